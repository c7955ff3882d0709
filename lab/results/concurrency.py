"""Decode under load, read for the book: each concurrency point beside its roofline floor, and where decode turns KV-bound.

A decode step of B sequences reads the model's weights once (shared by the whole batch) and every
sequence's KV cache (B x context x KV bytes per token). Over the GPU's bandwidth ceiling that is the
least time a step can take: the *floor*. The weights' part is fixed; the KV part grows with both the
batch and the context, so past some batch the KV cache, not the weights, is most of what a step reads:
decode has turned KV-bound (why grouped-query attention, MQA/MLA and FP8 KV caches exist).

Weight bytes count what a step reads: every layer's matmul weights and the LM head (the embedding table
is not read whole; one row per sequence), as :func:`lab.results.roofline.model_phase` counts them. Model
shape from :mod:`lab.results.modelshape`, bandwidth: the GPU's ceiling from :mod:`lab.results.bandwidth`.

Pure functions over ``concurrency.csv`` tables (written by ``python -m lab vllm-concurrency``); values and
"not measured" (None), never sentences.
"""

from __future__ import annotations

from pathlib import Path

from lab import LabError
from lab.measure.vllm.arms import Arm
from lab.results.bandwidth import bandwidth_ceiling, ceiling, short_name
from lab.results.data import DATA_DIR, datasets
from lab.results.facts import Fact
from lab.results.modelshape import qwen25_7b
from lab.results.quantities import Quantity

#: The committed H200 concurrency study.
H200_STUDY = "h200/vllm0.26-qwen2.5-7b-concurrency"
CSV = "concurrency.csv"
COLUMNS = ("arm", "context", "concurrency", "admitted", "itl_ms", "decode_tok_s", "window_s", "steps", "ok")

# --- the quantities of a concurrency point (chapters 6 and 6b state them; members: [arm, context, requests]) ----
_POINT = dict(run=H200_STUDY, file=f"<arm>/{CSV}")
POINT_ITL = Quantity("h200.concurrency.itl", "median inter-token gap with that many requests of one context sent at "
                     "once (vLLM 0.26, Qwen2.5-7B shape)", unit="ms", **_POINT)
POINT_FLOOR = Quantity("h200.concurrency.floor", "the floor of the batch vLLM admitted: the weights once and the "
                       "admitted requests' KV bytes over the H200's bandwidth ceiling", unit="ms", **_POINT)
POINT_X_FLOOR = Quantity("h200.concurrency.itl_over_floor", "a point's ITL over the floor of the batch vLLM admitted",
                         unit="×", **_POINT)
POINT_SENT = Quantity("h200.concurrency.requests", "the requests a point sent at once", unit="requests", **_POINT)
POINT_ADMITTED = Quantity("h200.concurrency.admitted", "of those, the requests vLLM ran at once", unit="requests",
                          **_POINT)
POINT_TOK_S = Quantity("h200.concurrency.decode_tok_s", "decode tokens per second of all admitted requests",
                       unit="tokens/s", **_POINT)
KV_CACHE_TOKENS = Quantity("h200.concurrency.kv_cache_tokens", "the KV cache's size in tokens, as an arm's server "
                           "log reports it", run=H200_STUDY, file="<arm>/server.log", unit="tokens")
MAX_MODEL_LEN = Quantity("h200.concurrency.max_model_len", "an arm's context limit (max_model_len)", run=H200_STUDY,
                         file="<arm>/provenance.json", unit="tokens")


def _shape(shape=None):
    return shape or qwen25_7b()


def weight_bytes_per_step(shape=None, bytes_per_element: int = 2) -> int:
    """Bytes of weights one decode step reads, whatever the batch: every layer's matmuls and the LM head."""
    shape = _shape(shape)
    return bytes_per_element * (shape.layers * shape.linear_weights_per_layer + shape.lm_head_weights)


def kv_bytes_per_step(batch: int, context: int, shape=None, bytes_per_element: int = 2) -> int:
    """Bytes of KV cache one decode step reads: every sequence's whole cache."""
    return int(batch) * int(context) * _shape(shape).kv_bytes_per_token(bytes_per_element)


def kv_bytes_per_element(arm_label: str) -> int:
    """Bytes per cached key or value element of an arm: 1 for an FP8 KV cache, 2 (bf16) otherwise."""

    return 1 if Arm.parse(arm_label).kv_cache_dtype.startswith("fp8") else 2


def floor_step_s(batch: int, context: int, bandwidth: float, shape=None, kv_bytes_per_value: int = 2) -> float:
    """The least time one decode step can take: weights once plus every sequence's KV, over ``bandwidth`` (B/s)."""
    if bandwidth <= 0:
        raise LabError(f"bandwidth must be positive, got {bandwidth}")
    return (weight_bytes_per_step(shape) + kv_bytes_per_step(batch, context, shape, kv_bytes_per_value)) / bandwidth


def floor_fact(batch: int, context: int, gpu: str = "H200-SXM", root: Path | None = None) -> Fact:
    """:func:`floor_step_s` of Qwen2.5-7B over the GPU's bandwidth ceiling, in ms, as the fact every page quotes
    (not measured while the ceiling is not)."""

    ceiling = bandwidth_ceiling(gpu, root)
    return Fact(1e3 * floor_step_s(batch, context, ceiling.value) if ceiling.measured else None, ceiling.source,
                quantity=f"{short_name(gpu)}.decode_floor.b{batch}.n{context}", unit="ms",
                method="(weights once + every sequence's KV cache) / the GPU's bandwidth ceiling")


def kv_bound_batch(context: int, shape=None) -> float:
    """The batch at which a step's KV bytes equal its weight bytes at this context (KV-bound above it)."""
    return weight_bytes_per_step(shape) / kv_bytes_per_step(1, context, shape)


def floor_bandwidth(gpu: str = "H200-SXM", root: Path | None = None) -> tuple[float, str]:
    """(B/s, where from) the floor divides by: the GPU's one bandwidth ceiling (lab.results.bandwidth)."""

    return ceiling(gpu, root), bandwidth_ceiling(gpu, root).source


def point(points, arm: str, context: int, concurrency: int) -> dict | None:
    """One measured point (a row of :func:`load_points` or :func:`with_floor`, as a dict), or None when it is
    not on file or did not finish (``ok`` false)."""
    if points is None or points.empty:
        return None
    rows = points[(points["arm"] == arm) & (points["context"] == context) & (points["concurrency"] == concurrency)]
    rows = rows[rows["ok"].astype(str).str.lower().isin(["true", "1"])]
    return None if rows.empty else rows.iloc[-1].to_dict()


def load_points(study: str = H200_STUDY, root: Path = DATA_DIR):
    """Every arm's concurrency.csv under ``root/study`` in one table, with ``dataset`` and ``gpu`` columns.

    An empty table (same columns) when nothing is on file: the chapter shows "not measured".
    """
    import pandas as pd

    tables = []
    folder = Path(root) / study
    for ds in datasets(kind="vllm-sweep", root=folder) if folder.is_dir() else []:
        if ds.has(CSV):
            table = ds.csv(CSV, COLUMNS)
            table.insert(0, "gpu", ds.gpu)
            table.insert(0, "dataset", ds.name)
            tables.append(table)
    if not tables:
        return pd.DataFrame(columns=["dataset", "gpu", *COLUMNS])
    return pd.concat(tables, ignore_index=True)


def with_floor(points, bandwidth: float, shape=None):
    """The points beside their floors. The batch of a step is ``admitted`` (what vLLM actually ran together).

    Adds: weight_bytes, kv_bytes (per step), kv_share (KV / all bytes), kv_bound (KV bytes > weight bytes),
    floor_ms, itl_x_floor (measured ITL / floor), floor_tok_s (batch / floor), tok_s_of_floor (measured / floor_tok_s).
    """
    table = points.copy()
    if table.empty:
        for column in ("weight_bytes", "kv_bytes", "kv_share", "kv_bound", "floor_ms", "itl_x_floor", "floor_tok_s",
                       "tok_s_of_floor"):
            table[column] = []
        return table
    batch = table["admitted"].where(table["admitted"] > 0, table["concurrency"]).astype(int)
    weights = weight_bytes_per_step(shape)
    kv = [kv_bytes_per_step(b, c, shape, kv_bytes_per_element(arm))
          for b, c, arm in zip(batch, table["context"], table["arm"], strict=True)]
    table["weight_bytes"] = weights
    table["kv_bytes"] = kv
    table["kv_share"] = table["kv_bytes"] / (table["kv_bytes"] + weights)
    table["kv_bound"] = table["kv_bytes"] > weights
    floor_s = (table["kv_bytes"] + weights) / bandwidth
    table["floor_ms"] = floor_s * 1e3
    table["itl_x_floor"] = table["itl_ms"] / table["floor_ms"]
    table["floor_tok_s"] = batch / floor_s
    table["tok_s_of_floor"] = table["decode_tok_s"] / table["floor_tok_s"]
    return table


def itl_growth(points):
    """ITL and throughput of each point relative to one request at the same arm and context (None without it)."""
    table = points.copy()
    base = table[table["concurrency"] == 1].set_index(["arm", "context"])
    keys = list(zip(table["arm"], table["context"], strict=True))
    table["itl_x_single"] = [row / base["itl_ms"].get(k) if k in base.index else None
                             for row, k in zip(table["itl_ms"], keys, strict=True)]
    table["tok_s_x_single"] = [row / base["decode_tok_s"].get(k) if k in base.index else None
                               for row, k in zip(table["decode_tok_s"], keys, strict=True)]
    return table


def kv_bound_from(context: int, concurrencies, shape=None) -> int | None:
    """The smallest of ``concurrencies`` at which a step at ``context`` reads more KV than weights (None if none)."""
    threshold = kv_bound_batch(context, shape)
    above = [int(n) for n in sorted(concurrencies) if n > threshold]
    return above[0] if above else None


def summary(points, bandwidth: float | None, shape=None, source: str = H200_STUDY) -> dict:
    """Values for the prose, each with where it came from: per context, the batch where decode turns KV-bound
    (the floor's answer), and per arm the largest measured point's ITL, throughput and distance from the floor.

    Returns {"weight_gb": ..., "bandwidth_tb_s": ..., "contexts": {context: {...}}, "source": ...};
    None for anything not measured.
    """
    weights = weight_bytes_per_step(shape)
    out = {"weight_gb": weights / 1e9, "kv_bytes_per_token": _shape(shape).kv_bytes_per_token(),
           "bandwidth_tb_s": None if bandwidth is None else bandwidth / 1e12, "contexts": {}, "source": source}
    measured = points[points["ok"].astype(bool)] if not points.empty else points
    table = with_floor(measured, bandwidth, shape) if bandwidth and not measured.empty else measured
    for context in sorted({int(c) for c in points["context"]}) if not points.empty else []:
        rows = table[table["context"] == context]
        entry = {"kv_bound_batch": kv_bound_batch(context, shape),
                 "kv_bound_from": kv_bound_from(context, points.loc[points["context"] == context, "concurrency"], shape),
                 "admitted_max": int(points.loc[points["context"] == context, "admitted"].max()), "arms": {}}
        for arm, arm_rows in rows.groupby("arm"):
            top = arm_rows.sort_values("concurrency").iloc[-1]
            entry["arms"][arm] = {"concurrency": int(top["concurrency"]), "admitted": int(top["admitted"]),
                                  "itl_ms": float(top["itl_ms"]), "decode_tok_s": float(top["decode_tok_s"]),
                                  "itl_x_floor": float(top["itl_x_floor"]) if "itl_x_floor" in top else None}
        out["contexts"][context] = entry
    return out


def server_flag(arm_label: str, flag: str, study: str = H200_STUDY, root: Path = DATA_DIR):
    """A flag the arm's server recorded in its dataset's provenance (``kv_cache_tokens``, ``max_model_len``);
    None when the arm is not on file."""
    folder = Path(root) / study
    for ds in datasets(kind="vllm-sweep", root=folder) if folder.is_dir() else []:
        if ds.provenance.get("arm") == arm_label:
            return ds.provenance.get("flags", {}).get(flag)
    return None


def kv_cache_tokens(arm_label: str, study: str = H200_STUDY, root: Path = DATA_DIR) -> int | None:
    """Tokens the arm's KV cache holds (the server log's "GPU KV cache size")."""
    return server_flag(arm_label, "kv_cache_tokens", study, root)


def max_model_len(arm_label: str, study: str = H200_STUDY, root: Path = DATA_DIR) -> int | None:
    return server_flag(arm_label, "max_model_len", study, root)
