"""A long prompt among decoders: what N requests mid-answer feel while a 32k-100k prompt is prefilled.

One trial: N streamed requests (contexts spread evenly over ``--decoder-context``, e.g. 4k..32k) are
sent at once and left to decode; once every one of them has streamed ``--warm-steps`` tokens, one long
prompt arrives. Every decoder's every token is timed on one clock, with the long prompt's arrival as
time zero, until the long request's first token plus ``--after-s``; then every stream is closed (vLLM
aborts a request whose client went away). The record keeps each decoder's token times and the long
request's TTFT, so the decoders' ITL over time during that prefill can be drawn (:mod:`lab.results.load`).

Each engine step holds at most ``max_num_batched_tokens`` tokens: the decodes (one token each) and a
chunk of the long prefill. A smaller chunk lets the decoders step more often (lower ITL during the
prefill) and makes the long prompt take more steps (higher TTFT); ``--chunks`` runs one server per
chunk size (0: vLLM's default, which its log states) so the trade can be measured.

Example (an H200)::

    python -m lab vllm-interference --arm FLASH_ATTN/FA3 --chunks 2048,0,32768 --decoders 8,32 \\
        --long 32768,98304 --deadline-s 520

The folder (default ``data/local/vllm-interference/<arm slug>``) gets ``chunk-<n>/trials.jsonl`` (one
record per trial), ``chunk-<n>/server.log`` and ``provenance.json``. A rerun skips trials already there.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

from lab import LabError, env
from lab.cli import path_arg, positive_number, text_arg
from lab.folders import check_kind, check_output, dataset_lock
from lab.measure.vllm.arms import ARMS, Arm
from lab.measure.vllm.concurrency import Stream
from lab.measure.vllm.probe import check_resume, make_prompt
from lab.measure.vllm.progress import Progress
from lab.measure.vllm.server import Server
from lab.measure.vllm.sweep import resolve_model
from lab.store import LOCAL_DIR, append_jsonl, new_provenance, write_provenance

#: What every trial record carries (a resume refuses a line without them).
RECORD_FIELDS = ("decoders", "long_len", "status")


@dataclass(frozen=True)
class Trial:
    """One trial: how many decoders at which contexts, and the long prompt that arrives among them."""

    decoders: int
    long_len: int
    context_min: int = 4096
    context_max: int = 32768
    decoder_tokens: int = 8192     # more than they will stream: the trial closes them
    warm_steps: int = 16
    after_s: float = 1.0
    timeout_s: float = 300.0
    seed: int = 0

    def contexts(self) -> list[int]:
        if self.decoders == 1:
            return [self.context_min]
        step = (self.context_max - self.context_min) / (self.decoders - 1)
        return [int(round(self.context_min + i * step)) for i in range(self.decoders)]


def _warm(streams: list[Stream], steps: int) -> bool:
    return all(sum(k for _, k in s.chunks) > steps for s in streams)


def run_trial(endpoint, trial: Trial, clock=time.perf_counter) -> dict:
    """Run one trial against a started server; return its record (status ok, or error with the reason)."""
    changed = threading.Condition()

    def notify() -> None:
        with changed:
            changed.notify_all()

    def wait_for(condition, limit_s: float) -> bool:
        deadline = clock() + limit_s
        with changed:
            while not condition():
                left = deadline - clock()
                if left <= 0:
                    return False
                changed.wait(timeout=min(left, 1.0))
        return True

    decoders = [Stream(endpoint.base_url, endpoint.model_name, make_prompt(n, trial.seed * 7919 + i),
                       trial.decoder_tokens, notify, clock=clock, timeout=trial.timeout_s + 60)
                for i, n in enumerate(trial.contexts())]
    long = Stream(endpoint.base_url, endpoint.model_name, make_prompt(trial.long_len, trial.seed * 7919 + 9973),
                  8, notify, clock=clock, timeout=trial.timeout_s + 60)
    started = clock()
    for stream in decoders:
        stream.start()
    warm = wait_for(lambda: _warm(decoders, trial.warm_steps) or any(not s.is_alive() for s in decoders),
                    trial.timeout_s)
    arrival = clock()
    error = None
    if not warm or not _warm(decoders, trial.warm_steps):
        error = "the decoders did not all stream their warm-up tokens" + ("" if warm else f" in {trial.timeout_s:.0f} s")
    else:
        long.start()
        if not wait_for(lambda: bool(long.chunks) or not long.is_alive(), trial.timeout_s):
            error = f"the long prompt had no first token after {trial.timeout_s:.0f} s"
        elif not long.chunks:
            error = f"the long prompt failed: {long.error}"
        else:
            wait_for(lambda: clock() - long.chunks[0][0] >= trial.after_s, trial.after_s + 5)
    for stream in [*decoders, long]:
        stream.cancel()
    for stream in [*decoders, long]:
        if stream.is_alive() or stream.ident:
            stream.join(timeout=60)
    failures = [s.error for s in decoders if s.error]
    error = error or (f"{len(failures)} decoder(s) failed: {failures[0]}" if failures else None)

    def rel(chunks):
        return [[round(t - arrival, 6), k] for t, k in chunks]

    return {"decoders": trial.decoders, "long_len": trial.long_len, "contexts": trial.contexts(),
            "status": "error" if error else "ok", "error": error, "seed": trial.seed,
            "warm_s": round(arrival - started, 3),
            "long_ttft_s": round(long.chunks[0][0] - arrival, 6) if long.chunks else None,
            "long_chunks": rel(long.chunks), "decoder_chunks": [rel(s.chunks) for s in decoders],
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def run_trials(endpoint, trials: list[Trial], path: Path, run_key: dict, progress) -> list[dict]:
    """Every trial not yet in ``path`` (JSONL, appended as each ends); stops early when time runs out."""

    records = check_resume(path, run_key, RECORD_FIELDS, "trials")
    done = {(r["decoders"], r["long_len"]) for r in records if r["status"] == "ok"}
    for trial in trials:
        if (trial.decoders, trial.long_len) in done:
            continue
        if progress.left() < 60:
            progress.say(f"{trial.decoders} decoders + {trial.long_len}: skipped, too little time left")
            continue
        record = {**run_trial(endpoint, trial), "run_key": run_key}
        append_jsonl(path, record)
        records.append(record)
        progress.say(f"{trial.decoders} decoders + a {trial.long_len}-token prompt: {record['status']}, "
                     f"long TTFT {record['long_ttft_s']} s{'' if not record['error'] else ': ' + record['error']}")
        if not endpoint.alive():
            raise LabError(endpoint.died_message(f"during the trial with {trial.decoders} decoders"))
    return records


# --- the command ---------------------------------------------------------------------------------

def _ints(text: str, option: str, least: int = 1) -> list[int]:
    try:
        values = [int(p) for p in text.replace(" ", "").split(",") if p]
    except ValueError:
        raise LabError(f"{option} {text!r}: expected comma-separated integers") from None
    if not values or min(values) < least:
        raise LabError(f"{option} {text!r}: expected integers of at least {least}")
    return values


def add_arguments(parser) -> None:
    parser.add_argument("--arm", required=True, help=f"the arm, by label or slug ({', '.join(ARMS)})")
    parser.add_argument("--model", type=text_arg, default="data/models/qwen2.5-7b-128k", help="model folder (default qwen2.5-7b-128k)")
    parser.add_argument("--chunks", default="2048,0,32768",
                        help="prefill chunk sizes, one server each (0: vLLM's default; default 2048,0,32768)")
    parser.add_argument("--decoders", default="8,32", help="decoding requests per trial (default 8,32)")
    parser.add_argument("--decoder-context", default="4096:32768", help="their context range (default 4096:32768)")
    parser.add_argument("--long", default="32768,98304", help="the long prompt's lengths (default 32768,98304)")
    parser.add_argument("--after-s", type=positive_number, default=1.0, help="seconds kept after the long first token (default 1)")
    parser.add_argument("--trial-timeout", type=positive_number, default=300.0, help="seconds one trial may wait (default 300)")
    parser.add_argument("--deadline-s", type=positive_number, help="no trial or server starts past this many seconds")
    parser.add_argument("--ready-timeout", type=positive_number, default=480.0, help="seconds to wait for the server")
    parser.add_argument("--seed", type=int, default=0, help="seed of the prompts (default 0)")
    parser.add_argument("--out", type=path_arg, help="dataset folder (default data/local/vllm-interference/<arm>)")


def parse_trials(decoders: str, long: str, decoder_context: str = "4096:32768", *, after_s: float = 1.0,
                 timeout_s: float = 300.0, seed: int = 0, option: str = "--") -> list[Trial]:
    """Every (decoders, long prompt) pair of the comma-separated lists, as trials (LabError on bad input)."""
    low, _, high = decoder_context.partition(":")
    context = _ints(f"{low},{high or low}", f"{option}decoder-context")
    if context[0] > context[1]:
        raise LabError(f"{option}decoder-context {decoder_context}: expected LOW:HIGH with LOW at most HIGH")
    return [Trial(n, length, context[0], context[1], after_s=after_s, timeout_s=timeout_s, seed=seed)
            for n in _ints(decoders, f"{option}decoders") for length in _ints(long, f"{option}long")]


def longest_context(trials: list[Trial]) -> int:
    """The longest sequence a trial may send (its long prompt, or a decoder's context and tokens)."""
    return max(max(t.long_len + 64, t.context_max + t.decoder_tokens) for t in trials)


def chunk_run_key(arm: Arm, chunk: int | None, trials: list[Trial]) -> dict:
    """What a resume into one chunk's folder must match."""
    return {"arm": arm.label, "max_num_batched_tokens": chunk, "seed": trials[0].seed,
            "decoder_context": [trials[0].context_min, trials[0].context_max]}


def write_chunk_provenance(out: Path, arm: Arm, run_key: dict, trials: list[Trial], server) -> None:
    write_provenance(out, new_provenance(
        "vllm-load", model=f"{Path(server.spec.model).name} (random weights)", dtype="bfloat16",
        flags={**run_key, "trials": [vars(t) for t in trials],
               "client": "lab.measure.vllm.interference (concurrency.Stream: every chunk timed on one clock)"},
        arm=arm.label, server=server.record(), files={
            "trials.jsonl": "one record per trial: each decoder's token times and the long prompt's, seconds "
                            "from its arrival", "server.log": "the vLLM server's log (when this folder's own server)"}))


def main(args) -> int:
    arm = Arm.parse(args.arm)
    trials = parse_trials(args.decoders, args.long, args.decoder_context, after_s=args.after_s,
                          timeout_s=args.trial_timeout, seed=args.seed)
    chunks = _ints(args.chunks, "--chunks", least=0)
    model = resolve_model(args.model)
    out = (args.out or LOCAL_DIR / "vllm-interference" / arm.slug).resolve()
    check_output(out, "--out", [("--model", Path(model) if Path(model).is_dir() else None)])

    if not env.detect().has_gpu:
        raise LabError("no CUDA GPU on this machine: the interference trials need one")
    for chunk in chunks:   # every chunk's folder is checked before the first server starts
        folder = out / f"chunk-{chunk or 'default'}"
        check_kind(folder, ("vllm-load",))
        check_resume(folder / "trials.jsonl", chunk_run_key(arm, chunk or None, trials), RECORD_FIELDS, "trials")
    progress = Progress(args.deadline_s)
    failed = 0
    for chunk in chunks:
        if progress.left() < 150:
            progress.say(f"chunk {chunk or 'default'}: skipped, too little time left for a server start")
            failed += 1
            continue
        failed += run_chunk(arm, chunk or None, trials, model, out / f"chunk-{chunk or 'default'}", progress,
                            args.ready_timeout)
    return 1 if failed else 0


def run_chunk(arm: Arm, chunk: int | None, trials: list[Trial], model: str, out: Path, progress, ready_timeout: float,
              server_factory=None) -> int:
    """One server at one chunk size, its trials, provenance, as its folder's one writer; returns how many trials
    are missing."""
    longest = longest_context(trials)
    run_key = chunk_run_key(arm, chunk, trials)
    with dataset_lock(out, kinds=("vllm-load",)):
        return _run_chunk(arm, chunk, trials, model, out, progress, ready_timeout, server_factory, longest, run_key)


def _run_chunk(arm: Arm, chunk: int | None, trials: list[Trial], model: str, out: Path, progress, ready_timeout: float,
               server_factory, longest: int, run_key: dict) -> int:
    check_resume(out / "trials.jsonl", run_key, RECORD_FIELDS, "trials")   # before the server or any file
    server = (server_factory or Server)(model, arm,
                                        max_model_len=int((longest + 255) // 256 * 256), max_num_batched_tokens=chunk,
                                        log_path=out / "server.log", ready_timeout=ready_timeout)
    progress.say(f"{arm.label}, chunk {chunk or 'default'}: starting {server.command_line()}")
    with server:
        progress.say(f"ready in {server.ready_s:.0f} s: chunk {server.facts.max_num_batched_tokens} (from the log), "
                     f"KV cache {server.facts.kv_cache_tokens} tokens")
        records = run_trials(server, trials, out / "trials.jsonl", run_key, progress)
        write_chunk_provenance(out, arm, run_key, trials, server)
    ok = {(r["decoders"], r["long_len"]) for r in records if r["status"] == "ok"}
    return sum(1 for t in trials if (t.decoders, t.long_len) not in ok)
