"""Do the book's kernels compute what FlashAttention 3 computes, inside a real server? One eager vLLM server
runs the OURS arm with ``LAB_OURS_SHADOW`` set (:mod:`lab.measure.vllm.backend`): every attention call of every
layer also runs vLLM's FlashAttention 3 on the same queries, paged cache and metadata, and the largest difference
is logged per call. A mixed workload (a long prompt prefilled in chunks over its own cached prefix while short
prompts prefill and decode beside it) makes the server issue every kind of step: prefill chunks with a prefix,
mixed prefill and decode, pure decode.

The check passes when every output is finite and no call's largest difference exceeds ``--tolerance`` times its
largest output (relative, since random dummy weights give small activations). ``--planted-bug`` runs the same
with every sequence handed to the kernels one key short, which the check must fail::

    python -m lab vllm-agreement --model data/models/qwen2.5-7b --out data/local/agreement
    python -m lab vllm-agreement --model data/models/qwen2.5-7b --out data/local/agreement-bug --planted-bug

Writes ``calls.jsonl`` (one line per attention call), ``summary.json`` (the verdict per kind of step),
``server.log`` and ``provenance.json``. Exit status 0 when the check passes, 1 when it fails.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

from lab import LabError
from lab.cli import module_cli, path_arg, positive_number, text_arg
from lab.folders import check_output, dataset_lock
from lab.store import new_provenance, read_jsonl, write_json_atomic, write_provenance

#: The workload: (prompt tokens, tokens to generate) per request, all sent at once.
REQUESTS = ((3000, 8), (700, 24), (1500, 24), (64, 24), (200, 24))
CHUNK_TOKENS = 1024          # --max-num-batched-tokens: the long prompt prefills in three chunks
#: bf16 outputs of two correct kernels differ by rounding: a few units of bf16's 2^-8 relative step
DEFAULT_TOLERANCE = 2e-2


def step_kind(call: dict) -> str:
    """A call's kind of step: decode (one new token per sequence), prefill (one sequence), or mixed."""
    if call["max_query_len"] == 1:
        return "decode"
    return "prefill" if call["sequences"] == 1 else "mixed"


def verdict(calls: list[dict], tolerance: float) -> dict:
    """The check over the logged calls: per kind of step, the calls and the worst relative difference; passed
    when there were calls of every kind, all finite and all within ``tolerance``."""
    kinds: dict[str, dict] = {}
    for call in calls:
        relative = call["max_abs_error"] / call["max_abs_output"] if call["max_abs_output"] > 0 else \
            (0.0 if call["max_abs_error"] == 0 else float("inf"))
        kind = kinds.setdefault(step_kind(call), {"calls": 0, "worst_relative_error": 0.0, "not_finite": 0,
                                                  "longest_keys": 0})
        kind["calls"] += 1
        kind["worst_relative_error"] = max(kind["worst_relative_error"], relative)
        kind["not_finite"] += 0 if call["finite"] else 1
        kind["longest_keys"] = max(kind["longest_keys"], call["max_seq_len"])
    missing = [k for k in ("prefill", "mixed", "decode") if k not in kinds]
    failed = [k for k, v in kinds.items() if v["not_finite"] or not v["worst_relative_error"] <= tolerance]
    return {"passed": not missing and not failed, "tolerance": tolerance, "kinds": kinds,
            "missing_kinds": missing, "failed_kinds": failed, "calls": len(calls)}


def add_arguments(parser) -> None:
    parser.add_argument("--model", required=True, type=text_arg,
                        help="model folder (config.json; weights are random: dummy)")
    parser.add_argument("--out", required=True, type=path_arg, help="new folder for the check's files")
    parser.add_argument("--planted-bug", action="store_true", help="hand the kernels every sequence one key short "
                                                                   "(the check must fail)")
    parser.add_argument("--tolerance", type=positive_number, default=DEFAULT_TOLERANCE,
                        help=f"largest difference allowed, relative to the largest output (default {DEFAULT_TOLERANCE})")
    parser.add_argument("--ready-timeout", type=positive_number, default=480.0, help="seconds to wait for the server")


def _send_all(server, failures: list[str]) -> None:
    from lab.measure.vllm.probe import StreamError, make_prompt, stream_completion

    def one(i: int, length: int, max_tokens: int) -> None:
        try:
            stream_completion(server.base_url, server.model_name, make_prompt(length, seed=100 + i), max_tokens,
                              timeout=300)
        except (StreamError, LabError) as exc:
            failures.append(f"request {i} ({length} tokens): {exc}")

    threads = [threading.Thread(target=one, args=(i, n, m)) for i, (n, m) in enumerate(REQUESTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def main(args) -> int:
    from lab.measure.vllm.arms import OURS
    from lab.measure.vllm.server import Server

    out: Path = args.out
    check_output(out, "--out", [("--model", Path(args.model) if Path(args.model).is_dir() else None)])
    if out.exists() and any(out.iterdir()):
        raise LabError(f"--out {out} is not empty: give the check a new folder")
    started = time.time()
    with dataset_lock(out, kinds=("vllm-agreement",)):
        calls_path = out / "calls.jsonl"
        env = {**os.environ, "LAB_OURS_SHADOW": str(calls_path.resolve())}
        env.pop("LAB_OURS_PLANTED_BUG", None)
        if args.planted_bug:
            env["LAB_OURS_PLANTED_BUG"] = "1"
        server = Server(args.model, OURS, log_path=out / "server.log", max_model_len=8192,
                        max_num_batched_tokens=CHUNK_TOKENS, extra_args=("--enforce-eager",), env=env,
                        ready_timeout=args.ready_timeout)
        print(f"[vllm-agreement] starting {server.command_line()}", file=sys.stderr, flush=True)
        failures: list[str] = []
        with server:
            calls_path.unlink(missing_ok=True)  # vLLM's start-up (profiling, warm-up) is not the workload
            _send_all(server, failures)
        calls = read_jsonl(calls_path, required=("max_abs_error", "max_abs_output", "finite", "max_query_len",
                                                 "sequences", "max_seq_len")) if calls_path.exists() else []
        result = {**verdict(calls, args.tolerance), "planted_bug": args.planted_bug, "request_failures": failures}
        result["passed"] = result["passed"] and not failures
        write_json_atomic(out / "summary.json", result)
        write_provenance(out, new_provenance(
            "vllm-agreement", model=f"{Path(args.model).name} (random weights)", dtype="bfloat16",
            flags={"requests": [list(r) for r in REQUESTS], "max_num_batched_tokens": CHUNK_TOKENS,
                   "enforce_eager": True, "tolerance": args.tolerance, "planted_bug": args.planted_bug},
            server=server.record(), elapsed_s=round(time.time() - started, 1),
            files={"calls.jsonl": "one line per attention call: its step and the largest difference from FA3",
                   "summary.json": "the verdict per kind of step", "server.log": "the server's console"}))
    for kind, row in result["kinds"].items():
        print(f"[vllm-agreement] {kind}: {row['calls']} calls, worst difference {row['worst_relative_error']:.2e} "
              f"of the largest output, {row['not_finite']} not finite", file=sys.stderr)
    print(f"[vllm-agreement] {'PASSED' if result['passed'] else 'FAILED'} (tolerance {args.tolerance:g}"
          f"{'; planted bug' if args.planted_bug else ''}){'; ' + '; '.join(failures) if failures else ''}",
          file=sys.stderr)
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(module_cli(sys.modules[__name__], "python -m lab.measure.vllm.agreement"))
