"""Why FlexAttention decodes slowly, from the hardware counters (lab.results.kernel_counters) of its decode
variants at 32k and batch 1 and 16, against FA3 as vLLM runs it and the read ceiling.

The gap between vLLM's FLEX arm (``flex-paged``: forced general kernel, 16 x 16 tiles, a block mask from
the block table, every request's query tokens packed into one sequence) and FA3 is split into factors that
are each a measured ratio:

- FA3 against the read floor (the compulsory bytes at the GPU's bandwidth ceiling, :func:`lab.results.bandwidth.ceiling`);
- the general kernel (``flex-default``) against that floor, as four factors: the useful MMA work at the
  tensor peak over the floor (below one: decode is memory-bound), the rows each program computes per real
  query row (``BLOCK_M`` of the tile over the one query token), the SMs left idle (all SMs over those that
  worked, from the SM-cycle counters) and the tensor pipe's idle share on the SMs that worked. Their
  product is a prediction; the measured time over the floor divided by it is the remainder, stated;
- vLLM's recipe over the general kernel (measured), with its split into instructions, issue rate, busy SMs
  and clock (an identity of the counters: time = instructions / (SMs x issue rate x clock)).

Values are numbers, "not measured" is None; the chapter writes the sentences.
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.results import bandwidth, hardware
from lab.results import kernel_counters as kc

N = 32768
#: The jobs of the counter table, in the order a reader meets them: (candidate, batch).
ROWS = (("flex-default", 1), ("flex-default", 16), ("flex-pad8", 1), ("flex-pad8", 16), ("flex-pad8-mask", 1),
        ("flex-pad8-mask", 16), ("flex-paged", 1),
        ("flex-paged", 16), ("sdpa-cudnn", 1), ("fa3", 1), ("fa3", 16), ("ours-tuned", 1), ("ours-tuned", 16))
#: Query rows per program of the general kernel: BLOCK_M of torch 2.11's default Flex config for sm_90, bf16,
#: head_dim 128 (``CUDAConfigHeuristic.h100_default_flex_config``: FlexConfig(128, 64, 3, 8) in
#: torch/_inductor/template_heuristics/triton.py). The counters agree: 8 warps, 129 KiB of shared memory
#: (a 128 x 128 query tile and 3 stages of 64-key K and V tiles).
GENERAL_BLOCK_M = 128
Q_HEADS, KV_HEADS, HEAD_DIM = 28, 4, 128
GPU = "NVIDIA H200"


def _job(candidate: str, batch: int) -> str:
    return f"{'flexdecode' if candidate.startswith('flex') else 'decode'}:{candidate}:{batch}:{N}"


def measured(root=None) -> dict[tuple[str, int], kc.JobCounters]:
    """The profiled decode jobs on file, by (candidate, batch)."""
    jobs = kc.jobs(root)
    return {key: jobs[_job(*key)] for key in ROWS if _job(*key) in jobs}


def busy_sms(job: kc.JobCounters) -> float | None:
    """SMs that worked, in SM-equivalents: SM-cycles with work over the busiest SM's cycles."""
    total, longest = job.main.get("sm_cycles_sum"), job.main.get("sm_cycles_max")
    return total / longest if total and longest else None


def table(root=None) -> list[dict]:
    """One row per decode job: job time, launch, busy SMs, warps per SM, tensor pipe, top stall, DRAM read and
    its rate over the job as a share of the read ceiling."""
    jobs = measured(root)
    ceiling = bandwidth.ceiling(GPU, root) if jobs else None  # no job: nothing to divide, nothing measured
    rows = []
    for (candidate, batch), job in jobs.items():
        seconds = job.totals["job_ms"] * 1e-3
        rows.append({"candidate": candidate, "batch": batch, "ms": job.totals["job_ms"],
                     "programs": int(job.main["programs"]), "busy_sms": busy_sms(job),
                     "warps_per_sm": job.main["warps_per_sm"], "tensor_pct": job.main["tensor_pct"],
                     "top_stall": job.stalls[0][0] if job.stalls else None, "dram_read_gb": job.totals["dram_read"] / 1e9,
                     "read_pct_of_ceiling": 100 * job.totals["dram_read"] / seconds / ceiling, "source": job.source})
    return rows


@dataclass(frozen=True)
class Factor:
    name: str
    value: float


@dataclass(frozen=True)
class Gap:
    """vLLM's FLEX recipe over FA3 at one batch, as factors that multiply to a prediction of the total."""

    batch: int
    floor_ms: float               # compulsory bytes at the read ceiling
    factors: tuple                # Factor, in the order of the chain
    general_predicted: float      # the four factors of the general kernel, multiplied
    general_measured: float       # its measured time over the floor
    recipe_split: tuple           # Factor: instructions, issue rate, busy SMs, clock (paged over general)
    total_measured: float         # flex-paged over FA3, job times
    sources: tuple

    @property
    def product(self) -> float:
        value = 1.0
        for factor in self.factors:
            value *= factor.value
        return value

    @property
    def remainder(self) -> float:
        """What the factors leave: measured total over their product (1 = nothing left)."""
        return self.total_measured / self.product

    def factor(self, name: str) -> float:
        return next(f.value for f in (*self.factors, *self.recipe_split) if f.name == name)


def useful_flops(batch: int, rows: int = 1) -> float:
    """QK^T and PV of one decode step, ``rows`` query rows per query head: 4 x rows x n x d per head."""
    return 4.0 * rows * N * HEAD_DIM * Q_HEADS * batch


def gap(batch: int, root=None) -> Gap | None:
    """The factor chain at ``batch``, or None while a job it needs is not on file."""
    jobs = measured(root)
    need = [("fa3", batch), ("flex-default", batch), ("flex-paged", batch)]
    if any(key not in jobs for key in need):
        return None
    fa3, general, paged = (jobs[key] for key in need)
    device = hardware.match_device(GPU)
    floor_ms = 1e3 * kc.compulsory_bytes(general) / bandwidth.ceiling(GPU, root)
    ms = {name: job.totals["job_ms"] for name, job in (("fa3", fa3), ("general", general), ("paged", paged))}
    general_factors = (Factor("useful work over the read floor", 1e3 * useful_flops(batch) / device.bf16_flops / floor_ms),
                       Factor("rows computed per real row", GENERAL_BLOCK_M),
                       Factor("idle SMs", device.sm_count / busy_sms(general)),
                       Factor("tensor pipe idle", 100.0 / general.main["tensor_pct"]))
    predicted = 1.0
    for factor in general_factors:
        predicted *= factor.value
    factors = (Factor("FA3 over the read floor", floor_ms / ms["fa3"]), *general_factors,
               Factor("vLLM's recipe over the general kernel", ms["paged"] / ms["general"]))
    return Gap(batch, floor_ms, factors, predicted, ms["general"] / floor_ms, recipe_split(general, paged),
               ms["paged"] / ms["fa3"], (fa3.source, general.source, paged.source, bandwidth.bandwidth_ceiling(GPU, root).source))


def recipe_split(general: kc.JobCounters, paged: kc.JobCounters) -> tuple:
    """Main-kernel time of ``paged`` over ``general`` as instructions x issue rate x busy SMs x clock."""
    g, p = general.main, paged.main
    return (Factor("instructions", p["instructions"] / g["instructions"]),
            Factor("issue rate", g["issue_pct"] / p["issue_pct"]),
            Factor("busy SMs", busy_sms(general) / busy_sms(paged)),
            Factor("clock", g["clock_hz"] / p["clock_hz"]),
            Factor("main kernel time", p["ms"] / g["ms"]))


def per_program_read(job: kc.JobCounters) -> float | None:
    """DRAM bytes per second per SM that worked: what one program pulls when few programs do the work."""
    sms = busy_sms(job)
    return job.totals["dram_read"] / sms / (job.main["ms"] * 1e-3) if sms else None
