"""What the hardware counters say the fused prefill kernels were doing at 16k tokens on the H200: the rows of
chapter 2's table and the facts its prose, the interview answer and the quiz quote.

Every value comes from :mod:`lab.results.kernel_counters` (Nsight Compute's counters of each job's main kernel)
and the H200's one bandwidth ceiling, :func:`lab.results.bandwidth.ceiling`; chapter 2 and chapter 8 both
read :func:`prefill_rows`, so a quantity is computed once. A job that is not on file gives None ("not measured").
"""

from __future__ import annotations

from lab.book.facts import Fact
from lab.results import bandwidth, kernel_counters
from lab.results.facts import NOT_MEASURED

N = 16384
#: The prefill jobs chapter 2 compares, fastest peers first, and how the page names each.
KERNELS = {"sdpa-cudnn": "cuDNN (SDPA)", "fa3": "FA3 (vLLM)", "fa4": "FA4", "flex-flash": "Flex, FLASH backend",
           "ours-tuned": "ours, tuned", "flex": "Flex (Triton)"}
FOLDER = f"data/{kernel_counters.RUNS[0]}"
SOURCE = f"{FOLDER}/raw.csv (Nsight Compute on the H200)"
COLUMNS = {"kernel": "kernel", "ms": "main kernel (ms)", "tensor_pct": "tensor pipe busy", "xu_pct": "XU pipe",
           "warps_per_sm": "warps per SM", "top_stall": "top stall", "read_over_compulsory": "DRAM reads / compulsory",
           "rate_pct": "DRAM rate, % of ceiling"}


def _row(candidate: str, job, ceiling: float) -> dict:
    """One kernel's counters; every value None when the job is not on file."""
    row = {"candidate": candidate, "kernel": KERNELS[candidate]}
    if job is None:
        return row | {key: None for key in COLUMNS if key != "kernel"} | {"dram_read": None, "compulsory_read": None,
                                                                          "barrier": None}
    compulsory = kernel_counters.compulsory_read_bytes(job)
    return row | {"ms": job.main["ms"], "tensor_pct": job.main["tensor_pct"], "xu_pct": job.main["xu_pct"],
                  "warps_per_sm": job.main["warps_per_sm"], "top_stall": job.stalls[0][0] if job.stalls else None,
                  "barrier": dict(job.stalls).get("barrier"), "dram_read": job.totals["dram_read"],
                  "compulsory_read": compulsory, "read_over_compulsory": job.totals["dram_read"] / compulsory,
                  "rate_pct": 100 * job.dram_rate / ceiling}


def prefill_rows(root=None) -> list[dict]:
    """One row per kernel of :data:`KERNELS` at :data:`N` tokens (batch 1): main-kernel ms, tensor and XU pipe
    busy (% of peak over the active cycles), warps resident per SM, the top stall reason (and the barrier stall,
    cycles per issued instruction), DRAM bytes read against Q, K and V read once, and the job's DRAM traffic per
    second as a percentage of the GPU's read ceiling. ``root``: the data folder (tests pass their own)."""
    jobs = kernel_counters.jobs(root)
    ceiling = bandwidth.ceiling("NVIDIA H200", root) if jobs else None  # no job: nothing to divide
    return [_row(candidate, jobs.get(f"prefill:{candidate}:1:{N}"), ceiling) for candidate in KERNELS]


def prefill_table(rows: list[dict]):
    """Chapter 2's table of ``rows`` (from :func:`prefill_rows`), "not measured yet" where a kernel is missing."""
    import pandas as pd

    table = pd.DataFrame(rows)[list(COLUMNS)].rename(columns=COLUMNS)
    formats = {"main kernel (ms)": "{:.2f}", "tensor pipe busy": "{:.1f}%", "XU pipe": "{:.1f}%",
               "warps per SM": "{:.0f}", "DRAM reads / compulsory": "{:.2f}×", "DRAM rate, % of ceiling": "{:.1f}%"}
    return table.style.hide(axis="index").format(formats, na_rep=NOT_MEASURED)


def _text(value, fmt: str) -> str | None:
    return None if value is None else fmt.format(value)


def _span(rows: list[dict], key: str, fmt: str) -> tuple[str | None, str | None]:
    """The smallest and largest ``key`` over the measured rows, as text."""
    values = [row[key] for row in rows if row[key] is not None]
    return (fmt.format(min(values)), fmt.format(max(values))) if values else (None, None)


def facts(rows: list[dict]) -> dict[str, Fact]:
    """The counters the prose quotes, as words with their units (no format spec needed, so a missing kernel
    reads "not measured yet"): the range over all kernels, and FA3 against ours."""
    by = {row["candidate"]: row for row in rows}
    out = {"kc_n": Fact(N, "lab.book.counter_facts")}
    for key, fmt in (("tensor_pct", "{:.0f}%"), ("xu_pct", "{:.0f}%"), ("read_over_compulsory", "{:.1f}×"),
                     ("rate_pct", "{:.1f}%")):
        low, high = _span(rows, key, fmt)
        out[f"kc_{key}_min"], out[f"kc_{key}_max"] = Fact(low, SOURCE), Fact(high, SOURCE)
    for tag, candidate in (("fa3", "fa3"), ("ours", "ours-tuned"), ("fa4", "fa4"), ("cudnn", "sdpa-cudnn")):
        row = by[candidate]
        out |= {f"kc_{tag}_ms": Fact(_text(row["ms"], "{:.2f} ms"), SOURCE),
                f"kc_{tag}_tensor": Fact(_text(row["tensor_pct"], "{:.1f}%"), SOURCE),
                f"kc_{tag}_xu": Fact(_text(row["xu_pct"], "{:.1f}%"), SOURCE),
                f"kc_{tag}_warps": Fact(_text(row["warps_per_sm"], "{:.0f}"), SOURCE),
                f"kc_{tag}_stall": Fact(row["top_stall"], SOURCE),
                f"kc_{tag}_barrier": Fact(_text(row["barrier"], "{:.2f}"), SOURCE),
                f"kc_{tag}_reads": Fact(_text(row["read_over_compulsory"], "{:.1f}×"), SOURCE)}
    return out
