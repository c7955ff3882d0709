"""A made-up busy-server study for tests: ``vllm bench serve`` result files from a toy queue, in the real schema.

Only for exercising code paths that need the H200 load study before it exists; never written under data/.
Every summary number (percentiles, throughput, goodput) is computed from the per-request lists written
beside it, as vLLM's client computes them, so a reader of the lists and a reader of the summary agree.
"""

from __future__ import annotations

import zlib

import numpy as np

from lab import store
from lab.measure.vllm.arms import Arm
from lab.measure.vllm.bench import METRICS, PERCENTILES

STUDY = "vllm0.26-qwen2.5-7b-load"
FRACTIONS = (0.25, 0.5, 0.75, 0.9, 1.0, 1.2)
#: arm -> (capacity req/s, TTFT ms at light load, TPOT ms at light load)
ARMS = {"FLASH_ATTN/FA3": (24.0, 45.0, 11.0), "FLEX_ATTENTION": (15.0, 90.0, 16.0), "TRITON_ATTN": (19.0, 60.0, 13.0)}


def _requests(rng, n: int, load: float, ttft_ms: float, tpot_ms: float, output_len: int):
    """Per-request TTFT (s) and inter-token gaps (s): both grow with the load, TTFT steeply near and past 1."""
    queue = load / max(0.05, 1.0 - min(load, 0.95))        # waiting grows like rho / (1 - rho)
    ttfts = rng.gamma(2.0, ttft_ms * (1 + queue) / 2.0, n) / 1000
    itls = [list(rng.gamma(4.0, tpot_ms * (1 + 0.6 * load) / 4.0, output_len - 1) / 1000) for _ in range(n)]
    return ttfts.tolist(), itls


def result(rate, n: int, load: float, ttft_ms: float, tpot_ms: float, *, seed: int, input_len: int = 1024,
           output_len: int = 8, max_concurrency=None, failed: int = 0, duration: float | None = None) -> dict:
    """One saved result (``--save-detailed``): ``failed`` of the ``n`` requests end with an error; ``duration``
    (s) set for an all-at-once point, whose requests per second is the arm's capacity."""
    rng = np.random.default_rng(seed)
    ttfts, itls = _requests(rng, n, load, ttft_ms, tpot_ms, output_len)
    errors = ["" if i >= failed else "ClientConnectorError" for i in range(n)]
    ok = [i for i in range(n) if not errors[i]]
    for i in range(failed):
        ttfts[i], itls[i] = 0.0, []
    e2el = [ttfts[i] + sum(itls[i]) for i in ok]
    tpot = [(e2el[k] - ttfts[i]) / (output_len - 1) for k, i in enumerate(ok)]
    series = {"ttft": [ttfts[i] for i in ok], "tpot": tpot, "itl": [g for i in ok for g in itls[i]], "e2el": e2el}
    arrivals = n / rate if rate not in (None, "inf") else 0.0
    duration = duration or max(arrivals, max(e2el)) + float(np.mean(e2el))
    out = {"date": "20261201-000000", "backend": "vllm", "model_id": "model", "num_prompts": n,
           "request_rate": "inf" if rate is None else rate, "burstiness": 1.0, "max_concurrency": max_concurrency,
           "duration": duration, "completed": len(ok), "failed": n - len(ok),
           "total_input_tokens": input_len * len(ok), "total_output_tokens": output_len * len(ok),
           "request_throughput": len(ok) / duration, "output_throughput": output_len * len(ok) / duration,
           "total_token_throughput": (input_len + output_len) * len(ok) / duration,
           "max_concurrent_requests": n, "request_goodput": None,
           "ttfts": ttfts, "itls": itls, "start_times": [0.0] * n, "input_lens": [input_len] * n,
           "output_lens": [output_len if not errors[i] else 0 for i in range(n)], "errors": errors}
    for metric in METRICS:
        values = np.array(series[metric]) * 1000
        out.update({f"mean_{metric}_ms": float(values.mean()), f"median_{metric}_ms": float(np.median(values)),
                    f"std_{metric}_ms": float(values.std())})
        out.update({f"p{p}_{metric}_ms": float(np.percentile(values, p)) for p in PERCENTILES})
    return out


def write_arm(folder, label: str, capacity: float, ttft_ms: float, tpot_ms: float, *, fractions=FRACTIONS,
              rates=None, prompts: int = 40, with_capacity: bool = True, gpu: str = "NVIDIA H200",
              workload: str = "random-1024-128") -> None:
    """One arm's folder: the capacity point, one Poisson point per fraction (or per rate), provenance."""
    points = [(None, 1.0)] if with_capacity else []
    if rates is None:
        points += [(float(f"{f * capacity:.2g}"), f) for f in fractions]
    else:
        points += [(r, r / capacity) for r in rates]
    for k, (rate, load) in enumerate(points):
        slug = "rate-inf" if rate is None else f"rate-{rate:g}"
        got = result(rate, prompts, 1.0 if rate is None else load, ttft_ms, tpot_ms, seed=zlib.crc32(f"{label}/{k}".encode()),
                     duration=prompts / capacity if rate is None else None)
        store.write_json_atomic(folder / f"{slug}.json", got)
    arm = Arm.parse(label)
    flags = {"arm": label, "workload": {"name": workload}, "fractions": list(fractions), "rates": rates,
             "min_prompts": prompts, "max_prompts": prompts, "capacity_prompts": prompts}
    record = store.new_provenance("vllm-load", model="qwen2.5-7b-128k (random weights)", dtype="bfloat16",
                                  flags=flags, command="python -m lab vllm-load (synthetic test data)", arm=arm.label,
                                  capacity_req_s=capacity if with_capacity else None, not_measured=[])
    record.update(gpu=gpu, vllm="0.26.0")
    store.write_provenance(folder, record)


def write_study(root, arms=ARMS, workload: str = "random-1024-128", study: str = STUDY, **kw):
    """Every arm of ``arms`` under ``root/study/workload/<arm slug>/``; returns the workload's folder."""
    base = root / study / workload
    for label, (capacity, ttft_ms, tpot_ms) in arms.items():
        write_arm(base / Arm.parse(label).slug, label, capacity, ttft_ms, tpot_ms, workload=workload, **kw)
    return base
