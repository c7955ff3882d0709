"""Batch on the decode roofline: concurrent requests x context x backend -> the floor of a decode
step (weights once, every sequence's KV cache) and, where the H200 concurrency sweep is on file,
the measured inter-token latency and throughput beside it."""

from __future__ import annotations

from pathlib import Path

from lab.book.explorer import Chart, Control, Explorer, Marker, Readout, Series, View
from lab.results import batch_decode as bd
from lab.results.data import DATA_DIR

ARMS = ("FLASH_ATTN/FA3", "FLEX_ATTENTION")


def concurrency_explorer(root: Path = DATA_DIR) -> Explorer:
    """Concurrent requests x context x backend -> step floor, KV share, intensities, measured ITL."""
    table = bd.read(root)
    batches = sorted(set(bd.CONCURRENCY) | (set(int(b) for b in table["concurrency"]) if table is not None else set()))

    def view(batch, context, arm):
        floor, point = bd.step_floor(batch, context), bd.measured(table, arm, context, batch)
        intensity = bd.intensities(batch)
        itl = point["itl_ms"] if point else None
        readouts = [
            Readout("floor_itl", "Roofline floor of a decode step", floor.itl_ms, unit="ms", fmt=".2f"),
            Readout("floor_tok_s", "Decode throughput at that floor", floor.tokens_per_s, unit="tokens/s", fmt=",.0f"),
            Readout("kv_share", "KV cache share of the step's bytes", floor.kv_share_pct, unit="%", fmt=".1f"),
            Readout("matmul_intensity", "Weight matmuls: FLOP per byte of weights", intensity["matmul"], fmt=".0f"),
            Readout("attention_intensity", "Decode attention: FLOP per byte of KV", intensity["attention"], fmt=".0f"),
            Readout("itl", "Measured inter-token latency", itl, unit="ms", fmt=".2f"),
            Readout("tok_s", "Measured decode throughput", point["decode_tok_s"] if point else None,
                    unit="tokens/s", fmt=",.0f"),
            Readout("itl_floor", "ITL / floor", itl / floor.itl_ms if itl else None, unit="x", fmt=".2f"),
        ]
        series = [Series(f"floor, {context:,} tokens", batches, [bd.step_floor(b, context).itl_ms for b in batches],
                         kind="line", dashed=True, color="#444444")]
        if table is not None:
            for name in ARMS:
                pts = [(b, bd.measured(table, name, context, b)) for b in batches]
                pts = [(b, p["itl_ms"]) for b, p in pts if p]
                if pts:
                    series.append(Series(name, [b for b, _ in pts], [y for _, y in pts], kind="line+points"))
        where = "KV-bound (more KV bytes than weight bytes per step)" if floor.kv_bound else "weight-bound"
        note = (f"{batch} sequences x {context:,} tokens: {where}."
                + ("" if point else f" {arm} at this point: not measured yet."))
        chart = Chart(x_label="concurrent requests (batch)", y_label="inter-token latency (ms)", log_x=True,
                      series=series, x_ticks=batches,
                      marker=Marker(batch, itl if itl else floor.itl_ms, label="measured" if itl else "floor"),
                      source=f"NVIDIA H200 datasheet bandwidth, Qwen2.5-7B shape, bf16"
                             + (f"; measured: data/{bd.STUDY}" if table is not None else "; no measurement on file yet"))
        return View(readouts=readouts, chart=chart, note=note)

    return Explorer(
        key="concurrency-explorer",
        title="Batch on the decode roofline: what many concurrent requests cost each other",
        controls=[Control("batch", "Concurrent requests", values=batches, default=16),
                  Control("context", "Context per request (tokens)", values=list(bd.CONTEXTS), default=max(bd.CONTEXTS)),
                  Control("arm", "Attention backend", values=list(ARMS))],
        view=view,
        caption="The dashed line is the floor of one decode step on the H200: every weight read once plus every "
                "sequence's KV cache, over the memory bandwidth. Measured points join it when the concurrency "
                "sweep is on file.")
