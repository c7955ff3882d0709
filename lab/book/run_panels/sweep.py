"""Chapter 06's panel: choose backends, prompt lengths, repetitions, output tokens and chunk size; run a
vLLM sweep; watch the server start and every prompt; see the points land in the sweep explorer.

Each arm runs the command line's probe loop (:func:`lab.measure.vllm.probe.run_probe`, its events shown as
progress lines and Stop checked before and after every request) and its points are written by the command's
dataset writer after every prompt length to ``data/local/vllm-live/<time>-<arm>/`` (the files
``python -m lab vllm-sweep`` writes, with provenance), so Stop keeps every finished length and the
explorer reads them like any other study.
"""

from __future__ import annotations

import time
from pathlib import Path

from lab import LabError
from lab.book.run_panels.base import Plan, RunPanel, shown_path
from lab.book.run_panels.servers import MAX_MODEL_LEN, ArmKey, available_arms, pool
from lab.measure.vllm import arms
from lab.measure.vllm.probe import ProbeEvents, ProbePlan, read_records, run_probe
from lab.measure.vllm.sweep import write_dataset
from lab.store import LOCAL_DIR
from lab.book.run_panels.base import autorun_requested
from lab.book.explorer import LiveExplorer
from lab.book.sweep_explorer import sweep_explorer

LENGTHS = (256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
OUTPUT_TOKENS = (16, 32, 64, 128)
CHUNKS = (None, 2048, 8192)
OUT_ROOT = LOCAL_DIR / "vllm-live"


def sweep_command(arm: str, values: dict) -> str:
    parts = ["python -m lab vllm-sweep", arms.options(arms.known(arm))]
    parts += [f"--lengths {','.join(str(n) for n in sorted(values['lengths']))}", f"--reps {values['reps']}",
              f"--max-tokens {values['max_tokens']}"]
    parts += [f"--max-num-batched-tokens {values['chunk']}"] if values.get("chunk") else []
    return " ".join(parts)


class SweepPanel(RunPanel):
    title = "Run a sweep on your GPU"
    needs_vllm = True

    def __init__(self, caps=None, pool_=None, out_root=OUT_ROOT, **defaults):
        self.notes = available_arms(caps) if caps is None or caps.has_gpu else {label: "" for label in arms.ARMS}
        first = next((a for a, note in self.notes.items() if not note), arms.FA3.label)
        base = {"backends": [first], "lengths": [256, 1024, 4096], "reps": 1, "max_tokens": 32, "chunk": None}
        super().__init__(caps, **{**base, **defaults})
        self.pool_ = pool_
        self.out_root = Path(out_root)
        self.current: ArmKey | None = None
        self.folders: list = []

    def pool(self):
        return self.pool_ or pool()

    def controls(self) -> dict:
        import ipywidgets as w

        style = {"description_width": "initial"}
        offered = [a for a, note in self.notes.items() if not note]
        return {
            "backends": w.SelectMultiple(options=offered, value=tuple(b for b in self.defaults["backends"] if b in offered),
                                         description="Backends", rows=len(offered), style=style),
            "lengths": w.SelectMultiple(options=[(f"{n:,}", n) for n in sorted(set(LENGTHS) | set(self.defaults["lengths"]))],
                                        value=tuple(self.defaults["lengths"]),
                                        description="Prompt lengths", rows=6, style=style),
            "reps": w.BoundedIntText(value=self.defaults["reps"], min=1, max=10, description="Repetitions", style=style),
            "max_tokens": w.Dropdown(options=sorted(set(OUTPUT_TOKENS) | {self.defaults["max_tokens"]}),
                                     value=self.defaults["max_tokens"],
                                     description="Output tokens", style=style),
            "chunk": w.Dropdown(options=[("vLLM's default" if c is None else f"{c:,}", c) for c in CHUNKS],
                                value=self.defaults["chunk"], description="Prefill chunk", style=style),
        }

    def plan(self, values: dict) -> Plan:
        labels, lengths = list(values["backends"]), sorted(values["lengths"])
        if not labels or not lengths:
            raise LabError("choose at least one backend and one prompt length")
        for label in labels:
            arms.known(label)
        if max(lengths) + values["max_tokens"] > MAX_MODEL_LEN:
            raise LabError(f"the longest prompt plus output tokens must stay within {MAX_MODEL_LEN} tokens")
        if values["reps"] < 1:
            raise LabError("repetitions must be at least 1")
        chunk = "vLLM's default chunk" if not values.get("chunk") else f"{values['chunk']:,}-token chunks"
        running = set(self.pool().running()) if self.reason is None else set()
        lines = []
        for arm in labels:
            key = self._key(arm, values)
            start = "already running: no start" if key in running else "started once, then kept for later runs (1-2 min)"
            lines.append(f"vLLM {arm}, {chunk}, Qwen2.5-7B shape with random weights: {start}")
        lines.append(f"prompts of {', '.join(f'{n:,}' for n in lengths)} tokens: 1 warm-up and {values['reps']} timed "
                     f"request(s) each, {values['max_tokens']} output tokens; TTFT and inter-token latency")
        lines.append(f"points written to {shown_path(self.out_root)}/ and drawn in the explorer as each length finishes")
        return Plan(f"{' + '.join(labels)} at {len(lengths)} prompt length(s)", lines,
                    "\n".join(sweep_command(arm, values) for arm in labels))

    @staticmethod
    def _key(arm: str, values: dict) -> ArmKey:
        return ArmKey(arms.known(arm), values.get("chunk") or None)

    def stop_resources(self) -> None:
        if self.current is not None:
            self.pool().stop(self.current)

    def run(self, values: dict) -> list:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        written = []
        for arm in values["backends"]:
            self.check_cancel()
            self.current = self._key(arm, values)
            server = self.pool().get(self.current, say=self.progress.line, cancelled=self.cancel.is_set)
            folder = self.out_root / f"{stamp}-{self.current.slug}"
            written.append(folder)
            self.folders.append(folder)
            self._sweep_arm(server, arm, values, folder)
        return written

    def _sweep_arm(self, server, arm: str, values: dict, folder) -> None:
        plan = ProbePlan(lengths=sorted(values["lengths"]), reps=values["reps"], max_tokens=values["max_tokens"],
                         warmup_tokens=min(16, values["max_tokens"]),
                         run_key={**arms.known(arm).run_key(), "max_tokens": values["max_tokens"],
                                  "chunk": values.get("chunk"), "panel": True})
        folder.mkdir(parents=True, exist_ok=True)
        jsonl, started = folder / "measurements.jsonl", time.time()
        command = sweep_command(arm, values) + "  (from chapter 06's run panel)"

        def write(records) -> None:
            write_dataset(folder, records, server, plan, started, command=command)
        try:
            run_probe(server, plan, jsonl, events=_PanelEvents(self, arm, folder, write))
        finally:
            if records := read_records(jsonl):
                write(records)

    def note_of(self, folders) -> str:
        import pandas as pd

        parts = []
        for folder in folders or []:
            table = pd.read_csv(folder / "sweep.csv")
            ok = table[table["status"] == "ok"]
            if len(ok):
                arm = ok["arm"].iloc[0]
                parts.append(f"vLLM {arm} TTFT " + ", ".join(f"{int(r.target_len):,}: {r.ttft_s:.3f} s"
                                                            for r in ok.itertuples()) + f"; ITL {ok['itl_ms'].median():.2f} ms")
        return "; ".join(parts)

    def report_length(self, folder, arm: str, length: int) -> None:
        import pandas as pd

        table = pd.read_csv(folder / "sweep.csv")
        row = table[table["target_len"] == length]
        if len(row) and row.iloc[0]["status"] == "ok":
            r = row.iloc[0]
            self.progress.line(f"{arm}: {length:,} tokens: TTFT {r['ttft_s']:.3f} s, ITL {r['itl_ms']:.2f} ms (written)")
        self.show_result((arm, length))

    def show_result(self, result) -> None:
        box = getattr(self, "result_box", None)
        if box is None:
            return

        arm, length = result
        live = LiveExplorer(sweep_explorer(key="sweep-live"))
        study = "local/vllm-live"
        for name, value in (("study", study), ("backend", arm), ("length", length)):
            widget = live.controls[name]
            if value in [v for _, v in widget.options]:
                widget.value = value
        box.children = (live.widget,)


class _PanelEvents(ProbeEvents):
    """The probe's requests as the panel's progress lines; Stop checked before and after each request
    (a request cut by Stop is not a measurement); every finished length written and drawn."""

    def __init__(self, panel: SweepPanel, arm: str, folder, write):
        self.panel, self.arm, self.folder, self.write = panel, arm, folder, write

    def request(self, length, rep, reps):
        self.panel.check_cancel()
        what = "warm-up" if rep == "warm" else f"request {rep + 1} of {reps}"
        self.panel.progress.line(f"{self.arm}: {length:,} tokens, {what}")

    def measured(self, record):
        self.panel.check_cancel()

    def failed(self, record, skipped):
        self.panel.progress.line(f"{self.arm}: {record['target_len']:,} tokens failed ({record.get('error')}); "
                                 "next length")

    def length_done(self, length, records):
        self.write(records)
        self.panel.report_length(self.folder, self.arm, length)


def sweep_panel(**defaults) -> SweepPanel:
    """Chapter 06's "run it yourself": the panel (and, under ``LAB_PANEL_AUTORUN=1``, its default run)."""
    panel = SweepPanel(**defaults)
    if panel.reason is None and autorun_requested():
        panel.autorun()
    return panel
