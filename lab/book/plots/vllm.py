"""Figures of the vLLM sweep chapter: TTFT and ITL against prompt length, one panel per GPU study."""

from __future__ import annotations

import numpy as np

from lab.book.plots import WIDTH_IN, caption, color, figure, legend_above, token_axis
from lab.measure.vllm.arms import FA2, FA3
from lab.results import sweeps as report

_FLOOR_STYLE = dict(color="#444444", linestyle=":", linewidth=1.3)


def _panels(count: int):
    """One panel per study, stacked in one column (a phone's width each), each headed by its legend."""
    fig, axes = figure(count, 1, figsize=(WIDTH_IN, 1.0 + 3.9 * count), squeeze=False)
    return fig, axes[:, 0]


def _arms(table, study):
    return sorted(table.loc[table["study"] == study, "arm"].unique())


def _source(table, studies, what: str) -> str:
    return f"{what}. Qwen2.5-7B shape, bf16, batch 1; GPU and vLLM version in each title. Data: " + ", ".join(
        f"data/{s}" for s in studies)


def _finish(fig, axes, source: str) -> None:
    caption(axes[-1], source)


def _floor_and_axes(ax, table, study: str, phase: str, x_label: str, y_label: str) -> None:
    """The roofline floor of the study's GPU over its measured lengths, log-2 x axis, labels, title, legend."""
    rows = table[table["study"] == study]
    xs = np.geomspace(rows["actual_len"].min(), rows["actual_len"].max(), 48).astype(int)
    floor = report.floors(str(rows["gpu"].iloc[0]), xs, report.gpu_count(table, study))
    if phase == "prefill":
        ax.plot(floor["n"], floor["prefill_s"], label="roofline floor (FLOPs / peak)", **_FLOOR_STYLE)
    else:
        ax.plot(floor["n"], floor["decode_s"] * 1e3, label="roofline floor (bytes / bandwidth)", **_FLOOR_STYLE)
    token_axis(ax, rows["actual_len"])
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    legend_above(ax, title=report.study_label(table, study))  # the legend heads the panel and names its GPU


def plot_prefill(table, studies: list[str]):
    """TTFT against prompt length: measured points, the quadratic fit (dashed), the FLOP floor (dotted)."""
    fig, axes = _panels(len(studies))
    for ax, study in zip(axes, studies, strict=True):
        for arm in _arms(table, study):
            rows = report.arm_rows(table, study, arm)
            ax.plot(rows["actual_len"], rows["ttft_s"], "o", color=color(arm), label=arm, ms=4.5)
            fit = report.prefill_fit(table, study, arm)
            if fit is not None:  # drawn over the arm's measured range: past the fitted lengths it is a prediction
                span = np.geomspace(rows["actual_len"].min(), rows["actual_len"].max(), 48)
                ax.plot(span, fit.predict(span), "--", color=color(arm), lw=1.2)
        _floor_and_axes(ax, table, study, "prefill", "prompt length (tokens)", "time to first token (s)")
    _finish(fig, axes, _source(table, studies, "Dashed: t = a + b·n + c·n² fitted per backend over the lengths every backend of its GPU ran"))
    return fig


def plot_decode(table, studies: list[str]):
    """Decode ITL (median, p10-p90 bars where recorded) against context length, with the bandwidth floor."""
    fig, axes = _panels(len(studies))
    for ax, study in zip(axes, studies, strict=True):
        for arm in _arms(table, study):
            rows = report.arm_rows(table, study, arm).dropna(subset=["itl_ms"])
            if "itl_p10_ms" in rows and rows["itl_p10_ms"].notna().all() and len(rows):
                err = [rows["itl_ms"] - rows["itl_p10_ms"], rows["itl_p90_ms"] - rows["itl_ms"]]
                ax.errorbar(rows["actual_len"], rows["itl_ms"], yerr=err, fmt="o-", color=color(arm), label=arm,
                            ms=4, lw=1.2, capsize=2)
            else:
                ax.plot(rows["actual_len"], rows["itl_ms"], "o-", color=color(arm), label=arm, ms=4, lw=1.2)
        _floor_and_axes(ax, table, study, "decode", "context length (tokens)", "inter-token latency (ms)")
        ax.set_ylim(bottom=0)
    _finish(fig, axes, _source(table, studies, "Median decode gap; bars p10-p90 where recorded"))
    return fig


def plot_tensor_parallel(split):
    """One GPU against the model split over several (lab.results.sweep_variants.TensorParallel): TTFT and ITL
    against prompt length, with each decode floor."""
    fig, (left, right) = _panels(2)
    one, many = "1 GPU", f"{split.gpus} GPUs, tensor parallel"
    left.plot(split.lengths, split.ttft_one, "o-", color=color(FA3.label), label=one, ms=4)
    left.plot(split.lengths, split.ttft_split, "s--", color=color(FA2.label), label=many, ms=4)
    right.plot(split.lengths, split.itl_one, "o-", color=color(FA3.label), label=one, ms=4)
    right.plot(split.lengths, split.itl_split, "s--", color=color(FA2.label), label=many, ms=4)
    right.plot(split.lengths, split.decode_floor_one_ms, label="floor, 1 GPU", **_FLOOR_STYLE)
    right.plot(split.lengths, split.decode_floor_split_ms, label=f"floor, {split.gpus} GPUs",
               **{**_FLOOR_STYLE, "linestyle": "-."})
    for ax, label in ((left, "time to first token (s)"), (right, "inter-token latency (ms)")):
        token_axis(ax, split.lengths)
        ax.set_xlabel("prompt length (tokens)")
        ax.set_ylabel(label)
        legend_above(ax)
    right.set_ylim(bottom=0)
    _finish(fig, [left, right], f"{FA3.label} on NVIDIA H200, Qwen2.5-7B shape, bf16, batch 1. Data: "
            "data/h200/vllm0.26-qwen2.5-7b and data/h200x2/vllm0.26-qwen2.5-7b-tp2")
    return fig
