"""Timing the kernels live from a chapter: one shape, a few candidates, progress printed as it goes.

Chapters 04 and 05 call :func:`run_live` from their "On your GPU" cell. On a machine with a GPU it
checks each candidate against the fp32 reference and times them in interleaved rounds through
``lab.measure.bench.measure_shape`` (the benchmark's own code), printing a line per step with the
elapsed time: the first call of a Triton kernel compiles it (and the tuned kernel autotunes), which
is most of a cold run, so the reader sees what the wait is for. Anywhere else it says what it would
have run and why it can't here, instead of a dead cell.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from lab import LabError, env
from lab.measure.bench import CANDIDATES, Shape, measure_shape

#: Columns a chapter shows from a live row, per phase.
SHOWN = {"prefill": ("candidate", "status", "ms", "tflops", "max_abs_err"),
         "decode": ("candidate", "status", "ms", "ms_eager", "gbps", "max_abs_err")}


class PrintedProgress:
    """The progress object ``measure_shape`` drives (``set_postfix_str``, ``update``), as printed lines.

    A line per step, each with the seconds since the start, so a notebook (or a log) shows where a
    cold run spends its time; ``out`` is where lines go (print by default, a list's append in tests).
    """

    def __init__(self, total: int, out=print, clock=time.monotonic):
        self.total, self.done, self.out, self.clock = total, 0, out, clock
        self.started = clock()
        self.last = None

    def set_postfix_str(self, text: str) -> None:
        if text == self.last:
            return
        self.last = text
        hint = " (first call: compile, autotune, check against the fp32 reference)" if text.endswith(": check") else ""
        self.out(f"[{self.clock() - self.started:5.1f} s] {text}{hint}")

    def update(self, n: int = 1) -> None:
        self.done += n
        if self.done >= self.total:
            self.out(f"[{self.clock() - self.started:5.1f} s] done: {self.done} of {self.total} candidates")


@dataclass
class LiveRun:
    """What a live cell did: ``rows`` (one dict per candidate, as the benchmark writes them) when it ran,
    otherwise ``reason`` says why not. ``plan`` says what it times, in either case."""

    shape: Shape
    candidates: list
    plan: str
    rows: list = field(default_factory=list)
    reason: str = ""

    @property
    def ran(self) -> bool:
        return bool(self.rows)

    def table(self):
        """The rows as a table with the columns the chapter shows (raises if nothing ran)."""
        import pandas as pd

        if not self.ran:
            raise LabError(f"nothing was measured: {self.reason}")
        return pd.DataFrame(self.rows)[list(SHOWN[self.shape.phase])].round(4)


def plan_words(shape: Shape, candidates) -> str:
    what = (f"causal prefill, {shape.n:,} tokens" if shape.phase == "prefill"
            else f"one decode step over {shape.n:,} cached tokens, batch {shape.batch} (graph replay)")
    return f"{what}; {shape.q_heads} query / {shape.kv_heads} KV heads, d={shape.head_dim}; {', '.join(candidates)}"


def run_live(phase: str, n: int, candidates, *, batch: int = 1, q_heads: int = 28, kv_heads: int = 4,
             head_dim: int = 128, rep_ms: int = 30, rounds: int = 3, out=print, caps=None, **measure_kw) -> LiveRun:
    """Time ``candidates`` on one shape here if this machine has a GPU Triton can compile for.

    ``rep_ms`` is small on purpose: a live cell is a spot check, and a cold start already pays for
    compiling every kernel. ``measure_kw`` (device, timer, dtype) exists for the CPU test.
    """
    if phase not in SHOWN:
        raise LabError(f"phase must be 'prefill' or 'decode', got {phase!r}")
    unknown = [c for c in candidates if c not in CANDIDATES]
    if unknown:
        raise LabError(f"unknown candidate(s) {', '.join(unknown)}; choose from {', '.join(CANDIDATES)}")
    shape = Shape(phase, batch, q_heads, kv_heads, n, head_dim)
    live = LiveRun(shape, list(candidates), plan_words(shape, candidates))
    caps = caps or env.detect()
    if not measure_kw and not (caps.has_gpu and caps.triton_mode == "gpu"):
        live.reason = (f"Triton runs in interpreter mode on this machine's {caps.gpu}" if caps.has_gpu
                       else f"this machine ({caps.machine}) has no GPU")
        return live
    out(f"timing {live.plan}")
    progress = PrintedProgress(len(live.candidates), out=out)
    live.rows = measure_shape(shape, live.candidates, rep_ms=rep_ms, progress=progress, rounds=rounds, **measure_kw)
    return live
