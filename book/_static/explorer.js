/* explorer.js: the static face of lab.widgets.Explorer (hand-written, no dependencies).
 *
 * Python pre-computes every combination of control values and embeds it as JSON inside each
 * [data-explorer] element. This file wires the controls, swaps in the pre-formatted readout
 * strings (it never formats a measured number itself) and draws the chart as inline SVG.
 * Tests read data-marker-x / data-marker-y on the <svg> and data-series on each series group.
 */
(function () {
  "use strict";
  var NS = "http://www.w3.org/2000/svg";
  /* The chart is drawn at the width it is shown (one SVG unit = one CSS pixel, up to 640), so text keeps
     its size on a phone instead of shrinking with a fixed 640-wide viewBox. */
  var MAX_W = 640, MIN_W = 280, MARGIN = { l: 58, r: 14, t: 12, b: 50 };
  var FONT_PX = { tick: 11, label: 12, legend: 11, source: 10 };
  /* A page may ask for larger chart text (--lab-chart-font, a factor; margins grow with it) and another
     plot shape (--lab-chart-ratio, height over width): a slide deck asks for both. */
  function sizes(el) {
    var style = getComputedStyle(el), font = {}, margin = {};
    var k = parseFloat(style.getPropertyValue("--lab-chart-font")) || 1;
    for (var f in FONT_PX) font[f] = Math.round(FONT_PX[f] * k);
    // a slide may draw the source line larger than the page does (--lab-chart-source: a slide is read from afar)
    font.source = Math.round(font.source * (parseFloat(style.getPropertyValue("--lab-chart-source")) || 1));
    for (var m in MARGIN) margin[m] = Math.round(MARGIN[m] * (m === "r" ? 1 : k));
    return { font: font, margin: margin, k: k, ratio: parseFloat(style.getPropertyValue("--lab-chart-ratio")) || 0 };
  }
  /* Colours follow the theme (pydata's html[data-theme=dark]) through CSS variables. */
  var CSS =
    ".lab-explorer{--lab-bg:#fff;--lab-fg:#222;--lab-muted:#555;--lab-grid:#e5e5e5;--lab-border:#ddd;" +
    "border:1px solid var(--lab-border);border-radius:6px;padding:.6em .8em;margin:1em 0;font-size:.9em;" +
    "background:var(--lab-bg);color:var(--lab-fg)}" +
    "html[data-theme=dark] .lab-explorer{--lab-bg:#1f2227;--lab-fg:#e3e3e3;--lab-muted:#a9adb3;--lab-grid:#3a3f46;" +
    "--lab-border:#444a52}" +
    ".lab-explorer-title{font-weight:600;margin-bottom:.4em}" +
    ".lab-controls{display:flex;flex-wrap:wrap;gap:.4em 1.4em;margin-bottom:.5em}" +
    ".lab-control{display:flex;align-items:center;gap:.4em;flex-wrap:wrap;max-width:100%;min-width:0}" +
    ".lab-control output{min-width:4.5em;font-variant-numeric:tabular-nums}" +
    ".lab-explorer select,.lab-explorer button{background:var(--lab-bg);color:var(--lab-fg);" +
    "border:1px solid var(--lab-border);border-radius:4px;padding:.1em .4em}.lab-explorer select{max-width:100%;min-width:0}" +
    ".lab-explorer-body{display:flex;flex-wrap:wrap;gap:1em;align-items:flex-start}" +
    ".lab-explorer svg[data-chart]{flex:1 1 420px;max-width:640px;min-width:0;width:100%;height:auto}" +
    ".lab-explorer svg text{fill:var(--lab-fg)}.lab-explorer svg text.lab-src{fill:var(--lab-muted)}" +
    ".lab-explorer svg .lab-grid{stroke:var(--lab-grid)}.lab-explorer svg .lab-axis{stroke:var(--lab-muted)}" +
    ".lab-readouts th{text-align:left;font-weight:normal;padding-right:1em}" +
    ".lab-readouts td{font-variant-numeric:tabular-nums;font-weight:600}" +
    ".lab-note,.lab-caption,.lab-snap{font-size:.85em;color:var(--lab-muted);margin:.3em 0}" +
    ".lab-snap:empty,.lab-point:empty{display:none}.lab-point{font-size:.85em;margin:.3em 0}" +
    ".lab-explorer svg[data-chart]{cursor:crosshair}" +
    ".lab-tools{display:flex;gap:1em;align-items:center;font-size:.85em;margin:.3em 0}" +
    ".lab-explorer .lab-tools a{color:inherit}" +
    /* a phone shows the chart at its own width: larger chart text keeps it legible there (12 px at least) */
    "@media (max-width:560px){.lab-explorer{--lab-chart-font:1.2}}";

  function injectStyle() {
    if (document.getElementById("lab-explorer-style")) return;
    var style = document.createElement("style");
    style.id = "lab-explorer-style";
    style.textContent = CSS;
    document.head.appendChild(style);
  }

  function svg(tag, attrs, parent) {
    var node = document.createElementNS(NS, tag);
    for (var k in attrs) node.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(node);
    return node;
  }

  // How much of the data a box would cover: every drawn point and a sample every 2 px along each curve, counted
  // on a 3 px grid with summed areas, so each box asked about is one lookup. The ring at (mx, my) counts as data.
  function coverage(series, X, Y, W, H, mx, my) {
    var CELL = 3, gw = Math.ceil(W / CELL) + 1, gh = Math.ceil(H / CELL) + 1, sat = new Float64Array((gw + 1) * (gh + 1));
    var mark = function (x, y) {
      var i = Math.floor(x / CELL), j = Math.floor(y / CELL);
      if (i >= 0 && j >= 0 && i < gw && j < gh) sat[(j + 1) * (gw + 1) + i + 1] += 1;
    };
    series.forEach(function (s) {
      var prev = null;
      for (var p = 0; p < s.x.length; p++) {
        if (!X.ok(s.x[p]) || !Y.ok(s.y[p])) { prev = null; continue; }
        var x = X.at(s.x[p]), y = Y.at(s.y[p]);
        mark(x, y);
        if (prev && s.kind !== "points") {
          var steps = Math.ceil(Math.sqrt((x - prev[0]) * (x - prev[0]) + (y - prev[1]) * (y - prev[1])) / 2);
          for (var k = 1; k < steps; k++) mark(prev[0] + (x - prev[0]) * k / steps, prev[1] + (y - prev[1]) * k / steps);
        }
        prev = [x, y];
      }
    });
    for (var a = -9; a <= 9; a += 3) { for (var c = -9; c <= 9; c += 3) mark(mx + a, my + c); }
    for (var j = 1; j <= gh; j++) {
      for (var i = 1; i <= gw; i++) {
        sat[j * (gw + 1) + i] += sat[(j - 1) * (gw + 1) + i] + sat[j * (gw + 1) + i - 1] - sat[(j - 1) * (gw + 1) + i - 1];
      }
    }
    var at = function (i, j) { return sat[Math.min(Math.max(j, 0), gh) * (gw + 1) + Math.min(Math.max(i, 0), gw)]; };
    return function (l, t, wide, high, pad) {
      var i0 = Math.floor((l - pad) / CELL), j0 = Math.floor((t - pad) / CELL);
      var i1 = Math.floor((l + wide + pad) / CELL) + 1, j1 = Math.floor((t + high + pad) / CELL) + 1;
      return at(i1, j1) - at(i0, j1) - at(i1, j0) + at(i0, j0);
    };
  }

  function text(parent, x, y, str, attrs) {
    var node = svg("text", attrs || {}, parent);
    node.setAttribute("x", x);
    node.setAttribute("y", y);
    node.textContent = str;
    return node;
  }

  /* Tick text, the same rule as lab.plots.explorer.tick_label: 16384, 250k, 1.5M. */
  function tickLabel(v) {
    var a = Math.abs(v), scales = [[1e9, "G"], [1e6, "M"], [1e5, "k"]];
    for (var i = 0; i < scales.length; i++) {
      if (a >= scales[i][0]) return +(v / (scales[i][1] === "k" ? 1e3 : scales[i][0])).toPrecision(4) + scales[i][1];
    }
    return String(+v.toPrecision(6));
  }

  function linearTicks(lo, hi) {
    var raw = (hi - lo) / 5 || 1, p = Math.pow(10, Math.floor(Math.log10(raw))), f = raw / p;
    var step = (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * p, ticks = [];
    for (var v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) ticks.push(+v.toPrecision(12));
    return ticks;
  }

  function logTicks(lo, hi) {
    var ticks = [], a = Math.floor(Math.log10(lo)), b = Math.ceil(Math.log10(hi));
    var steps = b - a <= 2 ? [1, 2, 5] : [1];
    for (var e = a; e <= b; e++) {
      for (var i = 0; i < steps.length; i++) {
        var v = +(steps[i] * Math.pow(10, e)).toPrecision(12);
        if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) ticks.push(v);
      }
    }
    return ticks;
  }

  /* One axis: the domain of all finite values (positive only on a log axis), padded a little. */
  function makeAxis(values, log, explicit, from, to) {
    var vals = values.filter(function (v) { return v !== null && isFinite(v) && (!log || v > 0); });
    if (explicit) vals = vals.concat(explicit);
    var lo = Math.min.apply(null, vals), hi = Math.max.apply(null, vals);
    if (!vals.length) { lo = log ? 1 : 0; hi = log ? 10 : 1; }
    var t = log ? Math.log10 : function (v) { return v; };
    var tlo = t(lo), thi = t(hi), pad = (thi - tlo) * 0.05 || (log ? 0.5 : Math.abs(tlo) * 0.1 || 1);
    tlo -= pad; thi += pad;
    var inv = log ? function (v) { return Math.pow(10, v); } : function (v) { return v; };
    var ticks = explicit || (log ? logTicks : linearTicks)(inv(tlo), inv(thi));
    return {
      ticks: ticks,
      at: function (v) { return from + (t(v) - tlo) / (thi - tlo) * (to - from); },
      ok: function (v) { return v !== null && isFinite(v) && (!log || v > 0); }
    };
  }

  /* Words into lines of at most `max` characters (a long source line on a phone wraps, never shrinks). */
  function wrap(str, max) {
    var lines = [], line = "";
    str.split(" ").forEach(function (word) {
      // a word longer than a line (a dataset's path) is cut after a "/" or "-" where it can be, else anywhere
      while (word.length > max) {
        var cut = Math.max(word.lastIndexOf("/", max - 1), word.lastIndexOf("-", max - 1)) + 1 || max;
        if (line) { lines.push(line); line = ""; }
        lines.push(word.slice(0, cut));
        word = word.slice(cut);
      }
      if (line && (line + " " + word).length > max) { lines.push(line); line = word; }
      else line = line ? line + " " + word : word;
    });
    if (line) lines.push(line);
    return lines;
  }

  function num(v) { return String(+(+v).toPrecision(5)); }

  /* Near-black series (a roof, a floor) take the text colour, so they stay visible in dark mode. */
  function ink(color) {
    var m = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(color || "");
    if (!m) return null;
    var lum = (0.299 * parseInt(m[1], 16) + 0.587 * parseInt(m[2], 16) + 0.114 * parseInt(m[3], 16)) / 255;
    return lum < 0.3 ? "var(--lab-fg)" : null;
  }

  function paint(node, prop, color) {
    var themed = ink(color);
    if (themed) node.setAttribute("style", prop + ":" + themed);
    else node.setAttribute(prop, color);
  }

  /* CSS pixels of layout per pixel drawn: a slide deck scales its slides with a transform. */
  function layoutPerDrawn(el) {
    for (var n = el.parentNode; n && n.getBoundingClientRect; n = n.parentNode) {
      var drawn = n.getBoundingClientRect().width;
      if (n.offsetWidth && drawn) return n.offsetWidth / drawn;
    }
    return 1;
  }

  function chartWidth(el) {
    var w = el.getBoundingClientRect().width;
    if (!w && el.parentNode) w = el.parentNode.getBoundingClientRect().width;
    return Math.max(MIN_W, Math.min(MAX_W, Math.round(w * layoutPerDrawn(el) || MAX_W)));
  }

  /* The legend sits under the plot, in rows that wrap: it never covers a curve. */
  function layoutLegend(series, W, FONT) {
    var items = [], x = 8, row = 0, charW = FONT.legend * 0.6, most = Math.max(8, Math.floor((W - 42) / charW));
    series.forEach(function (s) {
      var lines = s.name.length > most ? wrap(s.name, most) : [s.name];  // a long name wraps under itself
      var width = 30 + Math.max.apply(null, lines.map(function (l) { return l.length; })) * charW;
      if (x > 8 && (x + width > W - 4 || lines.length > 1)) { x = 8; row++; }
      items.push({ s: s, x: x, row: row, lines: lines });
      row += lines.length - 1;
      x = lines.length > 1 ? W : x + width + 14;  // nothing beside a wrapped name
    });
    return { items: items, rows: series.length ? row + 1 : 0 };
  }

  function drawChart(el, data, view) {
    while (el.firstChild) el.removeChild(el.firstChild);
    var chart = view.c === null || view.c === undefined ? null : data.charts[view.c];
    el.style.display = chart ? "" : "none";
    el.removeAttribute("data-marker-x");
    el.removeAttribute("data-marker-y");
    if (!chart) return;
    var size = sizes(el), FONT = size.font, M = size.margin, rowH = Math.round(17 * size.k), srcH = Math.round(13 * size.k);
    var W = chartWidth(el), PH = size.ratio ? Math.round(W * size.ratio) : W >= 560 ? 340 : Math.round(W * 0.78);
    PH = Math.max(PH, Math.round(chart.yl.length * FONT.label * 0.56) + M.t + M.b);  // room for the y label
    var series = view.s.map(function (i) { return data.series[i]; });
    var legend = layoutLegend(series, W, FONT);
    var src = chart.src ? wrap(chart.src, Math.floor((W - 12) / (FONT.source * 0.56))) : [];
    var legendTop = PH + 6, srcTop = legendTop + legend.rows * rowH + 6;
    var H = srcTop + src.length * srcH + 2;
    el.setAttribute("viewBox", "0 0 " + W + " " + H);
    el.setAttribute("data-width", String(W));
    var xs = [], ys = [];
    series.forEach(function (s) { xs = xs.concat(s.x); ys = ys.concat(s.y); });
    if (view.m) { xs.push(view.m[0]); ys.push(view.m[1]); }
    var X = makeAxis(xs, chart.logx, chart.xt, M.l, W - M.r);
    var Y = makeAxis(ys, chart.logy, chart.yt, PH - M.b, M.t);

    var grid = svg("g", { "class": "lab-grid", "stroke-width": 1 }, el);
    var labels = svg("g", { "font-size": FONT.tick, "font-family": "sans-serif" }, el);
    var lastRight = -1e9;
    X.ticks.forEach(function (v) {
      var x = X.at(v), label = tickLabel(v), half = label.length * FONT.tick * 0.3;
      svg("line", { x1: x, x2: x, y1: M.t, y2: PH - M.b }, grid);
      if (x - half < lastRight + 4) return;  // no overlapping tick labels on a narrow chart
      text(labels, x, PH - M.b + FONT.tick + 4, label, { "text-anchor": "middle" });
      lastRight = x + half;
    });
    Y.ticks.forEach(function (v) {
      var y = Y.at(v);
      svg("line", { x1: M.l, x2: W - M.r, y1: y, y2: y }, grid);
      text(labels, M.l - 6, y + FONT.tick * 0.36, tickLabel(v), { "text-anchor": "end" });
    });
    svg("path", { "class": "lab-axis", d: "M" + M.l + " " + M.t + "V" + (PH - M.b) + "H" + (W - M.r), fill: "none" }, el);
    text(labels, (M.l + W - M.r) / 2, PH - M.b + 2 * FONT.tick + 11, chart.xl, { "text-anchor": "middle", "font-size": FONT.label });
    var yl = text(labels, 0, 0, chart.yl, { "text-anchor": "middle", "font-size": FONT.label });
    yl.setAttribute("transform", "translate(" + (FONT.label + 2) + " " + (M.t + PH - M.b) / 2 + ") rotate(-90)");

    var plot = svg("g", { "class": "lab-series" }, el);
    el.labPoints = [];  // every drawn point, for a tap
    series.forEach(function (s) {
      for (var p = 0; p < s.x.length; p++) {
        if (X.ok(s.x[p]) && Y.ok(s.y[p])) {
          el.labPoints.push({ x: X.at(s.x[p]), y: Y.at(s.y[p]), color: s.color, dot: s.kind !== "line",
                              text: s.name + ": " + chart.xl + " " + num(s.x[p]) + ", " + chart.yl + " " + num(s.y[p]) });
        }
      }
      var g = svg("g", { "data-series": s.name, "data-kind": s.kind, "data-count": s.x.length }, plot);
      if (s.kind !== "points") {
        var d = "", pen = "M";
        for (var i = 0; i < s.x.length; i++) {
          if (!X.ok(s.x[i]) || !Y.ok(s.y[i])) { pen = "M"; continue; }
          d += pen + X.at(s.x[i]).toFixed(1) + " " + Y.at(s.y[i]).toFixed(1);
          pen = "L";
        }
        var line = svg("path", { d: d, fill: "none", "stroke-width": 1.8 }, g);
        paint(line, "stroke", s.color);
        if (s.dashed) line.setAttribute("stroke-dasharray", "6 4");
        svg("title", {}, line).textContent = s.name;
      }
      if (s.kind !== "line") {
        for (var j = 0; j < s.x.length; j++) {
          if (X.ok(s.x[j]) && Y.ok(s.y[j])) {
            var dot = svg("circle", { cx: X.at(s.x[j]).toFixed(1), cy: Y.at(s.y[j]).toFixed(1), r: 3.5 }, g);
            paint(dot, "fill", s.color);
            // hover: the point's values, as the readouts would print them
            svg("title", {}, dot).textContent = s.name + ": " + chart.xl + " " + num(s.x[j]) + ", " + chart.yl + " " + num(s.y[j]);
          }
        }
      }
    });

    if (view.m && X.ok(view.m[0]) && Y.ok(view.m[1])) {
      var mx = X.at(view.m[0]), my = Y.at(view.m[1]);
      var mk = svg("g", { "class": "lab-marker" }, el);
      var ring = svg("circle", { cx: mx, cy: my, r: 7, fill: "none", "stroke-width": 2, style: "stroke:var(--lab-fg)" }, mk);
      svg("title", {}, ring).textContent = (view.m[2] ? view.m[2] + ": " : "") + chart.xl + " " + num(view.m[0]) +
        ", " + chart.yl + " " + num(view.m[1]);
      if (view.m[2]) {
        // the label, measured as drawn (its font may be the page's), over a halo of the chart's background, in the
        // spot nearest the ring where it covers no point and no curve of the data (a point or curve under it counts
        // first, then one within 4 px), inside the plot; away from the ring, a thin line leads to it
        var tag = text(mk, 0, 0, view.m[2], { "font-size": FONT.legend, "font-family": "sans-serif",
          "class": "lab-marker-label", style: "paint-order:stroke;stroke:var(--lab-bg);stroke-width:4px;stroke-linejoin:round" });
        var b = { x: 0, y: 0, width: 0, height: 0 };
        try { b = tag.getBBox(); } catch (e) { /* not laid out (a hidden chart): the label's size is guessed */ }
        var wide = b.width || view.m[2].length * FONT.legend * 0.56, high = b.height || FONT.legend * 1.3;
        var count = coverage(series, X, Y, W, PH, mx, my);
        var left = M.l + 2, right = W - M.r - 2, top = M.t, bottom = PH - M.b - 2;
        var best = null;
        var consider = function (l, t) {
          var inside = l >= left && l + wide <= right && t >= top && t + high <= bottom;
          var dx = Math.max(l - mx, 0, mx - l - wide), dy = Math.max(t - my, 0, my - t - high);
          var score = (inside ? 0 : 1e6) + 1000 * count(l, t, wide, high, 0) + 10 * count(l, t, wide, high, 4) +
            Math.sqrt(dx * dx + dy * dy);
          if (!best || score < best[0]) best = [score, l, t, dx, dy];
        };
        [my - 9 - high, my + 9, my - high / 2].forEach(function (t, i) {  // above the ring, below it, level with it
          [mx + 11, mx - 11 - wide, mx - wide / 2].forEach(function (l, j) {  // to its right, its left, centred on it
            if (i < 2 || j < 2) consider(l, t);
          });
        });
        for (var gt = top; gt + high <= bottom; gt += 4) {
          for (var gl = left; gl + wide <= right; gl += 4) consider(gl, gt);
        }
        if (Math.sqrt(best[3] * best[3] + best[4] * best[4]) > 14) {  // not beside the ring: a leader to it
          var ex = Math.min(Math.max(mx, best[1]), best[1] + wide), ey = Math.min(Math.max(my, best[2]), best[2] + high);
          var len = Math.sqrt((ex - mx) * (ex - mx) + (ey - my) * (ey - my));
          var lead = svg("line", { x1: mx + 8 * (ex - mx) / len, y1: my + 8 * (ey - my) / len, x2: ex, y2: ey,
            "stroke-width": 1, "class": "lab-marker-leader", style: "stroke:var(--lab-fg);opacity:0.6" }, mk);
          mk.insertBefore(lead, tag);
        }
        tag.setAttribute("x", best[1] - b.x);
        tag.setAttribute("y", best[2] - (b.height ? b.y : -FONT.legend));
      }
      el.setAttribute("data-marker-x", String(view.m[0]));
      el.setAttribute("data-marker-y", String(view.m[1]));
    }

    var key = svg("g", { "class": "lab-legend", "font-size": FONT.legend, "font-family": "sans-serif" }, el);
    legend.items.forEach(function (item) {
      var s = item.s, y = legendTop + 8 + rowH * item.row, x = item.x;
      if (s.kind !== "points") {
        var sample = svg("line", { x1: x, x2: x + 20, y1: y, y2: y, "stroke-width": 2 }, key);
        paint(sample, "stroke", s.color);
        if (s.dashed) sample.setAttribute("stroke-dasharray", "5 3");
      }
      if (s.kind !== "line") paint(svg("circle", { cx: x + 10, cy: y, r: 3.5 }, key), "fill", s.color);
      item.lines.forEach(function (line, k) { text(key, x + 26, y + FONT.legend * 0.36 + rowH * k, line); });
    });
    src.forEach(function (line, k) {
      text(labels, 6, srcTop + FONT.source + srcH * k, line, { "font-size": FONT.source, "class": "lab-src" });
    });
  }

  /* A tap (or click) names the drawn point nearest to it, within a finger's reach, under the chart
     ([data-point]) and rings it; a tap away from every point clears both. */
  function pick(el, line, event) {
    var old = el.querySelector(".lab-picked");
    if (old) old.parentNode.removeChild(old);
    var ctm = el.getScreenCTM(), points = el.labPoints || [];
    if (!ctm || !line) return;
    var at = el.createSVGPoint();
    at.x = event.clientX;
    at.y = event.clientY;
    at = at.matrixTransform(ctm.inverse());
    var best = null, reach = 24 / (ctm.a || 1);  // 24 screen px, in the chart's own units
    points.forEach(function (p) {  // a measured dot first; a line's vertex when no dot is in reach
      var d = Math.sqrt((p.x - at.x) * (p.x - at.x) + (p.y - at.y) * (p.y - at.y));
      var rank = [p.dot ? 0 : 1, d];
      if (d <= reach && (!best || rank[0] < best.rank[0] || (rank[0] === best.rank[0] && d < best.rank[1]))) {
        best = { p: p, rank: rank };
      }
    });
    line.textContent = best ? best.p.text : "";
    el.setAttribute("data-picked", best ? best.p.text : "");
    if (best) {
      var ring = svg("circle", { "class": "lab-picked", cx: best.p.x, cy: best.p.y, r: 6, fill: "none", "stroke-width": 2.5 }, el);
      paint(ring, "stroke", best.p.color);
    }
  }

  /* Views are stored first control slowest, so the index is a mixed-radix number. */
  function viewIndex(data, chosen) {
    var index = 0;
    data.controls.forEach(function (c, i) { index = index * c.values.length + chosen[i]; });
    return index;
  }

  function decode(data, index) {
    var out = [];
    for (var i = data.controls.length - 1; i >= 0; i--) {
      var n = data.controls[i].values.length;
      out[i] = index % n;
      index = Math.floor(index / n);
    }
    return out;
  }

  function missing(data, chosen) {
    var view = data.views[viewIndex(data, chosen)];
    return "x" in view ? data.reasons[view.x] : "";   // why this combination has no data, stored once
  }

  /* The same rule as Explorer.resolve in lab/book/explorer.py: a combination without data is never shown.
     A moved slider goes to its nearest value with data; otherwise the moved control keeps its value and
     the others change as little as possible (fewest controls, smallest steps, first in order). */
  function resolve(data, chosen, moved) {
    if (!missing(data, chosen)) return chosen;
    var c = moved >= 0 ? data.controls[moved] : null;
    if (c && c.numeric) {
      var best = -1;
      for (var j = 0; j < c.values.length; j++) {
        var t = chosen.slice();
        t[moved] = j;
        if (!missing(data, t) && (best < 0 || Math.abs(j - chosen[moved]) < Math.abs(best - chosen[moved]))) best = j;
      }
      if (best >= 0) { var r = chosen.slice(); r[moved] = best; return r; }
    }
    var found = null, cost = null;
    for (var k = 0; k < data.views.length; k++) {
      if ("x" in data.views[k]) continue;
      var combo = decode(data, k);
      if (c && combo[moved] !== chosen[moved]) continue;
      var changed = 0, steps = 0;
      for (var i = 0; i < combo.length; i++) {
        var d = Math.abs(combo[i] - chosen[i]);
        if (d) changed++;
        steps += d;
      }
      if (!found || changed < cost[0] || (changed === cost[0] && steps < cost[1])) { found = combo; cost = [changed, steps]; }
    }
    return found || chosen;
  }

  function csvCell(v) {
    var s = v === null || v === undefined ? "" : String(v);
    return /[",\r\n]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
  }

  /* What is shown, as CSV: the choices, the readouts (the same strings), the note and every plotted point. */
  function toCsv(data, chosen, view) {
    var rows = [["section", "name", "x", "value"]];
    data.controls.forEach(function (c, i) { rows.push(["control", c.label, "", c.labels[chosen[i]]]); });
    data.readouts.forEach(function (r, i) { rows.push(["readout", r.label, "", view.r[i]]); });
    if (view.n) rows.push(["note", "", "", view.n]);
    (view.s || []).forEach(function (i) {
      var s = data.series[i];
      for (var j = 0; j < s.x.length; j++) if (s.x[j] !== null && s.y[j] !== null) rows.push(["series", s.name, s.x[j], s.y[j]]);
    });
    return rows.map(function (r) { return r.map(csvCell).join(","); }).join("\r\n") + "\r\n";
  }

  /* State in the URL: #<key>?<control>=<value>&... (values, not indices, so a link survives new data). */
  function readHash(data) {
    var hash = decodeURIComponent(location.hash.slice(1)), at = hash.indexOf("?");
    if (at < 0 || hash.slice(0, at) !== data.key) return null;
    var params = {};
    hash.slice(at + 1).split("&").forEach(function (pair) {
      var eq = pair.indexOf("=");
      if (eq > 0) params[pair.slice(0, eq)] = pair.slice(eq + 1);
    });
    return data.controls.map(function (c) {
      var i = c.values.map(String).indexOf(params[c.name]);
      return i < 0 ? c["default"] : i;
    });
  }

  function writeHash(data, chosen) {
    var parts = data.controls.map(function (c, i) {
      return encodeURIComponent(c.name) + "=" + encodeURIComponent(String(c.values[chosen[i]]));
    });
    // a slide deck keeps its own position in the hash (reveal.js): leave it alone there
    if (history.replaceState && !document.querySelector(".reveal")) {
      history.replaceState(null, "", "#" + encodeURIComponent(data.key) + "?" + parts.join("&"));
    }
  }

  function wire(root) {
    if (root.getAttribute("data-explorer-ready")) return;
    var script = root.querySelector("script[data-explorer-data]");
    if (!script) return;
    var data = JSON.parse(script.textContent);
    var inputs = data.controls.map(function (c) {
      return root.querySelector('[data-control="' + c.name + '"]');
    });
    var chartEl = root.querySelector("svg[data-chart]");
    var pointLine = root.querySelector("[data-point]");
    if (chartEl) chartEl.addEventListener("click", function (event) { pick(chartEl, pointLine, event); });
    var snap = root.querySelector("[data-snap]");
    var csv = root.querySelector("[data-csv]");
    var defaults = data.controls.map(function (c) { return c["default"]; });
    var chosen = defaults.slice(), drawnWidth = 0;

    function show(next) {
      chosen = next;
      inputs.forEach(function (input, i) { input.value = String(chosen[i]); });
      render();
    }

    function render() {
      data.controls.forEach(function (c, i) {
        var shown = root.querySelector('[data-value-for="' + c.name + '"]');
        if (shown) shown.textContent = c.labels[chosen[i]];
        // a screen reader says "8192 tokens", not the slider's index "5"
        if (inputs[i].type === "range") inputs[i].setAttribute("aria-valuetext", c.labels[chosen[i]]);
      });
      var view = data.views[viewIndex(data, chosen)];
      data.readouts.forEach(function (r, i) {
        var span = root.querySelector('[data-readout="' + r.name + '"]');
        if (span) span.textContent = view.r[i];
      });
      var note = root.querySelector("[data-note]");
      if (note) note.textContent = view.n || "";
      if (chartEl) { drawChart(chartEl, data, view); drawnWidth = chartWidth(chartEl); }
      if (pointLine) pointLine.textContent = "";  // the picked point belonged to the chart drawn before
      if (csv) csv.setAttribute("href", "data:text/csv;charset=utf-8," + encodeURIComponent(toCsv(data, chosen, view)));
      root.setAttribute("data-view-index", String(viewIndex(data, chosen)));
    }

    function move(asked, moved) {
      var next = resolve(data, asked, moved);
      var changed = next.join() !== asked.join();
      if (snap) snap.textContent = changed ? missing(data, asked) + ": showing the nearest choice with data" : "";
      show(next);
    }

    inputs.forEach(function (input, i) {
      input.addEventListener(input.tagName === "SELECT" ? "change" : "input", function () {
        move(inputs.map(function (el) { return parseInt(el.value, 10); }), i);
        writeHash(data, chosen);
      });
    });
    var reset = root.querySelector("[data-reset]");
    if (reset) reset.addEventListener("click", function () {
      if (snap) snap.textContent = "";
      show(defaults.slice());
      if (readHash(data) && history.replaceState) history.replaceState(null, "", location.pathname + location.search);
    });

    function fromHash() {
      var asked = readHash(data);
      if (!asked) return false;
      move(asked, -1);
      return true;
    }
    if (!fromHash()) show(chosen);
    else if (root.scrollIntoView) root.scrollIntoView();
    window.addEventListener("hashchange", fromHash);
    if (chartEl && window.ResizeObserver) {
      new ResizeObserver(function () { if (chartWidth(chartEl) !== drawnWidth) render(); }).observe(chartEl);
    }
    root.setAttribute("data-explorer-ready", "1");
  }

  function wireAll() {
    injectStyle();
    var roots = document.querySelectorAll("[data-explorer]");
    for (var i = 0; i < roots.length; i++) wire(roots[i]);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", wireAll);
  else wireAll();
})();
