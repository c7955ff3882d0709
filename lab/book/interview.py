"""The numbers an interview answer cites, read from the cached data and derived by ``lab``.

``facts()`` returns one flat dict (name -> value) that the interview and course-kit chapters glue,
so their prose never types a measured figure. A10G figures come from the published study parsed into
``data/reference/``; H200 figures come from this project's own runs under ``data/h200/`` and are
whole sentences built here, or :data:`H200_MISSING` until the runs exist, so a chapter reads
correctly either way.

The decode part carries the book's reconciliation of two claims. At batch 1 a decode step reads the
weights plus the KV cache; the KV part is linear in context, so there is no quadratic term for
tiling to remove. Comparing each backend's measured ITL growth with the time the extra KV bytes need
at full bandwidth tells whether its kernel pulls the bandwidth the GPU has (split-KV) or not.
"""

from __future__ import annotations

import math

from lab.measure import bench
from lab.results import kernel_runs

from lab.results import data

from lab.results import hardware

from lab.results import iomodel

from lab.results import reference
from lab.results.modelshape import qwen25_7b

A10G = reference.DATASET
FLASH, FLEX = "FLASH_ATTN", "FLEX_ATTENTION"
FA3, FA2 = "FLASH_ATTN/FA3", "FLASH_ATTN/FA2"
H200_MISSING = "(H200 not measured yet)"
GB = 1e9


def _row(table, **where):
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


def a10g_facts() -> dict:
    """Figures of the published A10G study and what lab derives from them (floats and ints)."""
    ds = data.load(A10G)
    sweep = ds.csv("sweep.csv", data.SWEEP_COLUMNS)
    fits = ds.csv("fits.csv", ["arm", "a_s", "b_us_per_token", "c_ps_per_token2"])
    share = ds.csv("quad_share.csv", ["arm", "n", "share_pct"])
    census = ds.csv("census.csv", ["phase", "tokens", "arm", "metric", "value"])
    kernels = ds.csv("decode_kernels.csv", ["arm", "phase", "kernel"])
    shape = qwen25_7b()
    a10g, h100, h200 = hardware.device("A10G"), hardware.device("H100-SXM"), hardware.device("H200-SXM")

    lengths = sorted(set(sweep["target_len"]))
    short, long = int(lengths[0]), int(lengths[-1])
    two_k = int(min(lengths, key=lambda n: abs(n - 2048)))
    at = lambda arm, n, col: float(_row(sweep, arm=arm, target_len=n)[col])
    f = {}
    f["a10g_short_len"], f["a10g_two_k_len"], f["a10g_long_len"] = short, two_k, long

    # roofline
    f["ridge_h100"], f["ridge_a10g"], f["ridge_h200"] = h100.ridge(), a10g.ridge(), h200.ridge()
    f["h100_tflops"], f["h100_tb_s"] = h100.bf16_flops / 1e12, h100.bandwidth / 1e12
    f["h200_tb_s"] = h200.bandwidth / 1e12
    f["a10g_gb_s"] = a10g.bandwidth / GB
    f["a10g_sms"] = a10g.sm_count
    f["a10g_mem_gb"] = a10g.memory_bytes / GB

    # the n×n matrix
    f["sp_gb_layer_long"] = iomodel.naive_intermediate_bytes(shape, long) / GB
    f["naive_max_len_a10g"] = iomodel.max_naive_length(shape, a10g.memory_bytes)
    sram = h100.smem_per_sm
    naive = iomodel.attention_hbm_bytes(shape, long, "prefill", "naive", sram, per="layer")
    flash = iomodel.attention_hbm_bytes(shape, long, "prefill", "flash", sram, per="layer")
    f["naive_gb_layer_long"], f["flash_gb_layer_long"] = naive / GB, flash / GB
    f["naive_over_flash_bytes"] = naive / flash
    f["crossover_len"] = iomodel.crossover_length(shape)
    f["attn_flop_share_long_pct"] = 100 * iomodel.attention_flop_share(shape, long)

    # prefill sweep and fit
    for arm, key in ((FLASH, "flash"), (FLEX, "flex")):
        row = _row(fits, arm=arm)
        f[f"b_{key}"], f[f"c_{key}"] = float(row["b_us_per_token"]), float(row["c_ps_per_token2"])
        f[f"ttft_{key}_short"], f[f"ttft_{key}_long"] = at(arm, short, "ttft_s"), at(arm, long, "ttft_s")
        f[f"itl_{key}_short"], f[f"itl_{key}_long"] = at(arm, short, "itl_ms"), at(arm, long, "itl_ms")
        f[f"itl_{key}_2k"] = at(arm, two_k, "itl_ms")
        f[f"itl_{key}_growth_pct"] = 100 * (f[f"itl_{key}_long"] / f[f"itl_{key}_short"] - 1)
        f[f"kv_bw_{key}_gb_s"] = kv_bandwidth_gb_s(f[f"itl_{key}_short"], f[f"itl_{key}_long"], short, long)
        f[f"kv_bw_{key}_pct"] = 100 * f[f"kv_bw_{key}_gb_s"] * GB / a10g.bandwidth
        f[f"kernel_{key}"] = str(_row(kernels, arm=arm, phase="decode")["kernel"])
    f["c_ratio"] = f["c_flex"] / f["c_flash"]
    f["ttft_ratio_short"] = f["ttft_flex_short"] / f["ttft_flash_short"]
    f["ttft_ratio_long"] = f["ttft_flex_long"] / f["ttft_flash_long"]
    f["itl_ratio_long"] = f["itl_flex_long"] / f["itl_flash_long"]
    f["itl_gap_2k"] = f["itl_flex_2k"] - f["itl_flash_2k"]
    f["itl_gap_long"] = f["itl_flex_long"] - f["itl_flash_long"]
    share_lens = sorted(set(share["n"]))
    f["share_len"] = int(share_lens[-1])
    f["share_flash_pct"] = float(_row(share, arm=FLASH, n=share_lens[-1])["share_pct"])
    f["share_flex_pct"] = float(_row(share, arm=FLEX, n=share_lens[-1])["share_pct"])
    f["attn_flop_share_share_len_pct"] = 100 * iomodel.attention_flop_share(shape, f["share_len"])
    f["chunk_a10g"] = int(ds.provenance["flags"]["max_num_batched_tokens"])
    f["chunks_long"] = math.ceil(long / f["chunk_a10g"])

    # decode bytes: weights vs KV, GQA
    f["kv_kb_per_token"] = shape.kv_bytes_per_token(2) / 1e3
    f["kv_gb_long"] = long * shape.kv_bytes_per_token(2) / GB
    f["kv_mha_gb_long"] = f["kv_gb_long"] * shape.q_heads / shape.kv_heads
    f["gqa_group"] = shape.q_heads // shape.kv_heads
    f["q_heads"], f["kv_heads"] = shape.q_heads, shape.kv_heads
    f["weights_gb"] = shape.parameters * 2 / GB
    f["weights_streamed_gb"] = streamed_weight_bytes() / GB
    f["kv_equals_weights_tokens"] = streamed_weight_bytes() / shape.kv_bytes_per_token(2)
    f["floor_short_ms"] = decode_floor_ms(a10g.bandwidth, short)
    f["floor_long_ms"] = decode_floor_ms(a10g.bandwidth, long)
    f["floor_growth_pct"] = 100 * (f["floor_long_ms"] / f["floor_short_ms"] - 1)
    f["floor_extra_ms"] = f["floor_long_ms"] - f["floor_short_ms"]
    f["kv_extra_gb"] = (long - short) * shape.kv_bytes_per_token(2) / GB
    f["itl_flash_extra_ms"] = f["itl_flash_long"] - f["itl_flash_short"]
    f["itl_flex_extra_ms"] = f["itl_flex_long"] - f["itl_flex_short"]
    f["decode_intensity"] = shape.linear_flops_per_token() / (shape.layers * shape.linear_weights_per_layer * 2)

    # census
    long_window = int(census.query("phase == 'prefill'")["tokens"].max())
    c = lambda phase, arm, metric: float(_row(census, phase=phase, tokens=long_window, arm=arm, metric=metric)["value"])
    f["census_len"] = long_window
    f["mm_flash"], f["mm_flex"] = c("prefill", FLASH, "matmul_ms"), c("prefill", FLEX, "matmul_ms")
    f["attn_flash"], f["attn_flex"] = c("prefill", FLASH, "attention_ms"), c("prefill", FLEX, "attention_ms")
    f["mm_diff_pct"] = 100 * abs(f["mm_flex"] / f["mm_flash"] - 1)
    f["attn_ratio"] = f["attn_flex"] / f["attn_flash"]
    f["decode_window_flash_s"] = c("decode", FLASH, "window_s")
    f["decode_window_flex_s"] = c("decode", FLEX, "window_s")
    f["prefill_kernels_flash_s"] = (f["mm_flash"] + f["attn_flash"]) / 1e3
    return f


# --- H200: sentences built from this project's runs, or a clear "not yet" ------------------------

def _h200_sweeps():
    """Committed H200 vLLM sweep rows with a measured TTFT (readers' data/local runs left out)."""
    try:
        table = data.load_sweeps()
    except Exception:  # no sweep at all: the reference dataset is missing too, which a10g_facts reports
        return None
    table = table[table["dataset"].str.startswith("h200/") & table["gpu"].str.contains("H200")]
    if "status" in table.columns:
        table = table[table["status"].isna() | (table["status"].astype(str) == "ok")]
    table = table[table["ttft_s"].apply(lambda v: isinstance(v, (int, float)) and math.isfinite(v))]
    return table if len(table) else None


def _longest_common(table, arms) -> int | None:
    common = None
    for arm in arms:
        lengths = set(table[table["arm"] == arm]["target_len"])
        common = lengths if common is None else common & lengths
    return int(max(common)) if common else None


def _pair_sentence(table, a: str, b: str) -> str:
    n = _longest_common(table, (a, b))
    if n is None:
        return H200_MISSING
    ra, rb = (_row(table, arm=arm, target_len=n) for arm in (a, b))
    return (f"on the H200 (vLLM {table.attrs.get('vllm', '0.26')}) at {n:,} tokens, TTFT was {ra['ttft_s']:.2f} s with {a} "
            f"and {rb['ttft_s']:.2f} s with {b} ({rb['ttft_s'] / ra['ttft_s']:.1f}×), and ITL {ra['itl_ms']:.1f} vs "
            f"{rb['itl_ms']:.1f} ms")


def _decode_sentence(table, arm: str, bandwidth: float) -> str:
    rows = table[(table["arm"] == arm) & table["itl_ms"].notna()].sort_values("target_len")
    if len(rows) < 2:
        return H200_MISSING
    s, l_ = rows.iloc[0], rows.iloc[-1]
    bw = kv_bandwidth_gb_s(float(s["itl_ms"]), float(l_["itl_ms"]), int(s["target_len"]), int(l_["target_len"]))
    return (f"{arm} went from {s['itl_ms']:.1f} ms at {int(s['target_len']):,} tokens to {l_['itl_ms']:.1f} ms at "
            f"{int(l_['target_len']):,} (+{100 * (l_['itl_ms'] / s['itl_ms'] - 1):.0f}%), so its extra KV bytes moved "
            f"at about {bw:,.0f} GB/s, {100 * bw * GB / bandwidth:.0f}% of the datasheet's {bandwidth / GB:,.0f} GB/s")


KERNELS = kernel_runs.RECORD  # the kernel benchmark the chapters read


def h200_decode_kernels_sentence() -> str:
    """Share of the copy bandwidth each decode kernel reached on the H200, at batch 1 and the largest batch."""
    if not (data.DATA_DIR / KERNELS / "decode.csv").exists():
        return H200_MISSING
    table = data.load(KERNELS).csv("decode.csv", ["candidate", "batch", "n", "status", "bw_fraction"])
    table = table[table["status"] == "ok"]
    names = {"ours-tuned": "the book's split-KV kernel", "sdpa-flash": "SDPA flash", "flex": "FlexAttention"}
    batches = sorted(set(table["batch"]))
    both = [n for n in sorted(set(table["n"]))
            if all(len(table[(table["candidate"] == c) & (table["batch"] == b) & (table["n"] == n)]) == 1
                   for c in names for b in (batches[0], batches[-1]))]
    if not both or len(batches) < 2:
        return H200_MISSING
    n = both[-1]
    share = lambda c, b: 100 * float(_row(table, candidate=c, batch=b, n=n)["bw_fraction"])
    parts = [f"batch {b}: " + ", ".join(f"{label} {share(c, b):.0f}%" for c, label in names.items())
             for b in (batches[0], batches[-1])]
    text = (f"in the H200 kernel benchmark at {n:,} tokens of context, the share of the copy bandwidth each decode "
            f"kernel reached was, at {parts[0]}; at {parts[1]}")
    small, large = batches[0], batches[-1]
    if max(share("flex", small), share("flex", large)) < 25 and share("sdpa-flash", large) > share("sdpa-flash", small):
        text += (f". FlexAttention's kernel stays far below the bandwidth at either batch; SDPA flash gets closer once "
                 f"{large} sequences supply parallel work (the copy figure counts a read and a write, so a pure read "
                 "can slightly exceed it)")
    return text


def h200_occupancy_sentence(root=None) -> str:
    """What a register cap did to the book's Triton forward kernel: one or two programs per multiprocessor."""
    import re

    from lab import LabError

    from lab.results import tuning

    folder = (data.DATA_DIR if root is None else root) / KERNELS
    if not (folder / "tuning_forward.csv").exists():
        return H200_MISSING
    try:
        pairs = tuning.register_cap_pairs(data.load(folder).csv("tuning_forward.csv"))
    except LabError:  # tuning runs from before resources were recorded
        return H200_MISSING
    best = pairs.loc[pairs.speedup.idxmax()]
    bm, bn, warps, stages = re.fullmatch(r"(\d+)x(\d+) w(\d+) s(\d+)", best.launch).groups()
    return (f"on the H200, the book's Triton kernel with {bm}×{bn} tiles, {warps} warps and {stages} pipeline stages "
            f"used {best.registers} registers per thread, so {best.programs_per_sm} program fit on a multiprocessor "
            f"and 16k-token causal prefill took {best.ms:.2f} ms; capped at {best.cap} registers, "
            f"{best.programs_per_sm_capped} programs fit and it took {best.ms_capped:.2f} ms ({best.speedup:.2f}× faster)")


def h200_rounds_sentence(root=None) -> str:
    """The 16k tuned-vs-cuDNN ratio over runs timed in single blocks and in interleaved rounds."""
    from lab import LabError

    bar = "prefill 16k: tuned speed vs fastest torch backend"
    try:
        blocks = kernel_runs.stored_runs("h200/kernels-contiguous", root=root)
        rounds = kernel_runs.runs_of_record(root=root)
    except LabError:
        return H200_MISSING

    def ratios(runs):
        return [float(ds.csv("bars.csv", ("bar", "ratio")).set_index("bar").ratio[bar]) for ds in runs.values()]

    b, r = ratios(blocks), ratios(rounds)
    return (f"on the H200, timed one candidate after another in single blocks, the book's tuned kernel reached "
            f"{min(b):.2f}–{max(b):.2f} of cuDNN's speed at 16k tokens over {len(b)} runs ({sum(x >= 0.8 for x in b)} "
            f"of them at or above 0.8); timed in interleaved rounds and taking each candidate's median round, "
            f"{min(r):.2f}–{max(r):.2f} over {len(r)} runs")


def h200_control_sentence(window: str = "prefill-28672", root=None) -> str:
    """The matmul control on the H200: same launches or not, the two totals, and the clocks of both windows."""
    from lab import LabError
    from lab.results import census_windows as census_data

    root = data.DATA_DIR if root is None else root
    try:
        launches = census_data.matmul_launches(root=root, window=window)
    except LabError:  # no capture of that window
        return H200_MISSING
    clocks = census_data.window_clocks(root=root)
    launches, clocks = launches[launches.gpu == "H200"], clocks[(clocks.gpu == "H200") & (clocks.window == window)]
    flash, flex = census_data.BACKENDS
    if launches.empty or set(clocks.backend) != {flash, flex}:
        return H200_MISSING
    same = (launches[f"{flash}: launches"] == launches[f"{flex}: launches"]).all()
    by = clocks.set_index("backend")
    fa, fx = by.loc[flash], by.loc[flex]
    apart = 100 * abs(fa.matmul_ms - fx.matmul_ms) / fa.matmul_ms

    def clock(c):
        limit = f"the {c.limit} active" if c.limit != "none" else "no clock limit active"
        return f"a median SM clock of {c.sm_mhz_median:,.0f} MHz with {limit}"

    kernels = "the same matmul kernels the same number of times" if same else "different matmul kernels"
    return (f"the {int(window.rsplit('-', 1)[1]) // 1024}k prefill windows launched {kernels}, yet their matmuls "
            f"took {fa.matmul_ms:,.0f} ms with FlashAttention 3 and {fx.matmul_ms:,.0f} ms with FlexAttention "
            f"({apart:.1f}% apart); the FlashAttention 3 window ran at {clock(fa)}, the FlexAttention one at {clock(fx)}")


def h200_facts() -> dict:
    """Sentences (lowercase start, no final period) from the H200 runs, or H200_MISSING for each."""
    names = ("h200_fa3_vs_flex", "h200_fa3_vs_fa2", "h200_decode_fa3", "h200_decode_flex", "h200_chunk")
    table = _h200_sweeps()
    if table is None:
        return {**dict.fromkeys(names, H200_MISSING), **_h200_kernel_facts()}
    bandwidth = hardware.device("H200-SXM").bandwidth
    chunks, versions = set(), set()
    for ds in data.datasets(kind="vllm-sweep"):  # one scan of the data tree for both
        if ds.name.startswith("h200/"):
            versions.add(ds.provenance["vllm"])
            if ds.provenance["flags"].get("max_num_batched_tokens"):
                chunks.add(int(ds.provenance["flags"]["max_num_batched_tokens"]))
    table.attrs["vllm"] = ", ".join(sorted(v for v in versions if v)) or "?"
    return {
        "h200_fa3_vs_flex": _pair_sentence(table, FA3, FLEX),
        "h200_fa3_vs_fa2": _pair_sentence(table, FA3, FA2),
        "h200_decode_fa3": _decode_sentence(table, FA3, bandwidth),
        "h200_decode_flex": _decode_sentence(table, FLEX, bandwidth),
        "h200_chunk": (f"the H200 runs prefilled in chunks of {', '.join(f'{c:,}' for c in sorted(chunks))} tokens"
                       if chunks else H200_MISSING),
        **_h200_kernel_facts(),
    }


def _h200_kernel_facts() -> dict:
    """The H200 sentences that come from the kernel benchmark and the census, not the vLLM sweeps."""
    return {"h200_decode_kernels": h200_decode_kernels_sentence(), "h200_control": h200_control_sentence(),
            "h200_occupancy": h200_occupancy_sentence(), "h200_rounds": h200_rounds_sentence()}


def facts() -> dict:
    """Everything the interview and course-kit chapters glue."""
    return {**a10g_facts(), **h200_facts()}
