"""Chapter 5b, paging the KV cache and FlexAttention: every fact the chapter states, its figures and its tables.

    glue_all(ch05b.facts())         # the one hidden cell
    ch05b.block_table(...), ch05b.addressing(...), ch05b.paged_errors(), ch05b.paged_table(), ch05b.versus_fa3(),
    ch05b.explorer(), ch05b.tile_counts(), ch05b.block_mask_figure(), ch05b.masks_table()

The runs it reads, each once: the paged-decode run (data/h200/paged-decode: our paged and contiguous split-KV
kernels and FA3's paged decode, in turns on the same K/V), the decode counters (data/h200/kernel-counters, and
-batch16) and the FlexAttention mask timings (data/h200/flex-masks). The memory arithmetic is
:class:`lab.results.paged.PagedCache`, the correctness checks run the kernels on this machine.

Glue names other pages take from here (the interview page, the course kit): ``p16_b16_share`` (16-token pages'
bandwidth against the contiguous kernel's), ``pbig_b16_share``, ``p16_b1_share``, ``p16_b16_gbps``,
``contig_b16_gbps``, ``p16_b16_of_read``, ``vs_fa3_*``, ``reserved_waste``, ``waste_slots_16``, ``sw_speedup``,
``doc_speedup``, ``causal_flex_vs_flash``.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pandas as pd
import torch
import matplotlib.colors

from lab.book.facts import Fact
from lab.book.paged_explorer import paged_explorer
from lab.book.plots import caption, figure
from lab.measure.attention import flex_masks, split_kv_tuned, triton_paged_decode
from lab.measure.attention.reference import attention_torch
from lab.results import kernel_counters, paged
from lab.results.modelshape import kv_per_token, qwen25_7b
from lab.results.quantities import Quantity
from lab.names import key
from lab.results.units import power_of_ten

MODEL = qwen25_7b()
MEMORY = "lab.results.paged.PagedCache (Qwen2.5-7B, bf16)"
SHAPE = "lab.results.modelshape: Qwen2.5-7B"
#: The paged-decode run's points the chapter quotes: (batch, tokens) and vLLM's page size.
SERVING, PAGE = (16, 32768), 16
MASK_N = 16384
TILE_N = 4096                 # the score matrix whose 128 × 128 tiles the chapter counts
PICTURE_N = 2048              # the document mask drawn tile by tile

# --- the quantities chapter 5b teaches --------------------------------------------------------------------

_PAGED = dict(run=paged.PAGED_RUN, file="paged.csv")
PAGED_RATE = Quantity("h200.paged_decode.read_rate", "K/V bytes one decode step (one layer, 28 query heads over 4 KV "
                      "heads, d=128, bf16) reads over its time, in the paged-decode run", unit="GB/s", **_PAGED)
PAGED_FRACTION = Quantity("h200.paged_decode.fraction_of_contiguous", "the paged kernel's read rate over our "
                          "contiguous kernel's on the same K/V in the same run", unit="fraction", **_PAGED)
PAGED_SPEED_VS_FA3 = Quantity("h200.paged_decode.speed_vs_fa3", "FA3's paged decode time over a kernel's, 16-token "
                              "pages, same K/V, same run (above 1: the kernel is faster)", unit="×", **_PAGED)
PAGED_LEAD_US = Quantity("h200.paged_decode.fa3_minus_ours", "FA3's paged decode time minus ours, 16-token pages, "
                         "same K/V, same run (above 0: ours is faster)", unit="us", **_PAGED)
LARGE_PAGE = Quantity("h200.paged_decode.large_page", "the larger page size the paged-decode run timed beside "
                      "vLLM's 16", unit="tokens", **_PAGED)
_COUNTERS = {1: kernel_counters.RUNS[0], 16: kernel_counters.RUNS[1]}
COUNTER_MAIN = {batch: Quantity(f"h200.decode_counters.b{batch}.main_kernel", "Nsight Compute's duration of a decode "
                                f"job's main kernel at batch {batch} over a 32k contiguous cache",
                                run=run, file="raw.csv", unit="us") for batch, run in _COUNTERS.items()}
COUNTER_OTHERS = {batch: Quantity(f"h200.decode_counters.b{batch}.other_kernels", "Nsight Compute's duration of the "
                                  f"job's other kernels (a scheduler's prepare, a combine) at batch {batch}",
                                  run=run, file="raw.csv", unit="us") for batch, run in _COUNTERS.items()}
COUNTER_LAUNCHES = Quantity("h200.decode_counters.b1.other_launches", "kernels a decode job launches besides its main "
                            "one (batch 1, 32k)", run=_COUNTERS[1], file="raw.csv", unit="kernels")
_MASKS = dict(run=paged.MASKS_RUN, file="masks.csv")
MASK_TIME, SDPA_OVER_FLEX = paged.MASK_TIME, paged.SDPA_OVER_FLEX  # chapter 6's Flex section quotes them too
FLEX_OVER_FLASH = Quantity("h200.flex_masks.flex_over_sdpa_flash", "FlexAttention's time over SDPA's flash backend "
                           "on plain causal attention (is_causal=True)", unit="×", **_MASKS)
MASK_TFLOPS = Quantity("h200.flex_masks.effective_tflops", "FLOP/s counted over the visible scores only",
                       unit="TFLOP/s", **_MASKS)


# --- the runs, each read once ------------------------------------------------------------------------

@functools.cache
def _paged():
    """The paged-decode table and the FA3 comparison drawn from it."""
    return paged.paged_table(), paged.versus(PAGE)


@functools.cache
def _masks():
    return paged.masks_table()


def _paged_value(column: str, kernel: str, batch: int, n: int, page_size: int | None = None):
    table = _paged()[0]
    rows = table[(table.kernel == kernel) & (table.batch == batch) & (table.n == n)]
    if page_size is not None:
        rows = rows[rows.page_size == page_size]
    return float(rows[column].iloc[0])


def _mask_ms(mask: str, impl: str, n: int = MASK_N):
    table = _masks()
    rows = table[(table["mask"] == mask) & (table.impl == impl) & (table.n == n)]
    value = float(rows.ms.iloc[0])
    return None if math.isnan(value) else value


# --- facts -------------------------------------------------------------------------------------------

def _memory_facts() -> dict:
    request, big_pages = paged.PagedCache(16, 4500, 1), paged.PagedCache(128, 4500, 1)
    serving = paged.PagedCache(PAGE, SERVING[1], SERVING[0])
    return {
        "kv_kib_per_token": kv_per_token().to("KiB").shown_as("{:.0f} KiB"),
        "kv_gb_32k": Fact(paged.PagedCache(PAGE, 32768, 1).kv_bytes / 1e9, MEMORY, "{:.1f} GB"),
        "reserved_waste": Fact(100 * request.reserved_waste_fraction(131072), MEMORY, "{:.0f}%"),
        "waste_slots_16": Fact(request.wasted_slots, MEMORY, "d"),
        "waste_share_16": Fact(100 * request.wasted_fraction, MEMORY, "{:.2f}%"),
        "waste_slots_128": Fact(big_pages.wasted_slots, MEMORY, "d"),
        "waste_share_128": Fact(100 * big_pages.wasted_fraction, MEMORY, "{:.1f}%"),
        "table_kb": Fact(serving.block_table_bytes / 1e3, MEMORY, "{:.0f} kB"),
        "serving_gb": Fact(serving.kv_bytes / 1e9, MEMORY, "{:.0f} GB"),
        "page_row_bytes": Fact(MODEL.head_dim * 2, SHAPE, "d"),
        "page_kib_16": Fact(PAGE * MODEL.head_dim * 2 // 1024, SHAPE, "d"),
        "flex_group": Fact(MODEL.q_heads // MODEL.kv_heads, SHAPE, "d"),
    }


def _paged_facts() -> dict:
    batch, n = SERVING
    big = max(p for p in paged.measured_page_sizes() if p != PAGE)
    share = lambda page, b, tokens: PAGED_FRACTION.fact(  # noqa: E731
        _paged_value("fraction_of_contiguous", "paged", b, tokens, page), "paged", page, b, tokens, fmt="{:.0%}")
    facts = {
        "p16_b16_share": share(PAGE, batch, n), "pbig_b16_share": share(big, batch, n),
        "p16_b1_share": share(PAGE, 1, n), "pbig_b1_share": share(big, 1, n), "p16_b16_128k_share": share(PAGE, batch, 131072),
        "contig_b16_gbps": PAGED_RATE.fact(_paged_value("gb_per_s", "contiguous", batch, n), "contiguous", batch, n,
                                           fmt="{:,.0f} GB/s"),
        "p16_b16_gbps": PAGED_RATE.fact(_paged_value("gb_per_s", "paged", batch, n, PAGE), "paged", PAGE, batch, n,
                                        fmt="{:,.0f} GB/s"),
        "p16_b16_of_read": paged.ceiling_share("paged", batch, n, PAGE).shown_as("{:.0f}%"),
        "big_page": LARGE_PAGE.fact(big, fmt="d"),
    }
    for r in _paged()[1].itertuples():
        key = f"b{r.batch}_{r.n // 1024}k"
        facts |= {f"vs_fa3_{key}": PAGED_SPEED_VS_FA3.fact(r.ours_vs_fa3, "paged", r.batch, r.n),
                  f"lead_us_{key}": PAGED_LEAD_US.fact(1e3 * (r.fa3_ms - r.ours_ms), "paged", r.batch, r.n),
                  f"contig_vs_fa3_{key}": PAGED_SPEED_VS_FA3.fact(r.contiguous_vs_fa3, "contiguous", r.batch, r.n),
                  f"fa3_read_pct_{key}": paged.ceiling_share("fa3-paged", r.batch, r.n, PAGE),
                  f"ours_read_pct_{key}": paged.ceiling_share("paged", r.batch, r.n, PAGE)}
    return facts


def _counter_facts() -> dict:
    jobs, facts = kernel_counters.jobs(), {}
    for who in ("fa3", "ours-tuned"):
        tag = key(who)
        for batch in (1, 16):
            job = jobs[f"decode:{who}:{batch}:32768"]
            facts |= {f"ctr_{tag}_b{batch}_main_us": COUNTER_MAIN[batch].fact(1e3 * job.main["ms"], who),
                      f"ctr_{tag}_b{batch}_others_us": COUNTER_OTHERS[batch].fact(1e3 * job.others_ms, who)}
    fa3 = jobs["decode:fa3:1:32768"]
    facts["ctr_fa3_b1_others_n"] = COUNTER_LAUNCHES.fact(len(fa3.others), "fa3")
    prepare = next((ms for name, ms in fa3.others if "prepare" in name), None)   # FA3's scheduler: flash::prepare_*
    facts["ctr_fa3_b1_prepare_us"] = COUNTER_OTHERS[1].fact(None if prepare is None else 1e3 * prepare, "fa3", "prepare")
    return facts


def _fastest_sdpa(mask: str) -> tuple[str, float]:
    impl, ms = paged.fastest_sdpa(mask, MASK_N)
    return impl, ms


def _mask_facts() -> dict:
    sw_impl, sw_ms = _fastest_sdpa("sliding-window")
    doc_impl, doc_ms = _fastest_sdpa("document")
    table = _masks()
    sw_flex = table[(table["mask"] == "sliding-window") & (table.impl == "flex") & (table.n == MASK_N)]
    return {
        "sw_speedup": SDPA_OVER_FLEX.fact(sw_ms / _mask_ms("sliding-window", "flex"), "sliding-window", MASK_N,
                                          fmt="{:.1f}×"),
        "sw_sdpa": Fact(sw_impl, paged.source(paged.MASKS_RUN)),
        "doc_speedup": SDPA_OVER_FLEX.fact(doc_ms / _mask_ms("document", "flex"), "document", MASK_N, fmt="{:.1f}×"),
        "causal_flex_vs_flash": FLEX_OVER_FLASH.fact(_mask_ms("causal", "flex") / _mask_ms("causal", "sdpa-flash"),
                                                     MASK_N, fmt="{:.2f}×"),
        "sw_flex_tflops": MASK_TFLOPS.fact(float(sw_flex.tflops_effective.iloc[0]), "sliding-window", "flex", MASK_N,
                                           fmt="{:.0f} TFLOP/s"),
        "cudnn_dense_16k": MASK_TIME.fact(_mask_ms("causal", "sdpa-cudnn"), "causal", "sdpa-cudnn", MASK_N,
                                          fmt="{:.1f} ms"),
    }


def _check_facts() -> dict:
    worst = _paged_errors()
    return {"paged_interp_worst": Fact(max(worst["by page size"].values()), "triton_paged_decode on the machine that "
                                       "built the page", power_of_ten),
            "interp_vs_contiguous": Fact(worst["vs contiguous"], "triton_paged_decode vs split_kv_tuned",
                                         power_of_ten),
            "flex_cpu_worst": Fact(max(_mask_errors().values()), "flex_masks on CPU", power_of_ten)}


@functools.cache
def facts() -> dict[str, Fact]:
    """Every fact chapter 5b states, by glue name."""
    return _memory_facts() | _paged_facts() | _counter_facts() | _mask_facts() | _check_facts()


# --- the block table, and the paged kernel against the contiguous one -----------------------------------

def addressing(k, k_cache, table, page_size: int, tokens):
    """Where some tokens live: for each (sequence, token), its table entry, page and slot, and the key read there
    beside the contiguous cache's."""
    rows = []
    for b, t in tokens:
        page, slot = int(table[b, t // page_size]), t % page_size
        rows.append({"sequence": b, "token": t, "table entry": t // page_size, "page": page, "slot": slot,
                     "key from the page pool": _vector(k_cache[page, slot, 0]), "k[sequence, 0, token]": _vector(k[b, 0, t])})
    return pd.DataFrame(rows).style.hide(axis="index")


def block_table(table, lengths, page_size: int):
    """A block table as the page shows it: one row per sequence, its page ids, and which entries it reads."""
    rows = []
    for b, length in enumerate(lengths.tolist()):
        used = -(-length // page_size)
        entries = {f"entry {j}": (str(int(page)) if j < used else "(unused)") for j, page in enumerate(table[b].tolist())}
        rows.append({"sequence": b, "tokens": length, **entries})
    return pd.DataFrame(rows).style.hide(axis="index")


def _vector(values) -> str:
    return "[" + ", ".join(f"{v:g}" for v in values.tolist()) + "]"


def _where() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"  # the interpreter takes CPU tensors, a GPU its own


@functools.cache
def _paged_errors() -> dict:
    """The paged kernel against a float64 reference for pages of 4, 16 and 32 tokens (shuffled over the pool,
    sequences of different lengths), and against the contiguous kernel on the same keys."""
    gen = torch.Generator().manual_seed(0)
    where = _where()
    q = torch.randn(3, 8, 1, 64, generator=gen).to(where)
    k, v = torch.randn(3, 2, 96, 64, generator=gen).to(where), torch.randn(3, 2, 96, 64, generator=gen).to(where)
    lengths = [96, 13, 50]
    worst = {}
    for page_size in (4, 16, 32):
        caches = triton_paged_decode.paginate(k, v, page_size, seq_lens=lengths, spare_pages=5, seed=page_size)
        out = triton_paged_decode.paged_decode(q, *caches)
        worst[page_size] = max(
            (out[b:b + 1] - attention_torch(q[b:b + 1], k[b:b + 1, :, :n], v[b:b + 1, :, :n],
                                            compute_dtype=torch.float64).float()).abs().max().item()
            for b, n in enumerate(lengths))
    full = triton_paged_decode.paged_decode(q, *triton_paged_decode.paginate(k, v, PAGE))
    return {"by page size": worst, "vs contiguous": (full - split_kv_tuned.tuned_decode(q, k, v)).abs().max().item()}


def paged_errors():
    """The table of :func:`_paged_errors`."""
    worst = _paged_errors()["by page size"]
    table = pd.DataFrame({"page size (tokens)": list(worst), "max |error| vs float64 reference": list(worst.values())})
    return table.style.hide(axis="index").format({"max |error| vs float64 reference": power_of_ten})


def paged_table():
    """The paged-decode run: K/V read rate (GB/s) of every kernel at every batch and context (the copy left out:
    it reads and writes, no ceiling for a kernel that only reads)."""
    table = _paged()[0]
    table = table[table.kernel != "copy"]
    names = {"contiguous": "ours, contiguous", "paged": "ours, {}-token pages", "fa3-paged": "FA3 paged, {}-token pages"}
    label = [names[k].format(int(p)) if k != "contiguous" else names[k] for k, p in zip(table.kernel, table.page_size,
                                                                                         strict=True)]
    wide = table.assign(kernel=label).pivot_table(index=["batch", "n"], columns="kernel", values="gb_per_s")
    wide = wide[[c for c in (names["contiguous"], *(names["paged"].format(p) for p in paged.measured_page_sizes()),
                             names["fa3-paged"].format(PAGE)) if c in wide.columns]]
    wide = wide.reset_index().rename(columns={"batch": "sequences", "n": "tokens each"})
    wide.columns = [c if c in ("sequences", "tokens each") else f"{c} (GB/s)" for c in wide.columns]
    rates = [c for c in wide.columns if c.endswith("(GB/s)")]
    return wide.style.hide(axis="index").format({"tokens each": "{:,}", **{c: "{:,.0f}" for c in rates}})


def versus_fa3():
    """Our paged kernel against FA3's paged decode on the same 16-token pages, with our contiguous kernel beside."""
    table = _paged()[1].rename(columns={"batch": "sequences", "n": "tokens each", "ours_ms": "ours, 16-token pages (ms)",
                                        "fa3_ms": "FA3 paged (ms)", "ours_vs_fa3": "ours / FA3 (speed)",
                                        "contiguous_vs_fa3": "ours contiguous / FA3 (speed)"})
    shown = ["sequences", "tokens each", "ours, 16-token pages (ms)", "FA3 paged (ms)", "ours / FA3 (speed)",
             "ours contiguous / FA3 (speed)"]
    return table[shown].style.hide(axis="index").format(
        {"tokens each": "{:,}", "ours, 16-token pages (ms)": "{:.3f}", "FA3 paged (ms)": "{:.3f}",
         "ours / FA3 (speed)": "{:.2f}×", "ours contiguous / FA3 (speed)": "{:.2f}×"})


def explorer():
    """Page size × context × batch: bytes, empty slots, block table, and the measured kernel times."""
    return paged_explorer()


# --- FlexAttention's masks ------------------------------------------------------------------------------

@functools.cache
def _mask_errors() -> dict:
    """Every mask, with and without a soft cap, through (eager) flex_attention against a float64 reference given
    the same mask as a dense boolean matrix; grouped-query heads, a length that is not a multiple of the tile."""
    n = 320
    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, h, n, 32, generator=gen) for h in (4, 2, 2))
    errors = {}
    for name in flex_masks.MASKS:
        mask_mod = flex_masks.mask_mod_for(name, n, window=64)
        for cap in (None, flex_masks.soft_cap(4.0)):
            out = flex_masks.flex(q, k, v, flex_masks.block_mask(mask_mod, n, n), cap)
            expected = flex_masks.masked_reference(q.double(), k.double(), v.double(),
                                                   flex_masks.dense_mask(mask_mod, n, n), cap,
                                                   compute_dtype=torch.float64)
            errors[(name, "soft cap" if cap else "plain")] = (out.double() - expected).abs().max().item()
    return errors


def tile_counts():
    """The 128 × 128 tiles of a 4,096-token score matrix each mask's BlockMask skips, computes whole, or masks."""
    rows = []
    for name in flex_masks.MASKS:
        c = flex_masks.block_counts(flex_masks.mask_mod_for(name, TILE_N), TILE_N, TILE_N)
        rows.append({"mask": name, "tiles": c["tiles"], "skipped": c["skipped"], "full (no mask evaluated)": c["full"],
                     "partial (masked element by element)": c["partial"], "scores visible": c["visible"] / TILE_N**2})
    return pd.DataFrame(rows).style.hide(axis="index").format({"scores visible": "{:.0%}"})


def block_mask_figure():
    """The document mask's BlockMask at 2,048 tokens, tile by tile: skipped, full or partial."""
    tile = 128
    dense = flex_masks.dense_mask(flex_masks.mask_mod_for("document", PICTURE_N), PICTURE_N, PICTURE_N)
    tiles = PICTURE_N // tile
    visible = dense.reshape(tiles, tile, tiles, tile).float().mean(dim=(1, 3)).numpy()
    kind = np.where(visible == 0, 0, np.where(visible == 1, 2, 1))   # 0 skipped, 1 partial, 2 full
    fig, ax = figure(figsize=(4.6, 4.9))
    colours = matplotlib.colors.ListedColormap(["white", "#e36b00", "#1f77b4"])
    ax.imshow(kind, cmap=colours, vmin=0, vmax=2, origin="upper")
    ax.set_xlabel("key tile (128 keys)")
    ax.set_ylabel("query tile (128 queries)")
    ax.grid(False)
    ax.set_title("document mask, 2,048 tokens: tiles skipped (white),\npartial (orange), full (blue)", fontsize=10)
    caption(ax, "lab.measure.attention.flex_masks: create_block_mask's tiles, from the mask_mod")
    return fig


def masks_table():
    """Milliseconds per mask, length and implementation; the cells SDPA's flash backend cannot run say so."""
    table = _masks()
    impls = [i for i in flex_masks.IMPLS if i in set(table.impl)]
    wide = table.pivot_table(index=["mask", "n"], columns="impl", values="ms", dropna=False)[impls]
    order = {name: i for i, name in enumerate(flex_masks.MASKS)}
    wide = wide.reset_index().sort_values(["mask", "n"], key=lambda c: c.map(order) if c.name == "mask" else c)
    wide = wide.rename(columns={"n": "tokens", **{i: f"{i} (ms)" for i in impls}})
    cells = {f"{i} (ms)": (lambda v: "plain causal only" if pd.isna(v) else f"{v:.3f}") for i in impls}
    return wide.style.hide(axis="index").format({"tokens": "{:,}", **cells})
