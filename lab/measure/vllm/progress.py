"""Progress of a long device study: one line per event, with the seconds since it started and its deadline."""

from __future__ import annotations

import math
import sys
import time


class Progress:
    """One line per event on stderr, with the seconds since the study started and the deadline's margin."""

    def __init__(self, deadline_s: float | None, clock=time.monotonic):
        self.clock, self.started, self.deadline_s = clock, clock(), deadline_s

    def elapsed(self) -> float:
        return self.clock() - self.started

    def left(self) -> float:
        return math.inf if self.deadline_s is None else self.deadline_s - self.elapsed()

    def say(self, text: str) -> None:
        print(f"[vllm-load +{self.elapsed():.0f}s] {text}", file=sys.stderr, flush=True)
