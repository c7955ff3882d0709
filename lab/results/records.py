"""The runs the book reads: every folder under data/ a quantity can have as its run of record.

Each :class:`lab.results.quantities.Quantity` names one of these as its run of record; a number quoted
from another run of the same measurement names that run on its page (its folder, or one of the words
:attr:`Run.names` gives it). The appendix's table of runs is built from this list, the quantities that
take each run as their record (:mod:`lab.book.pages`) and each run's ``provenance.json``.
"""

from __future__ import annotations

from dataclasses import dataclass

from lab import LabError


@dataclass(frozen=True)
class Run:
    """One run on file: its folder under data/, what it measured, and words by which prose may name it."""

    folder: str
    measured: str
    names: tuple[str, ...] = ()

    def holds(self, path: str) -> bool:
        """Whether a data path (``data/h200/kernels/prefill.csv``, a glob) lies inside this run's folder."""
        path = path.removeprefix("data/")
        return path == self.folder or path.startswith(f"{self.folder}/") or path.startswith(f"{self.folder}*")


RUNS = (
    Run("reference/a10g-vllm0.11-qwen2.5-7b", "the published A10G study: vLLM 0.11 sweeps of FLASH_ATTN and "
        "FLEX_ATTENTION and its census, parsed from its logs", names=("A10G study", "reference study")),
    Run("h200/hardware", "the H200's dense bf16 matrix-product rate (one torch.matmul, cuBLAS's own pick, square products of 4,096 to 12,288; the best at 4,096³)"),
    Run("h200/bandwidth", "the H200's read-stream bandwidth ceiling (256 MB-4 GB) and a copy beside it"),
    Run("h200/device-properties", "what the CUDA driver reports about the H200 (SMs, L2, shared memory)"),
    Run("h200/kernels", "the first full kernel benchmark: every candidate at 1k-32k, prefill and decode, "
        "3 interleaved rounds", names=("benchmark's earlier full run", "earlier full run", "first full run")),
    Run("h200/kernels-repeats", "three repeats of the prefill bars right after data/h200/kernels"),
    Run("h200/kernels-contiguous", "the benchmark timed one block per candidate, before interleaved rounds",
        names=("in single blocks", "one block per candidate", "block-timed")),
    Run("h200/kernels-race", "prefill kernels raced in one process: ours, SDPA, Flex, FA2, FA3, FA4 at 4k-128k",
        names=("race of record", "the race")),
    Run("h200/kernels-ablation", "the tuned kernel's ablation, each step switched on in turn, FA3 beside it",
        names=("ablation",)),
    Run("h200/kernels-tuning-race", "every variant of the tuned Triton kernel raced against FA3",
        names=("tuning race",)),
    Run("h200/kernels-hopper-race", "the hand-scheduled Gluon kernel's variants raced against FA3",
        names=("hand-scheduled kernel's race", "Gluon race")),
    Run("h200/kernel-counters", "Nsight Compute counters of the prefill and decode kernels"),
    Run("h200/kernel-counters-batch16", "Nsight Compute counters of decode at batch 16"),
    Run("h200/kernel-counters-mask", "Nsight Compute counters of FlexAttention's decode with a padded mask"),
    Run("h200/kernel-counters-hopper", "Nsight Compute counters of FA3 and the Gluon kernel at 16k"),
    Run("h200/dram-bytes", "DRAM bytes of one prefill call per kernel (Nsight Compute)"),
    Run("h200/decode-rows", "decode time against query rows per KV head at a long context"),
    Run("h200/decode-rows-extra", "more query rows for the decode-rows study"),
    Run("h200/paged-decode", "split-KV decode through a block table, against contiguous and FA3's paged decode"),
    Run("h200/flex-masks", "FlexAttention's masks and their build cost"),
    Run("h200/flex-decomposition", "FlexAttention standalone, then one vLLM ingredient at a time"),
    Run("h200/value-dependence", "whether a kernel's time depends on the values it multiplies"),
    Run("h200/vllm0.26-qwen2.5-7b", "vLLM 0.26 sweeps of prompt length per backend, and their profiler windows"),
    Run("h200/vllm0.26-qwen2.5-7b-chunk2048", "the FA3 sweep again with prefill chunks of 2,048 tokens",
        names=("chunk2048",)),
    Run("h200/vllm0.26-qwen2.5-7b-concurrency", "decode under load: ITL and tokens/s against concurrent requests"),
    Run("h200/vllm0.26-qwen2.5-7b-load", "a busy server: Poisson arrivals at several rates with vllm bench serve"),
    Run("h200/vllm0.26-qwen2.5-7b-interference", "a long prompt among decoders, per chunk size"),
    Run("h200x2/vllm0.26-qwen2.5-7b-tp2", "the FA3 sweep with tensor parallelism over two H200s"),
    Run("h200/backward-race", "attention backward passes raced in one process: ours, SDPA's flash and cuDNN "
        "backends at 4k-32k", names=("backward race",)),
    Run("h200/backward-counters", "Nsight Compute counters of one backward pass per kernel at 16k"),
    Run("h200/clock-probe", "the H200's clock, power and limit flags sampled through idle time and matrix-product "
        "bursts"),
    Run("h200/live-check", "every chapter executed live on the H200"),
    Run("h100/vllm0.26-qwen2.5-7b-ours", "the book's kernels serving in vLLM 0.26 (the OURS arm, through the lab's "
        "plugin) against FA3, one H100 lease: prompt-length sweeps of both arms and the OURS server's profiler "
        "windows", names=("OURS sweep", "one H100 lease")),
    Run("h100/serving-race", "a server's attention steps (8,192-token prefill chunks, decode at 32,768 keys) on one "
        "paged cache, our kernels against FA3, in the same H100 lease", names=("serving race",)),
    Run("h100/kernel-counters-chunk", "Nsight Compute counters of the last 8,192-token chunk of a 32k prompt on a "
        "paged cache, FA3 and our paged prefill kernel as the server runs them (a later H100 lease)",
        names=("chunk counters",)),
    Run("h100/agreement", "the OURS server with FA3 run beside every attention call on the same inputs "
        "(same H100 lease)", names=("agreement check",)),
    Run("h100/agreement-planted-bug", "the same check with every sequence handed to our kernels one key short",
        names=("planted bug",)),
    Run("h100/serving-race-gluon", "the serving race again, a later H100 lease: the same steps with the Gluon "
        "prefill kernel for Hopper among our settings", names=("Gluon serving race",)),
    Run("h100/agreement-gluon", "the agreement check of an OURS server whose prefill is the Gluon kernel (the Gluon "
        "serving race's lease)", names=("Gluon agreement check", "a server whose prefill was the Gluon kernel")),
    Run("h100/agreement-gluon-planted-bug", "the same with every sequence one key short", names=("Gluon planted bug", "a server whose prefill was the Gluon kernel")),
    Run("h100/vllm0.26-qwen2.5-7b-ours-gluon", "FA3 and OURS with the Gluon prefill in vLLM 0.26, one H100 lease (the "
        "Gluon serving race's): prompt-length sweeps at 4k, 16k and 32k tokens and the OURS server's profiler "
        "windows", names=("Gluon OURS sweep",)),
    Run("h100/vllm0.26-qwen2.5-7b-ours-arms", "every backend beside OURS with the Gluon prefill, one H100 lease: "
        "FA3, OURS and TRITON_ATTN swept to 131,072 tokens, FLEX_ATTENTION to 32,768", names=("every-backend sweep",)),
    Run("h100/vllm0.26-qwen2.5-7b-ours-load", "OURS with the Gluon prefill and FA3 under Poisson load with vllm bench "
        "serve, 1,024-token prompts, in the every-backend sweep's lease", names=("OURS load study",)),
    Run("h100/serving-race-mixed", "a busy server's mixed step (128 decoding sequences beside 7 new 1,024-token "
        "prompts) on one paged cache: FA3, and our kernels with the decode rows in the prefill kernel's tiles and "
        "split off to the decode kernel, a later H100 lease", names=("mixed-step race",)),
    Run("h100/vllm0.26-qwen2.5-7b-ours-load-split", "the OURS load study again with a mixed step's decode rows sent "
        "to the decode kernel, FA3 beside it, a later H100 lease", names=("split load study",)),
    Run("h100/agreement-split", "the agreement check of an OURS server that splits a mixed step's decode rows off "
        "(the split load study's lease)", names=("split agreement check",)),
    Run("h100/agreement-split-planted-bug", "the same with every sequence one key short",
        names=("split planted bug",)),
    Run("h100/kernel-counters-mixed", "Nsight Compute counters of the mixed-step race's step: FA3, and ours with the "
        "decode rows in the prefill kernel's tiles and split off (the split load study's lease)",
        names=("mixed counters",)),
    Run("h100/vllm0.26-qwen2.5-7b-ours-load-warm", "the OURS load study with kernels that compile once per server "
        "and warm up when it starts, FA3 beside it, a later H100 lease", names=("compile-once load study",)),
    Run("h100/vllm0.26-qwen2.5-7b-ours-load-warm-repeat", "both arms of the compile-once load study again, the same "
        "lease", names=("compile-once repeat",)),
    Run("h100/vllm0.26-qwen2.5-7b-ours-load-cold", "OURS under the same load with kernels that compile once per "
        "server and the warm-up off, the first server of the same lease", names=("cold OURS load run",)),
    Run("h100/vllm0.26-qwen2.5-7b-ours-arms-fa2", "FA2 swept beside FA3 and OURS (Gluon prefill) to 131,072 "
        "tokens, one later H100 lease", names=("FA2 lease",)),
    Run("h100/kernels-persistent-race", "the Gluon kernel launched persistently (strided and balanced plans) raced "
        "against its one-program-per-tile launch, its schedule's parts and FA3, 4k to 32k, one later H100 lease",
        names=("persistent race",)),
    Run("h100/kernels-persistent-race-repeat", "the persistent race again with nine rounds, same lease",
        names=("persistent race's repeat",)),
    Run("h100/kernels-persistent-race-fa4", "the persistent race again on another H100 lease, FA4's wheels carried, "
        "so FA4 raced beside FA3 and the Gluon kernel's launches", names=("persistent race with FA4",)),
    Run("h100/kernel-counters-persistent", "Nsight Compute counters at 16k of FA3 and the Gluon kernel launched "
        "both ways (the persistent race's call)", names=("persistent counters",)),
    Run("h100/kernel-counters-persistent-32k", "the same at 32k, same lease", names=("persistent counters at 32k",)),
    Run("h100/live-check", "every chapter executed live on a fresh H100 with the defaults of 2026-12-06 "
        "(the run that found two faults of those defaults, and four runs after the fixes)"),
    Run("h100/jupyter-check", "JupyterLab from the offline wheels on a fresh H100: chapter 04 opened and its panel run"),
    Run("h100/device-logs", "the consoles of the H100 calls"),
    Run("h200/device-logs", "the consoles of the H200 calls"),
)

_BY_FOLDER = {run.folder: run for run in RUNS}


def run(folder: str) -> Run:
    """The run on file under data/``folder``; a LabError naming the known runs otherwise."""
    found = _BY_FOLDER.get(folder.removeprefix("data/").rstrip("/"))
    if found is None:
        raise LabError(f"no run data/{folder} in lab.results.records.RUNS; add it there with what it measured")
    return found


def run_holding(path: str) -> Run | None:
    """The run whose folder holds a data path, or None (the longest folder wins: a study's part)."""
    held = [r for r in RUNS if r.holds(path)]
    return max(held, key=lambda r: len(r.folder)) if held else None
