"""Bounded profiler windows: chrome-trace JSON (gzipped) from a vLLM server or around any callable.

Two sources, one output format (``*.trace.json.gz`` that ``python -m lab census`` reads):

* **vLLM** (``python -m lab capture vllm``): start one server per arm with the torch profiler on
  (``lab.measure.vllm.server.Server(profiler_dir=...)``), then capture windows with ``/start_profile`` and
  ``/stop_profile`` around controlled requests:

  - ``prefill:N``: a warm request, then one ``max_tokens=1`` request of N prompt tokens;
  - ``decode:N``: a long generation on top of an N-token prompt; profiling starts after the first
    token arrived (the prefill is done) and stops after a fixed number of tokens, so the window
    holds decode steps only;
  - ``decode-naive:N``: the reference study's method (profile the whole 30-token request). With
    prefix caching off the window re-prefills the prompt first: kept to show the pitfall.

  vLLM's profiler config can also skip engine steps (``delay_iterations``, ``max_iterations``),
  but those are fixed when the server starts and would apply to the prefill windows as well, so
  the decode window is bounded by the stream instead; ``census --phase decode`` then checks, step
  by step, that the window holds decode steps only.

  Every window's census is written beside it; a trace over ``--max-trace-mb`` is trimmed to the
  events the census reads (kernels, launches, classifying CPU ops, step annotations), so the
  census of the kept file equals the census of the original.
* **in-process** (``python -m lab capture call MODULE:FUNCTION``, or :func:`capture_callable`):
  ``torch.profiler`` around a function, for the kernel benchmarks.
"""

from __future__ import annotations

import gzip
import http.client
import importlib
import json
import shutil
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from lab import LabError
from lab.cli import count_or_zero, path_arg, positive_count, positive_number, text_arg
from lab.folders import check_output, dataset_lock
from lab.measure import gpuclocks
from lab.measure.trace_store import MAX_TRACE_MB, census_rows, keep_trace, trim_trace, write_rows
from lab.measure.vllm import arms
from lab.measure.vllm.probe import make_prompt, stream_completion
from lab.measure.vllm.replies import StreamError, check_usage, error_message, event_tokens, parse_event
from lab.measure.vllm.server import DEFAULT_READY_TIMEOUT_S, Server
from lab.store import new_provenance, write_atomic, write_json_atomic, write_provenance

#: The windows of the reference study, re-measured: prefill at 2k/8k/28k, decode at 2k/28k.
DEFAULT_WINDOWS = "prefill:2048,prefill:8192,prefill:28672,decode:2048,decode:28672,decode-naive:28672"
PHASES = ("prefill", "decode", "decode-naive")
#: Tokens generated inside a decode window (the reference study generated 30).
DECODE_TOKENS = 30
#: Profiler settings for windows: no Python stacks (they triple the file and the census never reads them).
PROFILER_OPTIONS = {"torch_profiler_with_stack": False, "torch_profiler_dump_cuda_time_total": False}


@dataclass(frozen=True)
class Window:
    phase: str
    tokens: int

    @property
    def name(self) -> str:
        return f"{self.phase}-{self.tokens}"


def parse_windows(text: str) -> list[Window]:
    """``"prefill:2048,decode:28672"`` -> windows; a clear error for anything else."""
    windows = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        phase, _, tokens = part.partition(":")
        if phase not in PHASES or not tokens.isdigit() or int(tokens) < 1:
            raise LabError(f"window {part!r}: expected PHASE:TOKENS with PHASE one of {', '.join(PHASES)} "
                           "and TOKENS a positive integer, e.g. prefill:2048")
        windows.append(Window(phase, int(tokens)))
    if not windows:
        raise LabError(f"no windows in {text!r}; e.g. {DEFAULT_WINDOWS}")
    return windows


def prompt_ids(n: int, salt: int = 0) -> list[int]:
    """A reproducible prompt of ``n`` token ids (the probe's generator); ``salt`` picks another one."""

    return make_prompt(n, seed=1_000_003 * (salt + 1) + n)


# --- talking to the server ------------------------------------------------------------------------

def complete(base_url: str, model: str, ids: list[int], max_tokens: int, timeout: float = 600.0):
    """One whole request (greedy, exactly ``max_tokens`` tokens) through the probe's request primitive."""
    try:
        return stream_completion(base_url, model, ids, max_tokens, timeout=timeout)
    except StreamError as exc:
        raise LabError(f"{base_url}/v1/completions ({len(ids)} prompt tokens): {exc}") from None


def stream_chunks(base_url: str, model: str, ids: list[int], max_tokens: int, timeout: float = 600.0):
    """Yield each streamed completion chunk (a dict) as it arrives (server-sent events).

    The decode window must act *while* the stream runs (start profiling after the first token, stop
    after N more); ``lab.measure.vllm.probe.stream_completion`` returns only when the request is done, so
    this generator is the one place that reads a stream chunk by chunk.
    """
    payload = {"model": model, "prompt": ids, "max_tokens": max_tokens, "min_tokens": max_tokens,
               "temperature": 0.0, "ignore_eos": True, "stream": True, "return_token_ids": True}
    req = urllib.request.Request(base_url.rstrip("/") + "/v1/completions", data=json.dumps(payload).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            for raw in resp:
                line = raw.strip()
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    return
                event = parse_event(data)          # checked where the reply enters
                check_usage(event.get("usage"))
                event_tokens(event)
                yield event
    except StreamError as exc:
        raise LabError(f"{base_url}/v1/completions: {exc}") from None
    except urllib.error.HTTPError as exc:
        raise LabError(f"{base_url}/v1/completions answered {exc.code}: {error_message(exc.read())}") from None
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError, http.client.HTTPException) as exc:
        raise LabError(f"{base_url}/v1/completions: no answer ({getattr(exc, 'reason', exc)})") from None


class _TraceFolder:
    """The server's profiler folder: which trace files appeared since the last look."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.seen = self._files()

    def _files(self) -> dict[Path, float]:
        return {p: p.stat().st_mtime for p in self.folder.rglob("*") if p.is_file() and ".json" in p.name}

    def new_trace(self, since: float, wait_s: float = 120.0) -> Path:
        """The engine's trace written since ``since`` (the largest new file; the front-end's is CPU-only)."""
        deadline = time.monotonic() + wait_s
        while True:
            now = self._files()
            fresh = [p for p, m in now.items() if m >= since - 1 and self.seen.get(p) != m
                     and not p.name.endswith(".tmp") and not any(s in p.name for s in _FRONTEND_NAMES)]
            if fresh:
                sizes = {p: p.stat().st_size for p in fresh}
                time.sleep(1.0)   # let a writer finish: sizes must hold still for a second
                if all(p.exists() and p.stat().st_size == s for p, s in sizes.items()):
                    self.seen = self._files()
                    return max(fresh, key=lambda p: sizes[p])
            if time.monotonic() > deadline:
                raise LabError(f"{self.folder}: no new trace file {wait_s:.0f} s after /stop_profile")
            time.sleep(0.5)


#: The trace folder under its public name, for callers that keep their own server (the book's run panels).
TraceFolder = _TraceFolder

#: Trace files of vLLM's API-server process (CPU only) carry one of these in their names.
_FRONTEND_NAMES = ("async_llm", "api_server", "frontend")


def _profile_call(server, path: str) -> None:
    status, body = server.post(path)
    if status != 200:
        raise LabError(f"{server.base_url}{path} answered {status}: {error_message(body)} "
                       "(was the server started with a profiler folder?)")


class _NoClocks:
    """Stands in for a ClockSampler where nvidia-smi is missing."""

    def start(self):
        pass

    def stop(self):
        return None


def capture_window(server, folder: _TraceFolder, window: Window, *, decode_tokens: int = DECODE_TOKENS,
                   clocks=None) -> Path:
    """Capture one window on a running server; return the raw trace file it wrote.

    ``clocks`` (a :class:`lab.measure.gpuclocks.ClockSampler`) samples the GPU from just after /start_profile
    to just before /stop_profile."""
    model = server.model_name
    n = window.tokens
    clocks = clocks or _NoClocks()
    since = time.time()

    def start():
        _profile_call(server, "/start_profile")
        clocks.start()

    def stop():
        clocks.stop()
        _profile_call(server, "/stop_profile")

    if window.phase == "prefill":
        complete(server.base_url, model, prompt_ids(n, salt=1), max_tokens=1)        # warm: same shapes
        start()
        complete(server.base_url, model, prompt_ids(n, salt=2), max_tokens=1)
        stop()
    elif window.phase == "decode-naive":
        complete(server.base_url, model, prompt_ids(n, salt=1), max_tokens=4)        # the study's warm request
        start()
        complete(server.base_url, model, prompt_ids(n, salt=2), max_tokens=decode_tokens)
        stop()
    else:
        complete(server.base_url, model, prompt_ids(n, salt=1), max_tokens=4)
        # Generate well past the window; start profiling once the first token arrived (the prefill is
        # done) and stop after decode_tokens more tokens arrived: the window holds decode steps only.
        # /stop_profile runs in a thread so the stream keeps being read while the trace is written.
        margin = max(64, decode_tokens * 4)
        received, mark, stopper = 0, None, None
        errors: list[BaseException] = []

        def stop_in_thread():
            try:
                stop()
            except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread below
                errors.append(exc)

        for chunk in stream_chunks(server.base_url, model, prompt_ids(n, salt=2), max_tokens=decode_tokens + margin):
            received += event_tokens(chunk)[0]
            if mark is None and received >= 1:
                start()
                mark = received
            elif mark is not None and stopper is None and received - mark >= decode_tokens:
                stopper = threading.Thread(target=stop_in_thread, daemon=True)
                stopper.start()
        if stopper is None:
            stop_in_thread()
        else:
            stopper.join(timeout=600)
        if errors:
            raise errors[0]
    return folder.new_trace(since)


# --- vLLM: one arm, several windows ---------------------------------------------------------------

def capture_vllm(arm: str, out: Path, windows: list[Window], *, model: str, max_model_len: int,
                 max_num_batched_tokens: int | None, decode_tokens: int = DECODE_TOKENS,
                 max_mb: float = MAX_TRACE_MB, ready_timeout: float | None = None,
                 profiler_options: dict | None = None, tensor_parallel_size: int = 1) -> Path:
    """Start a server for ``arm`` (a label of :data:`lab.measure.vllm.arms.ARMS`), capture every window,
    write traces + census under ``out/<the arm's slug>/`` (the folder name its sweeps use).

    With ``tensor_parallel_size`` > 1 each GPU's worker writes its own trace; the first one written
    (one rank's kernels, its all-reduces in the ``communication`` family) is kept.
    """
    chosen = arms.known(arm)
    longest = max(w.tokens for w in windows) + decode_tokens * 6 + 64
    if longest > max_model_len:
        raise LabError(f"window of {max(w.tokens for w in windows)} tokens plus generation needs "
                       f"--max-model-len >= {longest} (have {max_model_len})")
    folder = Path(out) / chosen.slug
    check_output(folder, "--out", [("--model", Path(model) if Path(model).is_dir() else None)])
    with dataset_lock(folder, kinds=("census",)):
        raw_dir = Path(tempfile.mkdtemp(prefix="vllm-traces-"))
        rows, summary = [], []
        options = {**PROFILER_OPTIONS, **(profiler_options or {})}
        try:
            with Server(model, chosen, log_path=folder / "server.log",
                        max_model_len=max_model_len, max_num_batched_tokens=max_num_batched_tokens,
                        tensor_parallel_size=tensor_parallel_size, profiler_dir=raw_dir, profiler_options=options,
                        ready_timeout=ready_timeout or DEFAULT_READY_TIMEOUT_S) as server:
                traces = _TraceFolder(raw_dir)
                clocks = gpuclocks.ClockSampler(extra=gpuclocks.INSTANT_POWER) if gpuclocks.available() else None
                for window in windows:
                    t0 = time.monotonic()
                    raw = capture_window(server, traces, window, decode_tokens=decode_tokens, clocks=clocks)
                    sm = None
                    if clocks is not None:  # beside the trace: what the clocks did during this window
                        record = clocks.record()
                        write_json_atomic(folder / f"{window.name}.clocks.json", record)
                        sm = (record["sm_mhz"] or {}).get("median")
                    phase = "decode" if window.phase == "decode" else "all"
                    kept = keep_trace(raw, folder / f"{window.name}.trace.json.gz", phase=phase, max_mb=max_mb)
                    raw.unlink(missing_ok=True)
                    result = kept["census"]
                    rows += census_rows(result, window.phase, window.tokens, server.arm_label())
                    fam = result["families"]
                    line = (f"{server.arm_label():16s} {window.name:20s} window {result['kernel_ms']:10.1f} ms  "
                            f"attention {fam['attention']['ms']:9.1f} ms ({100 * fam['attention']['share']:4.1f}%)  "
                            f"matmul {fam['matmul']['ms']:9.1f} ms  steps {result['steps']['prefill']}p/"
                            f"{result['steps']['decode']}d  {result['attention_signature']['label']}  "
                            f"[{time.monotonic() - t0:.0f} s{', trimmed' if result['capture']['trimmed'] else ''}"
                            f"{f', SM clock median {sm:.0f} MHz' if sm else ''}]")
                    print(line, flush=True)
                    summary.append(line)
                    write_rows(folder / "census.csv", rows)   # after every window: nothing lost on a crash
                record = server.record()
        finally:
            shutil.rmtree(raw_dir, ignore_errors=True)
        write_provenance(folder, new_provenance(
            "census", model="Qwen2.5-7B-Instruct shape (dummy weights)", dtype="bfloat16",
            flags={"arm": arm, "windows": [w.name for w in windows], "decode_tokens": decode_tokens,
                   "tensor_parallel_size": tensor_parallel_size,
                   "max_trace_mb": max_mb, "profiler_options": options, "server": record}))
        return folder


# --- in-process: any callable -------------------------------------------------------------------

def capture_callable(fn, out: Path, *, warmup: int = 1, repeat: int = 1, record_shapes: bool = False) -> Path:
    """Run ``fn()`` ``warmup`` times unprofiled, then ``repeat`` times under torch.profiler; write gzipped JSON."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    out = Path(out)
    if not out.name.endswith(".json.gz"):
        raise LabError(f"{out}: name the output *.json.gz (the trace is written gzipped)")
    for _ in range(warmup):
        fn()
    activities = [ProfilerActivity.CPU]
    cuda = torch.cuda.is_available()
    if cuda:
        activities.append(ProfilerActivity.CUDA)
        torch.cuda.synchronize()
    with profile(activities=activities, record_shapes=record_shapes) as prof:
        for _ in range(repeat):
            fn()
        if cuda:
            torch.cuda.synchronize()

    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(raw))

        def write(part: Path) -> None:
            with open(raw, "rb") as src, gzip.open(part, "wb", compresslevel=6) as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        write_atomic(out, write)
    return out


def _load_callable(spec: str):
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise LabError(f"{spec!r}: expected MODULE:FUNCTION, e.g. lab.measure.attention.reference:demo")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise LabError(f"{spec!r}: cannot import {exc.name}") from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise LabError(f"{spec!r}: {module_name} has no function {attr}")
    return fn


# --- CLI -------------------------------------------------------------------------------------------

def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="source", metavar="SOURCE")
    v = sub.add_parser("vllm", help="windows from a vLLM server started here (one arm)")
    v.add_argument("--arm", required=True, choices=list(arms.ARMS), help="attention backend arm")
    v.add_argument("--out", required=True, type=path_arg, help="output folder; traces land in OUT/<arm>/")
    v.add_argument("--windows", default=DEFAULT_WINDOWS, help=f"PHASE:TOKENS list (default {DEFAULT_WINDOWS})")
    v.add_argument("--model", type=text_arg, default="data/models/qwen2.5-7b", help="model folder or name (dummy weights)")
    v.add_argument("--max-model-len", type=positive_count, default=33024)
    v.add_argument("--max-num-batched-tokens", type=positive_count, default=None,
                   help="chunked-prefill chunk size (default: vLLM's; the log records it)")
    v.add_argument("--decode-tokens", type=positive_count, default=DECODE_TOKENS, help="tokens inside a decode window")
    v.add_argument("--tensor-parallel-size", type=positive_count, default=1,
                   help="GPUs the model is split across (vLLM TP)")
    v.add_argument("--max-trace-mb", type=positive_number, default=MAX_TRACE_MB, help="trim traces above this size")
    v.add_argument("--ready-timeout", type=positive_number, default=None, help="seconds to wait for the server")
    v.add_argument("--profiler-option", action="append", default=[], metavar="KEY=JSON",
                   help="extra vLLM profiler-config field, e.g. torch_profiler_with_stack=false")
    c = sub.add_parser("call", help="profile a Python function in this process (torch.profiler)")
    c.add_argument("function", metavar="MODULE:FUNCTION", help="a function that takes no arguments")
    c.add_argument("--out", required=True, type=path_arg, help="output trace, *.json.gz")
    c.add_argument("--warmup", type=count_or_zero, default=1, help="unprofiled calls first (default 1)")
    c.add_argument("--repeat", type=positive_count, default=1, help="profiled calls (default 1)")
    t = sub.add_parser("trim", help="keep only the events the census reads (for committing a large trace)")
    t.add_argument("trace", type=path_arg)
    t.add_argument("--out", required=True, type=path_arg, help="output trace, *.json.gz")


def _profiler_options(items: list[str]) -> dict:
    options = {}
    for item in items:
        key, _, value = item.partition("=")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            raise LabError(f"--profiler-option {item!r}: the value must be JSON (true, 3, \"x\")") from None
    return options


def _trace_file(out: Path, inputs: list[tuple[str, Path]]) -> Path:
    """The output trace of ``call`` and ``trim``: a file name (not a folder, not an input), refused before any work."""
    if out.is_dir():
        raise LabError(f"--out {out}: is a folder; expected a file name such as window.trace.json.gz")
    if out.is_symlink() and not out.exists():
        raise LabError(f"--out {out}: a symbolic link that leads nowhere (or back to itself); expected a file name")
    check_output(out, "--out", inputs)
    return out


def _call(spec: str, out: Path, warmup: int, repeat: int) -> Path:
    fn = _load_callable(spec)

    def guarded():
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - the user's function: its failure is one line, not ours
            raise LabError(f"{spec}: the function raised {type(exc).__name__}: {exc}") from None
    return capture_callable(guarded, out, warmup=warmup, repeat=repeat)


def main(args) -> int:
    if args.source == "vllm":
        folder = capture_vllm(args.arm, Path(args.out), parse_windows(args.windows), model=args.model,
                              max_model_len=args.max_model_len, max_num_batched_tokens=args.max_num_batched_tokens,
                              decode_tokens=args.decode_tokens, max_mb=args.max_trace_mb,
                              ready_timeout=args.ready_timeout, profiler_options=_profiler_options(args.profiler_option),
                              tensor_parallel_size=args.tensor_parallel_size)
        print(f"wrote {folder}")
        return 0
    if args.source == "call":
        out = _trace_file(Path(args.out), [])
        with dataset_lock(out.parent):
            out = _call(args.function, out, args.warmup, args.repeat)
        print(f"wrote {out} ({out.stat().st_size / 1e3:.0f} kB)")
        return 0
    if args.source == "trim":
        out = _trace_file(Path(args.out), [("the trace being trimmed", Path(args.trace))])
        with dataset_lock(out.parent):
            counts = trim_trace(Path(args.trace), out)
        print(f"wrote {args.out}: kept {counts['kept']:,} events, dropped {counts['dropped']:,}")
        return 0
    raise LabError("choose a source: python -m lab capture {vllm,call,trim} --help")
