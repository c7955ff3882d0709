"""Chapters 04 and 05's panel: pick prompt lengths (or cached contexts) and candidates, time them here
through the benchmark's own code (``lab.book.live_bench`` -> ``lab.measure.bench.measure_shape``), and add
the rows to the chapter's kernel explorer.

Rows go to ``data/local/kernels-live/`` as ``python -m lab bench`` writes them (prefill.csv/decode.csv,
measurements.jsonl, provenance), after every shape, so Stop keeps what finished. On a GPU the chapter's
default shape runs as soon as the cell runs (the chapter's text promises a live timing); the panel then
offers more.
"""

from __future__ import annotations

import time
from pathlib import Path

from lab import LabError, store
from lab.book.run_panels.base import Plan, RunPanel
from lab.measure.bench import CANDIDATES, DECODE_CONTEXTS, PREFILL_LENGTHS
from lab.folders import dataset_lock
from lab.book.live_bench import run_live
from lab.results import units
from lab.measure.bench import write_tables
from lab.book import kernel_explorers
from lab.book.explorer import LiveExplorer

OUT = store.LOCAL_DIR / "kernels-live"


class KernelPanel(RunPanel):
    title = "Time the kernels on your GPU"

    def __init__(self, phase: str, caps=None, out=OUT, measure_kw: dict | None = None, **defaults):
        if phase not in ("prefill", "decode"):
            raise LabError(f"phase must be 'prefill' or 'decode', got {phase!r}")
        self.phase = phase
        self.sizes = PREFILL_LENGTHS if phase == "prefill" else DECODE_CONTEXTS
        base = {"sizes": [4096] if phase == "prefill" else [32768], "batch": 1,
                "candidates": ["sdpa-flash", "ours-teaching", "ours-tuned"], "q_heads": 28, "kv_heads": 4,
                "head_dim": 128}
        super().__init__(caps, **{**base, **defaults})
        self.out = Path(out)
        self.measure_kw = measure_kw or {}
        self.rows: list[dict] = []
        self.tables: list = []

    def controls(self) -> dict:
        import ipywidgets as w

        style = {"description_width": "initial"}
        what = "Prompt lengths" if self.phase == "prefill" else "Cached contexts"
        controls = {
            "sizes": w.SelectMultiple(options=[(f"{n:,}", n) for n in sorted(set(self.sizes) | set(self.defaults["sizes"]))],
                                      value=tuple(self.defaults["sizes"]),
                                      description=what, rows=min(8, len(self.sizes)), style=style),
            "candidates": w.SelectMultiple(options=list(CANDIDATES), value=tuple(self.defaults["candidates"]),
                                           description="Candidates", rows=len(CANDIDATES), style=style),
        }
        if self.phase == "decode":
            controls["batch"] = w.Dropdown(options=[1, 16], value=self.defaults["batch"], description="Batch", style=style)
        return controls

    def plan(self, values: dict) -> Plan:
        sizes, candidates = sorted(values["sizes"]), list(values["candidates"])
        if not sizes or not candidates:
            raise LabError("choose at least one size and one candidate")
        unknown = [c for c in candidates if c not in CANDIDATES]
        if unknown:
            raise LabError(f"unknown candidate {unknown[0]!r}; choose from {', '.join(CANDIDATES)}")
        batch = values.get("batch", 1)
        shape = (f"causal prefill of {', '.join(f'{n:,}' for n in sizes)} tokens" if self.phase == "prefill" else
                 f"one decode step over {', '.join(f'{n:,}' for n in sizes)} cached tokens, batch {batch}")
        lines = [f"{shape}; {self.defaults['q_heads']} query / {self.defaults['kv_heads']} KV heads, "
                 f"d={self.defaults['head_dim']}, bf16",
                 f"candidates: {', '.join(candidates)}: each checked against an fp32 reference, then timed in "
                 "interleaved rounds (a cold start first compiles each Triton kernel)",
                 "rows written to data/local/kernels-live/ and added to the explorer above"]
        flag = "--lengths" if self.phase == "prefill" else "--contexts"
        skip = "--skip-decode" if self.phase == "prefill" else f"--skip-prefill --batches {batch}"
        command = (f"python -m lab bench {flag} {','.join(str(n) for n in sizes)} {skip} "
                   f"--candidates {','.join(candidates)} --out data/local/kernels")
        return Plan(f"{len(candidates)} candidate(s) at {len(sizes)} size(s)", lines, command)

    def run(self, values: dict) -> list[dict]:
        with dataset_lock(self.out, option=""):   # a bench into the same folder is refused
            return self._run(values)

    def _run(self, values: dict) -> list[dict]:
        started = time.time()
        new = []
        for n in sorted(values["sizes"]):
            self.check_cancel()
            live = run_live(self.phase, n, list(values["candidates"]), batch=values.get("batch", 1),
                            q_heads=self.defaults["q_heads"], kv_heads=self.defaults["kv_heads"],
                            head_dim=self.defaults["head_dim"], out=self.progress.line, caps=self.caps, **self.measure_kw)
            if not live.ran:
                raise LabError(f"nothing was timed: {live.reason}")
            rows = [{"phase": self.phase, **row} for row in live.rows]
            for row in rows:
                store.append_jsonl(self.out / "measurements.jsonl", row)
            new += rows
            self.rows += rows
            self._write(started)
            self.tables.append(live.table())
            self.show_result(live)
        return new

    def note_of(self, rows) -> str:
        if not rows:
            return ""
        def one(r):
            rate = (units.flops_rate(r["tflops"] * 1e12) if self.phase == "prefill" and r.get("tflops")
                    else units.byte_rate(r["gbps"] * 1e9) if r.get("gbps") else "")
            return f"{r['candidate']} {r['ms']:.3g} ms" + (f" ({rate})" if rate else "") if r["status"] == "ok" \
                else f"{r['candidate']} {r['status']}"
        sizes = sorted({r["n"] for r in rows})
        return f"{self.phase} at {', '.join(f'{n:,}' for n in sizes)} tokens: " + ", ".join(one(r) for r in rows)

    def _write(self, started: float) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        write_tables(self.out, self.rows)
        flags = {"q_heads": self.defaults["q_heads"], "kv_heads": self.defaults["kv_heads"],
                 "head_dim": self.defaults["head_dim"],
                 "candidates": sorted({r["candidate"] for r in self.rows}), "rep_ms": 30, "rounds": 3,
                 "timer": "as python -m lab bench (lab.measure.timing.measure_shape), rep_ms 30: a spot check",
                 "source": "a chapter's run panel (lab.book.run_panels.kernels)"}
        store.write_provenance(self.out, store.new_provenance("kernels", dtype="bfloat16", flags=flags,
                                                             complete=True, seconds=round(time.time() - started, 1),
                                                             command="lab.book.run_panels.kernels.kernel_panel"))

    def show_result(self, live) -> None:
        box = getattr(self, "result_box", None)
        if box is None:
            return
        import ipywidgets as w

        kernel_explorers.kernel_runs.cache_clear()  # the new rows are a run of their own in the explorer
        explorer = (kernel_explorers.prefill_explorer() if self.phase == "prefill" else kernel_explorers.decode_explorer())
        view = LiveExplorer(explorer)
        run_name = str(self.out.relative_to(store.DATA_DIR)) if self.out.is_relative_to(store.DATA_DIR) else None
        if run_name in [v for _, v in view.controls["run"].options]:
            view.controls["run"].value = run_name
        table = w.Output()
        table.append_display_data(live.table())  # from the worker thread: no `with output:` capture
        box.children = (table, view.widget)


def kernel_panel(phase: str, **defaults) -> KernelPanel:
    """Chapters 04/05's "on your GPU" cell: on a GPU, time the default shape now (printed progress), then
    return the panel for more; anywhere else, the panel says what it would run and why not here."""
    panel = KernelPanel(phase, **defaults)
    if panel.reason is None:
        panel.autorun()
        for table in panel.tables:
            from IPython.display import display
            display(table)
    return panel
