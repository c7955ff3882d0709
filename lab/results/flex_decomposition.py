"""Why vLLM's FLEX_ATTENTION arm is slow, factor by factor: standalone FlexAttention, then one of vLLM's
ingredients at a time, beside vLLM's arm itself.

The H200 run (``data/h200/flex-decomposition/flex_decomposition.csv``, written by
:mod:`lab.measure.flex_decomposition`, whose docstring defines every variant) times, per shape
(decode at 32k with batch 1 and 16, causal prefill at 16k; Qwen2.5-7B's 28 query over 4 KV heads):

- ``flex-default``: ``flex_attention`` compiled as PyTorch ships it. Inductor's decode template
  (``_use_flex_decoding``) needs a power-of-two number of query heads per KV head; Qwen2.5-7B has 7,
  so even this call runs the general template (``note`` lists the kernels and their grids);
- ``flex-forced``: ``kernel_options={"FORCE_USE_FLEX_ATTENTION": True}``, as vLLM passes: for this
  model the same kernel as ``flex-default``;
- ``flex-tiles16``: forced, with 16 x 16 tiles (``BLOCK_M = BLOCK_N = 16``), as vLLM sets them;
- ``flex-paged``: vLLM's whole recipe: one pool of 16-token pages, every request's queries packed into
  a batch of one, a block mask built from the block table with no full blocks, a physical-to-logical
  lookup in ``mask_mod``, forced, 16 x 16 tiles;
- ``flex-pad8`` (decode only): ``flex-default`` with each group padded to 8 query heads, so the decode
  template (split-KV, the group's heads packed into one tile) runs: what that template is worth;
- ``sdpa-flash``, ``sdpa-cudnn``: PyTorch's fused kernels; ``copy``: a copy of the same K/V bytes (a read
  and a write: the "% of" a variant reaches is of the GPU's read-stream ceiling, not of this copy).

vLLM's arm itself comes from our profiler windows at 28k tokens (:mod:`lab.results.census_windows` for
its attention time, the stored trace for its kernel's grid). Everything returns numbers or None
("not measured yet"), never sentences.
"""

from __future__ import annotations

import gzip
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from lab import LabError
from lab.measure.vllm.arms import FLEX
from lab.results import census_windows as cd
from lab.results.bandwidth import ceiling as ceiling_of
from lab.results.bandwidth import percent_of_ceiling, short_name
from lab.results.data import DATA_DIR, load
from lab.results.facts import Fact
from lab.results.hardware import device
from lab.results.modelshape import qwen25_7b
from lab.results.roofline import model_phase

DATASET = "h200/flex-decomposition"
FILE = "flex_decomposition.csv"
COLUMNS = ("phase", "batch", "n", "variant", "ms", "ms_rounds", "kv_bytes", "gb_per_s", "tflops", "max_abs_err", "note")
VARIANTS = ("flex-default", "flex-forced", "flex-tiles16", "flex-paged", "flex-pad8", "sdpa-flash", "sdpa-cudnn", "copy")
#: The ladder from FlexAttention as a kernel to FlexAttention as vLLM calls it: (slower, faster, what changed).
STEPS = (("flex-forced", "flex-default", "FORCE_USE_FLEX_ATTENTION, as vLLM passes"),
         ("flex-tiles16", "flex-forced", "16 x 16 tiles, as vLLM sets them"),
         ("flex-paged", "flex-tiles16", "paged pool, block-table mask with no full blocks, packed queries"))
#: Beside the ladder: the decode template (group padded to a power of two) against the general kernel.
DECODE_TEMPLATE = ("flex-pad8", "flex-default", "decode template (group padded to 8 heads)")
#: The rate that measures each phase: decode reads the cache, prefill multiplies.
RATE = {"decode": "gb_per_s", "prefill": "tflops"}
#: The census windows that hold vLLM's own FLEX arm (prompt or context length of both).
VLLM_WINDOW_TOKENS = 28672
VLLM_TRACES = f"h200/vllm0.26-qwen2.5-7b/traces/{FLEX.slug}"


@dataclass(frozen=True)
class Decomposition:
    """The measured rows and where they came from."""

    table: object          # pandas DataFrame with COLUMNS
    source: str            # data/<dataset>/<file>
    gpu: str
    sources: dict = None   # provenance flags.sources: what the installed torch's source says (may be empty)
    root: Path = DATA_DIR  # the data/ folder it was read from (the GPU's bandwidth ceiling is read there too)

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

    def pct_of_ceiling(self, phase: str, batch: int, variant: str) -> float | None:
        """A decode variant's read rate as a percentage of the GPU's bandwidth ceiling (lab.results.bandwidth)."""
        rate = self.rate(phase, batch, variant) if phase == "decode" else None
        return None if rate is None else percent_of_ceiling(rate * 1e9, self.gpu, self.root)

    def factor(self, phase: str, batch: int, slow: str, fast: str) -> float | None:
        """Time of ``slow`` over time of ``fast`` at the same shape."""
        a, b = self.ms(phase, batch, slow), self.ms(phase, batch, fast)
        return a / b if a is not None and b else None

    def factor_fact(self, phase: str, batch: int, slow: str, fast: str) -> Fact:
        """:meth:`factor` as the fact every page quotes (None: one of the two variants not timed)."""
        return Fact(self.factor(phase, batch, slow, fast), self.source, unit="×",
                    quantity=f"{short_name(self.gpu)}.flex_decomposition.{phase}.b{batch}.{slow}_over_{fast}",
                    method="median time of one variant over the other's, same shape, same run")

    def grid(self, phase: str, batch: int, variant: str) -> tuple[int, ...] | None:
        """The launch grid of the variant's attention kernel (the ``triton_tem`` template), from ``note``."""
        row = self.row(phase, batch, variant)
        return template_grid(str(row["note"])) if row is not None else None

    def programs(self, phase: str, batch: int, variant: str) -> int | None:
        grid = self.grid(phase, batch, variant)
        return math.prod(grid) if grid else None

    def extra_kernels(self, phase: str, batch: int, variant: str) -> int | None:
        """Kernels launched after the attention template (the decode template's combine of its splits)."""
        row = self.row(phase, batch, variant)
        if row is None:
            return None
        names = [name for name, _ in kernels(str(row["note"]))]
        template = next((i for i, name in enumerate(names) if name.startswith("triton_tem")), None)
        return None if template is None else len(names) - template - 1

    def torch_checks_power_of_two(self) -> bool | None:
        """Whether the run's torch has the power-of-two group test in ``_use_flex_decoding``."""
        return (self.sources or {}).get("torch_use_flex_decoding_checks_power_of_two")

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
    sources = (ds.provenance.get("flags") or {}).get("sources") or {}
    return Decomposition(table, f"data/{DATASET}/{FILE}", ds.gpu, sources, Path(root))


_KERNEL = re.compile(r"(\S+) grid=\[([\d,\s]+)\]")


def kernels(note: str) -> list[tuple[str, tuple[int, ...]]]:
    """(name, grid) of every kernel a ``note`` lists ("kernels: name grid=[x, y, z]; ...")."""
    return [(name, tuple(int(x) for x in grid.split(","))) for name, grid in _KERNEL.findall(note or "")]


def template_grid(note: str) -> tuple[int, ...] | None:
    """The grid of the attention template (Inductor names it ``triton_tem_...``), or None."""
    return next((grid for name, grid in kernels(note) if name.startswith("triton_tem")), None)


@dataclass(frozen=True)
class VllmFlex:
    """vLLM's FLEX_ATTENTION arm in our H200 windows: attention only, batch 1."""

    decode_ms_per_step: float | None      # attention kernels of one decode step
    decode_gb_per_s: float | None         # the KV cache of one step over that time
    prefill_ms: float | None              # attention kernels of the whole prefill window
    prefill_tflops: float | None          # causal attention FLOPs over that time
    tokens: int = VLLM_WINDOW_TOKENS
    source: str = f"data/{VLLM_TRACES}"


def vllm_flex(root: Path = DATA_DIR, backend: str = "FlexAttention", arm: str = FLEX.label) -> VllmFlex:
    """Attention time and rate of vLLM's arm from the H200 census windows (None where not captured)."""
    try:
        table = cd.census_table(root)
    except LabError:  # no census under this root: nothing of vLLM's arm is measured
        return VllmFlex(None, None, None, None)
    shape, n = qwen25_7b(), VLLM_WINDOW_TOKENS
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


@dataclass(frozen=True)
class VllmKernel:
    """One launch configuration of vLLM's Flex attention kernel in a stored profiler trace."""

    window: str                 # e.g. decode-28672
    name: str
    grid: tuple[int, ...]
    calls: int
    ms_per_call: float

    @property
    def programs(self) -> int:
        return math.prod(self.grid)


def vllm_kernels(window: str, root: Path = DATA_DIR) -> list[VllmKernel]:
    """The Flex attention kernels of one of our vLLM windows, one entry per grid, most calls first
    (empty when the trace is not on file). Read from the trace itself: the census keeps no grids."""
    path = Path(root) / VLLM_TRACES / f"{window}.trace.json.gz"
    if not path.exists():
        return []
    with gzip.open(path, "rt") as handle:
        events = json.load(handle).get("traceEvents", [])
    launches: dict[tuple, list[float]] = {}
    for event in events:
        if event.get("cat") == "kernel" and "flex_attention" in event.get("name", ""):
            grid = tuple(int(x) for x in (event.get("args") or {}).get("grid") or ())
            launches.setdefault((event["name"], grid), []).append(float(event.get("dur", 0.0)) / 1e3)
    found = [VllmKernel(window, name, grid, len(ms), sum(ms) / len(ms)) for (name, grid), ms in launches.items()]
    return sorted(found, key=lambda k: -k.calls)


def vllm_over(decomposition: Decomposition, vllm: VllmFlex, variant: str = "flex-paged") -> float | None:
    """How many times slower vLLM's arm read the cache (batch-1 decode, GB/s at its window's length)
    than a standalone variant did at batch 1 (GB/s at the decomposition's length): rates, because the
    lengths differ."""
    rate = decomposition.rate("decode", 1, variant) if decomposition else None
    return rate / vllm.decode_gb_per_s if rate and vllm and vllm.decode_gb_per_s else None


def step_of(variant: str) -> tuple[str, str, str] | None:
    """The ladder step (or the decode-template comparison) that ends at ``variant``."""
    return next((step for step in (*STEPS, DECODE_TEMPLATE) if step[0] == variant), None)


def ladder(decomposition: Decomposition, phase: str, batch: int, ceiling_bytes_per_s: float | None = None):
    """One table per phase and batch, rows in the order of :data:`VARIANTS`: variant, ms, rate, % of the
    GPU's bandwidth ceiling (decode; :func:`lab.results.bandwidth.ceiling` unless given), programs of the attention
    kernel, and, for the variants of
    :data:`STEPS` and :data:`DECODE_TEMPLATE`, the time over the variant that step starts from
    (``x_step``) and that variant's name (``over``)."""
    import pandas as pd

    ceiling = (ceiling_bytes_per_s or ceiling_of(decomposition.gpu, decomposition.root)) / 1e9  # GB/s, as the rates
    rows = []
    for variant in VARIANTS:
        ms = decomposition.ms(phase, batch, variant)
        if ms is None:
            continue
        rate = decomposition.rate(phase, batch, variant)
        step = step_of(variant)
        factor = decomposition.factor(phase, batch, variant, step[1]) if step else None
        rows.append({"variant": variant, "ms": ms, "rate": rate,
                     "pct_of_ceiling": 100 * rate / ceiling if phase == "decode" and rate and variant != "copy" else None,
                     "programs": decomposition.programs(phase, batch, variant),
                     "x_step": factor, "over": step[1] if factor is not None else None})
    return pd.DataFrame(rows, columns=["variant", "ms", "rate", "pct_of_ceiling", "programs", "x_step", "over"])
