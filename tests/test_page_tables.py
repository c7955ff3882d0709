"""No raw Python in a table a chapter shows (issue 36): every DataFrame or Styler a page module hands a chapter
renders with no NaN cell, no bare 0/1/2 index, no list repr, no exponent form, no count printed as a float and
no raw float of many decimals."""

from __future__ import annotations

import html
import importlib
import re

import pandas as pd
import pytest
from chapter_calls import PAGE_CALLS
from pandas.io.formats.style import Styler

from lab import REPO_ROOT

#: What a chapter calls that is not a table (figures and explorers are tested elsewhere).
NOT_TABLES = re.compile(r"facts|_figure$|explorer$|^quiz$")
CHAPTER_CALLS = [(page, name) for page, name in PAGE_CALLS if not NOT_TABLES.search(name)]

CELL = re.compile(r"<t([dh])[^>]*>(.*?)</t[dh]>", re.S)
MISSING = re.compile(r"^(nan|NaN|None|<NA>|NaT|inf|-inf)$")
#: A cell that is a printed list of floats or strings ("[1.0, 2.0]"); "216.8 [213.1, 220.5]", an interval after
#: its value, is a reader's notation.
LIST_REPR = re.compile(r"^\[\s*('[^']*'|-?\d+\.\d+(e[-+]?\d+)?)(\s*,\s*('[^']*'|-?\d+\.\d+(e[-+]?\d+)?))*\s*\]$")
EXPONENT = re.compile(r"\d(\.\d+)?e[-+]?\d+\b")
RAW_FLOAT = re.compile(r"\d\.\d{6,}")
WHOLE_FLOAT = re.compile(r"^-?[\d,]+\.0$")


def _tables(value):
    if isinstance(value, (pd.DataFrame, Styler)):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _tables(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tables(item)


def _rows(table) -> list[list[tuple[str, str]]]:
    """The table as a reader sees it: rows of (td or th, text), from the HTML the chapter shows."""
    page = table.to_html() if isinstance(table, Styler) else table._repr_html_()
    return [[(kind, html.unescape(re.sub(r"<[^>]+>", "", text)).strip()) for kind, text in CELL.findall(row)]
            for row in re.findall(r"<tr[^>]*>(.*?)</tr>", page, re.S)]


def raw_python(table) -> list[str]:
    """What in ``table`` is Python's printing rather than a reader's table."""
    found = []
    frame = table.data if isinstance(table, Styler) else table
    index_hidden = isinstance(table, Styler) and table.hide_index_ and all(table.hide_index_)
    if isinstance(frame.index, pd.RangeIndex) and len(frame) > 1 and not index_hidden:
        found.append("a bare 0, 1, 2 index column")
    if isinstance(frame.columns, pd.RangeIndex):
        found.append("columns headed 0, 1, 2")
    rows = _rows(table)
    for row in rows:
        for _, text in row:
            if MISSING.match(text):
                found.append(f"a missing value shown as {text!r}")
            for pattern, what in ((LIST_REPR, "a list repr"), (EXPONENT, "exponent form"), (RAW_FLOAT, "a raw float")):
                if pattern.search(text):
                    found.append(f"{what}: {text!r}")
    # a column of whole numbers printed as floats (2830.0): a count the float type leaked into
    data_rows = [[text for kind, text in row if kind == "d"] for row in rows]
    width = max((len(r) for r in data_rows), default=0)
    for col in range(width):
        column = [r[col] for r in data_rows if col < len(r) and r[col]]
        if column and all(WHOLE_FLOAT.match(text) for text in column):
            found.append(f"a count shown as floats: {column[:3]}")
    return found


def test_the_check_finds_what_issue_36_found():
    nan_pivot = pd.DataFrame({"mask": ["causal", "document"], "flex (ms)": [1.25, float("nan")]})
    assert any("missing" in p for p in raw_python(nan_pivot.style.hide(axis="index")))
    assert any("index" in p for p in raw_python(pd.DataFrame({"tokens": ["4,096", "8,192"]})))
    assert any("list repr" in p for p in raw_python(pd.DataFrame({"x": [[1.0, 2.0]]}).style.hide(axis="index")))
    assert any("exponent" in p for p in raw_python(pd.DataFrame({"err": [4.768372e-07]}).style.hide(axis="index")
                                                   .format("{}")))
    assert any("count" in p for p in raw_python(pd.DataFrame({"requests": [2830.0, 12.0]}).style.hide(axis="index")
                                                .format("{:.1f}")))
    assert any("columns" in p for p in raw_python(pd.DataFrame([[1, 2]]).style.hide(axis="index")))
    fine = pd.DataFrame({"kernel": ["ours"], "ms": [1.5], "err": ["4.8 × 10⁻⁷"], "key": ["[12, 13, 14, 15]"],
                         "b (µs/token), 95% CI": ["216.8 [213.1, 220.5]"]})
    assert raw_python(fine.style.hide(axis="index").format({"ms": "{:.2f}"})) == []


def test_the_chapters_show_tables_from_their_page_modules():
    assert len(CHAPTER_CALLS) >= 40
    assert ("ch05b", "paged_table") in CHAPTER_CALLS and ("ch04", "race_table") in CHAPTER_CALLS


@pytest.mark.parametrize(("page", "name"), CHAPTER_CALLS, ids=[f"{p}.{n}" for p, n in CHAPTER_CALLS])
def test_no_raw_python_in_a_chapters_table(page, name):
    shown = getattr(importlib.import_module(f"lab.book.pages.{page}"), name)()
    for table in _tables(shown):
        assert raw_python(table) == [], f"{page}.{name}()"


def test_tables_a_chapter_builds_from_its_own_cells_and_the_check_table():
    """The tables chapters call with their own values: the block table and addressing (chapter 5b, on the
    chapter's tensors) and the kernels' check (chapter 4, on errors of the size the interpreter gives)."""
    torch = pytest.importorskip("torch")
    from lab.book.pages import ch04, ch05, ch05b
    from lab.measure.attention import triton_paged_decode

    k = torch.arange(2 * 1 * 10 * 4, dtype=torch.float32).view(2, 1, 10, 4)  # as chapter 5b builds it
    k_cache, _, table, lengths = triton_paged_decode.paginate(k, -k, page_size=4, seq_lens=[10, 5], seed=1)
    for shown in (ch05b.block_table(table, lengths, page_size=4),
                  ch05b.addressing(k, k_cache, table, page_size=4, tokens=[(0, 3), (0, 4), (0, 6), (1, 4)]),
                  ch04.check_table({"teaching": {"no mask": 4.768372e-07, "causal": 6.4e-07}}),
                  ch05.check_table({"teaching": {"1 piece": 1.3e-07, "3 pieces": 1.6e-07}})):
        assert raw_python(shown) == []


#: A glue role that formats its number itself (``{glue:text}`name:.1e```): exponent form, or a number the
#: page module cannot write as the tables do.
GLUE_SPEC = re.compile(r"\{glue(?::text)?\}`(\w+):([^`]*[eEgG])`")
#: The pages whose prose states tiny errors (issue 36 found them written 4.8e-07 beside tables saying 4.8 × 10⁻⁷).
#: Chapter 5 states its errors only in its check table (covered above).
ERROR_PAGES = ("ch03", "ch04b", "ch05b")


def test_no_glue_role_in_the_book_formats_a_number_in_exponent_form():
    pages = sorted((REPO_ROOT / "book").glob("*.md"))
    found = [f"{page.name}: {m[0]}" for page in pages for m in GLUE_SPEC.finditer(page.read_text(encoding="utf-8"))]
    assert found == []
    assert GLUE_SPEC.search("by {glue:text}`trace_err:.1e`: rounding")


@pytest.mark.parametrize("page", ERROR_PAGES)
def test_the_prose_writes_tiny_errors_as_the_tables_do(page):
    from lab.book.facts import glued_value

    glued = {name: glued_value(fact) for name, fact in importlib.import_module(f"lab.book.pages.{page}").facts().items()}
    assert [f"{name} = {value!r}" for name, value in glued.items()
            if isinstance(value, float) and value and abs(value) < 1e-3 or EXPONENT.search(str(value))] == []
    assert any("× 10" in str(value) for value in glued.values()), "no tiny error glued: the test checks nothing"
