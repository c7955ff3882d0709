"""One load point with vLLM's own client, ``vllm bench serve``: the command, the run, and a check of its result.

``vllm bench serve`` (vllm/benchmarks/serve.py in vLLM 0.26) sends prompts at a request rate with
Poisson arrivals (``--burstiness 1``: exponential gaps between requests), streams every answer, and
saves one result JSON: TTFT, TPOT, ITL and end-to-end latency (mean, median, chosen percentiles),
request and token throughput, and goodput (requests per second that met every stated SLO). With
``--save-detailed`` it also keeps every request's TTFT, inter-token gaps, start time and lengths,
which is what lets goodput be recomputed later at any SLO (:mod:`lab.results.load`).

:func:`command` builds the argv (a pure function: the tests pin every flag), :func:`run_points` runs
several points in one client process (vLLM's import paid once) with each console kept in a file, and
:func:`check_result` checks the JSON where it enters: a result
without its keys, with a non-number where a number belongs, or for another rate than asked, is a
failed point with its reason, never data.
"""

from __future__ import annotations

import argparse
import math
import queue
import shlex
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from lab import LabError
from lab.measure.vllm.serverlog import error_summary, read_text
from lab.store import read_json, write_atomic, write_json_atomic

#: ``vllm bench serve`` as a module (the ``vllm`` console script may not be on PATH).
DEFAULT_LAUNCHER = (sys.executable, "-m", "vllm.entrypoints.cli.main")
METRICS = ("ttft", "tpot", "itl", "e2el")
PERCENTILES = (50, 90, 99)
#: Several points in one process, each by the two calls ``vllm bench serve`` makes (lab.measure.vllm.bench_batch).
BATCH_RUNNER = (sys.executable, "-m", "lab.measure.vllm.bench_batch")
VLLM_BENCH = "vllm.benchmarks.serve"
#: Seconds the runner may take to import the client before its first point starts.
IMPORT_BUDGET_S = 300.0
#: The SLOs the bench itself scores goodput against (``--goodput``); the explorer recomputes others.
DEFAULT_SLO_MS = {"ttft": 500.0, "tpot": 50.0}
#: Fields every saved result must hold as numbers (vllm/benchmarks/serve.py, ``benchmark()``).
NUMERIC_FIELDS = ("duration", "completed", "failed", "num_prompts", "total_input_tokens", "total_output_tokens",
                  "request_throughput", "output_throughput", "total_token_throughput", "max_concurrent_requests")
#: Per-request lists that ``--save-detailed`` adds, one entry per prompt.
DETAILED_FIELDS = ("ttfts", "itls", "start_times", "input_lens", "output_lens", "errors")
#: Dropped before the result is kept: the decoded text of random token ids says nothing.
DROPPED_FIELDS = ("generated_texts",)


@dataclass(frozen=True)
class Workload:
    """What the prompts look like: fixed-length random prompts, or a JSONL file of prompts (a mix)."""

    name: str
    input_len: int = 1024
    output_len: int = 128
    range_ratio: float = 0.0          # random dataset: lengths uniform in [L(1-r), L(1+r)]
    dataset_path: str | None = None   # a custom JSONL dataset ({"prompt", "output_tokens"} per line)

    def dataset_args(self) -> list[str]:
        if self.dataset_path:
            return ["--dataset-name", "custom", "--dataset-path", self.dataset_path, "--custom-output-len", "-1",
                    "--skip-chat-template"]
        return ["--dataset-name", "random", "--random-input-len", str(self.input_len),
                "--random-output-len", str(self.output_len), "--random-range-ratio", f"{self.range_ratio:g}"]


@dataclass(frozen=True)
class Point:
    """One run of the client: a request rate (None: all at once) and how many prompts."""

    rate: float | None
    num_prompts: int
    max_concurrency: int | None = None
    seed: int = 0

    @property
    def slug(self) -> str:
        """File-name stem: ``rate-4``, ``rate-2.5``, ``rate-inf``, ``rate-inf-c1`` (at most one request at a time)."""
        rate = "inf" if self.rate is None else f"{self.rate:g}"
        return f"rate-{rate}" + (f"-c{self.max_concurrency}" if self.max_concurrency else "")


def command(point: Point, workload: Workload, *, base_url: str, model: str, tokenizer: str, result_dir: Path,
            result_filename: str, slo_ms: dict | None = None,
            launcher: tuple[str, ...] | list[str] = DEFAULT_LAUNCHER) -> list[str]:
    """The ``vllm bench serve`` argv for one point (every flag exists in vLLM 0.26's parser)."""
    slo_ms = DEFAULT_SLO_MS if slo_ms is None else slo_ms
    argv = [*launcher, "bench", "serve", "--backend", "vllm", "--base-url", base_url, "--endpoint", "/v1/completions",
            "--model", model, "--tokenizer", tokenizer, *workload.dataset_args(),
            "--num-prompts", str(point.num_prompts),
            "--request-rate", "inf" if point.rate is None else f"{point.rate:g}", "--burstiness", "1",
            "--seed", str(point.seed), "--ignore-eos", "--temperature", "0",
            "--percentile-metrics", ",".join(METRICS), "--metric-percentiles", ",".join(map(str, PERCENTILES)),
            "--save-result", "--save-detailed", "--result-dir", str(result_dir), "--result-filename", result_filename,
            "--disable-tqdm"]
    if slo_ms:
        argv += ["--goodput", *(f"{k}:{v:g}" for k, v in slo_ms.items())]
    if point.max_concurrency:
        argv += ["--max-concurrency", str(point.max_concurrency)]
    return argv


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _reasons(errors: list) -> str:
    """The distinct failure reasons of a result's ``errors``, most frequent first, each with its count."""
    counts = Counter(" ".join(str(e).split())[:80] for e in errors if e)
    return "; ".join(f"{n} x {reason!r}" for reason, n in counts.most_common(3)) or "no reason given"


def check_result(result, point: Point, *, where: str) -> dict:
    """The result if it is a complete ``vllm bench serve`` result for ``point``; LabError naming what is wrong."""
    if not isinstance(result, dict):
        raise LabError(f"{where}: expected a JSON object, found {type(result).__name__}")
    required = [*NUMERIC_FIELDS, *(f"{stat}_{m}_ms" for m in METRICS for stat in ("mean", "median")),
                *(f"p{p}_{m}_ms" for m in METRICS for p in PERCENTILES)]
    for key in required:
        if key not in result:
            raise LabError(f"{where}: no '{key}' (was it saved with --percentile-metrics {','.join(METRICS)} "
                           f"--metric-percentiles {','.join(map(str, PERCENTILES))}?)")
        if not _is_number(result[key]):
            raise LabError(f"{where}: '{key}' is {str(result[key])[:40]!r}; expected a finite number")
    asked = "inf" if point.rate is None else point.rate
    rate = result.get("request_rate")
    if not (rate == asked or (_is_number(rate) and _is_number(asked) and math.isclose(rate, asked, rel_tol=1e-9))):
        raise LabError(f"{where}: request_rate is {rate!r}, the point asked for {asked!r}")
    if result["num_prompts"] != point.num_prompts or result["completed"] + result["failed"] != point.num_prompts:
        raise LabError(f"{where}: {result['completed']} completed + {result['failed']} failed of "
                       f"{result['num_prompts']} prompts; the point sent {point.num_prompts}")
    if result["completed"] < 1:
        raise LabError(f"{where}: no request completed ({result['failed']} failed)")
    goodput = result.get("request_goodput")
    if goodput is not None and not _is_number(goodput):
        raise LabError(f"{where}: 'request_goodput' is {goodput!r}; expected a number or null")
    for key in DETAILED_FIELDS:
        values = result.get(key)
        if not isinstance(values, list) or len(values) != point.num_prompts:
            raise LabError(f"{where}: '{key}' must list one value per prompt ({point.num_prompts}); "
                           "was it saved with --save-detailed?")
    if result["failed"]:
        raise LabError(f"{where}: {result['failed']} of {point.num_prompts} requests failed "
                       f"({_reasons(result['errors'])}); a point measures the server only when it answered every "
                       "request: its log says why it refused")
    for index, (ttft, gaps) in enumerate(zip(result["ttfts"], result["itls"], strict=True)):
        if not _is_number(ttft) or not isinstance(gaps, list) or not all(_is_number(g) for g in gaps):
            raise LabError(f"{where}: request {index} has a non-numeric TTFT or inter-token gap")
    return result


@dataclass
class PointRun:
    """What running one point gave: the checked result (or the reason it failed) and the files kept."""

    point: Point
    status: str                      # "ok" or "failed"
    reason: str | None
    result_path: Path | None
    console_path: Path
    command: str
    elapsed_s: float


def run_points(jobs: list[tuple[Point, list[str], float]], *, folder: Path, deadline_s: float,
               env: dict | None = None, runner: tuple[str, ...] = BATCH_RUNNER, bench: str = VLLM_BENCH,
               on_end=None) -> list[PointRun]:
    """Run points one after another in one client process (:mod:`lab.measure.vllm.bench_batch`).

    ``jobs`` are (point, argv, budget in seconds), the argv as :func:`command` builds it; each point's
    command line is kept as ``<slug>.cmd`` and its console as ``<slug>.log``. The client writes
    ``<slug>.raw.json``; a checked result is kept as ``<slug>.json`` (without the generated text) and the
    raw file removed. A point past its budget (the process is stopped and the points after it are not
    run), a non-zero exit or a bad result is a failed point with its reason: ``<slug>.json`` is not
    written, so a rerun measures it again. No point starts whose budget would end past ``deadline_s``
    from now. ``on_end(run)`` is called as each point ends.
    """

    folder.mkdir(parents=True, exist_ok=True)
    lines, specs = {}, []
    for point, argv, budget in jobs:
        lines[point.slug] = line = " ".join(shlex.quote(a) for a in argv)
        write_atomic(folder / f"{point.slug}.cmd", lambda tmp, line=line: tmp.write_text(line + "\n", encoding="utf-8"))
        write_atomic(folder / f"{point.slug}.log", lambda tmp, line=line: tmp.write_text(f"# {line}\n", encoding="utf-8"))
        (folder / f"{point.slug}.raw.json").unlink(missing_ok=True)
        specs.append({"slug": point.slug, "flags": argv[argv.index("serve") + 1:], "budget_s": budget,
                      "console": str(folder / f"{point.slug}.log")})
    jobs_path = write_json_atomic(folder / "batch.jobs.json", {"jobs": specs, "deadline_unix": time.time() + deadline_s})
    points = {point.slug: point for point, _, _ in jobs}
    runs: dict[str, PointRun] = {}

    def finish(slug: str, status: str, seconds: float) -> None:
        runs[slug] = _outcome(points[slug], status, folder, lines[slug], seconds)
        if on_end:
            on_end(runs[slug])

    with open(folder / "batch.log", "a", encoding="utf-8") as log:
        try:
            proc = subprocess.Popen([*runner, str(jobs_path), "--bench", bench], stdout=subprocess.PIPE, stderr=log,
                                    stdin=subprocess.DEVNULL, text=True, env=env)
        except OSError as exc:
            for slug in points:
                finish(slug, f"could not run {runner[0]}: {exc.strerror or exc}", 0.0)
        else:
            _follow(proc, {s["slug"]: s["budget_s"] for s in specs}, finish)
    jobs_path.unlink(missing_ok=True)
    for slug in points:     # every point gets its outcome, and on_end, even when the client process died first
        if slug not in runs:
            finish(slug, "not run: the client process stopped before it", 0.0)
    return [runs[point.slug] for point, _, _ in jobs]


def _follow(proc, budgets: dict[str, float], finish) -> None:
    """Read the runner's ``start``/``end`` lines; stop it when a point runs past its budget."""
    events: queue.Queue = queue.Queue()

    def read() -> None:
        for text in proc.stdout:
            events.put(text.split())
        events.put(None)

    threading.Thread(target=read, daemon=True).start()
    current, since = None, time.monotonic()
    while True:
        limit = IMPORT_BUDGET_S if current is None else budgets[current]
        try:
            event = events.get(timeout=max(0.0, limit - (time.monotonic() - since)))
        except queue.Empty:
            proc.kill()
            if current is not None:
                finish(current, f"vllm bench serve did not finish within {limit:.0f} s", time.monotonic() - since)
            break
        if event is None:
            if current is not None:
                finish(current, "the client process stopped during it (see batch.log and its console)",
                       time.monotonic() - since)
            break
        if event[0] == "start" and event[1] in budgets:
            current, since = event[1], time.monotonic()
        elif event[0] == "end" and event[1] in budgets:
            finish(event[1], event[2], time.monotonic() - since if current == event[1] else 0.0)
            current, since = None, time.monotonic()
    proc.wait()


def _outcome(point: Point, status: str, folder: Path, line: str, seconds: float) -> PointRun:
    """A point's PointRun from the runner's status: an exit code, ``skipped``, or why it did not run."""

    console, raw = folder / f"{point.slug}.log", folder / f"{point.slug}.raw.json"

    def done(state, reason=None, path=None):
        return PointRun(point, state, reason, path, console, line, round(seconds, 1))

    if status == "skipped":
        return done("failed", "not started: its time would have run past the deadline")
    if not status.lstrip("-").isdigit():
        return done("failed", status)
    if int(status) != 0:
        why = error_summary(read_text(console)) or "see its console"
        return done("failed", f"vllm bench serve exited with status {status}: {why} (console: {console})")
    try:
        result = check_result(read_json(raw), point, where=str(raw))
    except LabError as exc:
        return done("failed", str(exc))
    kept = {k: v for k, v in result.items() if k not in DROPPED_FIELDS}
    path = write_json_atomic(folder / f"{point.slug}.json", kept)
    raw.unlink(missing_ok=True)
    return done("ok", path=path)


def read_point(folder: Path, point: Point) -> dict | None:
    """A point's kept result if it is there and still passes the check (None when it must be measured)."""

    path = folder / f"{point.slug}.json"
    if not path.exists():
        return None
    try:
        return check_result(read_json(path), point, where=str(path))
    except LabError:
        return None


def parse_slo(text: str) -> dict:
    """``ttft:500,tpot:50`` -> {"ttft": 500.0, "tpot": 50.0} (milliseconds; the metrics vllm bench scores)."""
    slo = {}
    for pair in (p for p in text.replace(" ", "").split(",") if p):
        name, _, value = pair.partition(":")
        if name not in ("ttft", "tpot", "e2el"):
            raise LabError(f"--slo {text!r}: {name!r} is not ttft, tpot or e2el")
        try:
            slo[name] = float(value)
        except ValueError:
            raise LabError(f"--slo {text!r}: {value!r} is not a number of milliseconds") from None
        if not math.isfinite(slo[name]) or slo[name] <= 0:
            raise LabError(f"--slo {text!r}: {name} must be a positive number of milliseconds")
    return slo


def slo_arg(text: str) -> dict:
    """``--slo`` read while the command line is parsed: a bad one is refused by the option's name."""
    try:
        return parse_slo(text)
    except LabError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--slo ")) from None
