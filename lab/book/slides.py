"""Export chapters as reveal.js slide decks that work offline (run after the site is built).

Each chapter's MyST notebook becomes a Jupyter notebook with slide metadata derived from its
headings (#, ## and ### each start a slide, all horizontal so that → alone reaches every one; each
figure, explorer and table part gets its own, see :mod:`lab.book.slide_split`), then nbconvert's
reveal exporter turns it into ``<out>/<chapter>.slides.html``. Only the opening of each section stays on the slide; the rest of its
prose goes to the speaker notes (press S). Dropdown answers become fragments that appear on the next
key press, so a class can guess first (a self-check question's answer is the next slide). One idea a slide: no
slide without a figure shows more than :data:`lab.book.slide_text.MAX_SLIDE_CHARS` characters of text; a cell
that would take its slide past that starts the next one (:func:`start_slides_where_full`). Glued numbers are filled in from the values the book build
stored (``_build/jupyter_execute/book/<chapter>.glue.json``), and figures come from the executed
notebook there, so nothing is executed twice; ``--execute`` runs a chapter instead (for a chapter the
site build did not execute). Under ``python -m lab live-check`` (no site build) ``LAB_EXECUTED_DIR`` names the
check's own notebooks instead, and the glued values come from their outputs.

Every script, style sheet and font a deck loads is one of the site's vendored files
(``book/_static/vendor``: reveal.js, require.js, MathJax), referenced by a relative path. After
writing a deck the exporter checks that no ``<script>``/``<link>`` points at the network and that
every local one exists; otherwise it fails.

    python -m lab slides                      # every chapter of _toc.yml into _build/html/slides/
    python -m lab slides 06-vllm-sweeps 08-interview-prep
"""

from __future__ import annotations

import base64
import html
import os
import re
from ast import literal_eval
from dataclasses import dataclass
from pathlib import Path

from lab import REPO_ROOT, LabError
from lab.book.slide_split import code_cell_slides, fragment_cells, is_glue_output, markdown_blocks, split_prose
from lab.book.slide_tables import split_markdown_table
from lab.book.slide_text import MAX_SLIDE_CHARS, cell_chars, markdown_chars
from lab.cli import path_arg
from lab.folders import check_output, dataset_lock
from lab.store import read_json, write_atomic

BOOK_DIR = REPO_ROOT / "book"
SITE_DIR = REPO_ROOT / "_build" / "html"
EXECUTED_DIR = REPO_ROOT / "_build" / "jupyter_execute"
#: Set by lab.book.live_check to its folder of executed chapters (``<stem>.ipynb``): it builds no site, and the
#: course kit counts its slide ranges from the decks of the chapters as that check executed them.
EXECUTED_ENV = "LAB_EXECUTED_DIR"
TEMPLATE_DIR = Path(__file__).resolve().parent / "slides_template"
TEMPLATE_NAME = "reveal_offline"
#: Characters of a section's opening kept on the slide (about six short lines: one idea, what a room reads
#: while the teacher talks); the rest of the section goes to the speaker notes.
SLIDE_TEXT_BUDGET = 480
ADMONITIONS = {"note", "tip", "hint", "important", "warning", "caution", "attention", "danger", "error",
               "seealso", "admonition"}
REVEALED = {"dropdown", "toggle"}  # hidden until asked for on the page: a fragment on a slide

_FENCE_OPEN = re.compile(r"^(?P<fence>:{3,}|`{3,}|~{3,})\{(?P<name>[\w:.-]+)\}\s*(?P<arg>.*)$")
_PLAIN_FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,})(?!\{)")
_OPTION = re.compile(r"^:[\w-]+:")
_HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
_TARGET = re.compile(r"^\([^)\s]+\)=\s*$")
_ROLE = re.compile(r"\{(?P<name>[\w:.-]+)\}`(?P<text>[^`]*)`")
_CITE = re.compile(r"\s*\{cite(?::[\w]+)?\}`[^`]*`")
_MD_LINK = re.compile(r"\]\((?P<target>[^)\s:#]+\.(?:md|ipynb))(?P<anchor>#[^)\s]*)?\)")
_REMOTE = re.compile(r"""<(?:script|link|img|iframe|source|video|audio)\b[^>]*?\b(?:src|href)\s*=\s*["']?(?:https?:)?//""",
                     re.I)
# a quoted URL to a script or style sheet inside inline JavaScript (require([...]), import ... from '...')
_JS_REMOTE = re.compile(r"""["'](?:https?:)?//[^"'\s]+\.(?:m?js|css)(?:\?[^"'\s]*)?["']""", re.I)
_CSS_REMOTE = re.compile(r"""(?:@import\s+(?:url\()?|url\()\s*["']?(?:https?:)?//""", re.I)
_LOCAL_REF = re.compile(r"""<(?:script|link)\b[^>]*?\b(?:src|href)\s*=\s*["'](?P<url>[^"'#?]+)""", re.I)


# --- MyST -> plain Markdown --------------------------------------------------------------------------

_INT_TYPES, _FLOAT_TYPES = set("bcdoxX"), set("eEfFgGn%")


def glued_plain_text(text: str, spec: str) -> str:
    """A glued value's text/plain face as ``{glue:text}`name:spec``` shows it on the site: the repr read back
    as a Python literal where it is one (a string loses its quotes), then formatted by the spec's type letter.
    The same rule as myst-nb's own (tests/test_slides.py holds the two together); it lives here because
    myst-nb's comes with its renderer, whose import needs myst-parser and importlib_metadata, which a GPU
    box's offline wheels do not carry (the course kit counts its slides there)."""
    try:
        value = literal_eval(text)
    except (SyntaxError, ValueError):
        value = text
    if not spec:
        return str(value)
    kind = spec[-1]
    if kind == "s":
        value = str(value)
    elif kind in _INT_TYPES:
        value = int(value)
    elif kind in _FLOAT_TYPES:
        value = float(value)
    return format(value, spec)


def _glue_text(output: dict | None, name: str, fmt: str) -> str:
    if output is None:
        raise LabError(f"glue name {name!r} has no value: build the site first or pass --execute")
    data = output.get("data", {})
    for mime in ("image/png", "image/jpeg", "image/svg+xml"):
        if mime in data and not fmt:
            payload = data[mime] if mime != "image/svg+xml" else base64.b64encode(data[mime].encode()).decode()
            return f'<img src="data:{mime};base64,{"".join(payload)}" alt="{name}">'
    if "text/html" in data and not fmt:  # a glued table: its HTML, not the repr its text/plain face holds
        html = data["text/html"]
        return "".join(html) if isinstance(html, list) else html
    text = data.get("text/plain")
    if text is None:
        raise LabError(f"glue name {name!r} has no text/plain value to show")
    return glued_plain_text("".join(text) if isinstance(text, list) else text, fmt)


def _glue_block(output: dict | None, name: str) -> str:
    """A ``{glue}`` directive's value on a slide: a glued table's HTML (a pandas Styler's text/plain is only
    its repr), else what the inline role would show. Blank lines are dropped so Markdown keeps the HTML one block."""
    html = (output or {}).get("data", {}).get("text/html")
    if html is None:
        return _glue_text(output, name, "")
    html = "".join(html) if isinstance(html, list) else html
    return "\n".join(line for line in html.splitlines() if line.strip())


def _inline(line: str, glue: dict, link) -> str:
    def role(m: re.Match) -> str:
        name, text = m["name"], m["text"]
        if name.startswith("glue"):
            key, _, fmt = text.partition(":")
            return _glue_text(glue.get(key), key, fmt)
        if name == "math":
            return f"${text}$"
        titled = re.match(r"^(.*?)\s*<[^>]+>$", text)  # {doc}`title <target>`
        return titled.group(1) if titled else text.lstrip("~")

    line = _CITE.sub("", line)  # citations live on the book's references page, not on a slide
    line = _ROLE.sub(role, line)
    return _MD_LINK.sub(lambda m: f"]({link(m['target'], m['anchor'] or '')})", line)


def _close_index(lines: list[str], start: int, fence: str) -> int:
    """Index of the line that closes the fence opened at ``start`` (MyST: the same char, at least as long)."""
    char, width = fence[0], len(fence)
    for j in range(start + 1, len(lines)):
        stripped = lines[j].strip()
        if stripped and set(stripped) == {char} and len(stripped) >= width:
            return j
    return len(lines)


@dataclass
class Segment:
    """A run of Markdown and how it shows: '-' on the slide, 'fragment' on the next key press."""

    kind: str
    lines: list[str]


def convert_myst(text: str, glue: dict, link=lambda target, anchor: target + anchor) -> list[Segment]:
    """MyST Markdown -> CommonMark segments nbconvert renders: roles resolved, directives flattened."""
    segments = [Segment("-", [])]
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        plain = _PLAIN_FENCE.match(line)
        opened = _FENCE_OPEN.match(line)
        if plain and not opened:  # an ordinary code block: copy verbatim (a '#' inside is not a heading)
            j = _close_index(lines, i, plain["fence"])
            segments[-1].lines += lines[i:j + 1]
            i = j + 1
            continue
        if opened:
            j = _close_index(lines, i, opened["fence"])
            body = lines[i + 1:j]
            while body and _OPTION.match(body[0]):
                body = body[1:]
            name, arg = opened["name"], _inline(opened["arg"].strip(), glue, link)
            i = j + 1
            if name in ("math",):
                segments[-1].lines += ["$$", *body, "$$", ""]
            elif name in ("code-block", "code", "sourcecode"):
                segments[-1].lines += [f"```{arg}", *body, "```", ""]
            elif name.startswith("glue"):
                key = arg.split()[0] if arg else ""
                segments[-1].lines += [_glue_block(glue.get(key), key), ""]
            else:
                inner = convert_myst("\n".join(body), glue, link)
                inner_text = [ln for seg in inner for ln in seg.lines]
                if name in REVEALED:
                    segments[-1].lines += [f"**{arg or 'Answer'}**", ""]
                    segments.append(Segment("fragment", inner_text + [""]))
                    segments.append(Segment("-", []))
                elif name in ADMONITIONS:
                    title = arg if name == "admonition" else (arg or name.capitalize())
                    segments[-1].lines += [f"> **{title}**", ">"] + [f"> {ln}" if ln else ">" for ln in inner_text] + [""]
                else:  # figure, margin, card, tab-set, ...: keep the text, drop the frame
                    segments[-1].lines += ([f"*{arg}*", ""] if arg and name not in ("figure", "image") else [])
                    segments[-1].lines += inner_text + [""]
            continue
        if _TARGET.match(line) or line.startswith("%"):
            i += 1
            continue
        segments[-1].lines.append(_inline(line, glue, link))
        i += 1
    return [s for s in segments if any(ln.strip() for ln in s.lines)]


def slide_cells(segments: list[Segment]) -> list[tuple[str, str]]:
    """(slide_type, markdown) cells: headings open slides, a section's opening stays, the rest is notes
    (lists and tables, being content, continue on further slides; after a revealed answer, a new slide)."""
    cells: list[tuple[str, str]] = []
    for seg in segments:
        if seg.kind == "fragment":
            cells += fragment_cells(seg.lines, SLIDE_TEXT_BUDGET)
            continue
        # after a revealed answer (and the notes that hold the rest of it), a new slide
        last = next((k for k, _ in reversed(cells) if k != "notes"), None)
        sections: list[tuple[str, list[str]]] = [("slide" if last == "fragment" else "-", [])]
        for line in seg.lines:
            heading = _HEADING.match(line)
            if heading:  # all horizontal (# to ###): → alone walks the deck
                sections.append(("slide" if len(heading.group(1)) <= 3 else "-", [line]))
            else:
                sections[-1][1].append(line)
        for kind, lines in sections:
            blocks, notes, item_notes = [], [], []
            heading = markdown_chars(lines[0]) if lines and _HEADING.match(lines[0]) else 0
            for block in markdown_blocks(lines):
                if block.lstrip().startswith("|"):  # a table: parts that fit a slide beside the heading
                    blocks += split_markdown_table(block, MAX_SLIDE_CHARS - heading)
                    continue
                parts, rest = _split_list(block)
                blocks += parts
                item_notes += rest
            if not blocks:
                continue
            # The heading and the section's opening fill the slide; a list that runs over continues on
            # further slides and a table gets one of its own (content); prose that runs over goes to the notes.
            slides, used = [(kind, [])], 0
            for block in blocks:
                over = used + len(block) > SLIDE_TEXT_BUDGET and slides[-1][1] and not _HEADING.match(slides[-1][1][-1])
                shared = slides[-1][1] and not (len(slides[-1][1]) == 1 and _HEADING.match(slides[-1][1][0]))
                if (over and _LIST_ITEM.match(block)) or (block.lstrip().startswith("|") and shared):
                    slides.append(("slide", []))  # a long list continues on the next slide; a table gets its own
                    used = 0
                elif over or notes:
                    notes.append(block)
                    continue
                block, rest = split_prose(block, max(SLIDE_TEXT_BUDGET - used, 0) if shared else SLIDE_TEXT_BUDGET)
                slides[-1][1].append(block)
                used += len(block)
                notes += [rest] if rest else []
            cells += [(k, "\n\n".join(b)) for k, b in slides if b]
            notes += item_notes  # the rest of items too long for a slide
            if notes:
                cells.append(("notes", "\n\n".join(notes)))
    return [(k, t) for k, t in cells if t]


_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s")



def _split_list(block: str) -> tuple[list[str], list[str]]:
    """A list longer than a slide, cut between items into parts that each fit, and what goes to the notes: the
    sentences of an item longer than the slide's budget after its first ones."""
    if len(block) <= SLIDE_TEXT_BUDGET or not _LIST_ITEM.match(block):
        return [block], []
    items: list[list[str]] = []
    for line in block.splitlines():
        if _LIST_ITEM.match(line) and not line.startswith((" ", "\t")):
            items.append([line])
        elif items:
            items[-1].append(line)
    parts, current, notes = [], [], []
    for item in items:
        text = "\n".join(item)
        marker = _LIST_ITEM.match(text).group(0)
        shown, rest = split_prose(" ".join(text[len(marker):].split()), SLIDE_TEXT_BUDGET - len(marker))
        if rest:
            text = marker + shown
            notes.append(rest)
        if current and len("\n".join(current)) + len(text) > SLIDE_TEXT_BUDGET:
            parts.append("\n".join(current))
            current = []
        current.append(text)
    if current:
        parts.append("\n".join(current))
    return parts, notes


# --- notebooks ---------------------------------------------------------------------------------------

def _glue_from_outputs(nb) -> dict:
    glue = {}
    prefix = "application/papermill.record/"
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if is_glue_output(output):
                name = output["metadata"]["scrapbook"]["name"]
                data = {k[len(prefix):] if k.startswith(prefix) else k: v for k, v in output.get("data", {}).items()}
                glue[name] = {"data": data}
    return glue


def executed_folder(book_dir: Path = BOOK_DIR, executed_dir: Path | None = None) -> Path:
    """Where the executed chapters lie: ``executed_dir``'s, else the live check's (``LAB_EXECUTED_DIR``), else the
    last site build's."""
    if executed_dir is None and os.environ.get(EXECUTED_ENV):
        return Path(os.environ[EXECUTED_ENV])
    return (executed_dir or EXECUTED_DIR) / book_dir.name


def load_chapter(stem: str, execute: bool = False, book_dir: Path = BOOK_DIR, executed_dir: Path | None = None):
    """The chapter as a notebook with outputs, plus its glue values: from the site build (or the live check),
    or executed now."""
    import jupytext
    import nbformat

    source = book_dir / f"{stem}.md"
    if not source.exists():
        raise LabError(f"{source}: no such chapter")
    executed = executed_folder(book_dir, executed_dir) / f"{stem}.ipynb"
    if not execute:
        if not executed.exists():
            raise LabError(f"{executed}: the site build has not executed {stem} (build the site first, "
                           "or pass --execute to run the chapter now)")
        nb = nbformat.read(executed, as_version=4)
        glue_file = executed.with_name(f"{stem}.glue.json")
        # myst-nb writes the glue file in a site build; the live check's notebooks carry their glue in their outputs
        glue = read_json(glue_file) if glue_file.exists() else _glue_from_outputs(nb)
        return nb, glue
    from nbclient import NotebookClient  # lazy: only running a notebook needs the Jupyter client stack

    nb = jupytext.read(source)
    env_before = os.environ.get("LAB_STATIC")
    os.environ["LAB_STATIC"] = "1"  # the same faces the site shows: static explorers, no inline quiz script
    try:
        NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(book_dir)}}).execute()
    except Exception as exc:  # a failing cell: say which chapter, keep nbclient's one-line reason
        raise LabError(f"{source}: executing the chapter failed: {str(exc).strip().splitlines()[-1]}") from None
    finally:
        if env_before is None:
            os.environ.pop("LAB_STATIC", None)
        else:
            os.environ["LAB_STATIC"] = env_before
    return nb, _glue_from_outputs(nb)


def _title(nb) -> str:
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                m = _HEADING.match(line)
                if m and len(m.group(1)) == 1:
                    return m.group(2).strip()
    return ""


def to_slides_notebook(nb, glue: dict, link=lambda target, anchor: target + anchor, chapter_url: str = ""):
    """A new notebook: MyST flattened, cells split and marked with reveal slide types. ``chapter_url``: the
    chapter's page, where a table too long for a slide is read instead (at its section's anchor)."""
    import nbformat
    from docutils.nodes import make_id

    metadata = {key: nb.metadata[key] for key in ("kernelspec", "language_info") if nb.metadata.get(key)}
    out = nbformat.v4.new_notebook(metadata={**metadata, "title": _title(nb)})
    own = False  # the last code part had a slide of its own: prose after it starts a new one
    section = ""  # the anchor of the section a table is in
    for cell in nb.cells:
        tags = set(cell.get("metadata", {}).get("tags", []))
        if cell.cell_type == "markdown":
            for kind, text in slide_cells(convert_myst(cell.source, glue, link)):
                kind, own = ("slide" if own and kind == "-" else kind), False
                out.cells.append(nbformat.v4.new_markdown_cell(text, metadata={"slideshow": {"slide_type": kind}}))
                headings = [m.group(2) for line in text.splitlines() if (m := _HEADING.match(line))]
                section = make_id(headings[-1]) if headings else section
        elif cell.cell_type == "code" and not tags & {"remove-cell", "remove-slide"}:  # remove-slide: the page's only
            own = code_cell_slides(out, cell, chapter_url + (f"#{section}" if chapter_url and section else ""))
    start_slides_where_full(out.cells)
    return out


def start_slides_where_full(cells) -> None:
    """A cell that would take its slide past :data:`MAX_SLIDE_CHARS` characters of text starts the next slide
    instead (prose after a short listing, say). A revealed answer keeps its question: the cell before it starts the
    next slide with it, the answer still a fragment, where the two fit; else the answer has the next slide."""
    used, before = 0, None  # the text on the slide being filled; the cell before and its text
    for cell in cells:
        show = cell.metadata.setdefault("slideshow", {})
        kind = show.get("slide_type", "-")
        if kind in ("notes", "skip"):
            continue
        chars = cell_chars(cell)
        if kind in ("-", "fragment") and used and used + chars > MAX_SLIDE_CHARS:
            question, asked = before or (None, 0)
            if kind == "fragment" and question is not None and question.metadata["slideshow"].get("slide_type") == "-" \
                    and asked + chars <= MAX_SLIDE_CHARS:
                question.metadata["slideshow"]["slide_type"] = "slide"
                used = asked
            else:
                show["slide_type"] = kind = "slide"
        used = chars if kind in ("slide", "subslide") else used + chars
        before = (cell, chars)


# --- export ------------------------------------------------------------------------------------------

def _rel(target: Path, start: Path) -> str:
    return Path(os.path.relpath(target, start)).as_posix()


_DATA_PNG = re.compile(r'<img alt="No description has been provided for this image"(?P<rest>[^>]*?'
                       r'src="data:image/png;base64,(?P<data>[^"]+)")')


def describe_images(html_text: str) -> str:
    """Each figure's alt text from its PNG (what lab.book.plots says it shows) instead of nbconvert's
    "No description has been provided for this image"."""
    from lab.book.plots.alt_text import png_alt  # lazy: pulls in matplotlib

    def alt(m: re.Match) -> str:
        text = png_alt(base64.b64decode(m["data"]))
        return m.group(0) if text is None else f'<img alt="{html.escape(text)}"{m["rest"]}'

    return _DATA_PNG.sub(alt, html_text)


def remote_references(html_text: str) -> list[str]:
    """Every script/style/image/frame the page would load from the network: tags, CSS imports, and
    script or style URLs quoted inside inline JavaScript."""
    found = [m.group(0) for m in _REMOTE.finditer(html_text)]
    for script in re.findall(r"<script[^>]*>(.*?)</script>", html_text, re.S | re.I):
        found += [m.group(0) for m in _JS_REMOTE.finditer(script)]
    for style in re.findall(r"<style[^>]*>(.*?)</style>", html_text, re.S | re.I):
        found += [m.group(0) for m in _CSS_REMOTE.finditer(style)]
    return found


def missing_local_references(html_text: str, page: Path) -> list[str]:
    """Local <script src>/<link href> targets that do not exist next to the page."""
    missing = []
    for m in _LOCAL_REF.finditer(html_text):
        url = m["url"]
        if url.startswith(("data:", "#")):
            continue
        if not (page.parent / url).resolve().exists():
            missing.append(url)
    return missing


def export(stem: str, out_dir: Path = SITE_DIR / "slides", site_dir: Path = SITE_DIR, execute: bool = False,
           book_dir: Path = BOOK_DIR, executed_dir: Path | None = None) -> Path:
    """Write ``<out_dir>/<stem>.slides.html`` and return its path; fail if it would load anything remote."""
    from nbconvert import SlidesExporter
    from nbconvert.preprocessors import TagRemovePreprocessor
    from traitlets.config import Config

    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    # Vendored files: the built site's copy when there is one, else the repository's (same files).
    static = Path(site_dir) / "_static"
    if not (static / "vendor" / "reveal.js").exists():
        static = BOOK_DIR / "_static"
    vendor = static / "vendor"
    for needed in (vendor / "reveal.js" / "dist" / "reveal.js", vendor / "require.js",
                   vendor / "mathjax" / "startup.js"):
        if not needed.exists():
            raise LabError(f"{needed}: vendored file missing (scripts/vendor_js.sh fetches it)")

    # Links between chapters point at the site's pages, relative to the deck.
    pages = Path(site_dir) / book_dir.name

    def link(target: str, anchor: str) -> str:
        return _rel(pages / Path(target).with_suffix(".html"), out_dir) + anchor

    nb, glue = load_chapter(stem, execute=execute, book_dir=book_dir, executed_dir=executed_dir)
    slides_nb = to_slides_notebook(nb, glue, link, chapter_url=link(f"{stem}.md", ""))

    c = Config()
    c.SlidesExporter.extra_template_basedirs = [str(TEMPLATE_DIR)]
    c.SlidesExporter.template_name = TEMPLATE_NAME
    c.SlidesExporter.reveal_url_prefix = _rel(vendor / "reveal.js", out_dir)
    c.SlidesExporter.reveal_theme = "white"
    c.SlidesExporter.reveal_scroll = False
    c.SlidesExporter.require_js_url = _rel(vendor / "require.js", out_dir)
    c.SlidesExporter.mathjax_url = _rel(vendor / "mathjax" / "startup.js", out_dir)
    c.SlidesExporter.jquery_url = ""
    c.SlidesExporter.font_awesome_url = ""
    c.SlidesExporter.jupyter_widgets_base_url = ""
    c.SlidesExporter.exclude_input_prompt = True
    c.SlidesExporter.exclude_output_prompt = True
    exporter = SlidesExporter(config=c)
    exporter.register_preprocessor(TagRemovePreprocessor(config=c), enabled=True)
    lab_css = [_rel(static / name, out_dir) for name in ("quiz.css",) if (static / name).exists()]
    lab_js = [_rel(static / name, out_dir) for name in ("explorer.js", "quiz.js") if (static / name).exists()]
    favicon = _rel(static / "favicon.svg", out_dir) if (static / "favicon.svg").exists() else ""  # else a 404
    body, _ = exporter.from_notebook_node(slides_nb, resources={"lab_css": lab_css, "lab_js": lab_js, "lab_favicon": favicon,
                                                                "metadata": {"name": stem}})

    body = describe_images(body)
    page = out_dir / f"{stem}.slides.html"
    remote = remote_references(body)
    if remote:
        raise LabError(f"{page.name}: the slides would load {remote[0]!r} from the network; "
                       "override that URL in lab/slides.py or the template")
    missing = missing_local_references(body, page)
    if missing:
        raise LabError(f"{page.name}: the slides reference {missing[0]!r}, which does not exist")

    return write_atomic(page, lambda tmp: tmp.write_text(body, encoding="utf-8"))


#: Pages in the table of contents that are not chapters and get no slide deck (bibliography, glossary).
NOT_DECKS = ("references", "glossary")


def toc_chapters() -> list[str]:
    """Chapter stems listed in _toc.yml (the root page included), in order."""
    import yaml

    toc = yaml.safe_load((REPO_ROOT / "_toc.yml").read_text(encoding="utf-8"))
    files, stack = [toc["root"]], list(toc.get("chapters") or toc.get("sections") or [])
    stack += [c for part in toc.get("parts") or [] for c in part.get("chapters", [])]
    while stack:
        entry = stack.pop(0)
        if "file" in entry:
            files.append(entry["file"])
        stack.extend(entry.get("sections") or [])
    return [Path(f).name for f in files if Path(f).parent.name == BOOK_DIR.name and Path(f).name not in NOT_DECKS]


class DeckLinks:
    """An HTML list of links from a book page to the chapters' decks (``../slides/<stem>.slides.html``)."""

    def __init__(self, stems: list[str] | None = None, book_dir: Path = BOOK_DIR):
        self.rows = []
        for stem in stems if stems is not None else toc_chapters():
            source = book_dir / f"{stem}.md"
            if not source.exists():
                continue
            title = next((m.group(2).strip() for line in source.read_text(encoding="utf-8").splitlines()
                          if (m := _HEADING.match(line)) and len(m.group(1)) == 1), stem)
            self.rows.append((stem, title))

    def _repr_html_(self) -> str:
        items = "".join(f'<li><a href="../slides/{stem}.slides.html">{html.escape(title)}</a></li>'
                        for stem, title in self.rows)
        return f'<ul class="lab-decks">{items}</ul>'

    def __repr__(self) -> str:
        return "\n".join(f"slides/{stem}.slides.html  {title}" for stem, title in self.rows)


# --- CLI ---------------------------------------------------------------------------------------------

def add_arguments(parser) -> None:
    parser.add_argument("chapters", nargs="*", metavar="CHAPTER",
                        help="chapter file stems, e.g. 06-vllm-sweeps (default: every chapter in _toc.yml)")
    parser.add_argument("--out", type=path_arg, default=SITE_DIR / "slides", help="folder for the decks (default: %(default)s)")
    parser.add_argument("--site", type=path_arg, default=SITE_DIR, help="the built site (default: %(default)s)")
    parser.add_argument("--execute", action="store_true",
                        help="run each chapter now instead of reading the site build's executed notebooks")


def main(args) -> int:
    from tqdm import tqdm

    check_output(args.out, "--out", [("the chapters folder", BOOK_DIR)])
    chapters = args.chapters or toc_chapters()
    if not args.execute and not (args.site / "index.html").exists():
        raise LabError(f"{args.site}: no built site; run scripts/build_site.sh first (or pass --execute)")
    with dataset_lock(args.out):
        for stem in tqdm(chapters, desc="slides", unit="deck", disable=len(chapters) < 2):
            page = export(stem, out_dir=args.out, site_dir=args.site, execute=args.execute)
            print(f"wrote {page}")
    return 0
