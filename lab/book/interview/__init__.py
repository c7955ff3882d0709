"""The numbers the interview and course-kit chapters cite: values, each knowing its source, never sentences.

``facts()`` returns one flat dict (name -> :class:`lab.book.facts.Fact`) that the chapters glue with
:func:`glue_for_prose`; the sentences around the numbers live in the chapters' markdown.

    common   arm names, Shown facts, the decode floor, the H200 vLLM sweep table (shared with the quizzes)
    a10g     the published A10G study: always there (data/reference/)
    h200     this project's H200 runs: sweeps, kernel benchmark, tuning, census
    studies  the studies that land later: paged decode, concurrency, Flex masks and decomposition, DRAM bytes

H200 and later-study facts are :class:`Shown`: glued as text in their own format, or as "not measured yet"
until their data exists.
"""

from __future__ import annotations

from collections.abc import Mapping

from lab.book.facts import Fact, glue_all
from lab.book.interview import a10g, h200, studies
from lab.book.interview.common import (A10G, FA2, FA3, FLASH, FLEX, Shown, decode_floor_ms, h200_sweeps,
                                       kv_bandwidth_gb_s, longest_common, streamed_weight_bytes)

__all__ = ["A10G", "FA2", "FA3", "FLASH", "FLEX", "Shown", "a10g_facts", "decode_floor_ms", "facts",
           "glue_for_prose", "h200_sweeps", "kv_bandwidth_gb_s", "longest_common", "streamed_weight_bytes"]

a10g_facts = a10g.a10g_facts


def facts() -> dict[str, Fact]:
    """Everything the interview and course-kit chapters glue."""
    return {**a10g.a10g_facts(), **h200.facts(), **studies.facts()}


def glue_for_prose(facts: Mapping[str, Fact]) -> dict:
    """Glue every fact (``Shown`` ones as formatted text); returns the glued values."""
    return glue_all({name: f.text() if isinstance(f, Shown) else f for name, f in facts.items()})
