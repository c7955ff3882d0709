"""Figures of the busy-server chapter: latency against throughput under Poisson load, a long prompt among
decoders, and decode steps with an FP8 KV cache beside their floors."""

from __future__ import annotations

from lab.book.plots import WIDTH_IN, caption, color, figure, legend_above, plain_log_axis
from lab.measure.vllm import arms
from lab.results import interference as ri
from lab.results import load as rl
from lab.store import DATA_DIR

_SLO_STYLE = dict(color="#444444", linestyle=":", linewidth=1.3)


def plot_load_curves(study: rl.LoadStudy, slo: dict):
    """p99 TTFT (top) and p99 ITL (bottom) against achieved requests per second, one line per backend;
    the SLO's TTFT as a dotted line."""
    fig, (top, bottom) = _two_panels()
    for label, rows in study.points.items():
        poisson = rl.poisson_points(rows)
        x = [r["request_throughput"] for r in poisson]
        top.plot(x, [r["p99_ttft_ms"] for r in poisson], "o-", color=color(label), label=label, ms=4.5)
        bottom.plot(x, [r["p99_itl_ms"] for r in poisson], "o-", color=color(label), label=label, ms=4.5)
        bottom.plot(x, [r["p50_itl_ms"] for r in poisson], "s--", color=color(label), ms=3.5, lw=1.0)
    top.axhline(slo["ttft"], label=f"TTFT target {slo['ttft']:g} ms", **_SLO_STYLE)
    for ax, what in ((top, "p99 time to first token (ms)"), (bottom, "inter-token latency (ms): p99 solid, p50 dashed")):
        ax.set_yscale("log")
        plain_log_axis(ax.yaxis, "")
        ax.set_ylabel(what)
        ax.set_xlabel("achieved requests per second")
    legend_above(top, title="Poisson arrivals, 1,024-token prompts, 128 tokens out (H200)")
    caption(bottom, "vllm bench serve (vLLM 0.26) at six rates per backend, from a quarter of its capacity to "
                    "1.2 times it. Data: data/h200/vllm0.26-qwen2.5-7b-load")
    return fig


def _two_panels():
    fig, axes = figure(2, 1, figsize=(WIDTH_IN, 8.2), squeeze=False)
    return fig, (axes[0, 0], axes[1, 0])


def plot_interference(root=DATA_DIR / "h200", decoders: int = 8, long_len: int = 98304):
    """Every decoder's inter-token gap over time around a long prompt's arrival (t = 0), FA3, chunk 2048 against
    8192; the long request's first token as a vertical line. None when neither trial is on file."""
    series = {chunk: ri.gap_series(root, arms.FA3.slug, chunk, decoders, long_len) for chunk in (2048, 8192)}
    if not any(series.values()):
        return None
    fig, ax = figure(1, 1, figsize=(WIDTH_IN, 4.6))
    styles = {2048: ("#1b9e77", "o"), 8192: ("#d95f02", "s")}
    end = max(found[1] for found in series.values() if found) + 1.0
    for chunk, found in series.items():
        if not found:
            continue
        # from 0.1 s before the arrival (inside the warm-up steps that follow the decoders' own prefills) to 1 s after
        points, ttft = [(t, g) for t, g in found[0] if -0.1 <= t <= end], found[1]
        shade, marker = styles[chunk]
        ax.plot([t for t, _ in points], [g for _, g in points], marker, ms=2.5, color=shade, alpha=0.6, ls="none",
                label=f"chunk {chunk:,}: long prompt's first token at {ttft:.2f} s")
        ax.axvline(ttft, color=shade, lw=1.2, ls="--")
    ax.set_yscale("log")
    ax.set_ylim(bottom=2.0)   # two chunks read in one go show as a near-zero gap: not a step
    plain_log_axis(ax.yaxis, "")
    ax.set_xlabel("time since the long prompt arrived (s)")
    ax.set_ylabel("decoders' inter-token gap (ms)")
    legend_above(ax, title=f"{decoders} decoders + a {long_len:,}-token prompt (FA3, H200)")
    caption(ax, f"Every gap of every decoder (contexts 4k to 32k). Data: data/h200/{ri.STUDY}")
    return fig


def plot_fp8(table, context: int = 32768):
    """Decode step time against concurrent requests at ``context``: FA3 with a bf16 and with an FP8 KV cache,
    each with its floor (weights once + the admitted requests' KV bytes over the bandwidth ceiling)."""
    fig, ax = figure(1, 1, figsize=(WIDTH_IN, 5.6))
    for arm, shade in ((arms.FA3, color(arms.FA3.label)), (arms.FA3_FP8, "#7570b3")):
        rows = table[(table["arm"] == arm.label) & (table["context"] == context)].sort_values("concurrency")
        if rows.empty:
            continue
        ax.plot(rows["concurrency"], rows["itl_ms"], "o-", color=shade, label=f"{arm.label} measured", ms=4.5)
        ax.plot(rows["concurrency"], rows["floor_ms"], ":", color=shade, lw=1.4, label=f"{arm.label} floor")
    ax.set_xscale("log", base=2)
    plain_log_axis(ax.xaxis, "")
    ax.set_xlabel("concurrent requests")
    ax.set_ylabel("inter-token latency (ms)")
    legend_above(ax, title=f"Decode at {context:,} tokens of context, H200, vLLM 0.26")
    caption(ax, "Floors use the batch vLLM admitted. Data: data/h200/vllm0.26-qwen2.5-7b-concurrency")
    return fig
