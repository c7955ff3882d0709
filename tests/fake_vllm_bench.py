"""A stand-in for ``vllm bench serve`` that needs no vLLM: ``add_cli_args`` and ``main`` as vllm.benchmarks.serve has
them (what lab.measure.vllm.bench_batch calls, given ``--bench tests/fake_vllm_bench.py``), or
``python tests/fake_vllm_bench.py bench serve FLAGS``.

It reads the flags the load study passes (vLLM 0.26's names), sends ``--num-prompts`` streamed requests
to the server at ``--base-url`` (Poisson arrivals at ``--request-rate``, at most ``--max-concurrency``
at once), and saves a result JSON of the real schema (vllm/benchmarks/serve.py: the summary fields,
``mean/median/std/pNN_<metric>_ms`` and, with ``--save-detailed``, the per-request lists) to
``--result-dir/--result-filename``. Prompts are token-id lists (the fake server takes no text).

``FAKE_BENCH_MODE`` picks a failure: ``crash`` (exit 1 with a traceback), ``missing_key`` (no p99_ttft_ms),
``text_number`` (request_throughput as a string), ``wrong_rate``, ``hang`` (never finishes).
``FAKE_BENCH_CALLS`` names a file that gets one line per call: ``<--request-rate>@<process id>``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from lab.measure.vllm.probe import StreamError, stream_completion  # noqa: E402


def add_cli_args(parser):
    """The flags the load study passes, as vllm.benchmarks.serve.add_cli_args has them."""
    for name in ("--backend", "--base-url", "--endpoint", "--model", "--tokenizer", "--dataset-name", "--dataset-path",
                 "--percentile-metrics", "--metric-percentiles", "--result-dir", "--result-filename",
                 "--random-range-ratio", "--request-rate"):
        parser.add_argument(name, required=name in ("--base-url", "--model", "--tokenizer"))
    for name in ("--random-input-len", "--random-output-len", "--num-prompts", "--seed", "--max-concurrency",
                 "--custom-output-len"):
        parser.add_argument(name, type=int)
    parser.add_argument("--burstiness", type=float, default=1.0)
    parser.add_argument("--temperature", type=float)
    parser.add_argument("--goodput", nargs="+")
    for flag in ("--ignore-eos", "--save-result", "--save-detailed", "--disable-tqdm", "--skip-chat-template"):
        parser.add_argument(flag, action="store_true")


def _requests(args):
    rng = random.Random(args.seed)
    if args.dataset_name == "custom":
        rows = [json.loads(line) for line in Path(args.dataset_path).read_text().splitlines() if line.strip()]
        rng.shuffle(rows)
        return [([int(w) for w in rows[i % len(rows)]["prompt"].split()], int(rows[i % len(rows)]["output_tokens"]))
                for i in range(args.num_prompts)]
    return [([rng.randrange(1000, 150000) for _ in range(args.random_input_len)], args.random_output_len)
            for _ in range(args.num_prompts)]


def _send_all(args, requests):
    outputs = [None] * len(requests)
    slots = threading.Semaphore(args.max_concurrency or len(requests))
    rate = float(args.request_rate)
    rng = np.random.default_rng(args.seed)

    def one(index, prompt, max_tokens):
        with slots:
            start = time.perf_counter()
            try:
                result = stream_completion(args.base_url, args.model, prompt, max_tokens, timeout=60)
                times = [t for t, _ in result.chunks]
                outputs[index] = {"ttft": times[0], "itl": [b - a for a, b in zip(times, times[1:], strict=False)],
                                  "latency": times[-1], "start": start, "output_len": result.n_tokens,
                                  "prompt_len": len(prompt), "error": ""}
            except StreamError as exc:
                outputs[index] = {"ttft": 0.0, "itl": [], "latency": 0.0, "start": start, "output_len": 0,
                                  "prompt_len": len(prompt), "error": str(exc)}

    threads = []
    for index, (prompt, max_tokens) in enumerate(requests):
        threads.append(threading.Thread(target=one, args=(index, prompt, max_tokens)))
        threads[-1].start()
        if rate != float("inf"):
            time.sleep(rng.exponential(1.0 / rate))
    for thread in threads:
        thread.join()
    return outputs


def _metrics(outputs, percentiles, slo):
    ok = [o for o in outputs if not o["error"]]
    tpots = [(o["latency"] - o["ttft"]) / (o["output_len"] - 1) for o in ok if o["output_len"] > 1]
    series = {"ttft": [o["ttft"] for o in ok], "tpot": tpots, "itl": [g for o in ok for g in o["itl"]],
              "e2el": [o["latency"] for o in ok]}
    result = {}
    for name, values in series.items():
        values = np.array(values or [0.0]) * 1000
        result.update({f"mean_{name}_ms": float(values.mean()), f"median_{name}_ms": float(np.median(values)),
                       f"std_{name}_ms": float(values.std())})
        for p in percentiles:
            result[f"p{p:g}_{name}_ms"] = float(np.percentile(values, p))
    good = sum(1 for o in ok if all((o["ttft"] if k == "ttft" else (o["latency"] - o["ttft"]) / max(o["output_len"] - 1, 1))
                                    * 1000 <= v for k, v in slo.items()))
    return result, good


def main(args):
    """One point, as vllm.benchmarks.serve.main runs it (lab.measure.vllm.bench_batch calls this)."""
    if os.environ.get("FAKE_BENCH_CALLS"):
        with open(os.environ["FAKE_BENCH_CALLS"], "a") as fh:
            fh.write(f"{args.request_rate}@{os.getpid()}\n")
    mode = os.environ.get("FAKE_BENCH_MODE", "ok")
    if not (Path(args.tokenizer) / "tokenizer.json").exists():
        raise SystemExit(f"OSError: Can't load tokenizer for '{args.tokenizer}'")
    if mode == "crash":
        raise ValueError("Initial test run failed")
    if mode == "hang":
        time.sleep(3600)
    started = time.perf_counter()
    outputs = _send_all(args, _requests(args))
    if mode == "refused":   # the server answered the first request 400, as vLLM does a prompt past its length check
        outputs[0].update(error="Bad Request", output_len=0)
    duration = time.perf_counter() - started
    percentiles = [float(p) for p in args.metric_percentiles.split(",")]
    slo = {k: float(v) for k, v in (pair.split(":") for pair in args.goodput or [])}
    metrics, good = _metrics(outputs, percentiles, slo)
    ok = [o for o in outputs if not o["error"]]
    rate = float(args.request_rate)
    result = {
        "date": time.strftime("%Y%m%d-%H%M%S"), "endpoint_type": args.backend, "backend": args.backend, "label": None,
        "model_id": args.model, "tokenizer_id": args.tokenizer, "num_prompts": args.num_prompts,
        "request_rate": rate if rate != float("inf") else "inf", "burstiness": args.burstiness,
        "max_concurrency": args.max_concurrency, "duration": duration, "completed": len(ok),
        "failed": len(outputs) - len(ok), "total_input_tokens": sum(o["prompt_len"] for o in ok),
        "total_output_tokens": sum(o["output_len"] for o in ok), "request_throughput": len(ok) / duration,
        "request_goodput": good / duration if slo else None,
        "output_throughput": sum(o["output_len"] for o in ok) / duration,
        "total_token_throughput": sum(o["prompt_len"] + o["output_len"] for o in ok) / duration,
        "max_output_tokens_per_s": 0.0, "max_concurrent_requests": len(outputs), "rtfx": 0.0, **metrics}
    if args.save_detailed:
        result.update(input_lens=[o["prompt_len"] for o in outputs], output_lens=[o["output_len"] for o in outputs],
                      ttfts=[o["ttft"] for o in outputs], itls=[o["itl"] for o in outputs],
                      start_times=[o["start"] for o in outputs], generated_texts=["7 7"] * len(outputs),
                      errors=[o["error"] for o in outputs])
    if mode == "missing_key":
        del result["p99_ttft_ms"]
    if mode == "text_number":
        result["request_throughput"] = "12.5"
    if mode == "wrong_rate":
        result["request_rate"] = 999.0
    Path(args.result_dir).mkdir(parents=True, exist_ok=True)
    (Path(args.result_dir) / args.result_filename).write_text(json.dumps(result))
    print(f"Successful requests: {len(ok)}", flush=True)
    return 0


if __name__ == "__main__":  # `python tests/fake_vllm_bench.py bench serve FLAGS`, as the vllm CLI
    assert sys.argv[1:3] == ["bench", "serve"], sys.argv
    command_line = argparse.ArgumentParser()
    add_cli_args(command_line)
    sys.exit(main(command_line.parse_args(sys.argv[3:])))
