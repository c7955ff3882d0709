"""Chapter 4b's panel: race the attention backward passes on this GPU with ``python -m lab backward-race`` and add
the run to the chapter's explorer.

The race runs as its own process (the command the plan shows, word for word), its progress lines streamed into
the panel; it writes ``data/local/backward-race/`` after every length, so Stop (which ends that process) keeps
the lengths that finished.
"""

from __future__ import annotations

import subprocess
import sys
import threading

from lab import REPO_ROOT, LabError, store
from lab.book.run_panels.base import Plan, RunPanel, Stopped
from lab.book.explorer import LiveExplorer

OUT = store.LOCAL_DIR / "backward-race"
#: What the race offers (lab.measure.backward_race: CANDIDATES, and the lengths the H200 run timed).
CANDIDATES = ("ours", "sdpa-flash", "sdpa-cudnn", "fa4")
LENGTHS = (4096, 8192, 16384, 32768)


class BackwardPanel(RunPanel):
    title = "Race the backward passes on your GPU"

    def __init__(self, caps=None, out=OUT, **defaults):
        base = {"lengths": [4096], "candidates": ["ours", "sdpa-flash", "sdpa-cudnn"], "rounds": 3}
        super().__init__(caps, **{**base, **defaults})
        self.out = out
        self.process: subprocess.Popen | None = None
        self._lock = threading.Lock()

    def controls(self) -> dict:
        import ipywidgets as w

        style = {"description_width": "initial"}
        return {"lengths": w.SelectMultiple(options=[(f"{n:,}", n) for n in LENGTHS],
                                            value=tuple(self.defaults["lengths"]), description="Sequence lengths",
                                            rows=len(LENGTHS), style=style),
                "candidates": w.SelectMultiple(options=list(CANDIDATES), value=tuple(self.defaults["candidates"]),
                                               description="Candidates", rows=len(CANDIDATES), style=style)}

    def _command(self, values: dict) -> list[str]:
        lengths, candidates = sorted(values["lengths"]), list(values["candidates"])
        if not lengths or not candidates:
            raise LabError("choose at least one length and one candidate")
        unknown = [c for c in candidates if c not in CANDIDATES]
        if unknown:
            raise LabError(f"unknown candidate {unknown[0]!r}; choose from {', '.join(CANDIDATES)}")
        return ["python", "-m", "lab", "backward-race", "--lengths", ",".join(str(n) for n in lengths),
                "--candidates", ",".join(candidates), "--rounds", str(values.get("rounds", 3)),
                "--out", "data/local/backward-race"]

    def plan(self, values: dict) -> Plan:
        command = self._command(values)
        lengths = ", ".join(f"{n:,}" for n in sorted(values["lengths"]))
        lines = [f"one training step of causal attention at {lengths} tokens: 28 query / 4 KV heads, d=128, bf16",
                 f"candidates: {', '.join(values['candidates'])}: each one's dQ, dK, dV checked against fp32 autograd, "
                 "then forward and forward + backward timed in interleaved rounds",
                 "rows written to data/local/backward-race/ and added to the explorer above"]
        return Plan(f"{len(values['candidates'])} candidate(s) at {len(values['lengths'])} length(s)", lines,
                    " ".join(command))

    def run(self, values: dict) -> str:
        command = [sys.executable, *self._command(values)[1:]]
        with self._lock:
            self.check_cancel()
            self.process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                            text=True, bufsize=1)
        for line in self.process.stdout:
            self.progress.line(line.rstrip())
        code = self.process.wait()
        if self.cancel.is_set():
            raise Stopped()
        if code != 0:
            raise LabError(f"python -m lab backward-race ended with status {code} (its lines are above)")
        self.show_result(str(self.out))
        return str(self.out)

    def stop_resources(self) -> None:
        with self._lock:
            if self.process is not None and self.process.poll() is None:
                self.process.terminate()   # the race writes after every length: finished lengths stay

    def note_of(self, result) -> str:
        return f"backward race written to {result}" if result else ""

    def show_result(self, result) -> None:
        box = getattr(self, "result_box", None)
        if box is None:
            return
        from lab.book import backward_explorer  # lazy: pulls in pandas

        backward_explorer.race_runs.cache_clear()   # the new run is a choice of its own in the explorer
        view = LiveExplorer(backward_explorer.backward_explorer())
        box.children = (view.widget,)


def backward_panel(**defaults) -> BackwardPanel:
    """Chapter 4b's "on your GPU" cell: on a GPU, race the default lengths now (printed progress), then return the
    panel for more; anywhere else, the panel says what it would run and why not here."""
    panel = BackwardPanel(**defaults)
    if panel.reason is None:
        panel.autorun()
    return panel
