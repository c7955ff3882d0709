"""The code a chapter teaches is on its page: every identifier of lab's code that a chapter's prose names in
code font (``tuned_tiles``, ``MASKED``, ``acc / l_i``, ``warpgroup_mma_wait``) is shown on that page in a
visible code block, or defined in the glossary.

"Lab's code" is what a reader could look for in ``lab/``: the functions, classes and module constants it
defines, and inside its Triton and Gluon kernels every parameter, local name and the API calls they make
(``tl.dot``, ``warpgroup_mma_wait``). A name the prose quotes from elsewhere (``torch.compile``, a vLLM flag,
a file path, a shell command) is not checked here.
"""

from __future__ import annotations

import ast
import functools
import html
import re
from pathlib import Path

import pytest

from lab import REPO_ROOT

PROSE_CODE = re.compile(r'<code class="docutils literal notranslate">(.*?)</code>', re.DOTALL)
PRE = re.compile(r"<pre>(.*?)</pre>", re.DOTALL)
HIDDEN_INPUT = re.compile(r'<details class="[^"]*hide above-input">.*?</details>', re.DOTALL)
TAG = re.compile(r"<[^>]+>")
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: Spans that are commands, flags, paths or file names, never identifiers of the code.
NOT_CODE = re.compile(r"^(triton\.|torch\.|flash_attn|cutlass|cute\.|python|pip|vllm|nvidia-smi|ncu|nsys|bash|scripts/|data/|book/|lab/|tests/|--|\.|/)|\.(py|md|csv|json|sh|h|cu|cuh)$")


def _text(fragment: str) -> str:
    return html.unescape(TAG.sub("", fragment))


def _is_jit(node: ast.FunctionDef) -> bool:
    return any("jit" in ast.unparse(d) for d in node.decorator_list)


def _code_like(name: str) -> bool:
    """A name that reads as code, not as a word: snake_case with an underscore, or CamelCase."""
    return "_" in name.strip("_") or bool(re.search(r"[a-z][A-Z]", name))


@functools.cache
def lab_names() -> frozenset[str]:
    """Identifiers a reader could look up in lab/: its functions, classes and module constants that read as code
    (``tuned_forward``, ``TUNED_CONFIGS``, ``PagedCache``), and inside its kernels every name (``MASKED``,
    ``l_i``, ``tl.dot``)."""
    names, kernel_names = set(), set()
    for path in (REPO_ROOT / "lab").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.Assign):
                names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            if isinstance(node, ast.FunctionDef) and _is_jit(node):
                for inner in ast.walk(node):
                    if isinstance(inner, ast.arg):
                        kernel_names.add(inner.arg)
                    elif isinstance(inner, ast.Name):
                        kernel_names.add(inner.id)
                    elif isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute):
                        kernel_names.add(inner.func.attr)
    chosen = {n for n in names if _code_like(n)} | kernel_names
    return frozenset(n for n in chosen if len(n) > 1 and not (n.startswith("__") and n.endswith("__")))


def lab_module_paths() -> set[str]:
    return {".".join(p.relative_to(REPO_ROOT).with_suffix("").parts).removesuffix(".__init__")
            for p in (REPO_ROOT / "lab").rglob("*.py")}


def named_in_prose(page_html: str) -> set[str]:
    """The lab identifiers the page's prose names in code font (outside code blocks)."""
    prose = PRE.sub(" ", page_html)
    modules, known, found = lab_module_paths(), lab_names(), set()
    for span in PROSE_CODE.findall(prose):
        text = _text(span).strip()
        if not text or NOT_CODE.search(text) or " -m " in text:
            continue
        dotted = text.split("(")[0]
        if dotted in modules or any(dotted.startswith(m + ".") and dotted.count(".") == m.count(".") + 1
                                    for m in modules if m.startswith("lab")):
            found |= {dotted.rsplit(".", 1)[-1]} & known if dotted not in modules else set()
            continue
        found |= {token for token in IDENT.findall(text) if token in known}
    return found


def shown_on(page_html: str) -> str:
    """The text of the page's visible code blocks (cell sources that are not hidden, outputs, literal blocks)."""
    return "\n".join(_text(block) for block in PRE.findall(HIDDEN_INPUT.sub(" ", page_html)))


@functools.cache
def glossary_terms() -> frozenset[str]:
    """The terms of the glossary directive: its unindented lines (a definition is indented under its terms)."""
    text = (REPO_ROOT / "book" / "glossary.md").read_text(encoding="utf-8")
    block = re.search(r"^```\{glossary\}\n(.*?)^```", text, re.M | re.S)
    terms = [line for line in (block.group(1) if block else "").splitlines() if line and not line[0].isspace()]
    return frozenset(IDENT.findall(" ".join(terms)))


def missing_on(page_html: str) -> list[str]:
    shown = set(IDENT.findall(shown_on(page_html)))
    return sorted(name for name in named_in_prose(page_html) if name not in shown and name not in glossary_terms())


CHAPTERS = sorted(p.stem for p in (REPO_ROOT / "book").glob("0*.md"))


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_identifier_the_prose_names_is_shown_on_its_page(built_site: Path, chapter: str):
    page = (built_site / "book" / f"{chapter}.html").read_text(encoding="utf-8")
    missing = missing_on(page)
    assert not missing, (f"{chapter}: the prose names {', '.join(missing)} in code font, but no visible code block on "
                         "the page shows it (show the function with lab.book.show.show, or define it in the glossary)")


def test_the_glossary_terms_are_read():
    assert {"mask_mod", "score_mod", "warpgroup"} <= glossary_terms()


def test_a_name_the_prose_uses_but_the_page_hides_is_found():
    page = ('<p>The split calls <code class="docutils literal notranslate"><span class="pre">tuned_tiles</span></code> '
            'twice, then divides <code class="docutils literal notranslate">acc / l_i</code>; see '
            '<code class="docutils literal notranslate">torch.compile</code> and '
            '<code class="docutils literal notranslate">python -m lab bench</code>.</p>'
            '<details class="admonition hide above-input"><pre>def tuned_tiles(acc, l_i): ...</pre></details>'
            '<pre>acc = acc / l_i</pre>')
    assert missing_on(page) == ["tuned_tiles"]
