"""The numbers the interview and course-kit chapters cite: values, each knowing its source, never sentences.

``facts()`` returns one flat dict (name -> :class:`lab.book.facts.Fact`) that the chapters glue with
:func:`lab.book.facts.glue_all`; the sentences around the numbers live in the chapters' markdown.

    common   facts that may be missing, one row of a table
    a10g     the published A10G study: always there (data/reference/)
    h200     this project's H200 runs: sweeps, kernel benchmark, tuning, census
    studies  the studies that land later: paged decode, concurrency, Flex masks and decomposition, DRAM bytes
    busy     the busy server (chapter 6b's facts and the answers' additions): load, a long prompt, FP8 KV cache
    hopper   chapter 4's hand-scheduled Hopper kernel against FA3 (the hk_* facts of lab.book.pages.ch04)

H200 and later-study facts carry their format (:attr:`lab.book.facts.Fact.fmt`): glued as text in it, or as
"not measured yet" until their data exists.
"""

from __future__ import annotations

from lab.book.facts import Fact
from lab.book.interview import a10g, busy, h200, studies
from lab.book.interview.common import A10G, FA2, FA3, FLASH, FLEX
from lab.book.pages import ch04, ch06

__all__ = ["A10G", "FA2", "FA3", "FLASH", "FLEX", "a10g_facts", "facts"]

a10g_facts = a10g.a10g_facts


def facts() -> dict[str, Fact]:
    """Everything the interview and course-kit chapters glue."""
    found = {**a10g.a10g_facts(), **h200.facts(), **studies.facts(), **busy.facts(),
             **{name: fact for name, fact in ch04.facts().items() if name.startswith("hk_")}}
    # a name chapter 6 states is chapter 6's fact; the interview keeps only its own display format
    teaching = ch06.facts()
    return found | {name: teaching[name].shown_as(found[name].fmt or teaching[name].fmt)
                    for name in found if name in teaching}

