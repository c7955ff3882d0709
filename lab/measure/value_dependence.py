"""Does a kernel's time depend on the values it multiplies? Random vs zeros vs small-magnitude inputs.

The arithmetic a matrix product or an attention kernel does is fixed by the shapes, so its time is
often said to depend on the shapes only. A GPU that runs at its power cap says otherwise: switching
transistors costs energy, zeros flip fewer bits than random data, and a kernel that draws less power
is clocked higher. This experiment times the same two kernels on three input sets of identical shape:
``random`` (N(0, 1)), ``zeros`` and ``small`` (1e-3 x N(0, 1): the same bit-level randomness in the
mantissas, smaller exponents), with the SM clock, power and active clock limit sampled
(lab.measure.gpuclocks) while each one runs.

Ops: ``matmul-8192`` (bf16 8192 x 8192 x 8192 through torch.mm) and ``ours-tuned-16k`` (this book's
tuned Triton FlashAttention forward, causal prefill at 16k tokens, 28/4 heads, d=128, bf16). An op's
input sets are timed in interleaved rounds (each round starts at a different set; triton's do_bench
median per round, L2 flushed between calls) and ``ms`` is the median round. Before timing, each
output is checked (fp32 reference for random and small inputs; exact zeros for zero inputs).

Writes ``values.csv`` (op,inputs,ms,ms_rounds,sm_mhz,power_w,clock_limit) and ``provenance.json``.
"""

from __future__ import annotations

import math
import statistics
import sys
import time
from pathlib import Path

from lab import REPO_ROOT, LabError, store
from lab.cli import module_cli, path_arg, positive_count
from lab.folders import writes_folder
from lab.measure import gpuclocks
from lab.measure.attention.reference import attention_torch
from lab.measure.gpuclocks import row_fields, summarise
from lab.measure.timing import rounds_text, time_in_rounds

DEFAULT_OUT = REPO_ROOT / "data" / "local" / "value-dependence"
COLUMNS = ("op", "inputs", "ms", "ms_rounds", "sm_mhz", "power_w", "clock_limit")
OPS = ("matmul-8192", "ours-tuned-16k")
INPUTS = {"random": 1.0, "zeros": 0.0, "small": 1e-3}   # input set -> standard deviation
MAX_REL_ERR = 2e-2   # bf16 operands, fp32 accumulation: max |out - ref| / max |ref|


def scaled_normal(shape, scale: float, seed: int, device: str = "cuda"):
    """bf16 tensor of N(0, scale^2) values; exact zeros when scale is 0."""
    import torch

    gen = torch.Generator(device=device).manual_seed(seed)
    return (scale * torch.randn(*shape, generator=gen, device=device)).to(torch.bfloat16)


def op_call(op: str, scale: float, seed: int, device: str = "cuda", size: int = 8192, n: int = 16384):
    """(call, reference) for one op on one input set: ``call()`` runs the kernel, ``reference()`` gives the
    fp32 result to compare with (small sizes for the CPU test)."""
    import torch

    if op == "matmul-8192":
        a, b = scaled_normal((size, size), scale, seed, device), scaled_normal((size, size), scale, seed + 1, device)
        c = torch.empty(size, size, dtype=torch.bfloat16, device=device)
        return (lambda: torch.mm(a, b, out=c)), (lambda: a.float() @ b.float())
    if op == "ours-tuned-16k":
        from lab.measure.attention.tuned import tuned_forward  # lazy: the kernels load triton and torch

        q = scaled_normal((1, 28, n, 128), scale, seed, device)
        k, v = (scaled_normal((1, 4, n, 128), scale, seed + i, device) for i in (1, 2))
        return (lambda: tuned_forward(q, k, v, True)), (lambda: attention_torch(q, k, v, True).float())
    raise LabError(f"unknown op {op!r}; choose from {', '.join(OPS)}")


def relative_error(out, ref) -> float:
    """max |out - ref| / max |ref|; for an all-zero reference, max |out| (which must then be 0)."""
    peak = ref.abs().max().item()
    err = (out.float() - ref).abs().max().item()
    return err / peak if peak else err


def measure_op(op: str, rep_ms: int, rounds: int, clocks=None, timer=None, device: str = "cuda",
               progress=print, **sizes) -> list[dict]:
    """Check, then time one op on every input set in interleaved rounds; one row per input set."""

    if timer is None:
        from triton.testing import do_bench as timer
    rows, ready = [], []
    for number, (name, scale) in enumerate(INPUTS.items()):
        call, reference = op_call(op, scale, seed=100 + 10 * number, device=device, **sizes)
        err = relative_error(call(), reference())
        if not err <= MAX_REL_ERR:
            raise LabError(f"{op} on {name} inputs: relative error {err:.3g} > {MAX_REL_ERR}; not timed")
        progress(f"{op} {name}: checked (relative error {err:.2g})")
        row = {"op": op, "inputs": name, "ms": math.nan, "ms_rounds": "", "sm_mhz": math.nan, "power_w": math.nan,
               "clock_limit": "not sampled", "times": [], "samples": []}
        rows.append(row)
        ready.append((row, call))
    def measure(item, _):
        row, call = item
        if clocks is not None:
            clocks.start()
        ms = timer(call, warmup=25, rep=max(1, rep_ms // rounds), return_mode="median")
        if clocks is not None:
            clocks.stop()
            row["samples"] += clocks.samples
        return ms

    for (row, _), times in zip(ready, time_in_rounds(ready, measure, rounds), strict=True):
        row["times"] = times
    for row in rows:
        times, samples = row.pop("times"), row.pop("samples")
        row["ms"] = statistics.median(times)
        row["ms_rounds"] = rounds_text(times)
        if clocks is not None:
            fields = row_fields(summarise(samples))
            row.update(sm_mhz=fields["sm_mhz"], power_w=fields["power_w"], clock_limit=fields["clock_limit"])
    return rows


def add_arguments(parser) -> None:
    parser.add_argument("--out", type=path_arg, default=DEFAULT_OUT, help=f"output folder (default {DEFAULT_OUT.relative_to(REPO_ROOT)})")
    parser.add_argument("--ops", default=",".join(OPS), help=f"subset of {','.join(OPS)}")
    parser.add_argument("--rep-ms", type=positive_count, default=3600, help="milliseconds of timed calls per op and input set, "
                        "shared out among the rounds (a round of about a second: nvidia-smi's power reading "
                        "averages over a window, so shorter rounds would mix in the previous input set)")
    parser.add_argument("--rounds", type=positive_count, default=3, help="interleaved rounds")


@writes_folder("--out")
def main(args) -> int:
    import pandas as pd
    import torch

    ops = [o for o in args.ops.split(",") if o]
    if not ops or any(o not in OPS for o in ops):
        raise LabError(f"--ops must name some of {', '.join(OPS)}; got {args.ops!r}")
    if args.rep_ms < args.rounds:
        raise LabError(f"--rep-ms must be at least --rounds; got --rounds {args.rounds}, --rep-ms {args.rep_ms}")
    if not torch.cuda.is_available():
        raise LabError("no CUDA GPU here: the value-dependence experiment times kernels on a GPU")
    out_dir = args.out if args.out.is_absolute() else Path.cwd() / args.out
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.time()
    clocks = gpuclocks.ClockSampler(interval_ms=gpuclocks.TIMING_INTERVAL_MS) if gpuclocks.available() else None
    flags = {"experiment": "value-dependence", "ops": ops, "inputs": INPUTS, "rep_ms": args.rep_ms, "rounds": args.rounds,
             "timer": "triton.testing.do_bench median per round (L2 flushed between calls), median round",
             "clocks": "nvidia-smi every 20 ms while each input set was timed: medians of SM clock and power, the "
                       "clock limit active in most samples" if clocks else "not sampled (no nvidia-smi)",
             "check": f"relative max error vs fp32 <= {MAX_REL_ERR}; zero inputs give zero outputs"}
    store.write_provenance(out_dir, store.new_provenance("kernels", dtype="bfloat16", flags=flags, complete=False))
    rows: list[dict] = []
    for op in ops:
        rows += measure_op(op, args.rep_ms, args.rounds, clocks,
                           progress=lambda text: print(f"[values +{time.time() - started:.0f}s] {text}",
                                                       file=sys.stderr, flush=True))
        store.write_csv(out_dir, "values.csv", pd.DataFrame(rows).reindex(columns=COLUMNS))
        torch.cuda.empty_cache()
    store.write_provenance(out_dir, store.new_provenance("kernels", dtype="bfloat16", flags=flags, complete=True,
                                                       seconds=round(time.time() - started, 1)))
    table = pd.DataFrame(rows).reindex(columns=COLUMNS)
    table["vs_random"] = table.ms / table.op.map(table[table.inputs == "random"].set_index("op").ms)
    print(table.drop(columns=["ms_rounds"]).round(4).to_string(index=False))
    return 0


def cli(argv=None) -> int:
    return module_cli(sys.modules[__name__], "python -m lab.measure.value_dependence", argv)


if __name__ == "__main__":
    sys.exit(cli())
