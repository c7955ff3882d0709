"""Every page that reads through a page module (lab.book.pages) glues every name its markdown uses from that
module's ``facts()``, each one measured, in one hidden cell; add a page here when it moves to its module."""

from __future__ import annotations

import importlib
import re

import pytest

from lab import REPO_ROOT
from lab.book import quoted

#: chapter file stem -> its page module
PAGES = {"intro": "intro", "01-roofline": "ch01", "02-naive-attention": "ch02", "03-tiling-online-softmax": "ch03",
         "04-flashattention-triton": "ch04", "04b-backward-pass": "ch04b", "05-decode-split-kv": "ch05",
         "05b-paged-attention": "ch05b", "06-vllm-sweeps": "ch06", "06b-busy-server": "ch06b",
         "06c-our-kernels-in-vllm": "ch06c", "07-the-trace": "ch07",
         "08-interview-prep": "interview", "appendix-method": "appendix"}
#: pages that quote other pages' facts from the last build's fact registry (lab.book.quoted)
QUOTING = {"08-interview-prep"}
GLUED = re.compile(r"\{glue:text\}`([a-z0-9_]+)")
CELL = re.compile(r"```\{code-cell\}[^\n]*\n(.*?)\n```", re.S)


@pytest.mark.parametrize("chapter", PAGES)
def test_the_page_glues_every_name_it_uses_from_its_module_in_one_cell(chapter):
    if chapter in QUOTING and not quoted.LAST_BUILD.is_dir():
        pytest.skip("quotes the fact registry of a site build (_build/facts): none here")
    text = (REPO_ROOT / "book" / f"{chapter}.md").read_text(encoding="utf-8")
    module = importlib.import_module(f"lab.book.pages.{PAGES[chapter]}")
    facts = module.facts()
    used = set(GLUED.findall(text))
    assert used <= set(facts), sorted(used - set(facts))
    assert all(facts[name].measured for name in used), sorted(n for n in used if not facts[n].measured)
    glue_cells = [cell for cell in CELL.findall(text) if "glue_all(" in cell]
    assert len(glue_cells) == 1 and f"glue_all({PAGES[chapter]}.facts())" in glue_cells[0]
    assert module.facts() is facts, "facts() is cached: a second call reads nothing"
