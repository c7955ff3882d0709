"""A paged KV cache in numbers: what pages cost in memory (pure arithmetic), and what they cost a kernel
(the committed H200 runs of ``python -m lab paged-bench`` and of the FlexAttention mask timings).

The memory side needs no GPU: a sequence of ``context`` tokens in pages of ``page_size`` tokens holds
ceil(context / page_size) pages; only its last page is partly empty. An engine without pages reserves
a sequence's maximum length up front instead. The measured side returns :class:`lab.book.facts.Fact`-
compatible values: ``None`` where the run is not on file, never a made-up number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from lab import LabError
from lab.results.bandwidth import bandwidth_ceiling, percent_of_ceiling
from lab.results.data import DATA_DIR, load
from lab.results.facts import Fact
from lab.results.hardware import match_device
from lab.results.kernel_runs import DECODE_SHARE
from lab.results.modelshape import qwen25_7b
from lab.results.quantities import Quantity

PAGED_RUN = "h200/paged-decode"
MASKS_RUN = "h200/flex-masks"
_MASKS = dict(run=MASKS_RUN, file="masks.csv")
#: The mask study's quantities: chapter 5b teaches the study, chapter 6's Flex section quotes its window mask.
MASK_TIME = Quantity("h200.flex_masks.time", "one causal-GQA attention (28 query heads over 4 KV heads, d=128, bf16) "
                     "with a mask, interleaved rounds", unit="ms", **_MASKS)
SDPA_OVER_FLEX = Quantity("h200.flex_masks.sdpa_over_flex", "the fastest SDPA backend that accepts the mask: its time "
                          "over FlexAttention's", unit="×", **_MASKS)
MASK_WINDOW = Quantity("h200.flex_masks.window", "the window of the mask study's sliding-window mask (each query "
                       "sees that many keys back, causal)", run=MASKS_RUN, file="provenance.json", unit="tokens")
BLOCK_TABLE_ENTRY_BYTES = 4  # int32 page ids, as vLLM's block tables


# --- memory: pure arithmetic ------------------------------------------------------------------------

@dataclass(frozen=True)
class PagedCache:
    """The KV cache of ``batch`` sequences of ``context`` tokens each, in pages of ``page_size`` tokens.

    ``bytes_per_token`` is K and V of one token over every layer (Qwen2.5-7B in bf16 by default).
    """

    page_size: int
    context: int
    batch: int
    bytes_per_token: int = 0

    def __post_init__(self):
        for name in ("page_size", "context", "batch"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise LabError(f"{name} must be a positive whole number, got {value!r}")
        if self.bytes_per_token == 0:
            object.__setattr__(self, "bytes_per_token", qwen25_7b().kv_bytes_per_token())

    @property
    def pages_per_sequence(self) -> int:
        return math.ceil(self.context / self.page_size)

    @property
    def pages(self) -> int:
        return self.batch * self.pages_per_sequence

    @property
    def kv_bytes(self) -> int:
        """Bytes of the tokens themselves (what a kernel reads each decode step)."""
        return self.batch * self.context * self.bytes_per_token

    @property
    def allocated_bytes(self) -> int:
        """Bytes of every page handed out, the empty slots of each last page included."""
        return self.pages * self.page_size * self.bytes_per_token

    @property
    def wasted_slots(self) -> int:
        """Token slots allocated but empty: at most page_size - 1 per sequence, all in its last page."""
        return self.batch * (self.pages_per_sequence * self.page_size - self.context)

    @property
    def wasted_bytes(self) -> int:
        return self.wasted_slots * self.bytes_per_token

    @property
    def wasted_fraction(self) -> float:
        return self.wasted_bytes / self.allocated_bytes

    @property
    def block_table_bytes(self) -> int:
        """One int32 page id per page of every sequence (one table shared by all layers)."""
        return self.pages * BLOCK_TABLE_ENTRY_BYTES

    def reserved_waste_fraction(self, max_len: int) -> float:
        """Without pages: the share of a max_len reservation per sequence that these tokens leave empty."""
        if max_len < self.context:
            raise LabError(f"max_len ({max_len}) must be at least the context ({self.context})")
        return 1 - self.context / max_len


# --- measured: the committed H200 runs ---------------------------------------------------------------

def _table(run: str, name: str, columns: tuple[str, ...], root=None):
    """The run's table, or None when the run is not on file (not measured yet)."""
    folder = (root or DATA_DIR) / run
    if not (folder / "provenance.json").exists() or not (folder / name).exists():
        return None
    return load(folder).csv(name, columns)


def mask_window(root=None) -> int | None:
    """The sliding window the mask study ran (its provenance's flags.window), or None before the study exists."""
    folder = (root or DATA_DIR) / MASKS_RUN
    return int(load(folder).provenance["flags"]["window"]) if (folder / "provenance.json").exists() else None


def paged_table(root=None):
    """data/h200/paged-decode/paged.csv (kernel, page_size, batch, n, ms, gb_per_s, ...) or None.

    Its ``copy`` rows (and ``copy_gb_per_s``, ``fraction_of_copy``) time a device copy of the same bytes,
    a read and a write: no ceiling for a kernel that reads (:func:`pct_of_ceiling` is)."""
    return _table(PAGED_RUN, "paged.csv", ("kernel", "page_size", "batch", "n", "ms", "gb_per_s", "copy_gb_per_s",
                                           "fraction_of_contiguous", "max_abs_err"), root)


def masks_table(root=None):
    """data/h200/flex-masks/masks.csv (mask, impl, n, ms, tflops_effective, max_abs_err) or None."""
    return _table(MASKS_RUN, "masks.csv", ("mask", "impl", "n", "ms", "tflops_effective", "max_abs_err"), root)


def paged_row(kernel: str, batch: int, n: int, page_size: int | None = None, root=None) -> dict | None:
    """One row of the paged-decode run ('contiguous', 'paged' or 'fa3-paged' with a page size, or 'copy'), or None."""
    table = paged_table(root)
    if table is None:
        return None
    sel = table[(table.kernel == kernel) & (table.batch == batch) & (table.n == n)]
    if kernel not in ("contiguous", "copy"):  # paged and fa3-paged rows are told apart by their page size
        sel = sel[sel.page_size == page_size]
    return sel.iloc[0].to_dict() if len(sel) and not math.isnan(sel.iloc[0]["ms"]) else None


def paged_value(column: str, kernel: str, batch: int, n: int, page_size: int | None = None, root=None):
    """A number from the paged-decode run, or None (not measured)."""
    row = paged_row(kernel, batch, n, page_size, root)
    if row is None:
        return None
    value = row.get(column)
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def _gpu(root=None) -> str:
    """The GPU the paged-decode run was measured on."""
    return load((root or DATA_DIR) / PAGED_RUN).gpu


def pct_of_ceiling(kernel: str, batch: int, n: int, page_size: int | None = None, root=None) -> float | None:
    """A kernel's read rate in the paged-decode run as a percentage of its GPU's bandwidth ceiling, or None."""
    rate = paged_value("gb_per_s", kernel, batch, n, page_size, root)
    return None if rate is None else percent_of_ceiling(rate * 1e9, _gpu(root), root)


#: A kernel's read rate through a block table in the paged-decode run, over the GPU's bandwidth ceiling.
PAGED_SHARE = Quantity("h200.paged_decode.pct_of_ceiling", "one layer's decode attention read through a block table "
                       "of shuffled pages (28 query heads over 4 KV heads, d=128, bf16, graph replay): the K/V bytes it "
                       "reads per second over the H200's bandwidth ceiling", run=PAGED_RUN, file="paged.csv", unit="%")


def ceiling_share(kernel: str, batch: int, n: int, page_size: int | None = None, root=None) -> Fact:
    """:func:`pct_of_ceiling` as the fact every page quotes (percent; None: the run or the ceiling not measured).

    The paged kernels ('paged', 'fa3-paged') are :data:`PAGED_SHARE`; the contiguous kernel timed beside them is
    the decode benchmark's quantity (:data:`lab.results.kernel_runs.DECODE_SHARE`) quoted from this run, which a
    page that states it must name."""
    rate = paged_value("gb_per_s", kernel, batch, n, page_size, root)
    gpu = _gpu(root) if rate is not None else None
    ceiling = bandwidth_ceiling(gpu, root) if gpu and match_device(gpu) else None  # a GPU outside the table: none
    value = 100 * rate * 1e9 / ceiling.value if ceiling is not None and ceiling.measured else None
    over = f"gb_per_s over {ceiling.source if ceiling else 'the bandwidth ceiling'}"
    if kernel == "contiguous":  # DECODE_SHARE names no file: its run of record keeps it in decode.csv, this run in paged.csv
        return DECODE_SHARE.fact(value, "ours-tuned", batch, n, run=PAGED_RUN, detail=f"paged.csv: {over}")
    return PAGED_SHARE.fact(value, kernel, page_size, batch, n, detail=over)


def nearest_measured(page_size: int, batch: int, n: int, root=None) -> tuple[int, int, int] | None:
    """The (page size, batch, tokens) of the paged-decode run nearest to these, or None (no run on file).

    Nearest counts factors of two: |log2| of each ratio, summed (16-token pages are as near to 8 as to 32);
    a tie goes to the smaller point."""
    table = paged_table(root)
    if table is None:
        return None
    rows = table[(table.kernel == "paged") & table.ms.notna()]
    points = sorted({(int(p), int(b), int(k)) for p, b, k in rows[["page_size", "batch", "n"]].itertuples(index=False)})
    if not points:
        return None
    asked = (page_size, batch, n)
    return min(points, key=lambda point: sum(abs(math.log2(got / want)) for got, want in zip(point, asked, strict=True)))


def measured_page_sizes(root=None) -> list[int]:
    table = paged_table(root)
    if table is None:
        return []
    return sorted(int(p) for p in table[table.kernel == "paged"].page_size.dropna().unique())


def mask_value(column: str, mask: str, impl: str, n: int, root=None):
    """A number from the FlexAttention mask run, or None (not measured, or that backend refused the mask)."""
    table = masks_table(root)
    if table is None:
        return None
    sel = table[(table["mask"] == mask) & (table.impl == impl) & (table.n == n)]
    if not len(sel):
        return None
    value = sel.iloc[0][column]
    return None if isinstance(value, float) and math.isnan(value) else value


def fastest_sdpa(mask: str, n: int, root=None) -> tuple[str | None, float | None]:
    """(impl, ms) of the fastest SDPA backend that ran this mask, or (None, None)."""
    table = masks_table(root)
    if table is None:
        return None, None
    sel = table[(table["mask"] == mask) & (table.n == n) & table.impl.str.startswith("sdpa") & table.ms.notna()]
    if not len(sel):
        return None, None
    best = sel.loc[sel.ms.idxmin()]
    return str(best.impl), float(best.ms)


def source(run: str) -> str:
    """Where a glued number comes from."""
    return f"data/{run}/" + ("paged.csv" if run == PAGED_RUN else "masks.csv")


def versus(page_size: int = 16, reference: str = "fa3-paged", root=None):
    """Our paged kernel against FA3's paged decode on the same pages, at every (batch, n) of the run that timed
    both: ours_ms, fa3_ms, their read rates, ours_vs_fa3 (FA3's time / ours: above 1, ours is faster) and
    contiguous_vs_fa3 (the same for our contiguous kernel). None when the run has no ``reference`` rows."""
    import pandas as pd

    table = paged_table(root)
    if table is None or not (table.kernel == reference).any():
        return None
    rows = []
    for (batch, n), _ in table.groupby(["batch", "n"]):
        ours = paged_row("paged", int(batch), int(n), page_size, root)
        fa3 = paged_row(reference, int(batch), int(n), page_size, root)
        contiguous = paged_row("contiguous", int(batch), int(n), None, root)
        if ours is None or fa3 is None:
            continue
        rows.append({"batch": int(batch), "n": int(n), "ours_ms": ours["ms"], "fa3_ms": fa3["ms"],
                     "ours_gb_per_s": ours["gb_per_s"], "fa3_gb_per_s": fa3["gb_per_s"],
                     "ours_vs_fa3": fa3["ms"] / ours["ms"],
                     "contiguous_vs_fa3": fa3["ms"] / contiguous["ms"] if contiguous else math.nan})
    return pd.DataFrame(rows).sort_values(["batch", "n"], ascending=[False, True]).reset_index(drop=True)
