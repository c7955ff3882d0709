"""What a reader actually sees of a box in chromium: text that runs out of it or is clipped, and the smallest text.

Shared by the slide-deck test (tests/test_slides.py, one slide at a time) and the page tests
(tests/test_browser.py, a whole chapter on a phone). Sizes are as drawn: a font size times every scale
applied on the way (reveal.js' slide scale, a deck's fit-to-slide scale, an SVG's viewBox).
"""

from __future__ import annotations

#: ``probe(root, frame)``: for every visible element under ``root`` (speaker notes, <noscript> and closed
#: <details> left out):
#: - ``cut``: text or a figure that reaches past ``frame`` (a rectangle) or is clipped by an ancestor that
#:   hides its overflow;
#: - ``scrolls``: boxes whose content is wider or taller than the box and must be scrolled to be seen (with how
#:   far and whether their first column stays put, i.e. is ``position: sticky``, and how much of the box that
#:   column takes; ``hinted``: the box says it scrolls, with a visible ``.lab-scroll-hint`` beside it);
#: - ``smallest``: the smallest text as drawn, in CSS px, with what it is.
PROBE = """([root, frame, skip]) => {
  const out = {cut: [], scrolls: [], smallest: 1e9, smallestWhat: ''};
  // not shown: speaker notes, the body of a closed <details> (a "Show code" or an answer not yet opened), ...
  const hidden = e => e.closest('aside.notes, noscript, script, style, title, [hidden], details:not([open]) > :not(summary)'
                                + (skip ? ', ' + skip : ''));
  const name = e => (e.tagName.toLowerCase() + (e.className && typeof e.className === 'string'
                     ? '.' + e.className.trim().split(/\\s+/)[0] : '') + ' "' + (e.textContent || '').trim().slice(0, 40) + '"');
  const visible = e => { const s = getComputedStyle(e); return s.display !== 'none' && s.visibility !== 'hidden'
                         && parseFloat(s.opacity) > 0; };
  const ownText = e => [...e.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
  const scaleOf = e => {  // CSS px drawn per layout px: every transform above it
    for (let n = e; n && n !== document.body; n = n.parentElement) {
      if (n instanceof HTMLElement && n.offsetWidth > 0) return n.getBoundingClientRect().width / n.offsetWidth;
    }
    return 1;
  };
  const clipped = (e, r) => {  // an ancestor (below root's parent) that hides or scrolls the part outside it
    for (let a = e.parentElement; a && a !== root.parentElement; a = a.parentElement) {
      const s = getComputedStyle(a);
      if (s.overflowX === 'visible' && s.overflowY === 'visible') continue;
      const b = a.getBoundingClientRect();
      const outX = r.left < b.left - 2 || r.right > b.right + 2, outY = r.top < b.top - 2 || r.bottom > b.bottom + 2;
      const scrollsX = /auto|scroll/.test(s.overflowX), scrollsY = /auto|scroll/.test(s.overflowY);
      if ((outX && !scrollsX) || (outY && !scrollsY)) return a;
      if (outX || outY) return 'scrolled';  // inside a scroll box: reached by scrolling (reported below)
    }
    return null;
  };
  const firstShare = box => {  // how much of the box a table's first column takes
    const widths = [...box.querySelectorAll('tr > :first-child')].map(c => c.getBoundingClientRect().width);
    return widths.length ? Math.max(...widths) / box.getBoundingClientRect().width : 0;
  };
  for (const e of root.querySelectorAll('*')) {
    if (hidden(e) || !visible(e)) continue;
    // a formula is one piece of text, measured at its own size (its sub- and superscripts are smaller by design)
    const math = e.tagName === 'MJX-CONTAINER';
    if (!math && e.closest('mjx-container')) continue;
    const isSvgText = e instanceof SVGTextElement || e instanceof SVGTSpanElement;
    const leaf = math || e.tagName === 'IMG' || e.tagName === 'svg' || isSvgText || ownText(e);
    if (e instanceof HTMLElement) {
      const s = getComputedStyle(e);
      const sideways = /auto|scroll/.test(s.overflowX) && e.scrollWidth > e.clientWidth + 2;
      const down = /auto|scroll/.test(s.overflowY) && e.scrollHeight > e.clientHeight + 2;
      if (sideways || down) {
        const first = e.querySelector('tr > :first-child');
        const hinted = e.closest('.lab-scrolls-x');  // the box says it scrolls: a shadow and a visible line
        const hint = hinted && [...hinted.parentElement.querySelectorAll(':scope > .lab-scroll-hint, :scope > * > .lab-scroll-hint')]
          .some(h => visible(h) && h.getBoundingClientRect().height > 0);
        out.scrolls.push({what: name(e), by: sideways ? e.scrollWidth - e.clientWidth : e.scrollHeight - e.clientHeight,
                          down, sideways, width: e.clientWidth, table: !!e.querySelector('table'), code: e.tagName === 'PRE',
                          sticky: !!first && getComputedStyle(first).position === 'sticky',
                          stickyShare: first && getComputedStyle(first).position === 'sticky' ? firstShare(e) : 0,
                          firstShare: firstShare(e),
                          hinted: !!hint, swipes: !e.closest('[data-prevent-swipe]')});
      }
    }
    if (!leaf) continue;
    const r = e.getBoundingClientRect();
    if (r.width < 1 || r.height < 1) continue;
    if (e instanceof SVGElement && e.tagName !== 'svg' && !isSvgText) continue;
    const by = clipped(e, r);
    if (by === 'scrolled') { /* out of view inside a scroll box: the reader scrolls to it */ }
    else if (by) { out.cut.push(name(e) + ' is clipped by ' + name(by).slice(0, 30)); continue; }
    else if (frame && (r.left < frame.left - 2 || r.right > frame.right + 2 || r.top < frame.top - 2 || r.bottom > frame.bottom + 2)) {
      out.cut.push(name(e) + ' runs past the frame by ' + Math.round(Math.max(frame.left - r.left, r.right - frame.right,
                   frame.top - r.top, r.bottom - frame.bottom)) + ' px');
      continue;
    }
    if (e.tagName === 'IMG' || e.tagName === 'svg' && !ownText(e)) continue;
    let px;
    if (isSvgText) {
      const svg = e.ownerSVGElement, vb = svg.viewBox.baseVal;
      const units = vb && vb.width ? svg.getBoundingClientRect().width / vb.width : 1;
      px = parseFloat(getComputedStyle(e).fontSize) * units;
    } else {
      px = parseFloat(getComputedStyle(e).fontSize) * scaleOf(e);
    }
    if (px < out.smallest) { out.smallest = px; out.smallestWhat = name(e); }
  }
  return out;
}"""


def probe(page, root_selector: str, frame: dict | None = None, skip: str = "") -> dict:
    """Run :data:`PROBE` on the first element matching ``root_selector``; ``frame`` as {left, right, top, bottom}."""
    return page.locator(root_selector).first.evaluate(f"(root, args) => ({PROBE})([root, args[0], args[1]])",
                                                      [frame, skip])
