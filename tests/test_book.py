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
