/* Search result snippets that read as text: formulas in plain symbols, no page furniture.
 *
 * Sphinx's search page (searchtools.js) shows, under each hit, 240 characters of the page's text around
 * the word. Taken from the raw page, that text holds TeX source ("\(S = QK^\top\)") that MathJax would
 * have drawn, and the page's table of contents and navigation. This replaces Search.htmlToText (the one
 * function that reads a page for its snippet) with one that drops the navigation and turns each formula
 * into plain symbols ("S = QKᵀ"), with a space between the page's parts (a title, a line, a paragraph), which
 * the text of the raw page runs together. Opened from disk (file://), the browser refuses to fetch the pages
 * snippets are read from: the search then lists its hits without snippets, and says so, instead of failing
 * one request per hit. On every other page it does nothing.
 */
(function () {
  "use strict";
  var SYMBOLS = {
    top: "ᵀ", times: "×", cdot: "·", le: "≤", leq: "≤", ge: "≥", geq: "≥", approx: "≈", ne: "≠", neq: "≠",
    sum: "Σ", prod: "Π", infty: "∞", to: "→", rightarrow: "→", leftarrow: "←", in: "∈", ll: "≪", gg: "≫",
    alpha: "α", beta: "β", gamma: "γ", delta: "δ", epsilon: "ε", lambda: "λ", mu: "μ", pi: "π", sigma: "σ",
    tau: "τ", theta: "θ", phi: "φ", Delta: "Δ", Sigma: "Σ", ldots: "…", dots: "…", cdots: "⋯", quad: " ", qquad: " "
  };
  var SUPERSCRIPTS = { "0": "⁰", "1": "¹", "2": "²", "3": "³", "4": "⁴", "5": "⁵", "6": "⁶", "7": "⁷", "8": "⁸",
                       "9": "⁹", "-": "⁻", "+": "⁺", "n": "ⁿ", "T": "ᵀ" };

  /* TeX source as plain text: \frac{a}{b} -> (a)/(b), ^2 -> ², \top -> ᵀ, \mathrm{x} -> x, no backslashes. */
  function plainTex(tex) {
    var s = tex.replace(/\\[()[\]]/g, "").replace(/\$\$?/g, "");
    for (var i = 0; i < 4; i++) {  // nested \frac, innermost first
      s = s.replace(/\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}/g, function (m, a, b) {
        return (a.length > 1 ? "(" + a + ")" : a) + "/" + (b.length > 1 ? "(" + b + ")" : b);
      });
      s = s.replace(/\\sqrt\s*\{([^{}]*)\}/g, "√($1)");
      s = s.replace(/\\(?:mathrm|text|textrm|mathbf|mathit|operatorname|boldsymbol|mathcal)\s*\{([^{}]*)\}/g, "$1");
    }
    s = s.replace(/\^\{?\\top\}?/g, "ᵀ");
    s = s.replace(/\^\{([0-9+\-nT]+)\}|\^([0-9nT])/g, function (m, group, one) {
      return (group || one).split("").map(function (c) { return SUPERSCRIPTS[c]; }).join("");
    });
    s = s.replace(/\\([A-Za-z]+)/g, function (m, name) { return SYMBOLS.hasOwnProperty(name) ? SYMBOLS[name] : name; });
    return s.replace(/\\[,;:!]/g, " ").replace(/[{}]/g, "").replace(/\\/g, "").replace(/\s+/g, " ").trim();
  }

  var FURNITURE = ".headerlink, script, style, nav, .bd-sidebar-secondary, .bd-toc, .bd-header-article, " +
                  ".prev-next-area, footer, .cell_input, .onlyprint, [data-explorer-data]";

  var BLOCKS = "p, li, dt, dd, h1, h2, h3, h4, h5, h6, div, section, td, th, caption, figcaption, blockquote, pre, br, a.btn";

  function htmlToText(htmlString, anchor) {
    var page = new DOMParser().parseFromString(htmlString, "text/html");
    page.querySelectorAll(FURNITURE).forEach(function (el) { el.remove(); });
    page.querySelectorAll(BLOCKS).forEach(function (el) { el.appendChild(page.createTextNode(" ")); });
    page.querySelectorAll(".math").forEach(function (el) { el.textContent = " " + plainTex(el.textContent) + " "; });
    var main = page.querySelector('[role="main"]');
    var part = anchor && main ? main.querySelector(anchor) : null;
    return (part || main || { textContent: "" }).textContent.replace(/\s+/g, " ");
  }

  window.labPlainTex = plainTex;  // for the browser tests
  window.labHtmlToText = htmlToText;
  var fromDisk = window.location.protocol === "file:";
  if (fromDisk && typeof DOCUMENTATION_OPTIONS !== "undefined") {  // eslint-disable-line no-undef
    DOCUMENTATION_OPTIONS.SHOW_SEARCH_SUMMARY = false;  // eslint-disable-line no-undef
  }
  function patch() {
    if (typeof Search !== "undefined" && Search.htmlToText) Search.htmlToText = htmlToText;  // eslint-disable-line no-undef
    var results = document.getElementById("search-results");
    if (fromDisk && results && !document.querySelector(".lab-search-note")) {
      var note = document.createElement("p");
      note.className = "lab-search-note";
      note.textContent = "Opened from disk, the search lists the pages that match but no snippets: serve the " +
                         "site (python -m http.server -d _build/html) to see them.";
      results.parentNode.insertBefore(note, results);
    }
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", patch);
  else patch();
})();
