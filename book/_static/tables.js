/* The book's tables as a reader on a phone needs them.
 *
 * - Text reads from the left, numbers line up on the right: a cell whose text is not a number (a row's name,
 *   a kernel, a sentence) is marked .lab-text-cell, which site.css aligns left.
 * - A table that scrolls sideways says so: .lab-scrolls-x (a shadow at the edge it continues past) and a line
 *   under it, "more columns: scroll sideways →", kept in step with the screen's width.
 * - Its first column (the row's name) stays in view while the rest scrolls, but never takes more than
 *   MAX_STICKY of the box: a wider one (long names wrapped as far as they go) scrolls with the rest.
 * - Code is never re-wrapped (its indentation is its meaning): a listing wider than its box scrolls, with
 *   "longer lines: scroll sideways →" under it.
 */
(function () {
  "use strict";
  var NUMBER = /^[\u2212\-+~\u2248<>\u00b1]?\s*[\d.,\u2009 ]*\d(?:e[\u2212\-+]?\d+)?\s*(?:%|\u00d7|[A-Za-z\u00b5\u00b0/\u00b2\u00b7]{1,12})?(?:\s*[\[(][^\])]*[\])])?$/;
  var MAX_STICKY = 0.4;
  var HINT = "more columns: scroll sideways \u2192", CODE_HINT = "longer lines: scroll sideways \u2192";

  function tables() {
    return Array.prototype.slice.call(document.querySelectorAll(".bd-article table:not(.lab-readouts)"));
  }

  function align(table) {
    table.querySelectorAll("td, th").forEach(function (cell) {
      var text = cell.textContent.replace(/\s+/g, " ").trim();
      if (text && !NUMBER.test(text)) cell.classList.add("lab-text-cell");
    });
  }

  function fit(table) {
    table.classList.remove("lab-unstuck");
    var scrolls = table.scrollWidth > table.clientWidth + 2;
    if (scrolls) {
      var widest = 0;
      table.querySelectorAll("tr > :first-child").forEach(function (cell) {
        widest = Math.max(widest, cell.getBoundingClientRect().width);
      });
      if (widest > MAX_STICKY * table.clientWidth) table.classList.add("lab-unstuck");
    }
    table.classList.toggle("lab-scrolls-x", scrolls);
    hinted(table, scrolls, HINT);
  }

  // a line under ``box`` that says it scrolls, while it does
  function hinted(box, scrolls, text) {
    var next = box.nextElementSibling;
    var hint = next && next.classList.contains("lab-scroll-hint") ? next : null;
    if (scrolls && !hint) {
      hint = document.createElement("p");
      hint.className = "lab-scroll-hint";
      hint.setAttribute("aria-hidden", "true");
      hint.textContent = text;
      box.insertAdjacentElement("afterend", hint);
    } else if (!scrolls && hint) {
      hint.remove();
    }
  }

  function listings() {
    return Array.prototype.slice.call(document.querySelectorAll(".bd-article div.highlight"));
  }

  function fitCode(listing) {
    var pre = listing.querySelector("pre");
    if (pre) hinted(listing, pre.scrollWidth > pre.clientWidth + 2, CODE_HINT);
  }

  function start() {
    var all = tables();
    all.forEach(align);
    all.forEach(fit);
    listings().forEach(fitCode);
    var pending = null;
    window.addEventListener("resize", function () {
      if (pending) cancelAnimationFrame(pending);
      pending = requestAnimationFrame(function () { tables().forEach(fit); listings().forEach(fitCode); });
    });
    // a table or listing inside a closed <details> (a hidden cell) is measured again when it opens
    document.addEventListener("toggle", function () { tables().forEach(fit); listings().forEach(fitCode); }, true);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
