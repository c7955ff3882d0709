"""The GPU's memory-bandwidth ceiling: a read-only stream over buffers far larger than L2.

A decode kernel reads its K/V cache and writes almost nothing, so the ceiling it lives under is how
fast the GPU can *read* DRAM. This measures that with the simplest kernel that does only that: a
persistent Triton grid (a few programs per multiprocessor) in which each program sums 16-byte-wide
slices of the buffer and writes one number, over buffer sizes from 256 MB to 4 GB (the H200's L2
holds 60 MiB). The ceiling (lab.results.bandwidth) is the slope of time against bytes over those
sizes, and the slopes between neighbouring sizes must agree, or the figure is not a property of the GPU. A device-to-device copy at the same sizes is timed too
(``kind=copy``, bytes read plus written): it is the figure an earlier run used, shown beside the read.

Every size is timed in interleaved rounds (each round visits every size), median of
``triton.testing.do_bench`` (CUDA events, L2 flushed before each call). Writes ``read_stream.csv``
(kind, size_bytes, ms, gb_per_s, reps, ms_rounds) and ``provenance.json`` to ``--out``.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from lab import REPO_ROOT, LabError, env, store
from lab.cli import module_cli, path_arg, positive_count, sizes
from lab.folders import writes_folder
from lab.measure.timing import time_in_rounds

env.use_triton_interpreter_without_gpu()

import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.testing import do_bench  # noqa: E402

if env.use_triton_interpreter_without_gpu():
    from lab.measure import triton_interpreter

    triton_interpreter.apply()

DEFAULT_OUT = REPO_ROOT / "data" / "local" / "bandwidth"
SIZES = "256M,512M,1G,2G,4G"
COLUMNS = ("kind", "size_bytes", "ms", "gb_per_s", "reps", "ms_rounds")
BLOCK = 4096           # int32 words per program per step: 16 KiB in flight per step, 16-byte loads
PROGRAMS_PER_SM = 8


@triton.jit
def _read_kernel(X, Partial, n_words, stride, BLOCK: tl.constexpr):
    # a persistent grid: program p sums words p*BLOCK, p*BLOCK + stride, ... (stride = programs * BLOCK)
    # and writes one partial sum
    pid = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.int32)
    for start in tl.range(pid * BLOCK, n_words, stride):
        acc += tl.load(X + start + offsets, mask=start + offsets < n_words, other=0)
    tl.store(Partial + pid, tl.sum(acc, 0))


def read_sum(words, programs: int):
    """Sum of int32 ``words`` (wrapping), read once by ``programs`` programs; the result keeps the reads alive."""
    import torch

    partial = torch.empty(programs, dtype=torch.int32, device=words.device)
    _read_kernel[(programs,)](words, partial, words.numel(), programs * BLOCK, BLOCK=BLOCK, num_warps=8)
    return partial.sum()


def read_ceiling_gbps(small: int = 256 << 20, large: int = 4 << 30, rep_ms: int = 50) -> float:
    """This GPU's read ceiling in GB/s, as lab.results.bandwidth defines it (the slope of a read-only stream's
    time against bytes, far above L2), from two sizes: (large - small) bytes / (its time - small's time). A quick
    measurement for a run that reports a share of it (``python -m lab bench``); the ceiling the book's pages
    divide by is the full stream of this command's run of record (data/h200/bandwidth)."""
    import torch

    programs = PROGRAMS_PER_SM * torch.cuda.get_device_properties(0).multi_processor_count
    words = torch.ones(large // 4, dtype=torch.int32, device="cuda")
    ms = {size: do_bench(lambda size=size: read_sum(words[:size // 4], programs), warmup=5, rep=rep_ms,
                         return_mode="median") for size in (small, large)}
    words = None            # the buffer goes back before the benchmark allocates its own
    torch.cuda.empty_cache()
    return (large - small) / ((ms[large] - ms[small]) * 1e-3) / 1e9


def add_arguments(parser) -> None:
    parser.add_argument("--out", type=path_arg, default=DEFAULT_OUT, help=f"output folder (default {DEFAULT_OUT.relative_to(REPO_ROOT)})")
    parser.add_argument("--sizes", default=SIZES, help=f"buffer sizes in bytes, k/M/G suffixes are powers of 2 (default {SIZES})")
    parser.add_argument("--rounds", type=positive_count, default=3, help="interleaved rounds over the sizes")
    parser.add_argument("--rep-ms", type=positive_count, default=100, help="milliseconds of timed calls per size per round")


@writes_folder("--out", kinds=("hardware",))
def main(args) -> int:
    import pandas as pd
    import torch

    buffer_sizes = sizes(args.sizes, option="--sizes")
    if args.rounds < 1 or args.rep_ms < 1 or any(size < 4 * BLOCK for size in buffer_sizes):
        raise LabError(f"--rounds and --rep-ms must be positive and every size at least {4 * BLOCK} bytes")
    caps = env.detect()
    if not caps.has_gpu or caps.triton_mode != "gpu":
        raise LabError("no CUDA GPU here: `python -m lab bandwidth` measures a GPU; the H200's run of record is "
                       "data/h200/bandwidth/")
    out_dir = args.out if args.out.is_absolute() else Path.cwd() / args.out
    programs = PROGRAMS_PER_SM * torch.cuda.get_device_properties(0).multi_processor_count
    flags = {"experiment": "bandwidth", "sizes": list(buffer_sizes), "rounds": args.rounds, "rep_ms": args.rep_ms,
             "read_kernel": f"Triton persistent sum, {programs} programs, {BLOCK} int32 words per step, 8 warps",
             "copy": "torch dst.copy_(src), bytes read + written",
             "timer": "triton.testing.do_bench median (L2 flushed before each call), interleaved rounds"}
    store.write_provenance(out_dir, store.new_provenance("hardware", flags=flags, complete=False))
    # words of -1, 0, 1: any sum of up to 2**31 of them is exact in int32, so the check is exact too
    biggest = torch.randint(-1, 2, (max(buffer_sizes) // 4,), dtype=torch.int32, device="cuda")
    copy_dst = torch.empty(max(buffer_sizes) // 4, dtype=torch.int32, device="cuda")
    expected = {size: biggest[:size // 4].sum(dtype=torch.int32) for size in buffer_sizes}
    for size in buffer_sizes:   # the kernel reads every word once: its sum must equal torch's
        if read_sum(biggest[:size // 4], programs).item() != expected[size].item():
            raise LabError(f"the read kernel's sum over {size} bytes differs from torch's: not every word was read")
    started = time.time()
    def measure(size, _):      # one size in one round: read, then copied
        words = biggest[:size // 4]
        return (do_bench(lambda: read_sum(words, programs), warmup=5, rep=args.rep_ms, return_mode="median"),
                do_bench(lambda: copy_dst[:words.numel()].copy_(words), warmup=5, rep=args.rep_ms, return_mode="median"))

    timed = time_in_rounds(
        list(buffer_sizes), measure, args.rounds,
        after_round=lambda turn, _: print(f"[bandwidth +{time.time() - started:.0f}s] round {turn + 1}/{args.rounds}",
                                          file=sys.stderr, flush=True))
    times = {(kind, size): [pair[i] for pair in pairs] for size, pairs in zip(buffer_sizes, timed, strict=True)
             for i, kind in enumerate(("read", "copy"))}
    rows = []
    for (kind, size), ms in sorted(times.items()):
        moved = size * (2 if kind == "copy" else 1)
        rows.append({"kind": kind, "size_bytes": size, "ms": statistics.median(ms),
                     "gb_per_s": moved / (statistics.median(ms) * 1e-3) / 1e9, "reps": len(ms),
                     "ms_rounds": " ".join(f"{t:.4f}" for t in ms)})
    table = pd.DataFrame(rows).reindex(columns=COLUMNS)
    store.write_csv(out_dir, "read_stream.csv", table)
    store.write_provenance(out_dir, store.new_provenance("hardware", flags=flags, complete=True,
                                                       seconds=round(time.time() - started, 1)))
    print(table.drop(columns=["ms_rounds"]).round(4).to_string(index=False))
    return 0


def cli(argv=None) -> int:
    return module_cli(sys.modules[__name__], "python -m lab bandwidth", argv)


if __name__ == "__main__":
    sys.exit(cli())
