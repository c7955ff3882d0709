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
  var W = 640, H = 360, M = { l: 62, r: 18, t: 14, b: 56 };
  var CSS =
    ".lab-explorer{border:1px solid #ddd;border-radius:6px;padding:.6em .8em;margin:1em 0;font-size:.9em;" +
    "background:#fff;color:#222}" +
    ".lab-explorer-title{font-weight:600;margin-bottom:.4em}" +
    ".lab-controls{display:flex;flex-wrap:wrap;gap:.4em 1.4em;margin-bottom:.5em}" +
    ".lab-control{display:flex;align-items:center;gap:.4em}" +
    ".lab-control output{min-width:4.5em;font-variant-numeric:tabular-nums}" +
    ".lab-explorer-body{display:flex;flex-wrap:wrap;gap:1em;align-items:flex-start}" +
    ".lab-explorer svg[data-chart]{flex:1 1 420px;max-width:640px;height:auto}" +
    ".lab-readouts th{text-align:left;font-weight:normal;padding-right:1em}" +
    ".lab-readouts td{font-variant-numeric:tabular-nums;font-weight:600}" +
    ".lab-note,.lab-caption{font-size:.85em;color:#555;margin:.3em 0}";

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

  function drawChart(el, data, view) {
    while (el.firstChild) el.removeChild(el.firstChild);
    var chart = view.c === null || view.c === undefined ? null : data.charts[view.c];
    el.style.display = chart ? "" : "none";
    el.removeAttribute("data-marker-x");
    el.removeAttribute("data-marker-y");
    if (!chart) return;
    var series = view.s.map(function (i) { return data.series[i]; });
    var xs = [], ys = [];
    series.forEach(function (s) { xs = xs.concat(s.x); ys = ys.concat(s.y); });
    if (view.m) { xs.push(view.m[0]); ys.push(view.m[1]); }
    var X = makeAxis(xs, chart.logx, chart.xt, M.l, W - M.r);
    var Y = makeAxis(ys, chart.logy, chart.yt, H - M.b, M.t);

    var grid = svg("g", { "class": "lab-grid", stroke: "#e5e5e5", "stroke-width": 1 }, el);
    var labels = svg("g", { "font-size": 11, fill: "#333", "font-family": "sans-serif" }, el);
    X.ticks.forEach(function (v) {
      var x = X.at(v);
      svg("line", { x1: x, x2: x, y1: M.t, y2: H - M.b }, grid);
      text(labels, x, H - M.b + 15, tickLabel(v), { "text-anchor": "middle" });
    });
    Y.ticks.forEach(function (v) {
      var y = Y.at(v);
      svg("line", { x1: M.l, x2: W - M.r, y1: y, y2: y }, grid);
      text(labels, M.l - 6, y + 4, tickLabel(v), { "text-anchor": "end" });
    });
    svg("path", { d: "M" + M.l + " " + M.t + "V" + (H - M.b) + "H" + (W - M.r), stroke: "#555", fill: "none" }, el);
    text(labels, (M.l + W - M.r) / 2, H - 22, chart.xl, { "text-anchor": "middle", "font-size": 12 });
    var yl = text(labels, 0, 0, chart.yl, { "text-anchor": "middle", "font-size": 12 });
    yl.setAttribute("transform", "translate(14 " + (M.t + H - M.b) / 2 + ") rotate(-90)");

    var plot = svg("g", { "class": "lab-series" }, el);
    series.forEach(function (s) {
      var g = svg("g", { "data-series": s.name, "data-kind": s.kind, "data-count": s.x.length }, plot);
      if (s.kind !== "points") {
        var d = "", pen = "M";
        for (var i = 0; i < s.x.length; i++) {
          if (!X.ok(s.x[i]) || !Y.ok(s.y[i])) { pen = "M"; continue; }
          d += pen + X.at(s.x[i]).toFixed(1) + " " + Y.at(s.y[i]).toFixed(1);
          pen = "L";
        }
        var line = svg("path", { d: d, fill: "none", stroke: s.color, "stroke-width": 1.8 }, g);
        if (s.dashed) line.setAttribute("stroke-dasharray", "6 4");
      }
      if (s.kind !== "line") {
        for (var j = 0; j < s.x.length; j++) {
          if (X.ok(s.x[j]) && Y.ok(s.y[j])) {
            svg("circle", { cx: X.at(s.x[j]).toFixed(1), cy: Y.at(s.y[j]).toFixed(1), r: 3, fill: s.color }, g);
          }
        }
      }
    });

    if (view.m && X.ok(view.m[0]) && Y.ok(view.m[1])) {
      var mx = X.at(view.m[0]), my = Y.at(view.m[1]);
      var mk = svg("g", { "class": "lab-marker" }, el);
      svg("circle", { cx: mx, cy: my, r: 7, fill: "none", stroke: "#000", "stroke-width": 2 }, mk);
      if (view.m[2]) {
        var right = mx < W - 160;
        text(mk, mx + (right ? 11 : -11), my - 8, view.m[2],
          { "font-size": 11, "font-family": "sans-serif", "text-anchor": right ? "start" : "end" });
      }
      el.setAttribute("data-marker-x", String(view.m[0]));
      el.setAttribute("data-marker-y", String(view.m[1]));
    }

    var legend = svg("g", { "class": "lab-legend", "font-size": 11, "font-family": "sans-serif" }, el);
    series.forEach(function (s, k) {
      var y = M.t + 10 + 15 * k, x = M.l + 10;
      if (s.kind !== "points") {
        var sample = svg("line", { x1: x, x2: x + 20, y1: y, y2: y, stroke: s.color, "stroke-width": 2 }, legend);
        if (s.dashed) sample.setAttribute("stroke-dasharray", "5 3");
      }
      if (s.kind !== "line") svg("circle", { cx: x + 10, cy: y, r: 3.5, fill: s.color }, legend);
      text(legend, x + 26, y + 4, s.name);
    });
    if (chart.src) text(labels, W - M.r, H - 4, chart.src, { "text-anchor": "end", "font-size": 9, fill: "#777" });
  }

  /* Views are stored first control slowest, so the index is a mixed-radix number. */
  function viewIndex(data, chosen) {
    var index = 0;
    data.controls.forEach(function (c, i) { index = index * c.values.length + chosen[i]; });
    return index;
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

    function render() {
      var chosen = inputs.map(function (input) { return parseInt(input.value, 10); });
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
      if (chartEl) drawChart(chartEl, data, view);
      root.setAttribute("data-view-index", String(viewIndex(data, chosen)));
    }

    inputs.forEach(function (input) {
      input.addEventListener(input.tagName === "SELECT" ? "change" : "input", render);
    });
    render();
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
