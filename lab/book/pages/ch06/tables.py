"""Chapter 6's tables, figures and explorers."""

from __future__ import annotations

import pandas as pd

from lab.book.batch_explorer import concurrency_explorer as _concurrency_explorer
from lab.book.pages.ch06.quantities import (
    A10G_RUN,
    FA2,
    FA3,
    decomposition,
    h200_study,
    sweep_table,
)
from lab.book.plots.vllm import plot_decode, plot_prefill, plot_tensor_parallel
from lab.book.sweep_explorer import sweep_explorer as _sweep_explorer
from lab.results import flex_counters as fc
from lab.results import flex_decomposition as flexdec
from lab.results import sweep_variants as variants
from lab.results import sweeps as report

# --- tables, figures and explorers --------------------------------------------------------------------------------

def rig_table():
    """What differs between the two rigs, one column per study."""
    table = sweep_table()

    def column(study: str) -> dict:
        prov = report.provenance(table, study)
        real = prov["kind"] == "reference"
        values = lambda key: " or ".join(map(str, report.flag_values(table, study, key)))  # noqa: E731
        return {"GPU": report.study_label(table, study).rsplit(",", 1)[0], "vLLM": prov["vllm"], "data": study,
                "prefill chunk (max_num_batched_tokens)": values("max_num_batched_tokens"),
                "context limit (max_model_len)": values("max_model_len"),
                "weights": "real (Qwen2.5-7B-Instruct)" if real else "random, same shapes",
                "prompts": "filler text cut to length" if real else "random token ids, exact length",
                "arms": ", ".join(sorted(table.loc[table["study"] == study, "arm"].unique()))}

    return pd.DataFrame([column(s) for s in (A10G_RUN, h200_study())]).set_index("GPU").T


def studies() -> list[str]:
    return [A10G_RUN, h200_study()]


def prefill_figure():
    return plot_prefill(sweep_table(), studies())


def decode_figure():
    return plot_decode(sweep_table(), studies())


def fit_table():
    """Each arm's fit with its 95% intervals and the quadratic term's share at 8k and 32k, both rigs; every arm of a
    GPU fitted over the lengths all of them ran."""
    def one(study: str):
        fits = report.fit_summary(sweep_table(), study)
        shown_fits = pd.DataFrame({
            "backend": fits["arm"], "a (s)": fits["a_s"].map(lambda v: f"{v:.3f}"),
            "b (µs/token), 95% CI": [f"{b:.1f} [{lo:.1f}, {hi:.1f}]" for b, lo, hi in zip(fits["b_us_per_token"], fits["b_lo"], fits["b_hi"], strict=True)],
            "c (ps/token²), 95% CI": [f"{c:,.0f} [{lo:,.0f}, {hi:,.0f}]" for c, lo, hi in zip(fits["c_ps_per_token2"], fits["c_lo"], fits["c_hi"], strict=True)],
            "quad share @ 8k": fits["share_8192_pct"].map(lambda v: f"{v:.1f}%"),
            "quad share @ 32k": fits["share_32768_pct"].map(lambda v: f"{v:.1f}%"), "points": fits["points"],
            "fitted to (tokens)": fits["fitted_to"].map(lambda v: f"{v:,d}")})
        shown_fits.insert(0, "GPU", report.study_label(sweep_table(), study))
        return shown_fits

    return pd.concat([one(s) for s in studies()]).style.hide(axis="index")


def decomposition_tables() -> list:
    """The Flex ladder per phase and batch: each step's time, rate, share of the read ceiling and factor."""
    dec, out = decomposition(), []
    if dec is None:
        return out
    for phase in ("decode", "prefill"):
        for batch in dec.batches(phase):
            steps = flexdec.ladder(dec, phase, batch)
            steps.insert(0, "shape", f"{phase}, batch {batch}, n = {dec.length(phase):,}")
            out.append(steps.rename(columns={"rate": "GB/s of K/V" if phase == "decode" else "TFLOP/s",
                                             "pct_of_ceiling": "% of read ceiling", "x_step": "time ×", "over": "over"})
                       .style.format(precision=2, na_rep="").format("{:,.0f}", subset=["programs"], na_rep="")
                       .hide(axis="index"))
    return out


def counter_table():
    """Nsight Compute on each decode variant, FA3, cuDNN and our tuned kernel (None while not on file)."""
    counters = pd.DataFrame(fc.table())
    if counters.empty:
        return None
    return (counters.drop(columns="source").rename(columns={
        "candidate": "kernel", "ms": "ms (all its kernels)", "busy_sms": "busy SMs", "warps_per_sm": "warps/SM",
        "tensor_pct": "tensor pipe %", "top_stall": "top stall", "dram_read_gb": "DRAM read (GB)",
        "read_pct_of_ceiling": "DRAM read rate, % of ceiling"})
        .style.format(precision=2).format("{:.0f}", subset=["busy SMs", "warps/SM"])
        .format("{:.1f}", subset=["tensor pipe %", "DRAM read rate, % of ceiling"]).hide(axis="index"))


def fa2_table():
    return (report.compare_arms(sweep_table(), h200_study(), FA2, FA3).style.hide(axis="index").format(precision=3))


def floor_table():
    """Each arm's shortest, middle and longest point against its roofline floor, both rigs."""
    def one(study: str):
        rows = report.against_floor(sweep_table(), study)
        keep = rows.groupby("arm")["n"].transform(lambda n: n.isin([n.min(), n.iloc[len(n) // 2], n.max()]))
        chosen = rows[keep].copy()
        chosen.insert(0, "GPU", report.study_label(sweep_table(), study))
        return chosen

    return (pd.concat([one(s) for s in studies()]).rename(columns={
        "arm": "backend", "n": "tokens", "ttft_s": "TTFT (s)", "prefill_floor_s": "prefill floor (s)",
        "ttft_x_floor": "TTFT / floor", "itl_ms": "ITL (ms)", "decode_floor_ms": "decode floor (ms)",
        "itl_x_floor": "ITL / floor"}).style.hide(axis="index").format(precision=3))


def tensor_parallel_figure():
    split = variants.tensor_parallel(sweep_table())
    return plot_tensor_parallel(split) if split is not None else None


def concurrency_explorer():
    return _concurrency_explorer()


def sweep_explorer():
    return _sweep_explorer()
