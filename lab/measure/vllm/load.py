"""A busy server: Poisson load at several request rates against one arm, with vLLM's own ``vllm bench serve``.

One server per arm, every point in one call: the server starts once (with the synthetic tokenizer of
:mod:`lab.measure.vllm.tokenizer`, because the client sends text), then ``vllm bench serve`` runs once
per point. First the *capacity* point (every prompt at once: the most requests per second this arm
completes), then Poisson arrivals at fractions of that capacity (``--load-fractions``, from light load
to past saturation) or at the rates given (``--rates``). Each point sends ``rate x --span-s`` prompts
(within ``--min-prompts`` and ``--max-prompts``), so every point lasts about as long and the study's
time is predictable. ``--agreement`` adds the serial point (one request at a time) and the project's
own probe at the same prompt length on the same server, for the probe-vs-bench check.

Example (an H200, vLLM 0.26, random weights in the Qwen2.5-7B shape)::

    python -m lab vllm-tokenizer --model data/models/qwen2.5-7b-128k
    python -m lab vllm-load --arm FLASH_ATTN/FA3 --agreement --deadline-s 520

The folder (default ``data/local/vllm-load/<workload>/<arm slug>``) gets, per point, ``<point>.json``
(the client's result, checked where it enters; ``rate-4.json``, ``rate-inf.json``), ``<point>.cmd``
(its exact command line) and ``<point>.log`` (its console); ``points.jsonl`` (every attempt: ok or
failed with its reason), ``server.log``, ``probe.jsonl`` with ``--agreement``, and
``provenance.json``. A rerun into the same folder skips the points already kept.
"""

from __future__ import annotations

import contextlib
import functools
import math
import shlex
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from lab import LabError, env
from lab.cli import count_or_zero, fraction, path_arg, positive_count, positive_number, text_arg
from lab.folders import check_output, dataset_lock
from lab.measure.vllm import interference
from lab.measure.vllm import tokenizer as synthetic
from lab.measure.vllm.arms import ARMS, Arm
from lab.measure.vllm.bench import (
    BATCH_RUNNER,
    DEFAULT_LAUNCHER,
    DEFAULT_SLO_MS,
    VLLM_BENCH,
    Point,
    Workload,
    command,
    read_point,
    run_points,
    slo_arg,
)
from lab.measure.vllm.interference import longest_context, parse_trials
from lab.measure.vllm.mix import write_mix
from lab.measure.vllm.probe import ProbePlan, run_probe
from lab.measure.vllm.probe import check_resume as check
from lab.measure.vllm.progress import Progress
from lab.measure.vllm.replicas import Replicas, check_gpu_count
from lab.measure.vllm.server import Server
from lab.measure.vllm.spreader import POLICIES
from lab.measure.vllm.sweep import resolve_model
from lab.store import LOCAL_DIR, append_jsonl, new_provenance, read_jsonl
from lab.store import write_provenance as write

DEFAULT_FRACTIONS = "0.25,0.5,0.75,0.9,1.0,1.2"
DEFAULT_MODEL = "data/models/qwen2.5-7b-128k"
#: A point whose client has not finished after this many seconds more than its expected length failed.
POINT_SLACK_S = 120.0
JIT_LOG_ARGS = ("--jit-monitor-verbose",)   # vLLM 0.26's flag: every JIT event, not the first per kernel


@dataclass
class LoadPlan:
    """Everything one arm's study does; ``run_key`` must match for a rerun to resume into a folder."""

    arm: Arm
    workload: Workload
    fractions: list[float] = field(default_factory=lambda: [float(f) for f in DEFAULT_FRACTIONS.split(",")])
    rates: list[float] | None = None          # absolute request rates instead of fractions of capacity
    span_s: float = 30.0
    min_prompts: int = 60
    max_prompts: int = 1500
    capacity_prompts: int = 200
    mix_prompts: int = 0                      # >0: the workload is a long-tailed mix of this many prompts
    agreement_prompts: int = 0                # >0: the serial point and the probe, this many requests each
    slo_ms: dict = field(default_factory=lambda: dict(DEFAULT_SLO_MS))
    seed: int = 0
    deadline_s: float | None = None           # no point starts (or runs) past this many seconds
    max_num_batched_tokens: int | None = 8192
    gpu_memory_utilization: float = 0.85
    interference: list = field(default_factory=list)   # interference.Trial: run on the same server afterwards
    interference_out: Path | None = None               # their folder (<study>-interference/<arm>/chunk-<n>)
    tensor_parallel_size: int = 1             # GPUs one server is split across
    replicas: int = 1                         # >1: that many one-GPU servers behind lab.measure.vllm.spreader
    policy: str = "least-loaded"              # how the spreader picks a replica
    jit_log: bool = False                     # the server logs every kernel JIT event (--jit-monitor-verbose)

    @property
    def layout(self) -> str:
        """How the arm uses its GPUs: "" (one server, one GPU), "tp2" or "replicas2"."""
        if self.replicas > 1:
            return f"replicas{self.replicas}"
        return f"tp{self.tensor_parallel_size}" if self.tensor_parallel_size > 1 else ""

    def num_prompts(self, rate: float) -> int:
        return int(min(self.max_prompts, max(self.min_prompts, round(rate * self.span_s))))

    def capacity_point(self) -> Point:
        return Point(None, self.capacity_prompts, seed=self.seed)

    def rate_points(self, capacity: float | None) -> list[Point]:
        """The Poisson points: the rates asked for, or the fractions of the measured capacity (2 significant digits)."""
        if self.rates:
            rates = self.rates
        else:
            if capacity is None:
                return []
            rates = [float(f"{f * capacity:.2g}") for f in self.fractions]
        return [Point(r, self.num_prompts(r), seed=self.seed) for r in sorted(set(rates))]

    @property
    def run_key(self) -> dict:
        workload = asdict(self.workload)
        if workload["dataset_path"]:  # the file's name: the folder it lives in may move
            workload["dataset_path"] = Path(workload["dataset_path"]).name
        key = {"arm": self.arm.label, "workload": workload, "seed": self.seed, "mix_prompts": self.mix_prompts,
               "max_num_batched_tokens": self.max_num_batched_tokens, "slo_ms": self.slo_ms,
               "span_s": self.span_s, "min_prompts": self.min_prompts, "max_prompts": self.max_prompts,
               "capacity_prompts": self.capacity_prompts}
        if self.layout:  # only then: the folders of one-GPU runs keep the key they were written with
            key.update(tensor_parallel_size=self.tensor_parallel_size, replicas=self.replicas,
                       policy=self.policy if self.replicas > 1 else None)
        return key


def _record_attempt(out: Path, run, run_key: dict) -> None:
    append_jsonl(out / "points.jsonl", {
        "point": run.point.slug, "rate": run.point.rate, "num_prompts": run.point.num_prompts,
        "max_concurrency": run.point.max_concurrency, "status": run.status, "reason": run.reason,
        "elapsed_s": run.elapsed_s, "command": run.command, "run_key": run_key,
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})


def agreement_key(plan: LoadPlan) -> dict:
    """The run key of the agreement probe's records (``probe.jsonl``)."""
    return {**plan.run_key, "probe": "agreement"}


def check_resume(plan: LoadPlan, out: Path) -> None:
    """Refuse a folder holding another study's points, agreement probe or interference trials, before anything
    is written or a server started (every file of such a folder stays as it was)."""

    check(out / "points.jsonl", plan.run_key, ("point", "status"), "points")
    if plan.agreement_prompts:
        check(out / "probe.jsonl", agreement_key(plan))
    if plan.interference:
        check(plan.interference_out / "trials.jsonl",
              interference.chunk_run_key(plan.arm, plan.max_num_batched_tokens, plan.interference),
              interference.RECORD_FIELDS, "trials")


def expected_s(point: Point, capacity: float | None) -> float:
    """How long a point should take: its arrivals, or its prompts at the arm's capacity if that is longer."""
    arrivals = 0.0 if point.rate is None else point.num_prompts / point.rate
    service = point.num_prompts / capacity if capacity else 0.0
    return max(arrivals, service)


class Study:
    """Runs one arm's points against a started server (``endpoint``: base_url, model_name, alive())."""

    def __init__(self, plan: LoadPlan, out: Path, endpoint, tokenizer: str, *, launcher=DEFAULT_LAUNCHER,
                 runner=BATCH_RUNNER, bench: str = VLLM_BENCH, progress: Progress | None = None,
                 env: dict | None = None):
        self.plan, self.out, self.endpoint, self.tokenizer = plan, Path(out), endpoint, tokenizer
        # launcher: the CLI each point's .cmd line names; runner and bench: what runs it (the same two calls)
        self.launcher, self.runner, self.bench, self.env = tuple(launcher), tuple(runner), bench, env
        self.progress = progress or Progress(plan.deadline_s)
        self.failed: list[str] = []
        self.measured: list[str] = []     # the points kept, by slug (a failure line need not be a point)
        self.capacity: float | None = None

    def points(self, points: list[Point]) -> dict[str, dict]:
        """Each point's result by slug: kept from an earlier run, or measured now in one client process
        (missing when it failed or no time was left; ``failed`` says why)."""
        results, todo = {}, []
        for point in points:
            kept = read_point(self.out, point)
            if kept is not None:
                self.progress.say(f"{point.slug}: kept from an earlier run ({kept['completed']} requests)")
                results[point.slug] = kept
            else:
                todo.append(point)
        left = self.progress.left()
        if not todo:
            return results
        if left < 60.0:
            for point in todo:
                self.failed.append(f"{point.slug}: skipped, {left:.0f} s left before the deadline")
                self.progress.say(self.failed[-1])
            return results
        if not self.endpoint.alive():
            raise LabError(self.endpoint.died_message(f"before {todo[0].slug}"))
        jobs = []
        for point in todo:
            argv = command(point, self.plan.workload, base_url=self.endpoint.base_url, model=self.endpoint.model_name,
                           tokenizer=self.tokenizer, result_dir=self.out, result_filename=f"{point.slug}.raw.json",
                           slo_ms=self.plan.slo_ms, launcher=self.launcher)
            jobs.append((point, argv, expected_s(point, self.capacity) + POINT_SLACK_S))
            self.progress.say(f"{point.slug}: {point.num_prompts} prompts (about {expected_s(point, self.capacity):.0f} s)")

        def ended(run) -> None:
            _record_attempt(self.out, run, self.plan.run_key)
            if run.status == "ok":
                results[run.point.slug] = read_point(self.out, run.point)
                self.measured.append(run.point.slug)
                self.progress.say(f"{run.point.slug}: ok in {run.elapsed_s:.0f} s: {_summary(results[run.point.slug])}")
            else:
                self.failed.append(f"{run.point.slug}: {run.reason}")
                self.progress.say(f"{run.point.slug}: FAILED after {run.elapsed_s:.0f} s: {run.reason}")

        run_points(jobs, folder=self.out, deadline_s=left, env=self.env, runner=self.runner, bench=self.bench,
                   on_end=ended)
        if len(results) < len(points) and not self.endpoint.alive():
            raise LabError(self.endpoint.died_message("during the load points"))
        return results

    def run(self) -> list[Point]:
        """Every point of the plan (the serial and capacity points in one client process, then the Poisson
        points in another); returns the points asked for."""
        first = []
        if self.plan.agreement_prompts:
            first.append(Point(None, self.plan.agreement_prompts, max_concurrency=1, seed=self.plan.seed))
        if not self.plan.rates:
            first.append(self.plan.capacity_point())
        results = self.points(first)
        if not self.plan.rates:
            result = results.get(self.plan.capacity_point().slug)
            self.capacity = result["request_throughput"] if result else None
            if self.capacity is None:
                self.failed.append("no capacity point, so no rates to derive from it (give --rates instead)")
                return first
            self.progress.say(f"capacity: {self.capacity:.3g} requests/s")
        rated = self.plan.rate_points(self.capacity)
        self.points(rated)
        return first + rated


def _summary(result: dict) -> str:
    return (f"{result['request_throughput']:.3g} req/s, TTFT p50/p99 {result['p50_ttft_ms']:.4g}/"
            f"{result['p99_ttft_ms']:.4g} ms, ITL p50/p99 {result['p50_itl_ms']:.3g}/{result['p99_itl_ms']:.3g} ms, "
            f"{result['failed']} failed")


# --- the command ---------------------------------------------------------------------------------

def parse_floats(text: str, option: str) -> list[float]:
    try:
        values = [float(part) for part in text.replace(" ", "").split(",") if part]
    except ValueError:
        raise LabError(f"{option} {text!r}: expected comma-separated numbers such as 0.25,0.5,1") from None
    if not values or min(values) <= 0 or not all(math.isfinite(v) for v in values):
        raise LabError(f"{option} {text!r}: expected positive numbers")
    return values


def add_arguments(parser) -> None:
    parser.add_argument("--arm", required=True, help=f"the arm, by label or slug ({', '.join(ARMS)})")
    parser.add_argument("--model", type=text_arg, default=DEFAULT_MODEL, help=f"model folder with config.json (default {DEFAULT_MODEL})")
    parser.add_argument("--input-len", type=positive_count, default=1024, help="prompt tokens (default 1024)")
    parser.add_argument("--output-len", type=positive_count, default=128, help="generated tokens per request (default 128)")
    parser.add_argument("--range-ratio", type=float, default=0.0,
                        help="lengths uniform in [L(1-r), L(1+r)] (vllm's --random-range-ratio; default 0: fixed)")
    parser.add_argument("--mix", type=positive_count, metavar="N",
                        help="a long-tailed mix of N prompts (log-normal lengths around --input-len/--output-len, "
                             "written to <out>/mix.jsonl) instead of fixed-length random prompts")
    parser.add_argument("--load-fractions", default=DEFAULT_FRACTIONS,
                        help=f"request rates as fractions of the measured capacity (default {DEFAULT_FRACTIONS})")
    parser.add_argument("--rates", help="request rates in requests/s instead (no capacity point)")
    parser.add_argument("--span-s", type=positive_number, default=30.0, help="seconds of arrivals per point (default 30)")
    parser.add_argument("--min-prompts", type=positive_count, default=60, help="fewest prompts per point (default 60)")
    parser.add_argument("--max-prompts", type=positive_count, default=1500, help="most prompts per point (default 1500)")
    parser.add_argument("--capacity-prompts", type=positive_count, default=200, help="prompts of the all-at-once point (default 200)")
    parser.add_argument("--agreement", type=count_or_zero, nargs="?", const=20, default=0, metavar="N",
                        help="also N requests one at a time with the bench and with the probe (default N 20)")
    parser.add_argument("--slo", type=slo_arg, default="ttft:500,tpot:50", help="goodput SLOs in ms (default ttft:500,tpot:50)")
    parser.add_argument("--max-num-batched-tokens", type=count_or_zero, default=8192, help="chunk size (default 8192; 0: vLLM's)")
    parser.add_argument("--gpu-memory-utilization", type=fraction, default=0.85, help="vLLM memory fraction (default 0.85)")
    parser.add_argument("--tensor-parallel-size", type=positive_count, default=1,
                        help="GPUs one server is split across (default 1)")
    parser.add_argument("--replicas", type=positive_count, default=1,
                        help="N one-GPU servers of the arm, one per GPU, behind the spreader (default 1: one server)")
    parser.add_argument("--policy", choices=POLICIES, default="least-loaded",
                        help="how the spreader picks a replica: round-robin or least-loaded (default)")
    parser.add_argument("--deadline-s", type=positive_number, help="no point starts or runs past this many seconds")
    parser.add_argument("--ready-timeout", type=positive_number, default=480.0, help="seconds to wait for the server (default 480)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the prompts and arrivals (default 0)")
    parser.add_argument("--out", type=path_arg, help="dataset folder (default data/local/vllm-load/<workload>/<arm>)")
    parser.add_argument("--interference-decoders", metavar="N,N",
                        help="after the load points, interference trials on the same server (python -m lab "
                             "vllm-interference's --decoders), e.g. 8,32; needs --interference-out")
    parser.add_argument("--interference-long", default="32768", metavar="L,L",
                        help="their long prompts' lengths (default 32768)")
    parser.add_argument("--interference-out", type=path_arg,
                        help="the trials' folder, e.g. <study>-interference/<arm slug>/chunk-8192")
    parser.add_argument("--jit-log", action="store_true",
                        help="the server logs every kernel JIT event after its warm-up, with the kernel's "
                             "specialization (vLLM's --jit-monitor-verbose; by default it logs the first per kernel)")
    parser.add_argument("--dry-run", action="store_true", help="print the plan and the commands, start nothing")


def plan_from_args(args) -> LoadPlan:
    arm = Arm.parse(args.arm)
    for name in ("input_len", "output_len", "min_prompts", "max_prompts", "capacity_prompts"):
        if getattr(args, name) < 1:
            raise LabError(f"--{name.replace('_', '-')} must be at least 1")
    if args.replicas > 1 and args.tensor_parallel_size > 1:
        raise LabError("--replicas and --tensor-parallel-size: one or the other (each replica is one GPU)")
    if not 0 <= args.range_ratio < 1:
        raise LabError(f"--range-ratio {args.range_ratio}: must be in [0, 1)")
    if args.mix is not None:
        if args.mix < 10:
            raise LabError(f"--mix {args.mix}: at least 10 prompts")
        workload = Workload(f"mix-{args.input_len}-{args.output_len}", args.input_len, args.output_len,
                            dataset_path="mix.jsonl")
    else:
        ratio = f"-r{args.range_ratio:g}" if args.range_ratio else ""
        workload = Workload(f"random-{args.input_len}-{args.output_len}{ratio}", args.input_len, args.output_len,
                            args.range_ratio)
    trials = []
    if args.interference_decoders:
        if args.interference_out is None:
            raise LabError("--interference-decoders needs --interference-out (the trials' folder)")
        trials = parse_trials(args.interference_decoders, args.interference_long, seed=args.seed,
                              option="--interference-")
    return LoadPlan(arm=arm, workload=workload, fractions=parse_floats(args.load_fractions, "--load-fractions"),
                    rates=parse_floats(args.rates, "--rates") if args.rates else None, span_s=args.span_s,
                    min_prompts=args.min_prompts, max_prompts=args.max_prompts,
                    capacity_prompts=args.capacity_prompts, agreement_prompts=args.agreement, mix_prompts=args.mix or 0,
                    slo_ms=args.slo, seed=args.seed, deadline_s=args.deadline_s,
                    max_num_batched_tokens=args.max_num_batched_tokens or None,
                    gpu_memory_utilization=args.gpu_memory_utilization, interference=trials,
                    interference_out=args.interference_out.resolve() if trials else None,
                    tensor_parallel_size=args.tensor_parallel_size, replicas=args.replicas, policy=args.policy,
                    jit_log=args.jit_log)


def max_model_len(workload: Workload, vocab_size: int) -> int:
    """The longest request the workload can send, rounded up to 256: its prompt's budget in vLLM's character
    check of text prompts (:func:`lab.measure.vllm.tokenizer.prompt_budget`) plus its output."""
    if workload.dataset_path:
        rows = read_jsonl(Path(workload.dataset_path), required=("prompt", "output_tokens"))
        longest = max(synthetic.prompt_budget(len(r["prompt"].split()), vocab_size) + int(r["output_tokens"])
                      for r in rows)
    else:
        longest = synthetic.prompt_budget(math.ceil(workload.input_len * (1 + workload.range_ratio)), vocab_size) + \
            math.ceil(workload.output_len * (1 + workload.range_ratio))
    return int(math.ceil((longest + 16) / 256) * 256)


def main(args) -> int:
    plan = plan_from_args(args)
    model = resolve_model(args.model)
    out = (args.out or LOCAL_DIR / "vllm-load" / plan.layout / plan.workload.name / plan.arm.slug).resolve()
    check_output(out, "--out", [("--model", Path(model) if Path(model).is_dir() else None)])
    if plan.interference_out:
        check_output(plan.interference_out, "--interference-out",
                     [("--model", Path(model) if Path(model).is_dir() else None), ("--out", out)])
    if args.dry_run:
        length = "from the mix" if plan.mix_prompts else server_model_len(plan, synthetic.model_vocab_size(Path(model)))
        print(f"{plan.arm.label}{' ' + plan.layout if plan.layout else ''}, {plan.workload.name}, "
              f"max_model_len {length} -> {out}")
        points = ([Point(None, plan.agreement_prompts, 1)] if plan.agreement_prompts else []) + (
            plan.rate_points(None) if plan.rates else [plan.capacity_point()])
        for point in points:
            print("  " + " ".join(shlex.quote(a) for a in command(
                point, plan.workload, base_url="http://127.0.0.1:8000", model=model, tokenizer=f"{model}/tokenizer",
                result_dir=out, result_filename=f"{point.slug}.raw.json", slo_ms=plan.slo_ms)))
        if not plan.rates:
            print(f"  then Poisson points at {', '.join(f'{f:g}' for f in plan.fractions)} x the measured capacity")
        return 0

    if not env.detect().has_gpu:
        raise LabError("no CUDA GPU on this machine: the load study needs one (--dry-run prints its commands)")
    if plan.layout:
        check_gpu_count(plan.tensor_parallel_size * plan.replicas, f"--replicas {plan.replicas}" if plan.replicas > 1
                        else f"--tensor-parallel-size {plan.tensor_parallel_size}")
    return run_arm(plan, model, out, ready_timeout=args.ready_timeout)


def run_arm(plan: LoadPlan, model: str, out: Path, *, ready_timeout: float = 480.0, server_factory=None,
            bench: str = VLLM_BENCH, bench_env: dict | None = None) -> int:
    """Start the arm's server, run every point, write provenance; the server is stopped whatever happens.

    Returns 0 when every point was measured, 1 when some failed or were skipped (each said why)."""
    trials = plan.interference_out if plan.interference else None
    with dataset_lock(out, kinds=("vllm-load",)), \
            (dataset_lock(trials, "--interference-out", ("vllm-load",)) if trials else contextlib.nullcontext()):
        return _run_arm(plan, model, out, ready_timeout=ready_timeout, server_factory=server_factory,
                        bench=bench, bench_env=bench_env)


def _run_arm(plan: LoadPlan, model: str, out: Path, *, ready_timeout: float, server_factory, bench: str,
             bench_env: dict | None) -> int:
    check_resume(plan, out)     # every refusal before the first file or server
    tok_dir = Path(model) / synthetic.SUBFOLDER
    if not (tok_dir / synthetic.FILES[0]).exists():
        raise LabError(f"{tok_dir}: no synthetic tokenizer; run `python -m lab vllm-tokenizer --model {model}` first")
    if plan.mix_prompts:  # the mix is written once per folder, from the seed, and reused on resume
        mix = out / plan.workload.dataset_path
        if not mix.exists():
            write_mix(mix, plan.mix_prompts, median_input=plan.workload.input_len,
                      median_output=plan.workload.output_len, seed=plan.seed)
        plan = replace(plan, workload=replace(plan.workload, dataset_path=str(mix)))
    progress = Progress(plan.deadline_s)
    log_path = out / "server.log"      # an earlier session's is kept as server.N.log (lab.folders.open_server_log)
    factory = server_factory or Server
    if plan.replicas > 1:
        factory = functools.partial(Replicas, count=plan.replicas, policy=plan.policy, server_factory=factory)
    server = factory(model, plan.arm, tensor_parallel_size=plan.tensor_parallel_size,
                     max_model_len=server_model_len(plan, synthetic.model_vocab_size(Path(model))),
                     max_num_batched_tokens=plan.max_num_batched_tokens,
                     gpu_memory_utilization=plan.gpu_memory_utilization, skip_tokenizer_init=False,
                     extra_args=("--tokenizer", str(tok_dir)) + (JIT_LOG_ARGS if plan.jit_log else ()),
                     log_path=log_path, ready_timeout=ready_timeout)
    progress.say(f"starting {plan.arm.label}: {server.command_line()}")
    study = None
    with server:
        facts = server.facts
        progress.say(f"ready in {server.ready_s:.0f} s: backend {facts.backend}, FlashAttention {facts.fa_version or '-'}, "
                     f"chunk {facts.max_num_batched_tokens}, KV cache {facts.kv_cache_tokens} tokens")
        study = Study(plan, out, server, str(tok_dir), bench=bench, progress=progress, env=bench_env)
        try:
            points = study.run()
            if plan.agreement_prompts:
                run_agreement_probe(server, plan, out, progress)
        finally:
            write_provenance(out, plan, server, study, progress.elapsed())
        if plan.interference:
            study.failed += run_interference(server, plan, progress)
    for line in study.failed:
        progress.say(f"not measured: {line}")
    progress.say(f"{plan.arm.label}: {len(study.measured)} of {len(points)} points -> {out}")
    return 0 if not study.failed else 1


def server_model_len(plan: LoadPlan, vocab_size: int) -> int:
    """The server's --max-model-len: the workload's longest request, or the interference trials' if longer."""

    trials = longest_context(plan.interference) if plan.interference else 0
    return max(max_model_len(plan.workload, vocab_size), int(math.ceil(trials / 256) * 256))


def run_interference(server, plan: LoadPlan, progress: Progress) -> list[str]:
    """The interference trials on this server (its chunk size), into their own folder; what is missing."""

    out = plan.interference_out
    run_key = interference.chunk_run_key(plan.arm, plan.max_num_batched_tokens, plan.interference)
    with dataset_lock(out, "--interference-out", ("vllm-load",)):     # the one writer of the trials' folder
        records = interference.run_trials(server, plan.interference, out / "trials.jsonl", run_key, progress)
        interference.write_chunk_provenance(out, plan.arm, run_key, plan.interference, server)
    ok = {(r["decoders"], r["long_len"]) for r in records if r["status"] == "ok"}
    return [f"interference, {t.decoders} decoders + a {t.long_len}-token prompt: not measured"
            for t in plan.interference if (t.decoders, t.long_len) not in ok]


def run_agreement_probe(server, plan: LoadPlan, out: Path, progress: Progress) -> None:
    """The project's probe on the same server: the same prompt and output length, one request at a time."""

    if progress.left() < 30:
        progress.say("agreement probe: skipped, no time left")
        return
    probe = ProbePlan(lengths=[plan.workload.input_len], reps=plan.agreement_prompts, max_tokens=plan.workload.output_len,
                      warmup_tokens=16, seed=plan.seed, run_key=agreement_key(plan))
    run_probe(server, probe, out / "probe.jsonl", progress=False)
    progress.say(f"agreement probe: {plan.agreement_prompts} requests of {plan.workload.input_len} tokens")


def write_provenance(out: Path, plan: LoadPlan, server, study, elapsed_s: float) -> None:
    record = new_provenance(
        "vllm-load", model=f"{Path(server.spec.model).name} (random weights)", dtype="bfloat16",
        flags={**plan.run_key, "fractions": plan.fractions, "rates": plan.rates,
               "agreement_prompts": plan.agreement_prompts, "deadline_s": plan.deadline_s,
               "client": "vllm bench serve (vLLM's own benchmark client), one call per point; its exact "
                         "command line is in <point>.cmd",
               "tokenizer": "synthetic WordLevel, every id its own word (lab.measure.vllm.tokenizer)"},
        arm=plan.arm.label, server=server.record(), capacity_req_s=study.capacity if study else None,
        not_measured=list(study.failed) if study else [], elapsed_s=round(elapsed_s, 1),
        files={"<point>.json": "vllm bench serve's saved result (--save-detailed), generated_texts removed",
               "<point>.cmd": "the exact vllm bench serve command line", "<point>.log": "its console",
               "points.jsonl": "every attempt at a point, ok or failed with its reason",
               "server.log": "the vLLM server's log", "probe.jsonl": "the probe's requests (with --agreement)"})
    write(out, record)
