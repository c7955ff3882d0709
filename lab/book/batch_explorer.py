"""Batch on the decode roofline: concurrent requests x context x backend -> the floor of a decode
step (weights once, every sequence's KV cache) and, where the H200 concurrency sweep is on file,
the measured inter-token latency and throughput beside it (read by :mod:`lab.results.concurrency`)."""

from __future__ import annotations

from pathlib import Path

from lab.book.explorer import Chart, Control, Explorer, Marker, Readout, Series, View
from lab.measure.vllm.arms import FA3, FLEX, book_order
from lab.results import concurrency as rc
from lab.results.data import DATA_DIR, skipped_note
from lab.results.modelshape import qwen25_7b

CONTEXTS = (2048, 32768)
CONCURRENCY = (1, 4, 16, 64)


def concurrency_explorer(root: Path = DATA_DIR) -> Explorer:
    """Concurrent requests x context x backend -> step floor, KV share, intensities, measured ITL."""
    bandwidth, bandwidth_source = rc.floor_bandwidth()
    table = rc.with_floor(rc.load_points(root=root), bandwidth)
    measured = not table.empty
    # the arms of the concurrency study on file (FA3 and FLEX, as it ran, when none is)
    shown = book_order(table["arm"]) if measured else [FA3.label, FLEX.label]
    batches = sorted(set(CONCURRENCY) | {int(b) for b in table["concurrency"]})
    shape = qwen25_7b()
    floor_ms = lambda batch, context: 1e3 * rc.floor_step_s(batch, context, bandwidth)

    def view(batch, context, arm):
        point = rc.point(table, arm, context, batch)
        itl = point["itl_ms"] if point else None
        admitted = int(point["admitted"]) if point else None
        ran = admitted or batch  # the floor is that of the sequences vLLM ran together
        floor = floor_ms(ran, context)
        weights, kv = rc.weight_bytes_per_step(), rc.kv_bytes_per_step(ran, context)
        unrun = "not run at this point" if measured else "no measurement on file"
        readouts = [
            Readout("floor_itl", "Roofline floor of a decode step", floor, unit="ms", fmt=".2f"),
            Readout("floor_tok_s", "Decode throughput at that floor", ran / floor * 1e3, unit="tokens/s", fmt=",.0f"),
            Readout("kv_share", "KV cache share of the step's bytes", 100 * kv / (kv + weights), unit="%", fmt=".1f"),
            Readout("matmul_intensity", "Weight matmuls: FLOP per byte of weights", float(batch), fmt=".0f"),
            Readout("attention_intensity", "Decode attention: FLOP per byte of KV", shape.q_heads / shape.kv_heads,
                    fmt=".0f"),
            Readout("admitted", "Requests vLLM ran together", admitted, fmt="d", missing=unrun),
            Readout("itl", "Measured inter-token latency", itl, unit="ms", fmt=".2f", missing=unrun),
            Readout("tok_s", "Measured decode throughput", point["decode_tok_s"] if point else None,
                    unit="tokens/s", fmt=",.0f", missing=unrun),
            Readout("itl_floor", "ITL / floor", point["itl_x_floor"] if point else None,
                    unit="×", fmt=".2f", missing=unrun),
        ]
        series = [Series(f"floor, {context:,} tokens", batches, [floor_ms(b, context) for b in batches],
                         kind="line", dashed=True, color="#444444")]
        for name in shown:
            pts = [(b, rc.point(table, name, context, b)) for b in batches]
            pts = [(b, p["itl_ms"]) for b, p in pts if p]
            if pts:
                series.append(Series(name, [b for b, _ in pts], [y for _, y in pts], kind="line+points"))
        where = "KV-bound (more KV bytes than weight bytes per step)" if kv > weights else "weight-bound"
        note = f"{ran} sequences x {context:,} tokens: {where}."
        if point and admitted != batch:
            note += f" vLLM admitted {admitted} of the {batch} requests (its KV cache held no more); the floor is theirs."
        elif not point:
            note += f" {arm} was not run at this point." if measured else " No measurement on file."
        chart = Chart(x_label="concurrent requests (batch)", y_label="inter-token latency (ms)", log_x=True,
                      series=series, x_ticks=batches,
                      marker=Marker(batch, itl if itl else floor, label="measured" if itl else "floor"),
                      source=f"bandwidth ceiling: {bandwidth_source}; Qwen2.5-7B shape, bf16"
                             + (f"; measured: data/{rc.H200_STUDY}" if measured else "; no measurement on file"))
        return View(readouts=readouts, chart=chart, note=note)

    return Explorer(
        key="concurrency-explorer",
        title="Batch on the decode roofline: what many concurrent requests cost each other",
        controls=[Control("batch", "Concurrent requests", values=batches, default=16),
                  Control("context", "Context per request (tokens)", values=list(CONTEXTS), default=max(CONTEXTS)),
                  Control("arm", "Attention backend", values=shown)],
        view=view, skipped=skipped_note(root, "concurrency.csv"),
        caption="The dashed line is the floor of one decode step on the H200: every weight read once plus every "
                "sequence's KV cache, over the H200's bandwidth ceiling (a read-only stream). The points are vLLM's "
                "measured inter-token latency at each number of concurrent requests.")
