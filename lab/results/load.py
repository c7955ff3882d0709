"""The busy-server study read back: latency-throughput curves per arm, goodput at any SLO, probe-vs-bench agreement.

Pure functions over the folders ``python -m lab vllm-load`` writes (``<study>-load/<workload>/<arm>/``:
one ``vllm bench serve`` result per point). Nothing here types a number: a study that is not there
comes back as ``LoadStudy(measured=False)`` and the chapter says "not measured yet".

Goodput follows vLLM's own rule (vllm/benchmarks/serve.py, ``calculate_metrics``): a request is good
when its TTFT and its TPOT, (end-to-end latency - TTFT) / (output tokens - 1), are each within their
SLO; goodput is the good requests per second of the run's duration. With the per-request lists that
``--save-detailed`` keeps, it is recomputed here at any SLO, not only the one the run was scored at.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from lab import LabError
from lab.measure.vllm.arms import Arm
from lab.measure.vllm.bench import Point, check_result
from lab.measure.vllm.probe import per_token_gaps, percentile, read_records
from lab.measure.vllm.serverlog import jit_events, read_text, warm_up_seconds
from lab.store import DATA_DIR, read_json

METRICS = ("ttft", "tpot", "itl", "e2el")
PERCENTILES = (50, 90, 99)
#: The probe and the bench must agree this closely at one load point (issue 25).
AGREEMENT_TOLERANCE = 0.05


@dataclass
class LoadStudy:
    """One workload's points per arm; ``measured`` False when no folder holds any."""

    workload: str
    points: dict[str, list[dict]] = field(default_factory=dict)   # arm label -> rows sorted by rate
    folders: dict[str, Path] = field(default_factory=dict)
    measured: bool = False


def point_row(result: dict, source: Path) -> dict:
    """The numbers of one result the book uses, in one flat row."""
    rate = result["request_rate"]
    row = {"rate": None if rate == "inf" else float(rate), "max_concurrency": result.get("max_concurrency"),
           "num_prompts": result["num_prompts"], "completed": result["completed"], "failed": result["failed"],
           "duration_s": result["duration"], "request_throughput": result["request_throughput"],
           "output_throughput": result["output_throughput"], "goodput_bench": result.get("request_goodput"),
           "source": str(source)}
    for metric in METRICS:
        row[f"mean_{metric}_ms"] = result[f"mean_{metric}_ms"]
        for p in PERCENTILES:
            row[f"p{p}_{metric}_ms"] = result[f"p{p}_{metric}_ms"]
    return row


def read_result(path: Path) -> dict:
    """One kept ``vllm bench serve`` result, checked again as it enters (LabError naming what is wrong)."""

    result = read_json(path)
    fields = result if isinstance(result, dict) else {}   # check_result names what a non-object is
    rate = fields.get("request_rate")
    point = Point(None if rate == "inf" else rate, fields.get("num_prompts"), fields.get("max_concurrency"))
    return check_result(result, point, where=str(path))


def read_arm(folder: Path) -> list[dict]:
    """Every kept point of one arm's folder (rate-*.json, checked again as it enters): the serial point
    first, then the Poisson points, lowest rate first, then the all-at-once capacity point."""
    rows = [point_row(read_result(path), path) for path in sorted(Path(folder).glob("rate-*.json"))
            if not path.name.endswith(".raw.json")]
    return sorted(rows, key=lambda r: (r["max_concurrency"] is None, r["rate"] is None, r["rate"] or 0))


#: The H200 study's folder under data/h200/, and where ``python -m lab vllm-load`` writes a reader's runs.
H200_STUDY = "vllm0.26-qwen2.5-7b-load"
LOCAL_STUDY = "vllm-load"


@dataclass
class ArmRun:
    """One arm's folder: its label (from its provenance), its points (:func:`read_arm`) and its provenance."""

    folder: Path
    label: str
    rows: list[dict]
    provenance: dict


def arm_runs(base: Path, broken: list | None = None) -> list[ArmRun]:
    """Every arm folder with a provenance.json and at least one point under ``base`` (a workload's folder),
    by folder name; none when ``base`` is not there. A folder whose files do not pass their check raises
    its LabError, or, given a ``broken`` list, is left out and appended to it as (folder, reason)."""
    base = Path(base)
    if not base.is_dir():
        return []
    runs = []
    for folder in sorted(p for p in base.iterdir() if (p / "provenance.json").exists()):
        try:
            provenance = read_json(folder / "provenance.json")
            label = provenance.get("arm") or Arm.parse(folder.name).label
            rows = read_arm(folder)
        except LabError as exc:
            if broken is None:
                raise
            broken.append((folder, str(exc)))
            continue
        if rows:
            runs.append(ArmRun(folder, label, rows, provenance))
    return runs


def load_study(workload: str = "random-1024-128", root: Path = DATA_DIR / "h200",
               study: str = H200_STUDY) -> LoadStudy:
    """The study's points per arm from ``root/study/workload/<arm slug>/`` (not measured when absent)."""
    found = LoadStudy(workload)
    for run in arm_runs(Path(root) / study / workload):
        found.points[run.label], found.folders[run.label] = run.rows, run.folder
    found.measured = bool(found.points)
    return found


def poisson_points(rows: list[dict]) -> list[dict]:
    """The Poisson points of an arm (neither the serial nor the all-at-once point)."""
    return [r for r in rows if r["rate"] is not None and not r["max_concurrency"]]


def capacity(rows: list[dict]) -> float | None:
    """Requests per second of the all-at-once point (None when it was not measured)."""
    found = [r for r in rows if r["rate"] is None and not r["max_concurrency"]]
    return found[0]["request_throughput"] if found else None


def _first_token_times(row: dict) -> list[float]:
    """The TTFT in seconds of every successful request of a point, from its detailed result's ``ttfts``."""
    result = read_json(Path(row["source"]))
    return [t for t, error in zip(result["ttfts"], result["errors"], strict=True) if not error]


def first_tokens(rows: list[dict]) -> tuple[float, float] | None:
    """(first, last) first-token time in seconds among the requests of the all-at-once point, each from the start
    of the burst: when the first prompt got its first token, and the last. None when the point was not measured."""
    found = [r for r in rows if r["rate"] is None and not r["max_concurrency"]]
    if not found:
        return None
    ttfts = _first_token_times(found[0])
    return min(ttfts), max(ttfts)


def longest_first_token(rows: list[dict]) -> float:
    """The longest TTFT in seconds of any request of an arm's Poisson points."""
    return max((t for row in poisson_points(rows) for t in _first_token_times(row)), default=0.0)


def server_jit_events(arm: ArmRun) -> int:
    """How many kernel JIT events vLLM's monitor logged during inference in an arm's server (``server.log``)."""
    return len(jit_events(read_text(arm.folder / "server.log", max_bytes=1 << 30)))


def server_warm_up(arm: ArmRun) -> float:
    """Seconds the lab backend's warm-up took when an arm's server started; LabError when its log has no such line."""
    seconds = warm_up_seconds(read_text(arm.folder / "server.log"))
    if seconds is None:
        raise LabError(f"{arm.folder / 'server.log'}: no warm-up line from the lab backend (LAB_OURS_WARMUP=0?)")
    return seconds


def request_latencies(result: dict) -> list[tuple[float, float]]:
    """(TTFT, TPOT) in seconds of every successful request of a detailed result, as vLLM computes them."""
    out = []
    for ttft, gaps, n_out, error in zip(result["ttfts"], result["itls"], result["output_lens"], result["errors"],
                                        strict=True):
        if error:
            continue
        latency = ttft + sum(gaps)
        out.append((ttft, (latency - ttft) / (n_out - 1) if n_out > 1 else 0.0))
    return out


def goodput(result: dict, ttft_ms: float | None = None, tpot_ms: float | None = None) -> float:
    """Requests per second that met both SLOs (an SLO left None is not checked)."""
    good = sum(1 for ttft, tpot in request_latencies(result)
               if (ttft_ms is None or ttft * 1000 <= ttft_ms) and (tpot_ms is None or tpot * 1000 <= tpot_ms))
    return good / result["duration"]


def point_goodputs(row: dict, slos) -> dict[tuple, float]:
    """Goodput of one point (a row of :func:`read_arm`) at each (TTFT ms, TPOT ms) pair of ``slos``, from the
    per-request lists of its result file (read once, checked as it entered by :func:`read_arm`)."""
    result = read_json(Path(row["source"]))
    return {tuple(slo): goodput(result, *slo) for slo in slos}


def highest_rate_meeting(rows: list[dict], limits_ms: dict[str, float], percentile: int = 99) -> float | None:
    """The highest Poisson rate measured whose p<percentile> of every metric in ``limits_ms`` (``{"ttft": 500,
    "tpot": 50}``) is within its limit (None: no measured rate is)."""
    def meets(row: dict) -> bool:
        return all(row[f"p{percentile}_{metric}_ms"] <= limit
                   for metric, limit in limits_ms.items())

    rates = [row["rate"] for row in poisson_points(rows) if meets(row)]
    return max(rates) if rates else None


def in_flight(row: dict) -> float | None:
    """Requests in flight on average at a Poisson point, by Little's law: arrival rate x mean end-to-end latency
    (None for the serial and all-at-once points, which have no arrival rate)."""
    return None if row["rate"] is None else row["rate"] * row["mean_e2el_ms"] / 1000


def highest_rate_within(rows: list[dict], metric: str, limit_ms: float, percentile: int = 99) -> float | None:
    """The highest Poisson rate measured whose p<percentile> <metric> is within ``limit_ms`` (None: none is)."""
    return highest_rate_meeting(rows, {metric: limit_ms}, percentile)


def agreement(folder: Path) -> dict:
    """The probe against the bench on one server: TTFT and ITL of the serial point (``rate-inf-c1``, one
    request at a time) and of the probe's requests of the same length.

    The test is on means: on the H200 the serial TTFT at 1,024 tokens has two modes (about 30 and 37 ms,
    plus a few near 55), so the median of twenty requests lands in either mode by chance, while the mean
    weighs every request. Medians are returned beside them. Returns the values (ms), the ratios
    bench/probe of the means and ``within`` (both within 5 %); ``measured`` False when either side is missing.
    """

    folder = Path(folder)
    serial = folder / "rate-inf-c1.json"
    records = probe_requests(folder)
    if not serial.exists() or not records:
        return {"measured": False}
    result = read_result(serial)
    ttfts = [r["ttft_s"] * 1000 for r in records]
    gaps = [g * 1000 for r in records for g in per_token_gaps([tuple(c) for c in r["chunks"]])]
    out = {"measured": True, "requests": len(records), "bench_requests": result["completed"],
           "bench_ttft_ms": result["mean_ttft_ms"], "probe_ttft_ms": sum(ttfts) / len(ttfts),
           "bench_itl_ms": result["mean_itl_ms"], "probe_itl_ms": sum(gaps) / len(gaps),
           "bench_ttft_median_ms": result["median_ttft_ms"], "probe_ttft_median_ms": percentile(ttfts, 50),
           "bench_itl_median_ms": result["median_itl_ms"], "probe_itl_median_ms": percentile(gaps, 50)}
    out["ttft_ratio"] = out["bench_ttft_ms"] / out["probe_ttft_ms"]
    out["itl_ratio"] = out["bench_itl_ms"] / out["probe_itl_ms"]
    out["within"] = all(abs(out[k] - 1) <= AGREEMENT_TOLERANCE for k in ("ttft_ratio", "itl_ratio"))
    return out


def probe_requests(folder: Path) -> list[dict]:
    """The probe's measured requests in a load folder (``probe.jsonl``: finished, the warm-up left out); none
    when the file is not there."""

    probe = Path(folder) / "probe.jsonl"
    if not probe.exists():
        return []
    return [r for r in read_records(probe) if r.get("status") == "ok" and r.get("rep") != "warm"]


def serial_ttfts(folder: Path) -> dict[str, list[float]] | None:
    """Every TTFT (ms) of the serial point (``rate-inf-c1``, one request at a time) and of the probe's requests on
    the same server, each sorted: what the agreement's means and medians summarise. None when either is missing."""
    folder = Path(folder)
    serial, records = folder / "rate-inf-c1.json", probe_requests(folder)
    if not serial.exists() or not records:
        return None
    result = read_result(serial)
    bench = [1000 * t for t, error in zip(result["ttfts"], result["errors"], strict=True) if not error]
    return {"bench": sorted(bench), "probe": sorted(1000 * r["ttft_s"] for r in records)}


def kv_bytes_per_token(layers: int, kv_heads: int, head_dim: int, bytes_per_value: float) -> float:
    """KV-cache bytes one token occupies: a key and a value per layer and KV head."""
    return 2 * layers * kv_heads * head_dim * bytes_per_value


def requests_admitted(kv_cache_tokens: int | None, tokens_per_request: int) -> int | None:
    """How many requests of this many tokens the KV cache holds at once (the server log's capacity)."""
    return None if kv_cache_tokens is None else kv_cache_tokens // tokens_per_request
