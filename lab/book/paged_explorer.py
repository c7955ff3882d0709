"""The paged-KV-cache explorer: page size x context x batch -> bytes, empty slots, block table, measured time.

The memory readouts are arithmetic (:class:`lab.results.paged.PagedCache`, Qwen2.5-7B in bf16), so
every choice shows them; the kernel times come from the committed H200 run (data/h200/paged-decode):
at the chosen page size, context and batch where those were measured, and elsewhere at the nearest
measured point, which the readouts and the note name.
"""

from __future__ import annotations

from lab.book.explorer import Chart, Control, Explorer, Marker, Readout, Series, View
from lab.results import paged
from lab.results.modelshape import qwen25_7b

PAGE_SIZES = (1, 8, 16, 32, 64, 128, 256)
#: Contexts: two measured (32k, 128k) and three that do not fill their last page.
CONTEXTS = (1000, 4500, 32768, 100000, 131072)
BATCHES = (1, 16, 64)
#: A reservation per sequence, for the engine without pages (the longest context offered here).
MAX_LEN = 131072


def _ms(kernel: str, batch: int, context: int, page_size: int | None = None):
    return paged.paged_value("ms", kernel, batch, context, page_size)


KERNEL_READOUTS = (("paged_ms", "paged decode attention, one layer (H200)"),
                   ("contiguous_ms", "contiguous kernel, same K/V (H200)"),
                   ("share", "paged bandwidth / contiguous"),
                   ("fa3_ms", "FA3's paged decode, 16-token pages, same K/V (H200)"))


def _kernel_readouts(page_size: int, context: int, batch: int) -> tuple[list[Readout], str]:
    """The measured kernel times: at this point if it was measured, else at the nearest measured point (said
    beside each value and in the note)."""
    at = paged.nearest_measured(page_size, batch, context)
    if at is None:
        return [Readout(name, label, None, missing="not measured yet") for name, label in KERNEL_READOUTS], \
            f"kernel times: not measured yet (data/{paged.PAGED_RUN})"
    p, b, n = at
    exact = at == (page_size, batch, context)
    share = paged.paged_value("fraction_of_contiguous", "paged", b, n, p)
    values = [(_ms("paged", b, n, p), "ms", ".4f"), (_ms("contiguous", b, n), "ms", ".4f"),
              (None if share is None else 100 * share, "%", ".0f"), (_ms("fa3-paged", b, n, 16), "ms", ".4f")]
    readouts = []
    for (name, label), (value, unit, fmt) in zip(KERNEL_READOUTS, values, strict=True):
        shown = Readout(name, label, value, unit, fmt, missing="not measured")
        readouts.append(shown if exact or not shown.has_value else Readout(name, label, f"{shown.text} (nearest measured)"))
    where = f"{p}-token pages, batch {b}, {n:,} tokens"
    note = (f"measured on the H200 at {where}" if exact else
            f"kernel times not measured at {page_size}-token pages, batch {batch}, {context:,} tokens: "
            f"shown for the nearest measured point, {where} (H200)")
    return readouts, note


def paged_view(page_size: int, context: int, batch: int) -> View:
    cache = paged.PagedCache(page_size, context, batch)
    kernels, note = _kernel_readouts(page_size, context, batch)
    readouts = [
        Readout("kv", "K/V of the tokens (all 28 layers)", cache.kv_bytes / 1e9, "GB", ".3g"),
        Readout("pages", "pages handed out", cache.pages, "", ",.0f"),
        Readout("wasted", "empty slots in last pages", cache.wasted_slots, "tokens", ",.0f"),
        Readout("wasted_share", "of the allocated cache left empty", 100 * cache.wasted_fraction, "%", ".2f"),
        Readout("reserved", f"left empty by a {MAX_LEN // 1024}k reservation per sequence instead",
                100 * cache.reserved_waste_fraction(MAX_LEN), "%", ".0f"),
        Readout("table", "block table (int32 page ids)", cache.block_table_bytes / 1e3, "kB", ",.1f"),
        *kernels,
    ]
    waste = [100 * paged.PagedCache(p, context, batch).wasted_fraction for p in PAGE_SIZES]
    table = [100 * paged.PagedCache(p, context, batch).block_table_bytes / cache.kv_bytes for p in PAGE_SIZES]
    return View(readouts=readouts,
                chart=Chart("page size (tokens)", "% of the cache", log_x=True, x_ticks=list(PAGE_SIZES),
                            series=[Series("empty slots", list(PAGE_SIZES), waste, kind="line+points"),
                                    Series("block table", list(PAGE_SIZES), table, kind="line+points", dashed=True)],
                            marker=Marker(page_size, 100 * cache.wasted_fraction, f"{page_size}-token pages"),
                            source=f"{qwen25_7b().name} shape, bf16; times: data/{paged.PAGED_RUN}"),
                note=note)


def paged_explorer() -> Explorer:
    """Page size x context x batch -> bytes, empty slots, block table, measured kernel time."""
    return Explorer(
        key="paged-kv", title="A paged KV cache (Qwen2.5-7B shape, bf16)",
        controls=[Control("page_size", "Page size (tokens)", values=list(PAGE_SIZES), default=16),
                  Control("context", "Tokens per sequence", values=list(CONTEXTS), default=32768),
                  Control("batch", "Sequences", values=list(BATCHES), default=16)],
        view=paged_view,
        caption="Memory from arithmetic; kernel times from one H200 run of the paged and contiguous split-KV "
                "decode kernels and FA3's paged decode on the same K/V, the pages scattered in a random order.")
