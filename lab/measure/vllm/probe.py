"""Measure one served model: time to first token and inter-token latency against prompt length.

Single stream, one request at a time, as the A10G reference study did. For each prompt length:
one warm-up request, then N timed repetitions. Each request streams ``/v1/completions`` with a
prompt of exactly the target length (a token-id list: random ids from a fixed seed, different for
every repetition so nothing could be served from a cache), ``ignore_eos`` so every request
generates ``max_tokens`` tokens, and ``return_token_ids`` so each streamed chunk says how many
tokens it carries. Every chunk's arrival time is kept.

Every measurement is appended to a JSONL file the moment it is taken; a rerun skips what the file
already holds. A failure at one length (HTTP error, out of memory, timeout) is recorded and the
sweep moves on; if the server itself died, the sweep stops with a clear error and keeps the data.

:func:`stream_completion` is the one request primitive; ``lab.measure.capture`` reuses it for profiled
requests.
"""

from __future__ import annotations

import http.client
import json
import math
import random
import sys
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from lab import LabError
from lab.measure.vllm.replies import (  # noqa: F401  (StreamError: callers import it from here)
    StreamError,
    check_usage,
    error_message,
    event_tokens,
    parse_event,
)
from lab.measure.vllm.server import request
from lab.store import append_jsonl, read_jsonl

#: Token ids are drawn from this range: real words of the Qwen2.5 vocabulary, clear of the special
#: tokens that start at 151643. (With random weights any id would do; with real weights this keeps
#: the prompt ordinary text-like input.)
TOKEN_ID_RANGE = (1000, 150000)
#: The first inter-token gaps still carry the tail of the prefill and the first scheduler steps.
DROP_FIRST_GAPS = 2


@dataclass
class StreamResult:
    """One streamed completion, timed from the moment the request was sent."""

    chunks: list[tuple[float, int]]      # (seconds since sent, tokens in the chunk) for each chunk
    prompt_tokens: int | None            # as the server counted them (usage), None if it did not say
    completion_tokens: int | None
    finish_reason: str | None
    total_s: float

    @property
    def ttft_s(self) -> float:
        return self.chunks[0][0]

    @property
    def n_tokens(self) -> int:
        return sum(k for _, k in self.chunks)


def _send(conn, body: dict, timeout: float):
    """POST the request; the response once its status line arrived (StreamError if it is not 200)."""
    try:
        conn.request("POST", "/v1/completions", body=json.dumps(body).encode(),
                     headers={"Content-Type": "application/json", "Accept": "text/event-stream"})
        resp = conn.getresponse()
    except TimeoutError:
        raise StreamError("timeout", f"no response within {timeout:.0f} s") from None
    except (OSError, http.client.HTTPException) as exc:
        raise StreamError("disconnected", f"request failed: {exc or type(exc).__name__}") from None
    if resp.status != 200:
        try:
            body = resp.read()
        except (OSError, http.client.HTTPException, ValueError):
            body = b"(the body was cut off)"
        raise StreamError("http", f"HTTP {resp.status}: {error_message(body)}")
    return resp


def _next_line(resp, chunks: list, timeout: float) -> bytes:
    try:
        line = resp.readline()
    except TimeoutError:
        raise StreamError("timeout", f"stream stalled for {timeout:.0f} s after {len(chunks)} chunks", chunks) from None
    except (OSError, http.client.HTTPException, ValueError) as exc:  # ValueError: a garbled chunk size
        raise StreamError("disconnected", f"connection lost after {len(chunks)} chunks "
                          f"({type(exc).__name__})", chunks) from None
    if not line:
        raise StreamError("disconnected", f"stream ended without [DONE] after {len(chunks)} chunks", chunks)
    return line


@dataclass
class _Tally:
    """What the stream said so far: chunk times and token counts, usage, finish reason."""

    chunks: list = field(default_factory=list)
    usage: dict | None = None
    finish: str | None = None

    def add(self, event: dict, now: float) -> None:
        usage = check_usage(event.get("usage"), self.chunks)
        self.usage = usage or self.usage
        count, finish = event_tokens(event, self.chunks)
        if count:
            self.chunks.append((now, count))
        self.finish = finish or self.finish


def stream_completion(base_url: str, model: str, prompt: list[int], max_tokens: int, *,
                      timeout: float = 600.0, ignore_eos: bool = True, extra: dict | None = None) -> StreamResult:
    """Send one streamed ``/v1/completions`` request and time every chunk; raise StreamError on failure.

    ``prompt`` is a list of token ids (the server may run with ``--skip-tokenizer-init``), decoding
    is greedy, ``extra`` adds or overrides request fields. ``timeout`` bounds the whole request.
    Times are taken when a chunk's line has arrived, before it is parsed.
    """
    parts = urllib.parse.urlsplit(base_url)
    body = {"model": model, "prompt": list(prompt), "max_tokens": int(max_tokens), "temperature": 0.0,
            "repetition_penalty": 1.0, "ignore_eos": ignore_eos, "stream": True, "return_token_ids": True,
            "stream_options": {"include_usage": True}, **(extra or {})}
    conn = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout)
    tally = _Tally()
    started = time.perf_counter()
    try:
        resp = _send(conn, body, timeout)
        while True:
            line = _next_line(resp, tally.chunks, timeout)
            now = time.perf_counter() - started
            if now > timeout:
                raise StreamError("timeout", f"request took longer than {timeout:.0f} s", tally.chunks)
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                break
            tally.add(parse_event(data, tally.chunks), now)
    finally:
        conn.close()
    if not tally.chunks:
        raise StreamError("protocol", "the stream finished without any generated token")
    usage = tally.usage or {}
    return StreamResult(chunks=tally.chunks, prompt_tokens=usage.get("prompt_tokens"),
                        completion_tokens=usage.get("completion_tokens"), finish_reason=tally.finish,
                        total_s=time.perf_counter() - started)


# --- turning chunk times into latencies ------------------------------------------------------------

def per_token_gaps(chunks: list[tuple[float, int]], drop_first: int = DROP_FIRST_GAPS) -> list[float]:
    """Inter-token latencies in seconds: a chunk of k tokens after a gap g counts as k gaps of g/k.

    The first chunk's arrival is the TTFT, not a gap; the first ``drop_first`` gaps are dropped.
    """
    gaps = []
    for (before, _), (at, count) in zip(chunks, chunks[1:], strict=False):
        gaps.extend([(at - before) / count] * count)
    return gaps[drop_first:]


def percentile(values: list[float], q: float) -> float | None:
    """Linear-interpolation percentile (numpy's default), q in [0, 100]; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def itl_summary(gaps: list[float]) -> dict:
    """Median, p10 and p90 inter-token latency in milliseconds."""
    def ms(q):
        value = percentile(gaps, q)
        return None if value is None else round(value * 1000, 4)
    return {"itl_ms": ms(50), "itl_p10_ms": ms(10), "itl_p90_ms": ms(90)}


def make_prompt(length: int, seed: int, id_range: tuple[int, int] = TOKEN_ID_RANGE) -> list[int]:
    """``length`` random token ids from a fixed seed (the same seed always gives the same prompt)."""
    rng = random.Random(seed)
    return [rng.randrange(*id_range) for _ in range(length)]


def prompt_seed(base_seed: int, target_len: int, rep: int | str) -> int:
    """A distinct, reproducible seed per (length, repetition); the warm-up has its own."""
    rep_index = -1 if rep == "warm" else int(rep)
    return (base_seed * 1_000_003 + target_len) * 1009 + rep_index + 1


# --- the sweep over lengths --------------------------------------------------------------------------

class Endpoint(Protocol):
    """What the probe needs from a server (a :class:`lab.measure.vllm.server.Server` is one)."""

    base_url: str
    model_name: str

    def alive(self) -> bool: ...
    def died_message(self, when: str) -> str: ...


@dataclass
class RemoteEndpoint:
    """A server someone else started: alive while ``/health`` answers 200."""

    base_url: str
    model_name: str

    def alive(self) -> bool:
        try:
            return request(self.base_url, "/health", timeout=5)[0] == 200
        except LabError:
            return False

    def died_message(self, when: str) -> str:
        return f"the vLLM server at {self.base_url} stopped answering {when}"


@dataclass
class ProbePlan:
    """Which requests to make. ``run_key`` identifies the arm; a rerun into the same file must match it."""

    lengths: list[int]
    reps: int = 3
    max_tokens: int = 64
    warmup_tokens: int = 16
    long_reps: int | None = None         # fewer repetitions for the longest prompts...
    long_from: int | None = None         # ...from this length on
    seed: int = 0
    timeout_s: float = 600.0
    run_key: dict = field(default_factory=dict)

    def reps_for(self, length: int) -> int:
        if self.long_reps is not None and self.long_from is not None and length >= self.long_from:
            return self.long_reps
        return self.reps


def read_records(path: Path, required=("target_len", "rep")) -> list[dict]:
    """Measurements already in a JSONL file (none if it does not exist; a torn last line is skipped).

    ``required``: the fields every record must carry (a sweep's by default; the concurrency sweep names its own).
    """

    path = Path(path)
    records = read_jsonl(path, required=required) if path.exists() else []
    for number, record in enumerate(records, 1):
        for name in set(required) & {"rep", *_COUNT_FIELDS}:
            value = record[name]
            if not (value == "warm" and name == "rep" or isinstance(value, int) and not isinstance(value, bool)
                    and value >= (0 if name == "rep" else 1)):
                raise LabError(f"{path}: record {number} has {name} {json.dumps(value)[:40]}; expected "
                               f"{'a repetition number or warm' if name == 'rep' else 'a positive integer'} "
                               "(delete the line or the file to measure it again)")
    return records


#: Record fields that are token or request counts: a resume sorts and compares them, so they must be integers.
_COUNT_FIELDS = ("target_len", "context", "concurrency", "decoders", "long_len")


def check_same_run(records: list[dict], run_key: dict, path: Path, what: str = "measurements") -> None:
    """Refuse to resume into a file of another run: a stored record whose run_key differs from this one."""
    for record in records:
        theirs = record.get("run_key")
        if theirs is not None and theirs != run_key:
            diff = sorted(k for k in set(theirs) | set(run_key) if theirs.get(k) != run_key.get(k)) \
                if isinstance(theirs, dict) else ["run_key"]
            raise LabError(f"{path} holds {what} of a different run (differs in {', '.join(diff)}); "
                           "choose another --out folder or delete that file")


def check_resume(path: Path, run_key: dict, required=("target_len", "rep"), what: str = "measurements") -> list[dict]:
    """The records a run may resume from ``path``, checked before the run writes anything or starts a server:
    a file of another run (or with a record that is no record) is refused here, with the folder untouched."""
    records = read_records(path, required=required)
    check_same_run(records, run_key, path, what)
    return records


def _record(plan: ProbePlan, target_len: int, rep, prompt_len: int, seed: int) -> dict:
    return {"target_len": target_len, "rep": rep, "prompt_len": prompt_len, "seed": seed,
            "max_tokens": plan.warmup_tokens if rep == "warm" else plan.max_tokens,
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "run_key": plan.run_key}


def measure_once(endpoint: Endpoint, plan: ProbePlan, target_len: int, rep) -> dict:
    """One request at one length; returns the record (status ok or error). Never raises StreamError."""
    seed = prompt_seed(plan.seed, target_len, rep)
    prompt = make_prompt(target_len, seed)
    record = _record(plan, target_len, rep, len(prompt), seed)
    try:
        result = stream_completion(endpoint.base_url, endpoint.model_name, prompt, record["max_tokens"],
                                   timeout=plan.timeout_s)
    except StreamError as exc:
        record.update(status="error", error_kind=exc.kind, error=str(exc),
                      chunks=[[round(t, 6), k] for t, k in exc.chunks])
        return record
    actual = result.prompt_tokens if result.prompt_tokens is not None else len(prompt)
    record.update(status="ok", actual_len=actual, ttft_s=round(result.ttft_s, 6), n_tokens=result.n_tokens,
                  completion_tokens=result.completion_tokens, finish_reason=result.finish_reason,
                  total_s=round(result.total_s, 6), **itl_summary(per_token_gaps(result.chunks)),
                  chunks=[[round(t, 6), k] for t, k in result.chunks])
    return record


class ProbeEvents:
    """What :func:`run_probe` reports as it goes; the default reports nothing. A hook may raise to stop
    the probe (a run panel's Stop): what was kept before stays in the file."""

    def begin(self, todo: list[tuple[int, list[int]]]) -> None:
        """Before the first request: each length to measure, with the repetitions it still needs."""

    def request(self, length: int, rep, reps: int) -> None:
        """Before each request: ``rep`` is "warm" or a repetition's index, of ``reps`` at this length."""

    def measured(self, record: dict) -> None:
        """After each request, before its record is kept: raising here drops it."""

    def failed(self, record: dict, skipped: int) -> None:
        """A request failed, the server still up: the length's other ``skipped`` requests are not sent."""

    def length_done(self, length: int, records: list[dict]) -> None:
        """After a length's last request; ``records``: every record in the file so far."""

    def end(self) -> None:
        """After the last request, or when the probe stopped early."""


class ProgressBar(ProbeEvents):
    """The command line's progress, in prompt tokens sent: long prompts take longer, so the ETA weighs them."""

    def __init__(self, enabled: bool = True):
        self.enabled, self.bar = enabled, None

    def begin(self, todo):
        from tqdm.auto import tqdm

        # in a log file (not a terminal) a line every 30 s is enough
        self.bar = tqdm(total=sum(length * (len(missing) + 1) for length, missing in todo), unit="tok",
                        unit_scale=True, disable=not self.enabled, desc="prompts", dynamic_ncols=True,
                        mininterval=1.0 if sys.stderr.isatty() else 30.0)

    def request(self, length, rep, reps):
        self.bar.set_postfix_str(f"{length} tokens, {'warm-up' if rep == 'warm' else f'rep {rep + 1}'}",
                                 refresh=False)  # the bar redraws on its own schedule

    def measured(self, record):
        self.bar.update(record["target_len"])

    def failed(self, record, skipped):
        self.bar.write(f"  {record['target_len']} tokens: {record['error_kind']}: {record['error']} (moving on)")
        self.bar.update(record["target_len"] * skipped)

    def end(self):
        if self.bar is not None:
            self.bar.close()


def run_probe(endpoint: Endpoint, plan: ProbePlan, jsonl_path: Path, progress: bool = True,
              events: ProbeEvents | None = None) -> list[dict]:
    """Measure every length of ``plan`` not yet in ``jsonl_path``; return all records in the file.

    ``events`` hears of every request (default: a progress bar, shown if ``progress``). Raises
    LabError (after recording the failure) if the server died; everything measured is kept.
    """
    jsonl_path = Path(jsonl_path)

    events = events or ProgressBar(progress)
    records = check_resume(jsonl_path, plan.run_key)
    done = {(r["target_len"], r["rep"]) for r in records if _usable(r) and r.get("rep") != "warm"}
    todo = []
    for length in sorted(set(plan.lengths)):  # shortest first: a failure at the long end costs least
        missing = [rep for rep in range(plan.reps_for(length)) if (length, rep) not in done]
        if missing:
            todo.append((length, missing))
    if not todo:
        return records
    events.begin(todo)
    try:
        for length, missing in todo:
            for sent, rep in enumerate(["warm", *missing], start=1):
                events.request(length, rep, plan.reps_for(length))
                record = measure_once(endpoint, plan, length, rep)
                events.measured(record)
                if record["status"] != "ok" and _server_gone(endpoint, record["error_kind"]):
                    record["error_kind"] = "server_died"
                    append_jsonl(jsonl_path, record)
                    raise LabError(endpoint.died_message(f"during a request of {length} tokens"))
                append_jsonl(jsonl_path, record)
                records.append(record)
                if record["status"] != "ok":
                    events.failed(record, skipped=len(missing) + 1 - sent)
                    break
            events.length_done(length, records)
    finally:
        events.end()
    return records


def _server_gone(endpoint: Endpoint, error_kind: str, grace_s: float = 5.0) -> bool:
    """After a failed request: is the server dead? A crash can break the connection a moment before
    the process exits, so a broken or stalled stream gets a few seconds to show which it was (a reply that
    arrived whole, however wrong, came from a live server)."""
    deadline = time.monotonic() + (grace_s if error_kind in ("disconnected", "timeout") else 0)
    while True:
        if not endpoint.alive():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.25)


# --- one row per length ------------------------------------------------------------------------------

def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def unusable(record: dict) -> str | None:
    """Why a record marked ok cannot be summarized (a bad reply stored by an older lab, a hand edit), or None.

    Such a record counts as a failed request: it is measured again on a resume and never crashes the summary.
    """
    actual, ttft, chunks = record.get("actual_len"), record.get("ttft_s"), record.get("chunks")
    if isinstance(actual, bool) or not isinstance(actual, int) or actual < 1:
        return f"stored record unusable: actual_len is {json.dumps(actual)[:40]}; expected a positive token count"
    if not _finite(ttft) or ttft < 0:
        return f"stored record unusable: ttft_s is {json.dumps(ttft)[:40]}; expected seconds"
    if not isinstance(chunks, list) or not chunks or not all(
            isinstance(c, list) and len(c) == 2 and _finite(c[0]) and _finite(c[1]) and c[1] > 0 for c in chunks):
        return "stored record unusable: chunks is not a list of [seconds, tokens] pairs"
    return None


def _usable(record: dict) -> bool:
    return record.get("status") == "ok" and unusable(record) is None


def _failure(record: dict) -> str | None:
    if record.get("status") != "ok":
        return record.get("error")
    return unusable(record)


def summarize(records: list[dict], arm: str, backend: str, reps_for=None) -> list[dict]:
    """Rows of sweep.csv: per target length, the median TTFT over repetitions and the ITL over all
    their decode gaps (pooled). Lengths that failed get a row with status 'error' and no numbers.

    ``reps_for(length)``: the repetitions asked for (ProbePlan.reps_for); a length with fewer measured
    (a run cut short by Ctrl-C) is 'partial', never 'ok'."""
    by_length: dict[int, list[dict]] = {}
    for record in records:
        by_length.setdefault(int(record["target_len"]), []).append(record)
    rows = []
    for length in sorted(by_length):
        ok = [r for r in by_length[length] if _usable(r) and r.get("rep") != "warm"]
        ok_reps = {r["rep"] for r in ok}
        # a failure counts unless a rerun measured that repetition; a failed warm-up only if nothing else ran
        failed = [r for r in by_length[length] if not _usable(r) and r.get("rep") != "warm"
                  and r.get("rep") not in ok_reps]
        if not ok and not failed:
            failed = [r for r in by_length[length] if not _usable(r)]
        if not ok and not failed:
            continue  # only a warm-up so far
        short = reps_for is not None and len(ok_reps) < reps_for(length)
        row = {"arm": arm, "backend": backend, "target_len": length, "actual_len": None, "ttft_s": None,
               "prefill_ms_per_token": None, "itl_ms": None, "itl_p10_ms": None, "itl_p90_ms": None,
               "ttft_min_s": None, "ttft_max_s": None, "reps": len(ok),
               "status": "ok" if ok and not failed and not short else ("partial" if ok else "error"),
               "error": _failure(failed[-1]) if failed else
               (f"{len(ok_reps)} of {reps_for(length)} repetitions measured" if short else None)}
        if ok:
            ttfts = [r["ttft_s"] for r in ok]
            actual = int(round(percentile([r["actual_len"] for r in ok], 50)))
            ttft = round(percentile(ttfts, 50), 6)
            gaps = [g for r in ok for g in per_token_gaps([tuple(c) for c in r["chunks"]])]
            row.update(actual_len=actual, ttft_s=ttft, prefill_ms_per_token=round(ttft * 1000 / actual, 6),
                       ttft_min_s=min(ttfts), ttft_max_s=max(ttfts), **itl_summary(gaps))
        rows.append(row)
    return rows
