"""What the interview's fact readers share: arm names, :class:`Shown` facts, the decode floor and the
bandwidth an ITL growth implies, and this project's H200 vLLM sweeps (the quizzes read them too)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from lab.book.facts import Fact, plain
from lab.measure.vllm import arms
from lab.results import data, reference
from lab.results.modelshape import qwen25_7b

A10G = reference.DATASET
FLASH, FLEX = arms.FLASH.label, arms.FLEX.label  # the A10G study's arms
FA3, FA2 = arms.FA3.label, arms.FA2.label
GB = 1e9


@dataclass(frozen=True)
class Shown(Fact):
    """A fact that may be missing, glued as text in ``fmt`` ("not measured yet" when it is missing): a format
    spec in the markdown would fail on those words, so the format travels with the fact."""

    fmt: str = ""  # a format spec (".1f"), or a template that carries the unit ("{:.1f}×", "{:,d} tokens")

    def text(self) -> Fact:
        if not self.measured:
            return Fact(None, self.source)
        value = plain(self.value)
        return Fact(self.fmt.format(value) if "{" in self.fmt else format(value, self.fmt), self.source)


def missing_facts(formats: dict, source: str) -> dict:
    """Every name of ``formats`` (name -> format) as a fact that is not measured."""
    return {name: Shown(None, source, fmt) for name, fmt in formats.items()}


def shown_facts(values: dict, formats: dict, source: str) -> dict:
    """A Shown fact per name of ``formats``; a name missing from ``values`` is not measured."""
    return {name: Shown(values.get(name), source, fmt) for name, fmt in formats.items()}


def row(table, **where):
    """The one row of ``table`` matching ``where`` (ValueError otherwise)."""
    rows = table
    for key, value in where.items():
        rows = rows[rows[key] == value]
    if len(rows) != 1:
        raise ValueError(f"{len(rows)} rows match {where}")
    return rows.iloc[0]


def streamed_weight_bytes() -> int:
    """Bytes of Qwen2.5-7B weights a decode step reads in bf16: every matrix but the embedding table,
    of which a step gathers one row per token."""
    shape = qwen25_7b()
    return (shape.parameters - shape.vocab * shape.hidden) * 2


def decode_floor_ms(bandwidth: float, n: int, batch: int = 1) -> float:
    """Lower bound on one decode step of Qwen2.5-7B: weights plus the KV of n tokens, read once at ``bandwidth``."""
    return 1e3 * (streamed_weight_bytes() + batch * n * qwen25_7b().kv_bytes_per_token(2)) / bandwidth


def kv_bandwidth_gb_s(itl_short_ms: float, itl_long_ms: float, n_short: int, n_long: int) -> float:
    """Bandwidth the extra KV bytes imply: (KV bytes added) / (ITL added), in GB/s.

    The weights cost the same at both lengths, so the ITL difference is the price of the longer KV read.
    """
    extra_bytes = (n_long - n_short) * qwen25_7b().kv_bytes_per_token(2)
    return extra_bytes / ((itl_long_ms - itl_short_ms) / 1e3) / GB


# --- shared with the quizzes: this project's H200 vLLM sweeps ---------------------------------------

#: The H200 study with vLLM's default settings; its variants (another chunk size, two GPUs) have folders of their own.
H200_STUDY = "h200/vllm0.26-qwen2.5-7b/"


def h200_sweeps():
    """Committed H200 vLLM sweep rows of the default-settings study with a measured TTFT (variants and readers'
    data/local runs left out), or None."""
    try:
        table = data.load_sweeps()
    except Exception:  # no sweep at all: the reference dataset is missing too, which a10g_facts reports
        return None
    table = table[table["dataset"].str.startswith(H200_STUDY) & table["gpu"].str.contains("H200")]
    if "status" in table.columns:
        table = table[table["status"].isna() | (table["status"].astype(str) == "ok")]
    table = table[table["ttft_s"].apply(lambda v: isinstance(v, (int, float)) and math.isfinite(v))]
    return table if len(table) else None


def longest_common(table, arms) -> int | None:
    """Longest target length every one of ``arms`` measured."""
    common = None
    for arm in arms:
        lengths = set(table[table["arm"] == arm]["target_len"])
        common = lengths if common is None else common & lengths
    return int(max(common)) if common else None
