"""The built site as a phone reader (390 x 844) meets it, and its tables on a laptop, in chromium.

Per page: nothing cut off, no text drawn below :data:`MIN_PAGE_TEXT_PX`, every wide table either fitting
or scrolling in its own box with its first column kept in view, no raw URLs in tables. Per widget: the
"On this page" drawer closes on a pick, the search box and its snippets read right, a tap on a chart
point names it, every figure's alt text says what it shows, chart lines keep 3:1 in both themes.
Measured with tests/layout_probe.py (what is cut, what scrolls, the smallest text as drawn).
"""
# ruff: noqa: F811  (each test takes the browser_context fixture imported below)

from __future__ import annotations

import re

import pytest
from layout_probe import probe
from test_browser import (
    LAPTOP,
    MAX_STICKY_SHARE,
    PHONE,
    _contrast,
    _rgba,
    browser_context,  # noqa: F401  (the fixture: one chromium for this module too)
    explorers_on,
    open_sized,
    rebuild,
    set_controls,
    site_pages,
    visible_toggle,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

#: The smallest text a page may draw on a phone, in CSS px (the theme's body text is 16 px, its smallest
#: furniture, captions and chart source lines 12-14 px; figure PNGs are held to 9 px by tests/test_browser.py).
MIN_PAGE_TEXT_PX = 12


def reading_pages(html) -> list[str]:
    return [n for n in site_pages(html) if not n.startswith(("slides/", "genindex", "search"))]


def test_no_page_cuts_anything_off_or_draws_tiny_text_on_a_phone(browser_context, served_site):
    base, html = served_site
    problems = []
    for name in reading_pages(html):
        page = open_sized(browser_context, base + name, PHONE)
        found = probe(page, "main", {"left": 0, "right": PHONE["width"], "top": -1e9, "bottom": 1e9})
        problems += [f"{name}: {cut}" for cut in found["cut"][:3]]
        if found["smallest"] < MIN_PAGE_TEXT_PX - 0.05:  # a chart drawn at a rounded width: 11.99 px is 12
            problems.append(f"{name}: text as small as {found['smallest']:.1f} px ({found['smallestWhat'][:50]})")
        problems += [f"{name}: {box['what'][:40]} scrolls sideways without keeping its first column in view"
                     for box in found["scrolls"] if box["table"] and not box["down"] and not box["sticky"]]
        browser_context[1].take()
        page.close()
    assert not problems, "\n".join(problems)


_TABLES = """() => [...document.querySelectorAll('.bd-article table:not(.lab-readouts)')].map(t => {
    const first = t.querySelector('tr > :first-child');
    return {text: t.innerText.slice(0, 40), wide: t.scrollWidth > t.clientWidth + 1, width: t.scrollWidth,
            columns: Math.max(...[...t.rows].map(r => r.cells.length)),
            shown: Math.round(t.getBoundingClientRect().width), scrolls: /auto|scroll/.test(getComputedStyle(t).overflowX),
            sticky: !!first && getComputedStyle(first).position === 'sticky',
            firstShare: Math.max(0, ...[...t.querySelectorAll('tr > :first-child')].map(c => c.getBoundingClientRect().width)) / t.clientWidth,
            urls: [...t.querySelectorAll('td, th')].filter(c => /https?:\\/\\//.test(c.innerText)).length};
})"""


#: A table of up to this many columns fits a laptop's page (1366 px wide: a 757 px column); a wider one may
#: scroll in its box there too, its first column in view.
LAPTOP_COLUMNS = 9


def test_wide_tables_scroll_in_their_box_on_a_phone_and_fit_a_laptop(browser_context, served_site):
    base, html = served_site
    problems, measured = [], 0
    for name in reading_pages(html):
        for label, viewport in (("phone", PHONE), ("laptop", LAPTOP)):
            page = open_sized(browser_context, base + name, viewport)
            for table in page.evaluate(_TABLES):
                measured += 1
                where = f"{name} ({label}) table {table['text']!r}"
                if table["urls"]:
                    problems.append(f"{where}: {table['urls']} cells show a raw URL (give the link a title)")
                if table["wide"] and label == "laptop" and table["columns"] <= LAPTOP_COLUMNS:
                    problems.append(f"{where}: {table['width']} px wide in a {table['shown']} px column")
                # a first column over MAX_STICKY_SHARE of the box (one long word that may not wrap) scrolls with the rest
                keeps_first = table["sticky"] or table["firstShare"] > MAX_STICKY_SHARE
                if table["wide"] and not (table["scrolls"] and keeps_first):
                    problems.append(f"{where}: wider than its box and not a scroll box with a sticky first column")
            browser_context[1].take()
            page.close()
    assert measured, "no table on any page"
    assert not problems, "\n".join(problems)


def test_explorer_controls_fit_the_phone(browser_context, served_site):
    base, html = served_site
    wide = []
    for name in reading_pages(html):
        if "data-explorer=" not in (html / name).read_text(encoding="utf-8"):
            continue
        page = open_sized(browser_context, base + name, PHONE)
        wide += [f"{name}: {w}" for w in page.evaluate("""() => [...document.querySelectorAll('[data-explorer]')]
            .flatMap(root => { const box = root.getBoundingClientRect();
              return [...root.querySelectorAll('select, input, output')].filter(c => {
                const r = c.getBoundingClientRect(); return r.width && (r.right > box.right + 1 || r.left < box.left - 1);
              }).map(c => `${root.dataset.explorer} ${c.getAttribute('aria-label') || c.tagName}: ${Math.round(c.getBoundingClientRect().width)} px`); })""")]
        page.close()
    assert not wide, "\n".join(wide)


def test_the_on_this_page_drawer_closes_on_a_pick_and_shows_the_place(browser_context, served_site):
    base, _ = served_site
    for name in ("book/01-roofline.html", "book/06-vllm-sweeps.html"):
        page = open_sized(browser_context, base + name, PHONE)
        visible_toggle(page, "secondary-toggle").click()
        page.wait_for_function("() => document.querySelector('#pst-secondary-sidebar-modal').open")
        entry = [a for a in page.locator("#pst-secondary-sidebar-modal nav a").all() if a.is_visible()][2]
        target = entry.get_attribute("href")
        entry.click()
        page.wait_for_function("() => !document.querySelector('#pst-secondary-sidebar-modal').open")
        page.wait_for_function("h => location.hash === h", arg=target)
        top = page.evaluate("id => document.getElementById(id).getBoundingClientRect().top", target[1:])
        assert 0 <= top < PHONE["height"] / 3, f"{name}: {target} is at {top:.0f} px after the pick"
        assert page.locator(".bd-sidebar-secondary nav a").count(), f"{name}: the list did not go back to its sidebar"
        assert not browser_context[1].take()
        page.close()


def test_the_search_box_and_its_snippets_read_right(browser_context, served_site):
    base, _ = served_site
    page = open_sized(browser_context, base + "search.html?q=softmax", PHONE)
    page.wait_for_function("() => document.querySelectorAll('#search-results li p.context').length >= 3", timeout=60000)
    box = page.evaluate("""() => { const f = document.querySelector('.bd-search-container form.bd-search');
        const icon = f.querySelector('i').getBoundingClientRect(), input = f.querySelector('input');
        return [icon.right, input.getBoundingClientRect().left + parseFloat(getComputedStyle(input).paddingLeft)]; }""")
    assert box[0] <= box[1], f"the search icon ends at {box[0]:.0f} px, the query starts at {box[1]:.0f} px"
    snippets = page.locator("#search-results li p.context").all_text_contents()
    tex = [s for s in snippets if re.search(r"\\[a-zA-Z()[\]]|\$", s)]
    assert not tex, f"snippets with TeX source: {tex[:2]}"
    assert not [s for s in snippets if "Contents" in s.split()[:3]], "a snippet starts with the page's table of contents"
    assert page.evaluate(r"() => labPlainTex('\\(S = QK^\\top / \\sqrt{d}\\)')") == "S = QKᵀ / √(d)"
    assert not browser_context[1].take()
    page.close()


def test_every_figure_says_what_it_shows(browser_context, served_site):
    base, html = served_site
    seen, problems = 0, []
    for name in [*reading_pages(html), *(f"slides/{p.name}" for p in sorted((html / "slides").glob("*.html")))]:
        text = (html / name).read_text(encoding="utf-8")
        for alt, src in re.findall(r'<img alt="([^"]*)"[^>]*?src="([^"]{0,200})', text):
            if "_static/" in src:
                continue  # the theme's logo
            seen += 1
            # lab.book.plots' description ("Chart. ... against ...") or an author's own words, never a file name
            if alt == src or re.search(r"\.png$|^No description", alt) or len(alt) < 30:
                problems.append(f"{name}: alt {alt[:60]!r}")
    assert seen >= 17, f"only {seen} figures found"
    assert not problems, "\n".join(problems[:10])


def test_a_tap_on_a_chart_point_names_it(browser_context, served_site):
    base, html = served_site
    page = open_sized(browser_context, base + "index.html", PHONE)
    root = page.locator("[data-explorer]").first
    # the dot with the most room around it: a tap meant for it can land on no other
    loneliest = root.evaluate("""r => { const dots = [...r.querySelectorAll('svg[data-chart] g[data-series] circle')];
        const at = d => [+d.getAttribute('cx'), +d.getAttribute('cy')];
        const room = d => Math.min(...dots.filter(o => o !== d).map(o => Math.hypot(at(o)[0] - at(d)[0], at(o)[1] - at(d)[1])));
        return dots.indexOf(dots.reduce((a, b) => room(a) >= room(b) ? a : b)); }""")
    dot = root.locator("svg[data-chart] g[data-series] circle").nth(loneliest)
    dot.scroll_into_view_if_needed()
    box = dot.bounding_box()
    page.mouse.click(box["x"] + box["width"] / 2 + 3, box["y"] + box["height"] / 2 - 2)  # a finger is not exact
    assert root.locator("[data-point]").text_content() == dot.locator("title").text_content()
    assert root.locator("svg[data-chart] .lab-picked").count() == 1
    explorer = rebuild(explorers_on(page)[0][2]["origin"], root.get_attribute("data-explorer"))
    set_controls(root, explorer, {**explorer.defaults, explorer.controls[0].name: explorer.controls[0].values[0]})
    assert root.locator("[data-point]").text_content() == "", "the named point outlived its chart"
    assert not browser_context[1].take()
    page.close()


_SERIES_COLOURS = """() => [...document.querySelectorAll('[data-explorer]')].map(root => {
    const back = getComputedStyle(root).backgroundColor;
    const marks = [...root.querySelectorAll('svg[data-chart] g[data-series] > *')].filter(e => e.tagName !== 'title');
    return [back, marks.map(e => { const s = getComputedStyle(e);
        return [e.parentNode.dataset.series, e.tagName === 'path' ? s.stroke : s.fill]; })];
})"""


def test_chart_lines_as_drawn_reach_3_to_1_in_both_themes(browser_context, served_site):
    base, html = served_site
    low, checked = set(), 0
    for name in reading_pages(html):
        if "data-explorer=" not in (html / name).read_text(encoding="utf-8"):
            continue
        page = open_sized(browser_context, base + name, PHONE)
        for theme in ("light", "dark"):
            page.evaluate(f"() => document.documentElement.setAttribute('data-theme', '{theme}')")
            for back, marks in page.evaluate(_SERIES_COLOURS):
                for series, colour in marks:
                    checked += 1
                    ratio = _contrast(_rgba(colour), _rgba(back))
                    if ratio < 3:
                        low.add(f"{name} {theme}: {series} {colour} on {back}: {ratio:.2f}")
        page.close()
    assert checked
    assert not low, "\n".join(sorted(low))


#: Every listing shown on a page: the rows it is drawn on, its lines, whether it scrolls and says so.
_LISTINGS = """() => [...document.querySelectorAll('.bd-article div.highlight')].filter(d => d.offsetParent !== null).map(d => {
    const pre = d.querySelector('pre'), style = getComputedStyle(pre), line = parseFloat(style.lineHeight);
    const text = pre.textContent, lines = text.split('\\n').length - (text.endsWith('\\n') ? 1 : 0);
    const inner = pre.clientHeight - parseFloat(style.paddingTop) - parseFloat(style.paddingBottom);
    const next = d.nextElementSibling;
    return {what: text.trim().slice(0, 40), lines, rows: line > 0 ? Math.round(inner / line) : lines,
            scrolls: pre.scrollWidth > pre.clientWidth + 2,
            hinted: !!(next && next.classList.contains('lab-scroll-hint') && next.offsetParent !== null)};
})"""


@pytest.mark.parametrize("viewport", ["phone", "laptop"])
def test_code_is_never_rewrapped_and_a_listing_that_scrolls_says_so(browser_context, served_site, viewport):
    """Indentation is a listing's meaning: a shown function or code cell keeps its lines (it scrolls sideways
    instead), and a listing wider than its box has the hint under it."""
    base, html = served_site
    problems = []
    for name in reading_pages(html):
        page = open_sized(browser_context, base + name, PHONE if viewport == "phone" else LAPTOP)
        for listing in page.evaluate(_LISTINGS):
            if listing["rows"] > listing["lines"]:
                problems.append(f"{name}: {listing['what']!r} drawn on {listing['rows']} rows for {listing['lines']} lines")
            if listing["scrolls"] and not listing["hinted"]:
                problems.append(f"{name}: {listing['what']!r} scrolls sideways and does not say so")
        browser_context[1].take()
        page.close()
    assert not problems, f"{len(problems)} listings:\n" + "\n".join(problems[:20])
