"""Our kernels serving in vLLM, read from the runs of one lease: both arms' sweeps side by side (``sweep_pair``), the
serving race, the agreement check and its planted bug, the attention kernels of the OURS server's profiler windows.
A later lease ran the same with the Gluon prefill kernel (the ``GLUON_*`` runs): each reader takes ``run``. Another
swept every backend beside OURS to 128k tokens (``arms_sweep``) and put OURS and FA3 under Poisson load (read by
lab.results.load)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from lab import LabError
from lab.measure.vllm import serverlog
from lab.measure.vllm.arms import FA3, OURS, book_order
from lab.results import kernel_counters
from lab.results.data import DATA_DIR
from lab.store import read_json

SWEEP_RUN = "h100/vllm0.26-qwen2.5-7b-ours"
RACE_RUN = "h100/serving-race"
AGREEMENT_RUN, PLANTED_RUN = "h100/agreement", "h100/agreement-planted-bug"
#: The same studies with OURS's prefill the Gluon kernel for Hopper (lab.measure.attention.hopper_paged), one later lease.
GLUON_SWEEP_RUN, GLUON_RACE_RUN = "h100/vllm0.26-qwen2.5-7b-ours-gluon", "h100/serving-race-gluon"
GLUON_AGREEMENT_RUN, GLUON_PLANTED_RUN = "h100/agreement-gluon", "h100/agreement-gluon-planted-bug"
#: Every backend swept beside OURS (Gluon prefill) to 128k tokens, and OURS and FA3 under Poisson load: one lease.
ARMS_RUN, LOAD_RUN = "h100/vllm0.26-qwen2.5-7b-ours-arms", "h100/vllm0.26-qwen2.5-7b-ours-load"
#: FA2 swept beside FA3 and OURS to 128k tokens, a later lease (FA2's server starts slowly: a call of its own).
FA2_RUN = "h100/vllm0.26-qwen2.5-7b-ours-arms-fa2"
#: A busy server's mixed step raced alone, our decode rows in the prefill kernel and split off, a later lease.
MIXED_RACE_RUN = "h100/serving-race-mixed"
#: The load study again with a mixed step's decode rows split off to the decode kernel, and the agreement check of
#: such a server, a later lease (before the kernels compiled once per server).
LOAD_SPLIT_RUN = "h100/vllm0.26-qwen2.5-7b-ours-load-split"
SPLIT_AGREEMENT_RUN, SPLIT_PLANTED_RUN = "h100/agreement-split", "h100/agreement-split-planted-bug"
#: The load study with kernels that compile once per server and warm up when it starts (both arms, then both again),
#: and OURS with the warm-up off, the first server of that lease.
LOAD_ONCE_RUN = "h100/vllm0.26-qwen2.5-7b-ours-load-warm"
LOAD_REPEAT_RUN = "h100/vllm0.26-qwen2.5-7b-ours-load-warm-repeat"
LOAD_COLD_RUN = "h100/vllm0.26-qwen2.5-7b-ours-load-cold"
#: The serving race's last chunk (prefill 8192 over 24576) under Nsight Compute, FA3 and ours, in a later lease.
CHUNK_COUNTERS_RUN = "h100/kernel-counters-chunk"
#: The mixed-step race's step under Nsight Compute: FA3, ours with the decode rows in the tiles and split off.
MIXED_COUNTERS_RUN = "h100/kernel-counters-mixed"
#: Kernel-name words of FlashAttention's own kernels (lab.measure.census.rules: fa2, fa3, flash helpers).
FLASH_WORDS = ("flash_fwd", "FlashAttn", "flash::", "flash_attn")


def _sweep(root: Path, arm, run: str) -> pd.DataFrame:
    path = root / run / arm.slug / "sweep.csv"
    if not path.is_file():
        raise LabError(f"{path}: no sweep of {arm.label} in the OURS lease")
    rows = pd.read_csv(path)
    return rows[rows.status == "ok"].set_index("target_len")[["ttft_s", "itl_ms"]]


def _arm_sweeps(root: Path, run: str) -> dict[str, pd.DataFrame]:
    """Each arm's sweep.csv of one lease by arm label, in the book's order: its measured rows (``ok``, and
    ``partial`` where the lease's time ran out between repetitions), by prompt length."""
    paths = sorted((root / run).glob("*/sweep.csv"))
    if not paths:
        raise LabError(f"{root / run}: no arm's sweep.csv")
    sweeps = {}
    for path in paths:
        rows = pd.read_csv(path)
        sweeps[str(rows.arm.iloc[0])] = rows[rows.status.isin(("ok", "partial"))].set_index("target_len")
    return {label: sweeps[label] for label in book_order(sweeps)}


def arms_sweep(root: Path = DATA_DIR, run: str = ARMS_RUN, metric: str = "ttft_s") -> pd.DataFrame:
    """One column of every arm of one lease's sweep (``ttft_s``, ``itl_ms``, ``ttft_min_s`` ...): a row per prompt
    length, a column per arm label in the book's order; NaN where an arm did not measure a length."""
    return pd.DataFrame({label: rows[metric] for label, rows in _arm_sweeps(root, run).items()}).sort_index()


def arms_partial(root: Path = DATA_DIR, run: str = ARMS_RUN) -> dict[tuple[str, int], str]:
    """(arm label, prompt length) -> what the sweep says was measured, for the rows a call's time limit cut short."""
    return {(label, int(n)): str(row.error) for label, rows in _arm_sweeps(root, run).items()
            for n, row in rows[rows.status == "partial"].iterrows()}


def graph_capture(arm, run: str = FA2_RUN, root: Path = DATA_DIR) -> float:
    """Seconds an arm's sweep server spent capturing CUDA graphs as it started (its server.log); LabError without it."""
    path = root / run / arm.slug / "server.log"
    seconds = serverlog.graph_capture_seconds(serverlog.read_text(path))
    if seconds is None:
        raise LabError(f"{path}: no 'Graph capturing finished' line (an eager server, or a log cut short)")
    return seconds


def sweep_pair(root: Path = DATA_DIR, run: str = SWEEP_RUN) -> pd.DataFrame:
    """Prompt lengths both arms measured: TTFT (s) and ITL (ms) of each, and OURS over FA3 (above 1: ours slower)."""
    fa3, ours = _sweep(root, FA3, run), _sweep(root, OURS, run)
    pair = fa3.add_suffix("_fa3").join(ours.add_suffix("_ours"), how="inner")
    pair["ttft_ratio"] = pair.ttft_s_ours / pair.ttft_s_fa3
    pair["itl_ratio"] = pair.itl_ms_ours / pair.itl_ms_fa3
    return pair


def race_table(root: Path = DATA_DIR, run: str = RACE_RUN) -> pd.DataFrame:
    """The serving race's timed rows: step, candidate, ms, speed over FA3 (above 1: faster), config."""
    rows = pd.read_csv(root / run / "race.csv")
    return rows[rows.ms.notna()][["step", "candidate", "ms", "vs_fa3", "max_abs_diff", "config"]]


def raced_steps(root: Path = DATA_DIR, run: str = MIXED_RACE_RUN) -> list[tuple[str, int, int, int]]:
    """The steps a race ran, as its provenance records them: (name, sequences, query tokens, longest keys)."""
    return [tuple(step) for step in read_json(root / run / "provenance.json")["flags"]["steps"]]


def agreement(root: Path = DATA_DIR, run: str = AGREEMENT_RUN) -> dict:
    """The agreement check's summary: passed, tolerance, and per kind of step its calls, worst relative difference
    (inf where an output was not finite) and how many outputs were not finite."""
    summary = read_json(root / run / "summary.json")
    for kind in summary["kinds"].values():
        if kind["worst_relative_error"] is None or kind["not_finite"]:
            kind["worst_relative_error"] = math.inf
    return summary


def attention_kernels(root: Path = DATA_DIR, arm=OURS, run: str = SWEEP_RUN) -> dict[str, dict]:
    """Each profiler window of the OURS server: the attention kernels it ran with their GPU time, and which of them
    are FlashAttention's (none, when our kernels did every attention call)."""
    folder = root / run / "traces" / arm.slug
    windows = {}
    for path in sorted(folder.glob("*.census.json")):
        census = read_json(path)
        kernels = {k["name"]: k["ms"] for k in census["attention_kernels"]}
        windows[path.name.removesuffix(".census.json")] = {
            "kernels": kernels, "attention_share": census["families"]["attention"]["share"],
            "flash": [name for name in kernels if any(word in name for word in FLASH_WORDS)]}
    if not windows:
        raise LabError(f"{folder}: no census of the OURS server's windows")
    return windows


def chunk_counters(root: Path = DATA_DIR) -> dict[str, kernel_counters.JobCounters]:
    """The last 8k chunk of a 32k prompt under Nsight Compute, by candidate (``fa3``, ``ours``): its main kernel's
    counters (lab.results.kernel_counters.JobCounters)."""
    jobs = kernel_counters.run_jobs(CHUNK_COUNTERS_RUN, root)
    return {job.candidate: job for job in jobs.values()}


def mixed_counters(root: Path = DATA_DIR) -> dict[str, kernel_counters.JobCounters]:
    """The mixed-step race's step under Nsight Compute, by candidate (``fa3``, ``ours-chunks``: the decode rows in the
    prefill kernel's tiles, ``ours-decode``: split off to the decode kernel)."""
    jobs = kernel_counters.run_jobs(MIXED_COUNTERS_RUN, root)
    if not jobs:
        raise LabError(f"data/{MIXED_COUNTERS_RUN}: no profiled jobs")
    return {job.candidate: job for job in jobs.values()}
