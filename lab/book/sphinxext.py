"""Sphinx extension for the book's HTML: every page must load with no browser console error.

Sphinx 7.4's HTML builder adds, in ``prepare_writing``, every script registered after
``Builder.init()`` a second time (once with filename ``None``, once with ``''``). Inline scripts
added then (sphinx-thebe's ``const THEBE_JS_URL = ...``, sphinx-togglebutton's selector) so appear
twice on every page, and the second ``const`` declaration is a SyntaxError in the browser.
This extension drops such duplicates from each page's script list just before it is written, and
drops sphinx-thebe's files when no thebe launch button is configured (its inline line names a CDN).
It also tells each page's kernel where to write the page's fact registry (:mod:`lab.book.fact_registry`).
After the build it gives each figure the alt text its PNG carries (what it shows, not its file name)
and long names in table cells places to wrap (:mod:`lab.book.long_names`), so a table of kernel
names fits a laptop's page instead of scrolling.

Enable it in ``_config.yml``: ``sphinx: extra_extensions: [lab.book.sphinxext]``.
"""

from __future__ import annotations

import html
import os
import re
import shutil
from pathlib import Path

from lab.book import fact_registry
from lab.book.long_names import add_breaks_in_cells
from lab.book.plots.alt_text import png_alt


def _script_key(script) -> tuple:
    filename = getattr(script, "filename", script) or ""
    attributes = getattr(script, "attributes", {}) or {}
    return filename, getattr(script, "priority", 500), tuple(sorted((k, str(v)) for k, v in attributes.items()))


def unique_scripts(scripts: list) -> list:
    """``scripts`` without later copies of a script (same file or same inline body and attributes)."""
    seen, kept = set(), []
    for script in scripts:
        key = _script_key(script)
        if key not in seen:
            seen.add(key)
            kept.append(script)
    return kept


def _thebe_off(app) -> bool:
    return not (app.config.html_theme_options or {}).get("launch_buttons", {}).get("thebe")


def _is_thebe(asset) -> bool:
    """sphinx-thebe's loader, style sheet, or the inline line that names its CDN address."""
    filename = getattr(asset, "filename", asset) or ""
    body = (getattr(asset, "attributes", {}) or {}).get("body", "")
    return "sphinx-thebe" in filename or "THEBE_JS_URL" in body


def _dedupe_page_scripts(app, pagename, templatename, context, doctree) -> None:
    scripts = context.get("script_files")
    if isinstance(scripts, list):
        scripts[:] = unique_scripts(scripts)  # in place: the builder restores its list after each page
    if _thebe_off(app):
        # With no thebe launch button nothing can start thebe, so its loader (and the CDN address it
        # names) has no business on an offline page.
        for key in ("script_files", "css_files"):
            if isinstance(context.get(key), list):
                context[key][:] = [a for a in context[key] if not _is_thebe(a)]


#: pydata-sphinx-theme's SVG-icon script (1.5 MB on every page). Its stylesheet already draws the same
#: icons from the Font Awesome web font, so the page looks the same without it and weighs 1.5 MB less.
FONTAWESOME_SCRIPT = re.compile(r'\s*<script defer src="[^"]*_static/scripts/fontawesome\.js[^"]*"></script>')


def drop_icon_script(html_text: str) -> str:
    """``html_text`` without the theme's fontawesome.js tag."""
    return FONTAWESOME_SCRIPT.sub("", html_text)


_IMG = re.compile(r'<img alt="(?P<alt>[^"]*)" src="(?P<src>[^"]+\.png)"')


def describe_images(html_text: str, page: Path) -> str:
    """``html_text`` with each figure's alt text taken from its PNG (lab.book.plots writes what it shows
    there) where the alt is only the image's file name, as myst-nb leaves it."""
    def alt(m: re.Match) -> str:
        if m["alt"] != m["src"]:
            return m.group(0)
        image = (page.parent / m["src"]).resolve()
        text = png_alt(image.read_bytes()) if image.is_file() else None
        return m.group(0) if text is None else f'<img alt="{html.escape(text)}" src="{m["src"]}"'

    return _IMG.sub(alt, html_text)


_ICON = re.compile(r'<link[^>]+rel="(?:shortcut )?icon"', re.I)


def add_icon_link(html_text: str, page: Path, outdir: Path) -> str:
    """``html_text`` with a ``<link rel="icon">`` to the book's favicon where it has none (the root's redirect
    page): without one a browser asks the server for /favicon.ico, a 404 on every served visit."""
    icon = Path(outdir) / "_static" / "favicon.svg"
    if _ICON.search(html_text) or not icon.is_file():
        return html_text
    link = f'<link rel="icon" href="{Path(os.path.relpath(icon, page.parent)).as_posix()}" type="image/svg+xml">'
    if "<head>" in html_text:
        return html_text.replace("<head>", f"<head>\n{link}", 1)
    return f"{link}\n{html_text}"  # a page of one <meta> redirect (sphinx-external-toc's index.html)


def _finish_pages(app, exception) -> None:
    """Each written page without the icon script, its figures described, its table cells' long names given
    places to wrap."""
    if exception is not None or app.builder.format != "html":
        return
    for page in Path(app.outdir).rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        finished = add_icon_link(add_breaks_in_cells(describe_images(drop_icon_script(text), page)), page, app.outdir)
        if finished != text:
            page.write_text(finished, encoding="utf-8")


def _registry_folder(app) -> None:
    """Each page's glued facts go beside the HTML (``_build/facts``), where tests/test_consistency.py reads them.
    A build from a fresh environment executes every page, so what an earlier build recorded goes first:
    the glue layer compares each page with the pages built before it, never with a stale one."""
    folder = Path(app.outdir).parent / "facts"
    if not app.env.all_docs and folder.is_dir():
        shutil.rmtree(folder)
    os.environ[fact_registry.FOLDER_ENV] = str(folder)


def _registry_page(app, docname, source) -> None:
    """The page about to execute: its kernel (started after this, with this environment) writes its facts
    under its name; what an earlier build of the page recorded goes first."""
    os.environ[fact_registry.PAGE_ENV] = docname
    (Path(os.environ[fact_registry.FOLDER_ENV]) / f"{docname}.json").unlink(missing_ok=True)


def setup(app):
    app.connect("builder-inited", _registry_folder)
    app.connect("source-read", _registry_page)
    app.connect("html-page-context", _dedupe_page_scripts, priority=900)  # after extensions that add scripts
    app.connect("build-finished", _finish_pages, priority=900)  # after sphinx-external-toc writes the root redirect
    app.add_js_file("tables.js")  # text left, numbers right, a hint on every table that scrolls (book/_static)
    app.setup_extension("lab.book.chapter_header")  # the line under each chapter title, the .ipynb download
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
