"""Chapter 07's panel: capture one profiler window on a vLLM server (backend, prompt length, prefill or
decode) and show its census, GPU time by kernel family, as soon as the trace is read.

The server runs with the torch profiler configured (a server of its own: timing runs never have the
profiler on) and stays up for the next window. Traces and census go to
``data/local/census-live/<arm>/``, as ``python -m lab capture vllm`` writes them, so chapter 07's census
explorer lists them beside the H200's.
"""

from __future__ import annotations

from pathlib import Path

from lab import LabError
from lab.book.run_panels.base import Plan, RunPanel
from lab.book.run_panels.servers import LOG_DIR, MAX_MODEL_LEN, ArmKey, available_arms, pool
from lab.measure.vllm import arms
from lab.store import LOCAL_DIR
import csv
from lab.book.run_panels.base import autorun_requested
from lab.measure.capture import DECODE_TOKENS
from lab.folders import dataset_lock
from lab.measure.capture import DECODE_TOKENS, PROFILER_OPTIONS, TraceFolder, Window, capture_window
from lab.measure.capture import DECODE_TOKENS
from lab.measure.trace_store import census_rows, keep_trace, write_rows
from lab.store import new_provenance, write_provenance

LENGTHS = (1024, 2048, 8192, 28672)
OUT_ROOT = LOCAL_DIR / "census-live"


class CapturePanel(RunPanel):
    title = "Capture a window on your GPU"
    needs_vllm = True

    def __init__(self, caps=None, pool_=None, out_root=OUT_ROOT, **defaults):
        self.notes = available_arms(caps) if caps is None or caps.has_gpu else {label: "" for label in arms.ARMS}
        first = next((a for a, note in self.notes.items() if not note), arms.FA3.label)
        super().__init__(caps, **{"backend": first, "tokens": 2048, "phase": "prefill", **defaults})
        self.pool_, self.out_root = pool_, Path(out_root)
        self.current: ArmKey | None = None
        self.census: list[dict] = []

    def pool(self):
        return self.pool_ or pool()

    def controls(self) -> dict:
        import ipywidgets as w

        style = {"description_width": "initial"}
        offered = [a for a, note in self.notes.items() if not note]
        return {"backend": w.Dropdown(options=offered, value=self.defaults["backend"], description="Backend", style=style),
                "tokens": w.Dropdown(options=[(f"{n:,}", n) for n in LENGTHS], value=self.defaults["tokens"],
                                     description="Prompt tokens", style=style),
                "phase": w.Dropdown(options=[("prefill (one prompt)", "prefill"), ("decode steps only", "decode")],
                                    value=self.defaults["phase"], description="Window", style=style)}

    def plan(self, values: dict) -> Plan:
        arm, n, phase = values["backend"], int(values["tokens"]), values["phase"]
        arms.known(arm)
        if phase not in ("prefill", "decode"):
            raise LabError(f"window must be prefill or decode, not {phase!r}")
        if n + DECODE_TOKENS * 6 + 64 > MAX_MODEL_LEN:
            raise LabError(f"{n} tokens plus the decode window do not fit the panel server's {MAX_MODEL_LEN} tokens")
        window = (f"one {n:,}-token prompt's prefill (after a warm request of the same length)" if phase == "prefill"
                  else f"{DECODE_TOKENS} decode steps after a {n:,}-token prompt (profiling starts once its first token arrived)")
        lines = [f"vLLM {arm} with the torch profiler on: started once, kept for later windows (1-2 min)",
                 f"window: {window}",
                 "census: GPU time by kernel family (attention, matmul, communication, ...), written to "
                 "data/local/census-live/ and shown below"]
        command = (f"python -m lab capture vllm --arm {arm} --windows {phase}:{n} --out data/local/census "
                   "--model data/models/qwen2.5-7b-128k")
        return Plan(f"{phase} window of {n:,} tokens on {arm}", lines, command)

    def stop_resources(self) -> None:
        if self.current is not None:
            self.pool().stop(self.current)

    def run(self, values: dict) -> dict:

        self.current = ArmKey(arms.known(values["backend"]), profiler=True)
        trace_dir = (LOG_DIR / f"{self.current.slug}-traces").resolve()
        trace_dir.mkdir(parents=True, exist_ok=True)  # vLLM writes its traces here (an absolute folder)
        server = self.pool().get(self.current, say=self.progress.line, cancelled=self.cancel.is_set,
                                 profiler_dir=trace_dir, profiler_options=PROFILER_OPTIONS)
        self.check_cancel()
        window = Window(values["phase"], int(values["tokens"]))
        self.progress.line(f"capturing {window.name}: warm request, then /start_profile ... /stop_profile "
                           "(vLLM writes the trace when profiling stops: tens of seconds)")
        raw = capture_window(server, TraceFolder(trace_dir), window, decode_tokens=DECODE_TOKENS)
        self.check_cancel()
        folder = self.out_root / self.current.arm.slug
        with dataset_lock(folder, option="", kinds=("census",)):     # a capture into the same folder is refused
            return self._store(server, raw, window, folder, values)

    def _store(self, server, raw, window, folder, values) -> dict:

        self.progress.line(f"reading the trace ({raw.stat().st_size / 1e6:.0f} MB) into a census")
        kept = keep_trace(raw, folder / f"{window.name}.trace.json.gz",
                          phase="decode" if window.phase == "decode" else "all")
        raw.unlink(missing_ok=True)
        result = kept["census"]
        rows = census_rows(result, window.phase, window.tokens, server.arm_label())
        old = folder / "census.csv"
        keep = _other_windows(old, window) if old.exists() else []
        write_rows(old, keep + rows)
        write_provenance(folder, new_provenance(
            "census", model="Qwen2.5-7B-Instruct shape (dummy weights)", dtype="bfloat16",
            flags={"arm": server.arm_label(), "windows": [window.name], "decode_tokens": DECODE_TOKENS,
                   "server": server.record(), "source": "chapter 07's run panel"},
            command=self.plan(values).command + "  (from chapter 07's run panel)"))
        summary = {"arm": server.arm_label(), "window": window.name, "kernel_ms": result["kernel_ms"],
                   "families": {f: {"ms": v["ms"], "share": v["share"]} for f, v in result["families"].items()}}
        self.census.append(summary)
        fam = result["families"]
        self.progress.line(f"{window.name} on {server.arm_label()}: {result['kernel_ms']:.1f} ms of GPU kernels, "
                           f"attention {fam['attention']['ms']:.1f} ms ({100 * fam['attention']['share']:.1f}%), "
                           f"matmul {fam['matmul']['ms']:.1f} ms")
        self.show_result(summary)
        return summary

    def note_of(self, summary) -> str:
        if not summary:
            return ""
        attention = summary["families"]["attention"]
        return (f"census of {summary['window']} on {summary['arm']}: {summary['kernel_ms']:.1f} ms of kernels, "
                f"attention {100 * attention['share']:.1f}%")

    def table(self, summary: dict | None = None):
        """The census of a window (default: the last) as a table: family, ms, share of the window."""
        import pandas as pd

        if not self.census and summary is None:
            raise LabError("no window captured yet")
        summary = summary or self.census[-1]
        return pd.DataFrame([{"family": f, "ms": round(v["ms"], 2), "share %": round(100 * v["share"], 1)}
                             for f, v in summary["families"].items()])

    def show_result(self, summary) -> None:
        box = getattr(self, "result_box", None)
        if box is None:
            return
        import ipywidgets as w

        out = w.Output()
        out.append_display_data(self.table(summary))
        box.children = (w.HTML(f"<b>{summary['window']} on {summary['arm']}: "
                               f"{summary['kernel_ms']:,.1f} ms of GPU kernels</b>"), out)


def _other_windows(path, window) -> list[dict]:
    """Rows of census.csv for windows other than ``window`` (a re-capture replaces its own rows)."""
    with open(path, newline="") as fh:
        return [r for r in csv.DictReader(fh) if not (r["phase"] == window.phase and int(r["tokens"]) == window.tokens)]


def capture_panel(**defaults) -> CapturePanel:
    """Chapter 07's "run it yourself": the panel (and, under ``LAB_PANEL_AUTORUN=1``, its default window)."""
    panel = CapturePanel(**defaults)
    if panel.reason is None and autorun_requested():
        panel.autorun()
        from IPython.display import display
        display(panel.table())
    return panel
