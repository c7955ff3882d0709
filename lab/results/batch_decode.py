"""Batch on the decode roofline: many sequences decoding together in one vLLM server.

A decode step reads every weight once whatever the batch, and every sequence's KV cache: the
weights' intensity grows with the batch, attention's stays near the group size (query heads per
KV head). This module gives the roofline floor of a step for a batch and a context, and reads the
concurrency sweeps (``concurrency.csv``: arm, context, concurrency, admitted, itl_ms, decode_tok_s,
window_s, steps, ok) when they are on file. Numbers or None, never sentences.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lab.results.data import DATA_DIR

STUDY = "h200/vllm0.26-qwen2.5-7b-concurrency"
FILE = "concurrency.csv"
COLUMNS = ("arm", "context", "concurrency", "admitted", "itl_ms", "decode_tok_s", "window_s", "steps", "ok")
CONTEXTS = (2048, 32768)
CONCURRENCY = (1, 4, 16, 64)


@dataclass(frozen=True)
class StepFloor:
    """One decode step of ``batch`` sequences with ``context`` tokens each, at the roofline."""

    batch: int
    context: int
    weight_bytes: float
    kv_bytes: float
    bandwidth: float

    @property
    def itl_ms(self) -> float:
        return (self.weight_bytes + self.kv_bytes) / self.bandwidth * 1e3

    @property
    def tokens_per_s(self) -> float:
        return self.batch / (self.itl_ms / 1e3)

    @property
    def kv_share_pct(self) -> float:
        return 100 * self.kv_bytes / (self.weight_bytes + self.kv_bytes)

    @property
    def kv_bound(self) -> bool:
        """More bytes of KV cache than of weights in a step."""
        return self.kv_bytes > self.weight_bytes


def step_floor(batch: int, context: int, gpu: str = "H200-SXM") -> StepFloor:
    """Weights once plus every sequence's KV cache, over the datasheet bandwidth."""
    from lab.results.hardware import device
    from lab.results.modelshape import qwen25_7b

    shape, dev = qwen25_7b(), device(gpu)
    weights = 2 * (shape.layers * shape.linear_weights_per_layer + shape.lm_head_weights)
    return StepFloor(batch, context, float(weights), float(batch * context * shape.kv_bytes_per_token()), dev.bandwidth)


def kv_bound_batch(context: int) -> int:
    """The smallest batch whose KV bytes exceed the weight bytes at this context."""
    one = step_floor(1, context)
    return int(one.weight_bytes // one.kv_bytes) + 1


def intensities(batch: int) -> dict:
    """FLOP per byte of the weight matmuls (grows with the batch) and of decode attention (the group size)."""
    from lab.results.modelshape import qwen25_7b

    shape = qwen25_7b()
    return {"matmul": float(batch), "attention": shape.q_heads / shape.kv_heads}


def read(root: Path = DATA_DIR):
    """Every committed concurrency.csv under the study folder in one table (with ``arm`` from the file),
    or None while none is on file."""
    import pandas as pd

    from lab.results.data import load

    folder = Path(root) / STUDY
    tables = []
    for path in sorted(folder.glob(f"*/{FILE}")) if folder.is_dir() else []:
        if (path.parent / "provenance.json").exists():
            tables.append(load(path.parent).csv(FILE, COLUMNS))
    return pd.concat(tables, ignore_index=True) if tables else None


def measured(table, arm: str, context: int, batch: int) -> dict | None:
    """The measured point (itl_ms, decode_tok_s, admitted) or None."""
    if table is None:
        return None
    rows = table[(table["arm"] == arm) & (table["context"] == context) & (table["concurrency"] == batch)]
    rows = rows[rows["ok"].astype(str).str.lower().isin(["true", "1", "ok"])] if "ok" in rows else rows
    if rows.empty:
        return None
    row = rows.iloc[-1]
    return {"itl_ms": float(row["itl_ms"]), "decode_tok_s": float(row["decode_tok_s"]), "admitted": int(row["admitted"])}
