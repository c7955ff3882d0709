"""How finely a sweep's ITL median resolves: tokens per streamed chunk, the clock step of the record, and the spread
of a median pooled over the repetitions' gaps.

The probe (:mod:`lab.measure.vllm.probe`) times every streamed chunk on arrival and records the times to the
microsecond; a chunk of k tokens counts as k gaps of a k-th of its delay. Two arms whose medians agree to the
microsecond have either a coarse clock, chunks that carry several tokens (a server batching its stream), or a
coincidence; :func:`resolution` says which.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lab.measure.vllm.probe import per_token_gaps
from lab.results.data import DATA_DIR
from lab.store import read_jsonl


@dataclass(frozen=True)
class Resolution:
    """One length of one arm's sweep: its pooled gaps and how finely their median is known (ms unless named)."""

    gaps: int                   # decode gaps pooled over the timed repetitions
    most_tokens_per_chunk: int  # 1: every streamed chunk carried one token
    clock_step_us: float        # the step the recorded chunk times are rounded to
    median_ms: float
    low_ms: float               # bootstrap 95% interval of the median
    high_ms: float

    @property
    def half_width_us(self) -> float:
        return 1e3 * (self.high_ms - self.low_ms) / 2


def resolution(dataset: str, target_len: int, root: Path = DATA_DIR, resamples: int = 2000,
               seed: int = 0) -> Resolution | None:
    """:class:`Resolution` of ``dataset``'s timed requests at ``target_len`` (None: none on file)."""
    path = Path(root) / dataset / "measurements.jsonl"
    if not path.exists():
        return None
    records = [r for r in read_jsonl(path, required=("target_len", "rep"))
               if r["target_len"] == target_len and r["rep"] != "warm" and r.get("chunks")]
    if not records:
        return None
    chunks = [[tuple(c) for c in r["chunks"]] for r in records]
    gaps = np.array([g for c in chunks for g in per_token_gaps(c)]) * 1e3
    times = np.array([t for c in chunks for t, _ in c])
    medians = np.median(np.random.default_rng(seed).choice(gaps, (resamples, len(gaps))), axis=1)
    return Resolution(gaps=len(gaps), most_tokens_per_chunk=max(k for c in chunks for _, k in c),
                      clock_step_us=1e6 * _rounding_step(times), median_ms=float(np.median(gaps)),
                      low_ms=float(np.percentile(medians, 2.5)), high_ms=float(np.percentile(medians, 97.5)))


def _rounding_step(times: np.ndarray) -> float:
    """The step (s) every recorded time is a multiple of: 10^-d for the fewest decimals d that hold them all."""
    for decimals in range(10):
        scaled = times * 10**decimals
        if np.allclose(scaled, np.round(scaled), rtol=0, atol=1e-6):
            return 10.0**-decimals
    return 1e-9
