"""What the hardware counters say each kernel was doing (data/h200/kernel-counters*, Nsight Compute).

A job (``prefill:fa3:1:16384``, ``flexdecode:flex-paged:1:32768``, ...) may launch several kernels; its
*main* kernel is the longest. For it: how busy the tensor pipe and the XU pipe (exponentials) were,
as a share of the active cycles of the multiprocessors that ran it; warps resident per multiprocessor
(achieved occupancy); the three reasons warps waited most (cycles stalled per issued instruction);
launch shape (programs, threads, registers, shared memory, programs per SM and waves); and, summed over the
job's kernels, DRAM and L2 bytes and time. Values are plain numbers; "not measured" is None.

The counters the book states are named quantities (:data:`TENSOR_BUSY`, ...): their run of record is chapter 2's
``h200/kernel-counters``; FA3 profiled again beside the Gluon kernel (``h200/kernel-counters-hopper``) is another
run of the same quantities, which a page names when it quotes it (:func:`counter_fact`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from lab import LabError
from lab.measure import ncu_output
from lab.results import data, iomodel
from lab.results.facts import Fact
from lab.results.quantities import Quantity

RUNS = ("h200/kernel-counters", "h200/kernel-counters-batch16", "h200/kernel-counters-mask")
#: FA3 and the hand-scheduled Gluon kernel profiled side by side at 16k, one call of the tool.
HOPPER_RUN = "h200/kernel-counters-hopper"
METRICS = {
    "ms": "gpu__time_duration.sum",
    "tensor_pct": "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
    "xu_pct": "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active",
    "fma_pct": "sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active",
    "occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "warps_per_sm": "sm__warps_active.avg.per_cycle_active",
    "sm_busy_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "memory_pct": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",  # the busiest memory unit's
    "programs": "launch__grid_size",
    "threads": "launch__block_size",
    "registers": "launch__registers_per_thread",
    "shared_bytes": "launch__shared_mem_per_block",
    "waves": "launch__waves_per_multiprocessor",
    "instructions": "smsp__inst_executed.sum",                 # warp instructions, all SMs
    "issue_pct": "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "sm_cycles_sum": "sm__cycles_active.sum",                  # SM-cycles with work, summed over the SMs
    "sm_cycles_max": "sm__cycles_active.max",                  # the busiest SM's
    "clock_hz": "gpc__cycles_elapsed.avg.per_second",     # the clock the kernel ran at (ncu leaves it free)
    "sms": "device__attribute_multiprocessor_count",
    "limit_registers": "launch__occupancy_limit_registers",  # programs per SM that registers allow, and so on
    "limit_shared": "launch__occupancy_limit_shared_mem",
    "limit_warps": "launch__occupancy_limit_warps",
    "limit_blocks": "launch__occupancy_limit_blocks",
    "limit_barriers": "launch__occupancy_limit_barriers",
}
LIMITS = ("limit_registers", "limit_shared", "limit_warps", "limit_blocks", "limit_barriers")
SUMMED = {"dram_read": "dram__bytes_read.sum", "dram_write": "dram__bytes_write.sum", "l2_bytes": "lts__t_bytes.sum",
          "job_ms": "gpu__time_duration.sum"}
STALL = ("smsp__average_warps_issue_stalled_", "_per_issue_active.ratio")


@dataclass(frozen=True)
class JobCounters:
    job: str
    phase: str
    candidate: str
    batch: int
    n: int
    kernel: str                      # the main (longest) kernel's name
    kernels: int                     # kernels the job launched
    main: dict = field(default_factory=dict)     # METRICS of the main kernel (ms in milliseconds)
    totals: dict = field(default_factory=dict)   # SUMMED over the job's kernels (job_ms in milliseconds)
    stall_cycles: dict = field(default_factory=dict)  # every reason's cycles per issued instruction, largest first
                                                      # ("selected": the issuing warp's own cycle, 1 by definition)
    source: str = ""
    others: tuple = ()               # (kernel name, ms) of the job's other kernels, in launch order

    @property
    def stalls(self) -> tuple:
        """The three largest (reason, cycles per issued instruction), largest first."""
        return tuple(sorted(self.stall_cycles.items(), key=lambda kv: -kv[1])[:3])

    @property
    def others_ms(self) -> float:
        """Time of the job's kernels besides the main one (a scheduler's prepare, a split's combine)."""
        return sum(ms for _, ms in self.others)

    @property
    def dram_rate(self) -> float:
        """DRAM bytes (read + written) per second over the job's kernels."""
        return (self.totals["dram_read"] + self.totals["dram_write"]) / (self.totals["job_ms"] * 1e-3)


def _run_rows(run: str, root) -> list[dict]:
    folder = (root / run) if root is not None else run
    try:
        dataset = data.load(folder)
        raw, log = dataset.file("raw.csv").read_text(), dataset.file("child.log").read_text()
    except Exception:  # noqa: BLE001  (a run not on file is "not measured")
        return []
    return [{**row, "source": f"data/{run}/raw.csv"} for row in ncu_output.read_dataset(raw, log)]


def jobs(root=None) -> dict[str, JobCounters]:
    """Every profiled job of the runs of record, by job name."""
    by_job: dict[str, list[dict]] = {}
    for run in RUNS:  # a job profiled again in a later run keeps its first run's counters (the run of record)
        rows = [row for row in _run_rows(run, root) if row["job"] not in by_job]
        for row in rows:
            by_job.setdefault(row["job"], []).append(row)
    return {job: _summarise(job, rows) for job, rows in by_job.items()}


def run_jobs(run: str, root=None) -> dict[str, JobCounters]:
    """The profiled jobs of one run, by job name (to compare kernels profiled side by side in it)."""
    by_job: dict[str, list[dict]] = {}
    for row in _run_rows(run, root):
        by_job.setdefault(row["job"], []).append(row)
    return {job: _summarise(job, rows) for job, rows in by_job.items()}


def _summarise(job: str, rows: list[dict]) -> JobCounters:
    kernels: dict[int, dict] = {}
    for row in rows:
        kernels.setdefault(row["kernel_index"], {"kernel": row["kernel"]})[row["metric"]] = row["value"]
    main_index = max(kernels, key=lambda i: kernels[i].get(METRICS["ms"], 0.0))
    main_kernel = kernels[main_index]
    main = {name: main_kernel.get(metric) for name, metric in METRICS.items()}
    main["ms"] = main["ms"] * 1e3 if main["ms"] is not None else None
    totals = {name: sum(k.get(metric, 0.0) for k in kernels.values()) for name, metric in SUMMED.items()}
    totals["job_ms"] *= 1e3
    stalls = sorted(((metric[len(STALL[0]):-len(STALL[1])], value) for metric, value in main_kernel.items()
                     if isinstance(metric, str) and metric.startswith(STALL[0]) and metric.endswith(STALL[1])),
                    key=lambda kv: -kv[1])
    phase, candidate, batch, n = ncu_output.parse_job(job)
    others = tuple((k["kernel"], k.get(METRICS["ms"], 0.0) * 1e3) for i, k in sorted(kernels.items()) if i != main_index)
    return JobCounters(job, phase, candidate, batch, n, main_kernel["kernel"], len(kernels), main, totals,
                       dict(stalls), rows[0]["source"], others)


def compulsory_bytes(job: JobCounters, q_heads: int = 28, kv_heads: int = 4, head_dim: int = 128) -> int:
    """Q, K, V read once and O written once, bf16: the least DRAM traffic the job could have (a backward
    job: :func:`lab.results.iomodel.backward_hbm_bytes`, P recomputed)."""
    if job.phase == "backward":
        return iomodel.backward_hbm_bytes(job.n, job.n, q_heads, kv_heads, head_dim, True, job.batch)["recompute"]
    return 2 * head_dim * sum(2 * q_heads * n_q + 2 * kv_heads * keys
                              for n_q, keys in ncu_output.job_sequences(job.phase, job.batch, job.n))


def table(root=None) -> list[dict]:
    """One flat row per job for a chapter's table."""
    rows = []
    for job in jobs(root).values():
        rows.append({"job": job.job, "phase": job.phase, "candidate": job.candidate, "batch": job.batch, "n": job.n,
                     "kernel": job.kernel, "kernels": job.kernels, **job.main, **job.totals,
                     "dram_rate": job.dram_rate, "compulsory": compulsory_bytes(job),
                     "stalls": ", ".join(f"{reason} {value:.2f}" for reason, value in job.stalls),
                     "top_stall": job.stalls[0][0] if job.stalls else None, "source": job.source})
    return rows


def compulsory_read_bytes(job: JobCounters, q_heads: int = 28, kv_heads: int = 4, head_dim: int = 128) -> int:
    """Q, K and V read once, bf16: the least a job must read from DRAM (what its DRAM-read counter is held to;
    a backward job: Q, K, V, O, dO and the log-sum-exp)."""
    if job.phase == "backward":   # Q, K, V, O, dO and the log-sum-exp
        return iomodel.backward_hbm_bytes(job.n, job.n, q_heads, kv_heads, head_dim, True, job.batch)["recompute_reads"]
    return 2 * head_dim * sum(q_heads * n_q + 2 * kv_heads * keys
                              for n_q, keys in ncu_output.job_sequences(job.phase, job.batch, job.n))


# --- the launch in waves ---------------------------------------------------------------------------

def programs_per_sm(job: JobCounters) -> int:
    """How many programs of the main kernel fit on one SM at once: the smallest of ncu's occupancy limits
    (registers, shared memory, warps, blocks, barriers)."""
    limits = [job.main[key] for key in LIMITS if job.main.get(key) is not None]
    if not limits:
        raise LabError(f"{job.job}: no occupancy limits in its counters ({job.source})")
    return int(min(limits))


def waves(job: JobCounters) -> dict:
    """The main kernel's programs in waves over the GPU: ``waves`` = programs / (SMs x programs per SM), the
    ``rounds`` that makes (waves rounded up) and how full the last one is (``last_full``, 0-1]."""
    programs, per_round = int(job.main["programs"]), int(job.main["sms"]) * programs_per_sm(job)
    rounds = math.ceil(programs / per_round)
    return {"programs": programs, "per_round": per_round, "waves": programs / per_round, "rounds": rounds,
            "last_full": (programs - (rounds - 1) * per_round) / per_round}


def tensor_cycles(job: JobCounters) -> float:
    """SM-cycles in which the tensor pipe was busy, summed over the SMs: its busy share of the active cycles
    times the active cycles (the matrix products' work, whatever the clock)."""
    return job.main["tensor_pct"] / 100 * job.main["sm_cycles_sum"]


# --- the counters the book states, as named quantities ------------------------------------------------

_OTHER = {HOPPER_RUN: "FA3 and the Gluon kernel profiled side by side in a call of their own, on another lease"}
_MAIN = ("the main (longest) kernel of one causal prefill call, batch 1, 28/4 heads, d=128, bf16, "
         "one call under Nsight Compute after three warm-ups, caches flushed, clocks left free: ")
TENSOR_BUSY = Quantity("h200.counters.tensor_busy", _MAIN + "tensor-pipe cycles as a share of the active cycles of "
                       "the SMs that ran it", run=RUNS[0], file="raw.csv", unit="%", others=_OTHER)
WARPS_PER_SM = Quantity("h200.counters.warps_per_sm", _MAIN + "warps resident per SM per active cycle (achieved "
                        "occupancy)", run=RUNS[0], file="raw.csv", unit="warps", others=_OTHER)
MAIN_MS = Quantity("h200.counters.main_ms", _MAIN + "its duration", run=RUNS[0], file="raw.csv", unit="ms",
                   others=_OTHER)
SM_CYCLES = Quantity("h200.counters.sm_cycles", _MAIN + "SM-cycles with work, summed over the SMs",
                     run=RUNS[0], file="raw.csv", unit="cycles", others=_OTHER)
CLOCK = Quantity("h200.counters.clock", _MAIN + "the clock it ran at (gpc__cycles_elapsed.avg.per_second)",
                 run=RUNS[0], file="raw.csv", unit="GHz", others=_OTHER)
PROGRAMS = Quantity("h200.counters.programs", _MAIN + "programs (thread blocks) launched", run=RUNS[0],
                    file="raw.csv", unit="programs", others=_OTHER)
THREADS = Quantity("h200.counters.threads", _MAIN + "threads per program", run=RUNS[0], file="raw.csv",
                   unit="threads", others=_OTHER)
WAVES = Quantity("h200.counters.waves", _MAIN + "programs / (SMs x programs that fit on one SM)", run=RUNS[0],
                 file="raw.csv", unit="waves", others=_OTHER)
COUNTERS = (TENSOR_BUSY, WARPS_PER_SM, MAIN_MS, SM_CYCLES, CLOCK, PROGRAMS, THREADS, WAVES)


def counter_fact(quantity: Quantity, value, job: JobCounters, **kw) -> Fact:
    """``value`` (read from ``job``'s counters) as the quantity's member for the job's kernel and length, from
    the run the job was profiled in (another run than the record is named in the fact: ``...@run``)."""
    run = job.source.removeprefix("data/").rsplit("/", 1)[0]
    return quantity.fact(value, job.candidate, f"{job.n // 1024}k", run=run, **kw)
