"""Facts of the studies that land after the interview chapter was written, each "not measured yet" until then.

Every reader looks up a few named columns; a missing file, a missing column or not exactly one matching row
gives a fact that is not measured, and its source names the file and the columns it reads, so a study
written with other column names shows up as "not measured yet" instead of a wrong number:

    paged         data/h200/paged-decode/paged.csv: layout (contiguous|paged), page_size, batch, n, gbps, copy_gbps
    concurrency   data/h200/vllm0.26-qwen2.5-7b-concurrency/*/concurrency.csv: arm, target_len, concurrency, itl_ms
    masks         data/h200/flex-masks/masks.csv: mask, n, flex_ms, sdpa_ms
    decomposition through lab.results.flex_decomposition (its variants, and vLLM's trace windows)
    dram bytes    data/h200/dram-bytes/dram_bytes.csv: candidate, n, dram_read_bytes, dram_write_bytes

The batch-on-the-roofline facts that need no measurement (where decode turns KV-bound in the model) are
always there.
"""

from __future__ import annotations

from lab.book.interview.common import FA3, FLEX, Shown, missing_facts, shown_facts, streamed_weight_bytes
from lab.results import data, hardware, iomodel
from lab.results.modelshape import qwen25_7b

PAGED = "h200/paged-decode/paged.csv"
CONCURRENCY = "h200/vllm0.26-qwen2.5-7b-concurrency"
MASKS = "h200/flex-masks/masks.csv"
DECOMPOSITION = "h200/flex-decomposition/flex_decomposition.csv"
DRAM = "h200/dram-bytes/dram_bytes.csv"


def _table(relative: str, root=None):
    """A study's table, or None when the file is not there."""
    import pandas as pd

    path = (data.DATA_DIR if root is None else root) / relative
    return pd.read_csv(path) if path.exists() else None


def cell(table, column: str, **where):
    """The one value of ``column`` where every ``where`` column equals its value, or None (missing column,
    no row, several rows, or an empty cell)."""
    if table is None or any(c not in table.columns for c in (column, *where)):
        return None
    rows = table
    for key, want in where.items():
        rows = rows[rows[key] == want]
    if len(rows) != 1 or rows[column].isna().iloc[0]:
        return None
    value = rows[column].iloc[0]
    return value.item() if hasattr(value, "item") else value


def _ratio(a, b, scale: float = 1.0):
    return None if a is None or b is None or not b else scale * a / b


# --- PagedAttention: a paged split-KV kernel against the contiguous one ------------------------------

PAGED_FORMATS = {"paged_vs_contiguous_pct": "{:.0f}%", "paged_copy_pct": "{:.0f}%", "contiguous_copy_pct": "{:.0f}%"}


def paged_facts(root=None, batch: int = 16, n: int = 32768, page: int = 16) -> dict:
    """Batch 16 × 32k decode with 16-token pages: the paged kernel's bandwidth against the contiguous one's."""
    table = _table(PAGED, root)
    paged = cell(table, "gbps", layout="paged", page_size=page, batch=batch, n=n)
    contiguous = cell(table, "gbps", layout="contiguous", batch=batch, n=n)
    copy = cell(table, "copy_gbps", layout="contiguous", batch=batch, n=n)
    values = {"paged_vs_contiguous_pct": _ratio(paged, contiguous, 100), "paged_copy_pct": _ratio(paged, copy, 100),
              "contiguous_copy_pct": _ratio(contiguous, copy, 100)}
    return shown_facts(values, PAGED_FORMATS, f"data/{PAGED}: gbps, copy_gbps by layout, page_size, batch, n")


# --- batch on the decode roofline -------------------------------------------------------------------

def kv_bound_batch(n: int) -> float:
    """Batch at which the KV bytes of n-token sequences equal the streamed weights (the model, no data)."""
    return streamed_weight_bytes() / (n * qwen25_7b().kv_bytes_per_token(2))


CONCURRENCY_FORMATS = {f"conc_{arm}_{n}_{c}": "{:.1f} ms" for arm in ("fa3", "flex") for n in ("2k", "32k")
                       for c in (1, 64)}


def concurrency_facts(root=None) -> dict:
    """ITL at 1 and 64 concurrent requests, 2k and 32k context, FA3 and FLEX, from the vLLM concurrency sweep."""
    import pandas as pd

    folder = (data.DATA_DIR if root is None else root) / CONCURRENCY
    tables = [pd.read_csv(p) for p in sorted(folder.glob("*/concurrency.csv"))] if folder.exists() else []
    table = pd.concat(tables, ignore_index=True) if tables else None
    values = {}
    for key, arm in (("fa3", FA3), ("flex", FLEX)):
        for label, n in (("2k", 2048), ("32k", 32768)):
            for c in (1, 64):
                values[f"conc_{key}_{label}_{c}"] = cell(table, "itl_ms", arm=arm, target_len=n, concurrency=c)
    source = f"data/{CONCURRENCY}/*/concurrency.csv: itl_ms by arm, target_len, concurrency"
    return shown_facts(values, CONCURRENCY_FORMATS, source)


def roofline_batch_facts() -> dict:
    """Where decode turns KV-bound for Qwen2.5-7B, and the H200 floor of a 64 × 32k step (the model)."""
    bandwidth = hardware.device("H200-SXM").bandwidth
    shape = qwen25_7b()
    floor = lambda n, b: 1e3 * (streamed_weight_bytes() + b * n * shape.kv_bytes_per_token(2)) / bandwidth
    source = "lab.results.modelshape (Qwen2.5-7B) + lab.results.hardware (H200 datasheet bandwidth)"
    values = {"kv_bound_batch_2k": kv_bound_batch(2048), "kv_bound_batch_32k": kv_bound_batch(32768),
              "floor_h200_1_32k_ms": floor(32768, 1), "floor_h200_64_32k_ms": floor(32768, 64),
              "floor_h200_64_2k_ms": floor(2048, 64),
              "kv_share_64_32k_pct": 100 * 64 * 32768 * shape.kv_bytes_per_token(2)
              / (streamed_weight_bytes() + 64 * 32768 * shape.kv_bytes_per_token(2))}
    formats = {"kv_bound_batch_2k": ".0f", "kv_bound_batch_32k": ".0f", "floor_h200_1_32k_ms": ".1f",
               "floor_h200_64_32k_ms": ".1f", "floor_h200_64_2k_ms": ".1f", "kv_share_64_32k_pct": ".0f"}
    return shown_facts(values, formats, source)


# --- FlexAttention: masks as code, and what vLLM's integration costs ---------------------------------

MASK_FORMATS = {"mask_sliding_speedup": "{:.1f}×", "mask_document_speedup": "{:.1f}×", "mask_len": "{:,d} tokens"}


def mask_facts(root=None) -> dict:
    """Sliding-window and document masks: SDPA's time over Flex's at the longest length measured."""
    table = _table(MASKS, root)
    source = f"data/{MASKS}: flex_ms, sdpa_ms by mask, n"
    if table is None or "n" not in table.columns:
        return missing_facts(MASK_FORMATS, source)
    n = int(table["n"].max())
    speedup = lambda mask: _ratio(cell(table, "sdpa_ms", mask=mask, n=n), cell(table, "flex_ms", mask=mask, n=n))
    values = {"mask_sliding_speedup": speedup("sliding_window"), "mask_document_speedup": speedup("document"),
              "mask_len": n}
    if values["mask_sliding_speedup"] is None and values["mask_document_speedup"] is None:
        values["mask_len"] = None
    return shown_facts(values, MASK_FORMATS, source)


DECOMPOSITION_FORMATS = {"flex_forced_over_default": "{:.2f}×", "flex_tiles16_over_forced": "{:.1f}×",
                         "flex_paged_over_tiles16": "{:.1f}×", "vllm_over_paged": "{:.2f}×",
                         "vllm_over_default": "{:.1f}×", "flex_default_over_cudnn": "{:.0f}×",
                         "flex_pad8_speedup_b16": "{:.1f}×", "flex_prefill_tflops": "{:.0f} TFLOP/s",
                         "flex_prefill_tiles16_x": "{:.0f}×", "flex_prefill_len": "{:,d} tokens"}


def decomposition_facts(root=None) -> dict:
    """Standalone Flex to vLLM's arm, one ingredient at a time (lab.results.flex_decomposition): decode at
    batch 1 as time ratios, vLLM's arm as read-rate ratios (its window is 28k tokens, the rest 32k), the
    decode template at batch 16, and prefill."""
    from lab.results import flex_decomposition as fd

    root = data.DATA_DIR if root is None else root
    dec, vllm = fd.read(root), fd.vllm_flex(root)
    source = f"{fd.DATASET}/{fd.FILE} (lab.results.flex_decomposition) + vLLM's FLEX trace windows"
    if dec is None:
        return missing_facts(DECOMPOSITION_FORMATS, f"data/{source}")
    step = lambda slow, fast, batch=1, phase="decode": dec.factor(phase, batch, slow, fast)  # noqa: E731
    values = {"flex_forced_over_default": step("flex-forced", "flex-default"),
              "flex_tiles16_over_forced": step("flex-tiles16", "flex-forced"),
              "flex_paged_over_tiles16": step("flex-paged", "flex-tiles16"),
              "vllm_over_paged": fd.vllm_over(dec, vllm), "vllm_over_default": fd.vllm_over(dec, vllm, "flex-default"),
              "flex_default_over_cudnn": step("flex-default", "sdpa-cudnn"),
              "flex_pad8_speedup_b16": step("flex-default", "flex-pad8", 16),
              "flex_prefill_tflops": dec.rate("prefill", 1, "flex-default"),
              "flex_prefill_tiles16_x": step("flex-tiles16", "flex-forced", 1, "prefill"),
              "flex_prefill_len": dec.length("prefill")}
    return shown_facts(values, DECOMPOSITION_FORMATS, f"data/{source}")


# --- measured DRAM bytes against the two model counts ------------------------------------------------

DRAM_FORMATS = {"dram_len": "{:,d} tokens", "dram_over_compulsory": "{:.1f}×", "reread_over_dram": "{:.1f}×",
                "dram_intensity": "{:,.0f} FLOP/byte"}


def dram_facts(root=None, candidate: str = "ours-tuned", n: int = 16384) -> dict:
    """Measured DRAM bytes of one layer's prefill attention between the compulsory and re-read counts."""
    table = _table(DRAM, root)
    read = cell(table, "dram_read_bytes", candidate=candidate, n=n)
    write = cell(table, "dram_write_bytes", candidate=candidate, n=n)
    source = f"data/{DRAM}: dram_read_bytes, dram_write_bytes by candidate, n + lab.results.iomodel"
    if read is None or write is None:
        return missing_facts(DRAM_FORMATS, source)
    shape, measured = qwen25_7b(), read + write
    flops = iomodel.prefill_flops(shape, n)["attention"] / shape.layers
    compulsory = iomodel.attention_compulsory_bytes(shape, n, "prefill", per="layer")
    reread = iomodel.attention_hbm_bytes(shape, n, "prefill", "flash", hardware.device("H200-SXM").smem_per_sm,
                                         per="layer")
    values = {"dram_len": n, "dram_over_compulsory": measured / compulsory, "reread_over_dram": reread / measured,
              "dram_intensity": flops / measured}
    return shown_facts(values, DRAM_FORMATS, source)


def facts(root=None) -> dict[str, Shown]:
    """Every later-study fact, measured or not."""
    return {**paged_facts(root), **concurrency_facts(root), **roofline_batch_facts(), **mask_facts(root),
            **decomposition_facts(root), **dram_facts(root)}
