"""The book build is a test: every chapter executes on a CPU from cached data, with no warning."""

import re
from pathlib import Path

import yaml

from lab import REPO_ROOT


def _toc_files() -> list[str]:
    toc = yaml.safe_load((REPO_ROOT / "_toc.yml").read_text())
    files = [toc["root"]]
    stack = list(toc.get("chapters") or []) + [c for p in toc.get("parts") or [] for c in p.get("chapters", [])]
    while stack:
        entry = stack.pop(0)
        files.append(entry["file"])
        stack.extend(entry.get("sections") or [])
    return files


def test_every_toc_entry_is_a_myst_notebook():
    for name in _toc_files():
        path = REPO_ROOT / f"{name}.md"
        text = path.read_text(encoding="utf-8")
        assert text.startswith("---\njupytext:"), f"{path} lacks jupytext front matter"
        assert "format_name: myst" in text.split("---")[1], f"{path} is not a MyST notebook"


def test_site_builds_and_has_every_page(built_site: Path):
    assert (built_site / "index.html").exists()
    for name in _toc_files():
        page = built_site / f"{name}.html"
        assert page.exists(), f"{page} was not built"
        html = page.read_text(encoding="utf-8")
        assert "Traceback (most recent call last)" not in html, f"{page} shows a traceback"


def test_no_page_references_a_remote_script_or_stylesheet(built_site: Path):
    remote = re.compile(r"""<(?:script|link|img|iframe)[^>]+(?:src|href)=["'](?:https?:)?//""")
    for page in built_site.rglob("*.html"):
        found = remote.search(page.read_text(encoding="utf-8"))
        assert not found, f"{page.relative_to(built_site)} loads {found.group(0)} from the network"


def test_no_page_names_a_cdn_anywhere(built_site: Path):
    # stricter than the tag check: not even an inline script may carry a CDN address to load later
    cdn = re.compile(r"(?:unpkg\.com|cdn\.jsdelivr\.net|cdnjs\.cloudflare\.com|ajax\.googleapis\.com)")
    for page in built_site.rglob("*.html"):
        found = cdn.search(page.read_text(encoding="utf-8"))
        assert not found, f"{page.relative_to(built_site)} names {found.group(0)}"


def test_no_table_cell_holds_raw_markup_of_a_name(built_site: Path):
    """Text with ``<...>`` in a table cell (a templated kernel name) is escaped: raw, the browser reads
    ``<flash::FlashAttnFwdSm90<...>>`` as a tag and shows ``void cutlass::device_kernel>>``."""
    import re

    raw = re.compile(r"<t[dh]\b[^>]*>[^<]*(?:<wbr>[^<]*)*<(?!/?(?:wbr|code|a|span|em|strong|br|sub|sup|b|i|p|div|ul|li|"
                     r"img|svg|mjx|math|abbr)\b)[A-Za-z_][^>]*>")
    found = [f"{page.relative_to(built_site)}: {m.group(0)[:80]}" for page in sorted(built_site.rglob("*.html"))
             for m in raw.finditer(page.read_text(encoding="utf-8"))]
    assert not found, "\n".join(found[:10])


def test_the_teaching_kernel_fits_on_a_screen():
    """Chapter 04 shows the teaching kernel as it runs; no line may need sideways scrolling."""
    from lab.book.show import source_of
    from lab.measure.attention.teaching import teaching_kernel

    kernel = source_of(teaching_kernel)
    long_lines = [line for line in kernel.splitlines() if len(line) > 100]
    assert not long_lines, f"teaching kernel lines over 100 characters: {long_lines}"
    assert len(kernel.strip().splitlines()) <= 60


GLOSSARY_TERMS = ("HBM", "SRAM", "shared memory", "SM", "L2 cache", "TTFT", "ITL", "GQA", "MQA", "MLA", "TMA",
                  "wgmma", "warp", "warpgroup", "KV cache", "paged KV cache", "split-KV", "roofline",
                  "arithmetic intensity", "ridge point", "CUDA graph", "chunked prefill", "tensor parallelism",
                  "tensor pipe utilisation", "XU pipe", "achieved occupancy", "warp stall reason", "compulsory bytes")


def _term_id(term: str) -> str:
    return "term-" + re.sub(r"[^\w]+", "-", term).strip("-")


def test_the_glossary_defines_every_term_and_chapters_link_to_it(built_site: Path):
    glossary = (built_site / "book" / "glossary.html").read_text(encoding="utf-8")
    chapters = "".join(p.read_text(encoding="utf-8") for p in (built_site / "book").glob("*.html")
                       if p.name != "glossary.html")
    for term in GLOSSARY_TERMS:
        anchor = _term_id(term)
        assert f'id="{anchor}"' in glossary, f"the glossary does not define {term!r} (no #{anchor})"
    linked = {t for t in GLOSSARY_TERMS if f'glossary.html#{_term_id(t)}"' in chapters}
    assert len(linked) >= len(GLOSSARY_TERMS) - 2, f"terms no chapter links: {set(GLOSSARY_TERMS) - linked}"


def test_figures_are_numbered_captioned_and_cross_referenced(built_site: Path):
    pages = {p.name: p.read_text(encoding="utf-8") for p in (built_site / "book").glob("*.html")}
    numbered = {name: re.findall(r'<span class="caption-number">Figure (\d+) </span>', text) for name, text in pages.items()}
    assert len(numbered["06-vllm-sweeps.html"]) >= 2 and len(numbered["03-tiling-online-softmax.html"]) == 3
    assert sum(len(v) for v in numbered.values()) >= 15
    for name, text in pages.items():
        for target, label in re.findall(r'<a class="reference internal" href="[^"]*#([\w-]+)"><span class="std std-numref">([^<]*)</span>', text):
            assert re.match(r"Figure \d+", label), f"{name}: a figure reference reads {label!r}"
            assert f'id="{target}"' in text, f"{name}: the reference to #{target} does not resolve on the page"
