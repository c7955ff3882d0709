"""Why vLLM's FLEX_ATTENTION arm is slow, factor by factor: standalone FlexAttention against the
same kernel with its decode path turned off and over a paged cache, beside vLLM's arm itself.

The H200 run (``data/h200/flex-decomposition/flex_decomposition.csv``) times, at one shape per row:

- ``flex-default``: ``flex_attention`` as PyTorch ships it (for a query shorter than 128 tokens
  Inductor picks its decoding kernel: split-KV with the query heads of a KV group packed together);
- ``flex-forced``: the same call with ``kernel_options={"FORCE_USE_FLEX_ATTENTION": True}``, which
  vLLM's backend always passes, so the general kernel runs (one program per query block and head);
- ``flex-paged``: forced as well, over a paged cache (one flat pool of 16-token pages) with a mask
  that turns physical positions into logical ones through a block-table lookup, as vLLM's does;
- ``sdpa-flash`` and ``sdpa-cudnn``: PyTorch's fused kernels on the same shape, for reference;
- ``copy``: a device-to-device copy in the same run (the bandwidth a read can reach).

vLLM's arm itself comes from our profiler windows (:mod:`lab.results.census_windows`): attention
time per decode step at 28k tokens of context, and attention time of the 28k prefill window.
Everything returns numbers or None ("not measured yet"), never sentences.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from lab.results.data import DATA_DIR, load

DATASET = "h200/flex-decomposition"
FILE = "flex_decomposition.csv"
COLUMNS = ("phase", "batch", "n", "variant", "ms", "ms_rounds", "kv_bytes", "gb_per_s", "tflops", "max_abs_err", "note")
VARIANTS = ("flex-default", "flex-forced", "flex-paged", "sdpa-flash", "sdpa-cudnn", "copy")
#: The ladder from FlexAttention as a kernel to FlexAttention as vLLM calls it: (slower, faster, what changed).
STEPS = (("flex-forced", "flex-default", "decode path off (FORCE_USE_FLEX_ATTENTION)"),
         ("flex-paged", "flex-forced", "paged cache, block-table lookup in the mask"))
#: The rate that measures each phase: decode reads the cache, prefill multiplies.
RATE = {"decode": "gb_per_s", "prefill": "tflops"}
#: The census windows that hold vLLM's own FLEX arm (prompt or context length of both).
VLLM_WINDOW_TOKENS = 28672


@dataclass(frozen=True)
class Decomposition:
    """The measured rows and where they came from."""

    table: object          # pandas DataFrame with COLUMNS
    source: str            # data/<dataset>/<file>
    gpu: str

    def row(self, phase: str, batch: int, variant: str):
        rows = self.table[(self.table["phase"] == phase) & (self.table["batch"] == batch)
                          & (self.table["variant"] == variant)]
        return None if rows.empty else rows.iloc[0]

    def ms(self, phase: str, batch: int, variant: str) -> float | None:
        row = self.row(phase, batch, variant)
        return _finite(row["ms"]) if row is not None else None

    def rate(self, phase: str, batch: int, variant: str) -> float | None:
        """GB/s of K/V read (decode) or TFLOP/s (prefill); for ``copy`` always GB/s."""
        row = self.row(phase, batch, variant)
        column = "gb_per_s" if variant == "copy" else RATE[phase]
        return _finite(row[column]) if row is not None else None

    def factor(self, phase: str, batch: int, slow: str, fast: str) -> float | None:
        """Time of ``slow`` over time of ``fast`` at the same shape."""
        a, b = self.ms(phase, batch, slow), self.ms(phase, batch, fast)
        return a / b if a is not None and b else None

    def batches(self, phase: str) -> list[int]:
        return sorted(int(b) for b in self.table.loc[self.table["phase"] == phase, "batch"].unique())

    def length(self, phase: str) -> int | None:
        values = self.table.loc[self.table["phase"] == phase, "n"]
        return None if values.empty else int(values.iloc[0])


def _finite(value) -> float | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def read(root: Path = DATA_DIR) -> Decomposition | None:
    """The decomposition on file, or None while the H200 run is not committed."""
    folder = Path(root) / DATASET
    if not (folder / FILE).exists() or not (folder / "provenance.json").exists():
        return None
    ds = load(folder)
    table = ds.csv(FILE, COLUMNS)
    return Decomposition(table, f"data/{DATASET}/{FILE}", ds.gpu)


@dataclass(frozen=True)
class VllmFlex:
    """vLLM's FLEX_ATTENTION arm in our H200 windows: attention only, batch 1."""

    decode_ms_per_step: float | None      # attention kernels of one decode step
    decode_gb_per_s: float | None         # the KV cache of one step over that time
    prefill_ms: float | None              # attention kernels of the whole prefill window
    prefill_tflops: float | None          # causal attention FLOPs over that time
    tokens: int = VLLM_WINDOW_TOKENS
    source: str = "data/h200/vllm0.26-qwen2.5-7b/traces/flex_attention"


def vllm_flex(root: Path = DATA_DIR, backend: str = "FlexAttention", arm: str = "FLEX_ATTENTION") -> VllmFlex:
    """Attention time and rate of vLLM's arm from the H200 census windows (None where not captured)."""
    from lab.results import census_windows as cd
    from lab.results.hardware import device
    from lab.results.modelshape import qwen25_7b
    from lab.results.roofline import model_phase

    table, shape, n = cd.census_table(root), qwen25_7b(), VLLM_WINDOW_TOKENS
    steps = {w["window"]: w["steps"].get("decode") for w in cd.measured_windows(root)
             if w["gpu"] == "H200" and w["arm"] == arm}
    decode, prefill = cd.window(table, "H200", "decode", n, backend), cd.window(table, "H200", "prefill", n, backend)
    count = steps.get(f"decode-{n}")
    per_step = decode.ms["attention"] / count if decode.ms["attention"] is not None and count else None
    kv_bytes = n * shape.kv_bytes_per_token()
    flops = model_phase(shape, "prefill", n, fused=True, sram_bytes=device("H200-SXM").smem_per_sm)["attention"].flops
    attention = prefill.ms["attention"]
    return VllmFlex(per_step, kv_bytes / (per_step / 1e3) / 1e9 if per_step else None,
                    attention, flops / (attention / 1e3) / 1e12 if attention else None)


def ladder(decomposition: Decomposition, phase: str, batch: int):
    """One table per phase and batch: variant, ms, rate, % of copy bandwidth (decode), time over the
    variant above it in the ladder. Rows in the order of :data:`VARIANTS`."""
    import pandas as pd

    copy = decomposition.rate(phase, batch, "copy")
    rows, previous = [], None
    for variant in VARIANTS:
        ms = decomposition.ms(phase, batch, variant)
        if ms is None:
            continue
        rate = decomposition.rate(phase, batch, variant)
        step = ms / decomposition.ms(phase, batch, previous) if previous in ("flex-default", "flex-forced") and \
            variant in ("flex-forced", "flex-paged") else None
        rows.append({"variant": variant, "ms": ms, "rate": rate,
                     "pct_of_copy": 100 * rate / copy if phase == "decode" and rate and copy and variant != "copy" else None,
                     "x_previous": step})
        previous = variant
    return pd.DataFrame(rows, columns=["variant", "ms", "rate", "pct_of_copy", "x_previous"])
