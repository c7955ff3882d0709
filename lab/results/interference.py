"""A long prompt among decoders, read back: what the decoders' inter-token gaps do while it is prefilled.

Pure functions over the folders ``python -m lab vllm-interference`` and ``vllm-load --interference-*``
write (``<study>-interference/<arm slug>/chunk-<n>/trials.jsonl``, times in seconds from the long
prompt's arrival). A trial's gaps fall in three windows:

- *steady*: each decoder's last ``STEADY_GAPS`` gaps before the arrival (every decoder has streamed its
  warm-up tokens by then, so no other prefill is in those steps: plain decode of the N decoders);
- *during*: gaps that end between the arrival and the long prompt's first token (every step also carries
  a chunk of its prefill);
- *after*: gaps after that first token (N decoders plus the long request decoding).

Nothing here types a number; a folder that is not there is not measured.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

from lab.measure.vllm.arms import Arm
from lab.store import DATA_DIR, read_json, read_jsonl

STUDY = "vllm0.26-qwen2.5-7b-interference"
#: Gaps per decoder, just before the arrival, that make its steady baseline.
STEADY_GAPS = 8


@dataclass(frozen=True)
class TrialSummary:
    """One trial in numbers (milliseconds unless named otherwise)."""

    arm: str
    chunk: int | None              # the server's max_num_batched_tokens (None: vLLM's default)
    decoders: int
    long_len: int
    long_ttft_s: float
    steady_ms: float               # median steady gap
    during_median_ms: float
    during_max_ms: float
    after_median_ms: float
    during_gaps: int
    source: str

    @property
    def stall_x(self) -> float:
        """The worst gap during the prefill over the steady gap."""
        return self.during_max_ms / self.steady_ms


def gaps(chunks: list) -> list[tuple[float, float]]:
    """(end time s, gap ms) between consecutive streamed chunks of one decoder."""
    times = [t for t, _ in chunks]
    return [(b, 1000.0 * (b - a)) for a, b in zip(times, times[1:], strict=False)]


def summarize_trial(record: dict, arm: str, chunk: int | None, source: str) -> TrialSummary | None:
    """A trial's three windows: each decoder's last gaps before the long prompt arrives (steady), those that end
    while it is prefilled (during) and those after its first token (None when it did not finish or a window
    is empty)."""
    if record.get("status") != "ok" or record.get("long_ttft_s") is None:
        return None
    ttft = record["long_ttft_s"]
    steady, during, after = [], [], []
    for chunks in record["decoder_chunks"]:
        own = gaps(chunks)
        steady += [g for t, g in own if t < 0][-STEADY_GAPS:]
        during += [g for t, g in own if 0 <= t <= ttft]
        after += [g for t, g in own if t > ttft]
    if not (steady and during and after):
        return None
    return TrialSummary(arm, chunk, record["decoders"], record["long_len"], ttft,
                        statistics.median(steady), statistics.median(during), max(during),
                        statistics.median(after), len(during), source)


def read_trials(root: Path = DATA_DIR / "h200", study: str = STUDY) -> list[TrialSummary]:
    """Every finished trial of every arm and chunk size, arm by arm, smallest chunk first."""
    base = Path(root) / study
    found = []
    for folder in sorted(base.glob("*/chunk-*")) if base.is_dir() else []:
        if not (folder / "trials.jsonl").exists() or not (folder / "provenance.json").exists():
            continue
        prov = read_json(folder / "provenance.json")
        label = prov.get("arm") or Arm.parse(folder.parent.name).label
        chunk = prov.get("flags", {}).get("max_num_batched_tokens")
        for record in read_jsonl(folder / "trials.jsonl", required=("decoders", "long_len", "status")):
            summary = summarize_trial(record, label, chunk, str(folder))
            if summary is not None:
                found.append(summary)
    return sorted(found, key=lambda s: (s.arm, s.chunk or 0, s.decoders, s.long_len))


def find(trials: list[TrialSummary], arm: str, chunk: int | None, decoders: int, long_len: int) -> TrialSummary | None:
    """The trial of that arm, chunk, decoder count and long prompt (None: not measured)."""
    for trial in trials:
        if (trial.arm, trial.chunk, trial.decoders, trial.long_len) == (arm, chunk, decoders, long_len):
            return trial
    return None


def gap_series(root: Path, arm_slug: str, chunk: int, decoders: int, long_len: int,
               study: str = STUDY) -> tuple[list[tuple[float, float]], float] | None:
    """Every decoder's (end time s, gap ms) of one trial, pooled, and the long prompt's TTFT (s); None if absent."""
    path = Path(root) / study / arm_slug / f"chunk-{chunk}" / "trials.jsonl"
    if not path.exists():
        return None
    for record in read_jsonl(path, required=("decoders", "long_len", "status")):
        if (record["decoders"], record["long_len"], record["status"]) == (decoders, long_len, "ok"):
            return sorted(p for chunks in record["decoder_chunks"] for p in gaps(chunks)), record["long_ttft_s"]
    return None


@dataclass(frozen=True)
class ChunkCost:
    """What a smaller prefill chunk adds to the long prompt's TTFT, and per extra engine step.

    Each step carries one token per decoder and a chunk of the long prompt (the budget minus the decoders'
    tokens), so the prompt takes ceil(long_len / (chunk - decoders)) steps. A step of a chunk of thousands of tokens
    is bound by its matmuls' arithmetic, not by reading the weights (its weight matmuls do as many FLOPs per weight
    byte as it has rows), so the extra steps' cost is not their bytes; a sweep of whole requests does not say what
    it is."""

    ttft_added_s: float
    extra_steps: int
    small_chunk_rows: int        # tokens in one step of the small chunk: its weight matmuls' FLOPs per weight byte

    @property
    def per_step_s(self) -> float:
        return self.ttft_added_s / self.extra_steps


def _trial(root: Path, arm_slug: str, chunk: int, decoders: int, long_len: int, study: str) -> dict | None:
    path = Path(root) / study / arm_slug / f"chunk-{chunk}" / "trials.jsonl"
    if not path.exists():
        return None
    return next((r for r in read_jsonl(path, required=("decoders", "long_len", "status"))
                 if (r["decoders"], r["long_len"], r["status"]) == (decoders, long_len, "ok")), None)


def chunk_cost(arm_slug: str, decoders: int, long_len: int, small: int, large: int, root: Path = DATA_DIR / "h200",
               study: str = STUDY) -> ChunkCost | None:
    """:class:`ChunkCost` of chunks of ``small`` tokens against ``large`` for one trial (None: not measured)."""
    trials = {c: _trial(root, arm_slug, c, decoders, long_len, study) for c in (small, large)}
    if None in trials.values():
        return None
    steps = {c: -(-long_len // (c - decoders)) for c in trials}
    return ChunkCost(ttft_added_s=trials[small]["long_ttft_s"] - trials[large]["long_ttft_s"],
                     extra_steps=steps[small] - steps[large], small_chunk_rows=small)
