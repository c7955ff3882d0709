"""Decode under load: inter-token latency and total decode throughput against the number of concurrent requests.

For each context length and concurrency N, N streamed requests are sent at once (distinct random
token-id prompts, so nothing is shared through a prefix; prefix caching is off anyway; ``ignore_eos``).
Every streamed chunk of every request is timed on one clock. The *steady state* is the window from
the last request's first token (every prefill done) to the first request's finish, where all admitted
requests decode together: its median inter-token gap (ITL), its total decode tokens per second, and
how many requests were decoding in it (``admitted``). The point ends, and every stream is closed (vLLM
aborts a request whose client went away), as soon as the window holds ``--steps`` steps, when a
request finishes, or at ``--point-timeout``.

vLLM may not admit all N (64 requests of 32k tokens need more KV cache than an H200 holds): when no
request has got its first token for ``--stall`` seconds while the others decode, the waiting ones
count as not admitted and the window is measured without them.

Example (an H200, vLLM 0.26, random weights in the Qwen2.5-7B shape)::

    python -m lab vllm-concurrency --backend FLASH_ATTN --fa-version 3 --contexts 2048,32768 \\
        --concurrency 1,4,16,64 --max-num-batched-tokens 8192

The folder (default ``data/local/vllm-concurrency/<arm>``) gets ``measurements.jsonl`` (a record per
point, every request's chunk times, written as the point ends), ``concurrency.csv`` (a row per point),
``server.log`` and ``provenance.json``. A rerun into the same folder skips the points already measured.

Why this client stays beside ``vllm bench serve`` (vLLM 0.26, vllm/benchmarks/serve.py), which runs the
open-loop load study: ``--max-concurrency N`` only caps the requests in flight with a semaphore, and every
request runs to its output length. Its ITL is pooled over each request's whole life (one gap per streamed
chunk), so it mixes in the steps that carry other requests' prefill chunks and the steps in which fewer
than N are decoding; its output throughput divides all output tokens by the whole run's
duration, prefills included. This client measures the quantity the decode floor predicts: the window in
which exactly the admitted requests decode together, with per-token gaps (a chunk of k tokens is k gaps),
and it stops once that window is long enough instead of decoding every request to the end. And it says
how many of the N requests vLLM admitted: bench serve counts concurrency from the client's side, so a
request waiting for KV-cache blocks shows only as a long TTFT, where here it is detected by the stall
and left out of the window.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import shlex
import socket
import sys
import threading
import time
import urllib.parse
from dataclasses import dataclass, field, replace
from pathlib import Path

from lab import LabError, env
from lab.cli import fraction, path_arg, positive_count, positive_number, text_arg
from lab.folders import check_output, dataset_lock
from lab.measure.vllm import arms, sweep
from lab.measure.vllm.probe import Endpoint, check_resume, make_prompt, percentile, read_records, stream_completion
from lab.measure.vllm.replies import StreamError, check_usage, error_message, event_tokens, parse_event, queue_counts
from lab.measure.vllm.server import DEFAULT_READY_TIMEOUT_S, Server, request
from lab.measure.vllm.sweep import DEFAULT_MODEL, dry_run_line, parse_lengths, resolve_max_model_len, resolve_model
from lab.store import LOCAL_DIR, append_jsonl, new_provenance, write_csv, write_provenance

DEFAULT_CONTEXTS = "2048,32768"
DEFAULT_CONCURRENCY = "1,4,16,64"
#: A window shorter than this many decode steps is not a steady state.
MIN_WINDOW_STEPS = 8
#: What every point's JSONL record carries (a resume refuses a line without them).
RECORD_FIELDS = ("context", "concurrency")
#: Columns of concurrency.csv, in order.
COLUMNS = ["arm", "context", "concurrency", "admitted", "itl_ms", "decode_tok_s", "window_s", "steps", "ok",
           "itl_p90_ms", "ttft_first_s", "ttft_last_s", "stop", "status", "error"]


# --- one streamed request on a shared clock, cancellable from outside -------------------------------

class Stream(threading.Thread):
    """One streamed ``/v1/completions`` request; ``chunks`` holds (clock time, tokens) of every chunk.

    Unlike :func:`lab.measure.vllm.probe.stream_completion` (one request, times relative to its own
    start) the times here are on the caller's clock, so N requests line up, and :meth:`cancel` closes
    the connection from another thread (a queued request may never send a byte to notice a flag).
    ``notify`` is called (with no argument) after every chunk and when the stream ends.
    """

    def __init__(self, base_url: str, model: str, prompt: list[int], max_tokens: int, notify, *,
                 clock=time.perf_counter, timeout: float = 600.0):
        super().__init__(daemon=True)
        self.url = urllib.parse.urlsplit(base_url)
        self.body = json.dumps({"model": model, "prompt": prompt, "max_tokens": int(max_tokens), "temperature": 0.0,
                                "ignore_eos": True, "stream": True, "return_token_ids": True}).encode()
        self.notify, self.clock, self.timeout = notify, clock, timeout
        self.chunks: list[tuple[float, int]] = []
        self.finished = False          # the server ended the stream ([DONE]): max_tokens reached
        self.error: str | None = None  # why it failed (None if it finished or was cancelled)
        self.cancelled = False
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            if self._sock is not None:
                with contextlib.suppress(OSError):
                    self._sock.shutdown(socket.SHUT_RDWR)  # wakes the blocked read in run()

    def run(self) -> None:
        conn = http.client.HTTPConnection(self.url.hostname, self.url.port or 80, timeout=self.timeout)
        try:
            conn.connect()
            with self._lock:
                self._sock = conn.sock
                if self.cancelled:
                    return
            conn.request("POST", "/v1/completions", body=self.body, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            if resp.status != 200:
                self.error = f"HTTP {resp.status}: {error_message(resp.read()[:2000])}"
                return
            self._read(resp)
        except (OSError, http.client.HTTPException, ValueError) as exc:
            if not self.cancelled:
                self.error = f"{type(exc).__name__}: {exc}"
        finally:
            conn.close()
            self.notify()

    def _read(self, resp) -> None:
        while True:
            line = resp.readline()
            now = self.clock()
            if not line:
                if not self.cancelled:
                    self.error = f"stream ended without [DONE] after {len(self.chunks)} chunks"
                return
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                self.finished = True
                return
            try:  # checked where it enters, as the probe checks its replies
                event = parse_event(data)
                check_usage(event.get("usage"))
                count, _ = event_tokens(event)
            except StreamError as exc:
                self.error = f"{exc.kind}: {exc}"
                return
            if count:
                self.chunks.append((now, count))
                self.notify()


# --- one point: N requests at once ------------------------------------------------------------------

@dataclass
class PointPlan:
    """How one (context, concurrency) point is run and when it stops."""

    context: int
    concurrency: int
    max_tokens: int = 2048
    steps: int = 64              # decode steps wanted in the steady window
    stall_s: float = 10.0        # no new first token for this long while others decode: the rest wait for KV
    timeout_s: float = 180.0     # wall-clock cap of the point
    seed: int = 0
    run_key: dict = field(default_factory=dict)


def point_seed(base_seed: int, context: int, concurrency: int, index: int) -> int:
    """A distinct, reproducible prompt seed per request of a point."""
    return ((base_seed * 1_000_003 + context) * 1009 + concurrency) * 10_007 + index


def steady_window(chunks: list[list], finished: list[bool], stop_at: float) -> dict:
    """The steady state of one point from its streams' chunk times (a pure function).

    ``chunks[i]``: [time, tokens] of request i's chunks on one clock; ``finished[i]``: whether it ran to
    max_tokens; ``stop_at``: when the streams were closed. The window runs from the last first token to
    the first finish (or ``stop_at``). Returns admitted, itl_ms, itl_p90_ms, decode_tok_s, window_s,
    steps (median decode steps per request in the window), ttft_first_s and ttft_last_s.
    """
    started = [c for c in chunks if c]
    out = {"admitted": len(started), "itl_ms": None, "itl_p90_ms": None, "decode_tok_s": None, "window_s": 0.0,
           "steps": 0, "ttft_first_s": None, "ttft_last_s": None}
    if not started:
        return out
    firsts = [c[0][0] for c in started]
    start = max(firsts)
    ends = [c[-1][0] for c, done in zip(chunks, finished, strict=True) if c and done]
    end = min([stop_at, *ends])
    gaps, tokens, steps = [], 0, []
    for stream in started:
        inside = [(t, k) for t, k in stream if start < t <= end]
        tokens += sum(k for _, k in inside)
        steps.append(sum(k for _, k in inside))
        for (before, _), (at, count) in zip(stream, stream[1:], strict=False):
            if before >= start and at <= end:
                gaps.extend([(at - before) / count] * count)
    window = max(end - start, 0.0)
    out.update(window_s=round(window, 6), steps=int(percentile(steps, 50)), ttft_first_s=round(min(firsts), 6),
               ttft_last_s=round(start, 6))
    if gaps:
        out.update(itl_ms=round(percentile(gaps, 50) * 1000, 4), itl_p90_ms=round(percentile(gaps, 90) * 1000, 4))
    if window > 0:
        out["decode_tok_s"] = round(tokens / window, 2)
    return out


def stop_reason(streams: list[Stream], plan: PointPlan, now: float, started_at: float) -> str | None:
    """Why the point should end now, or None to keep waiting. Read under the point's lock."""
    if any(s.finished for s in streams):
        return "finished"          # the first finish closes the window
    if all(not s.is_alive() for s in streams):
        return "ended"             # every stream failed or closed
    firsts = [s.chunks[0][0] for s in streams if s.chunks]
    if firsts:
        start = max(firsts)
        # the median request: one preempted by vLLM (KV full) must not hold the point open
        steps = percentile([sum(k for t, k in s.chunks if t > start) for s in streams if s.chunks], 50)
        if steps >= plan.steps and (len(firsts) == len(streams) or now - start >= plan.stall_s):
            return "steady" if len(firsts) == len(streams) else "kv-limited"
    if now - started_at >= plan.timeout_s:
        return "timeout"
    return None


def run_point(endpoint: Endpoint, plan: PointPlan, clock=time.perf_counter) -> dict:
    """Send ``plan.concurrency`` requests at once, stop at the first :func:`stop_reason`, return the record."""
    changed = threading.Condition()

    def notify() -> None:
        with changed:
            changed.notify_all()

    prompts = [make_prompt(plan.context, point_seed(plan.seed, plan.context, plan.concurrency, i))
               for i in range(plan.concurrency)]
    streams = [Stream(endpoint.base_url, endpoint.model_name, p, plan.max_tokens, notify, clock=clock,
                      timeout=plan.timeout_s + 60) for p in prompts]
    started_at = clock()
    for stream in streams:
        stream.start()
    with changed:
        while (reason := stop_reason(streams, plan, clock(), started_at)) is None:
            # woken by every chunk; the timeout only lets the stall and the cap be noticed when nothing arrives
            changed.wait(timeout=min(plan.stall_s, plan.timeout_s) / 4)
        stop_at = clock()
    for stream in streams:
        stream.cancel()
    for stream in streams:
        stream.join(timeout=60)
    chunks = [[[round(t - started_at, 5), k] for t, k in s.chunks] for s in streams]
    finished = [s.finished for s in streams]
    errors = [s.error for s in streams if s.error]
    if reason == "timeout" and not any(chunks):   # a silent server: no request got one token
        errors.append(f"timeout: no request got a first token within {plan.timeout_s:g} s")
    window = steady_window(chunks, finished, stop_at - started_at)
    usable = window["steps"] >= MIN_WINDOW_STEPS and window["itl_ms"] is not None
    status = "error" if errors and not usable else ("ok" if usable else "no_window")
    return {"context": plan.context, "concurrency": plan.concurrency, "prompt_len": plan.context,
            "max_tokens": plan.max_tokens, "seed": plan.seed, "stop": reason, "status": status,
            "ok": usable and not errors, "error": errors[0] if errors else None, "errors": len(errors),
            "wall_s": round(stop_at - started_at, 3), **window,
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "run_key": plan.run_key,
            "requests": [{"chunks": c, "finished": f, "error": s.error} for c, f, s in zip(chunks, finished, streams,
                                                                                          strict=True)]}


def wait_idle(base_url: str, timeout_s: float = 60.0) -> bool | None:
    """Wait until the server has no running or waiting request (aborts take a moment); None if it has no /metrics."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            status, text = request(base_url, "/metrics", timeout=10)
        except LabError:
            return None
        counts = queue_counts(text) if status == 200 else None  # checked where it enters (lab.measure.vllm.replies)
        if counts is None:
            return None
        if sum(counts) == 0:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)


# --- the sweep over points --------------------------------------------------------------------------

def parse_limits(text: str | None) -> dict[int, int]:
    """``"32768:4"`` -> {32768: 4}: from that context on, concurrency at most 4."""
    limits = {}
    for part in (text or "").replace(" ", "").split(","):
        if not part:
            continue
        try:
            context, most = (int(x) for x in part.split(":"))
        except ValueError:
            context = most = 0
        if min(context, most) < 1:
            raise LabError(f"--limit {text!r}: expected CONTEXT:MAX_CONCURRENCY pairs of positive integers such as 32768:4")
        limits[context] = most
    return limits


def plan_points(contexts: list[int], concurrencies: list[int], limits: dict[int, int]) -> list[tuple[int, int]]:
    """(context, concurrency) in run order: shortest context first, then fewest requests."""
    def allowed(context: int, n: int) -> bool:
        return all(n <= most for start, most in limits.items() if context >= start)
    return [(c, n) for c in sorted(contexts) for n in sorted(concurrencies) if allowed(c, n)]


def run_points(endpoint: Endpoint, points: list[tuple[int, int]], template: PointPlan, jsonl: Path,
               say=print) -> list[dict]:
    """Measure every point not yet in ``jsonl`` (appending each as it ends); return every record there.

    A point that errored or whose server died is measured again on a rerun; one that ran is not.
    Raises LabError (after recording the point) when the server died during it.
    """
    records = check_resume(jsonl, template.run_key, RECORD_FIELDS, "points")
    done = {(r["context"], r["concurrency"]) for r in records if r.get("status") in ("ok", "no_window")}
    for context, n in points:
        if (context, n) in done:
            continue
        say(f"  point: {n} x {context} tokens ...")
        record = run_point(endpoint, replace(template, context=context, concurrency=n))
        if record["errors"] and not endpoint.alive():
            record["status"] = "server_died"
            append_jsonl(jsonl, record)
            raise LabError(endpoint.died_message(f"during {n} requests of {context} tokens"))
        append_jsonl(jsonl, record)
        records.append(record)
        idle = wait_idle(endpoint.base_url)
        say(f"  point: {n} x {context} tokens: {record['status']} ({record['stop']}), admitted {record['admitted']}, "
            f"ITL {record['itl_ms']} ms, {record['decode_tok_s']} tok/s over {record['window_s']:.2f} s, "
            f"{record['steps']} steps, {record['wall_s']:.0f} s{'' if idle is not False else ' (server still busy)'}")
    return records


def summarize(records: list[dict], arm: str) -> list[dict]:
    """Rows of concurrency.csv: the last record of each point (a rerun's replaces an earlier failure)."""
    last = {(r["context"], r["concurrency"]): r for r in records}
    return [{"arm": arm, **{k: r.get(k) for k in COLUMNS if k != "arm"}} for _, r in sorted(last.items())]


# --- command line -----------------------------------------------------------------------------------

def add_arguments(parser) -> None:
    arms.add_arguments(parser)
    parser.add_argument("--contexts", default=DEFAULT_CONTEXTS, help=f"prompt lengths in tokens (default {DEFAULT_CONTEXTS})")
    parser.add_argument("--concurrency", default=DEFAULT_CONCURRENCY,
                        help=f"numbers of requests sent at once (default {DEFAULT_CONCURRENCY})")
    parser.add_argument("--limit", help="CONTEXT:MAX pairs: from that context on, at most MAX requests (e.g. 32768:4)")
    parser.add_argument("--max-tokens", type=positive_count, default=2048,
                        help="tokens each request may generate; points stop earlier, once steady (default 2048)")
    parser.add_argument("--steps", type=positive_count, default=64, help="decode steps wanted in the steady window (default 64)")
    parser.add_argument("--stall", type=positive_number, default=10.0,
                        help="seconds without a new first token after which waiting requests count as not admitted (default 10)")
    parser.add_argument("--point-timeout", type=positive_number, default=180.0, help="wall-clock cap of one point in seconds (default 180)")
    parser.add_argument("--model", type=text_arg, default=DEFAULT_MODEL, help=f"model folder with config.json (default {DEFAULT_MODEL})")
    parser.add_argument("--load-format", default="dummy", help="'dummy' (random weights; default) or 'auto'")
    parser.add_argument("--out", type=path_arg, help="dataset folder (default data/local/vllm-concurrency/<arm>)")
    parser.add_argument("--max-model-len", type=positive_count, help="vLLM --max-model-len (default: longest context + max tokens)")
    parser.add_argument("--max-num-batched-tokens", type=positive_count, help="chunked-prefill chunk size (default: vLLM's own)")
    parser.add_argument("--gpu-memory-utilization", type=fraction, default=0.85, help="vLLM memory fraction (default 0.85)")
    parser.add_argument("--ready-timeout", type=positive_number, default=DEFAULT_READY_TIMEOUT_S,
                        help=f"seconds to wait for the server (default {DEFAULT_READY_TIMEOUT_S:.0f})")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random prompts (default 0)")
    parser.add_argument("--vllm-version", help="build the command for this vLLM release (default: the installed one)")
    parser.add_argument("--dry-run", action="store_true", help="print the server command and the points, start nothing")


def _check_args(args, contexts: list[int], model: str) -> int:
    if min(args.max_tokens, args.steps) < MIN_WINDOW_STEPS or args.steps >= args.max_tokens:
        raise LabError(f"--steps must be at least {MIN_WINDOW_STEPS} and below --max-tokens ({args.max_tokens})")
    return resolve_max_model_len(args.max_model_len, contexts, args.max_tokens, model)


def main(args) -> int:
    contexts = parse_lengths(args.contexts, "--contexts")
    points = plan_points(contexts, parse_lengths(args.concurrency, "--concurrency"), parse_limits(args.limit))
    if not points:
        raise LabError(f"--limit {args.limit}: leaves no point to measure; raise its limits or drop it")
    model = resolve_model(args.model)
    max_model_len = _check_args(args, contexts, model)

    out = (args.out or LOCAL_DIR / "vllm-concurrency" / arms.from_args(args).slug).resolve()
    check_output(out, "--out", [("--model", Path(model) if Path(model).is_dir() else None)])
    if args.dry_run:
        print(dry_run_line(args, model, max_model_len))
        for context, n in points:
            print(f"  {n:>4} requests x {context:>6} tokens: up to {args.max_tokens} tokens each, stop after "
                  f"{args.steps} steady steps or {args.point_timeout:.0f} s")
        print(f"  -> {out}")
        return 0

    caps = env.detect()
    if not caps.has_gpu:
        raise LabError("no CUDA GPU on this machine: a concurrency sweep needs one (--dry-run prints the plan)")
    if caps.vllm is None and not args.vllm_version:
        raise LabError("vLLM is not installed for this Python: run `pip install -r requirements-gpu.txt` "
                       "(or put a vLLM site tree on PYTHONPATH), then rerun")
    return run_arm(args, model, points, max_model_len, out, caps.vllm or args.vllm_version)


def run_arm(args, model: str, points: list[tuple[int, int]], max_model_len: int, out: Path, vllm_version: str) -> int:
    """Serve, measure every point, write the dataset as its one writer; the server is stopped whatever happens."""
    with dataset_lock(out, kinds=("vllm-sweep",)):
        return _run_arm(args, model, points, max_model_len, out, vllm_version)


def _run_arm(args, model: str, points: list[tuple[int, int]], max_model_len: int, out: Path, vllm_version: str) -> int:
    log_path = out / "server.log"
    started = time.time()
    arm = arms.from_args(args)
    run_key = {"experiment": "concurrency", **arm.run_key(), "model": Path(model).name, "max_tokens": args.max_tokens,
               "steps": args.steps, "max_model_len": max_model_len, "max_num_batched_tokens": args.max_num_batched_tokens,
               "load_format": args.load_format, "seed": args.seed}
    template = PointPlan(context=0, concurrency=0, max_tokens=args.max_tokens, steps=args.steps, stall_s=args.stall,
                         timeout_s=args.point_timeout, seed=args.seed, run_key=run_key)
    jsonl = out / "measurements.jsonl"
    check_resume(jsonl, run_key, RECORD_FIELDS, "points")   # another run's folder: refused before anything is written
    server = Server(model, arm, max_model_len=max_model_len,
                    max_num_batched_tokens=args.max_num_batched_tokens,
                    gpu_memory_utilization=args.gpu_memory_utilization, load_format=args.load_format,
                    log_path=log_path, vllm_version=vllm_version, ready_timeout=args.ready_timeout)

    def say(text: str) -> None:
        print(f"[vllm-concurrency] {text}", file=sys.stderr, flush=True)

    say(f"starting {server.arm_label()}: {server.command_line()}")
    with server:
        facts = server.facts
        say(f"ready in {server.ready_s:.0f} s: backend {facts.backend}, FlashAttention {facts.fa_version or '-'}, "
            f"max_num_batched_tokens {facts.max_num_batched_tokens}, KV cache {facts.kv_cache_tokens} tokens")
        # one short request first: the server's first request pays one-off costs no point should carry
        try:
            stream_completion(server.base_url, server.model_name, make_prompt(min(c for c, _ in points), args.seed - 1),
                              16, timeout=args.point_timeout)
        except StreamError as exc:
            raise LabError(f"the warm-up request failed ({exc.kind}: {exc}); log: {log_path}") from None
        try:
            run_points(server, points, template, jsonl, say=say)
        finally:
            write_dataset(out, read_records(jsonl, required=RECORD_FIELDS), server, args, model, points, started)
    say(f"{server.arm_label()} done in {time.time() - started:.0f} s -> {out}")
    print_table(out / "concurrency.csv")
    return sweep.all_failed(out / "concurrency.csv", "point")


def write_dataset(out: Path, records: list[dict], server: Server, args, model: str, points, started: float) -> None:
    """concurrency.csv and provenance.json from the points so far (called even when a point failed)."""
    import pandas as pd

    write_csv(out, "concurrency.csv", pd.DataFrame(summarize(records, server.arm_label()), columns=COLUMNS))
    facts = server.facts
    flags = {
        "experiment": "concurrency", "backend": args.backend,
        "fa_version": facts.fa_version if args.backend == "FLASH_ATTN" else None, "fa_version_requested": args.fa_version,
        "kv_cache_dtype": server.spec.kv_cache_dtype,
        "max_model_len": server.spec.max_model_len,
        "max_num_batched_tokens": facts.max_num_batched_tokens or args.max_num_batched_tokens,
        "max_num_batched_tokens_requested": args.max_num_batched_tokens,
        "gpu_memory_utilization": args.gpu_memory_utilization, "kv_cache_tokens": facts.kv_cache_tokens,
        "prefix_caching": False, "load_format": args.load_format, "skip_tokenizer_init": True,
        "points": [list(p) for p in points], "max_tokens": args.max_tokens, "steps": args.steps,
        "stall_s": args.stall, "point_timeout_s": args.point_timeout, "seed": args.seed,
        "decoding": "greedy, ignore_eos, distinct random prompts per request",
        "window": "last request's first token to the first request's finish (or the stop after `steps` steps)",
    }
    options = sys.argv[1:]
    if options[:1] == ["vllm-concurrency"]:
        options = options[1:]
    record = new_provenance(
        "vllm-sweep", model=f"{Path(model).name} ({'random weights' if args.load_format == 'dummy' else 'real weights'})",
        dtype="bfloat16", flags=flags, arm=server.arm_label(), server=server.record(), files={
            "measurements.jsonl": "one record per point: its steady-state figures and every request's chunk times "
                                  "[seconds since the point started, tokens]",
            "concurrency.csv": "one row per (context, concurrency) point",
            "server.log": sweep.SERVER_LOGS},
        elapsed_s=round(time.time() - started, 1),
        command="python -m lab vllm-concurrency " + " ".join(shlex.quote(a) for a in options))
    write_provenance(out, record)


def print_table(path: Path) -> None:
    import pandas as pd

    table = pd.read_csv(path)
    if not table.empty:
        print(table[COLUMNS[:9] + ["stop"]].to_string(index=False, float_format=lambda v: f"{v:.4g}"))

