"""What a block table costs a decode kernel: contiguous vs paged split-KV decode, and a copy, in one run.

For each (batch, context) the same K/V values are held three ways: one contiguous stretch per
sequence (:func:`split_kv_tuned.tuned_decode`), and paged caches of 16-token and of larger pages
scattered over the pool in a random order (:func:`triton_paged_decode.paged_decode`). A
device-to-device copy of the same number of bytes is the ceiling. Every output is checked against
an fp32 reference first; then all of them are timed in interleaved rounds (each round starts at a
different one), each time a median of CUDA-graph replays with the inputs rotated so that K/V come
from HBM, not from L2 (as ``python -m lab bench`` times decode).

Writes ``paged.csv`` (kernel, page_size, batch, n, ms, ms_rounds, kv_bytes, gb_per_s, copy_gb_per_s,
fraction_of_contiguous, max_abs_err, then fraction_of_copy and the launch chosen), the rows as
``measurements.jsonl`` after every shape, and ``provenance.json`` (kind "kernels", experiment
"paged-decode") to ``--out`` (default data/local/paged-decode; the book reads data/h200/paged-decode).
"""

from __future__ import annotations

import functools
import math
import statistics
import sys
import time
from pathlib import Path

from lab import REPO_ROOT, LabError, env, store
from lab.cli import number_or_zero, path_arg, positive_count, sizes
from lab.folders import set_aside, writes_folder
from lab.measure import timing
from lab.measure.attention.reference import attention_torch

DEFAULT_OUT = REPO_ROOT / "data" / "local" / "paged-decode"
EXPERIMENT = "paged-decode"
COLUMNS = ("kernel", "page_size", "batch", "n", "ms", "ms_rounds", "kv_bytes", "gb_per_s", "copy_gb_per_s",
           "fraction_of_contiguous", "max_abs_err", "fraction_of_copy", "config")
MAX_ABS_ERR = 2e-2          # bf16 outputs against the fp32 reference
ROTATE_BYTES = 256 << 20    # input sets cycled per kernel so that no call finds its K/V in L2


def kv_bytes(batch: int, kv_heads: int, n: int, head_dim: int, element_bytes: int = 2) -> int:
    """K and V of every sequence, read once."""
    return 2 * batch * kv_heads * n * head_dim * element_bytes


def replay_ms(call, sets: list, rep_ms: int) -> float:
    """Median ms per ``call(*set)`` replayed from a CUDA graph, cycling through ``sets`` (:func:`timing.replay_ms`)."""
    return timing.replay_ms([functools.partial(call, *one) for one in sets], rep_ms)


def _rotated(first: tuple, nbytes: int, fresh) -> list:
    """``first`` plus enough fresh sets (``fresh()``) that one pass over them reads >= ROTATE_BYTES."""
    sets = [first]
    while len(sets) * nbytes < ROTATE_BYTES:
        sets.append(fresh())
    return sets


def fa3_paged(batch: int, n: int, sets: list, q):
    """FA3's paged decode (vLLM's bundled vllm_flash_attn) as vLLM's FLASH_ATTN backend calls it, on the
    16-token page sets of our paged kernel: same pages, same shuffled block table, same rotation."""
    import torch
    from vllm.vllm_flash_attn import flash_attn_varlen_func

    batch_, q_heads, _, d = q.shape
    starts = torch.arange(batch + 1, dtype=torch.int32, device=q.device)

    def call(q, kc, vc, table, lens):
        out = flash_attn_varlen_func(q.view(batch_, q_heads, d), kc, vc, max_seqlen_q=1, cu_seqlens_q=starts,
                                     max_seqlen_k=n, seqused_k=lens, block_table=table, causal=True, fa_version=3)
        return out.view(batch_, q_heads, 1, d)
    return ("fa3-paged", 16, call, sets, sets[0], lambda: None)


def candidates(batch: int, n: int, page_sizes, q_heads: int, kv_heads: int, head_dim: int = 128,
               device: str = "cuda", dtype=None, with_fa3: bool = False):
    """(name, page_size, call, sets, output or None, config function) for every kernel of one shape.

    Builds the inputs once (seeded), the paged caches from the same K/V, and the rotation sets.
    ``device`` and ``dtype`` (bf16 by default) exist for the CPU test (interpreter, fp16).
    """
    import torch

    from lab.measure.attention import split_kv_tuned, triton_paged_decode  # lazy: the kernels load triton and torch

    gen = torch.Generator(device=device).manual_seed(n + 7 * batch)
    def randn(*shape):
        return torch.randn(*shape, generator=gen, device=device).to(dtype or torch.bfloat16)

    q, k, v = randn(batch, q_heads, 1, head_dim), randn(batch, kv_heads, n, head_dim), randn(batch, kv_heads, n, head_dim)
    nbytes = kv_bytes(batch, kv_heads, n, head_dim)
    out = []
    contiguous = split_kv_tuned.tuned_decode
    out.append(("contiguous", None, contiguous,
                _rotated((q, k, v), nbytes, lambda: (q, torch.randn_like(k), torch.randn_like(v))), (q, k, v),
                lambda: split_kv_tuned.best_decode_config(batch, q_heads, kv_heads, n, head_dim, q.dtype)))
    for page in page_sizes:
        k_cache, v_cache, table, lens = triton_paged_decode.paginate(k, v, page, shuffle=True, seed=page)
        def call(q, kc, vc, table, lens):
            return triton_paged_decode.paged_decode(q, kc, vc, table, lens, max_seq_len=n)
        first = (q, k_cache, v_cache, table, lens)
        sets = _rotated(first, nbytes, lambda kc=k_cache, vc=v_cache, t=table, s=lens:
                        (q, torch.randn_like(kc), torch.randn_like(vc), t, s))
        out.append((f"paged-{page}", page, call, sets, first,
                    lambda page=page: triton_paged_decode.best_paged_config(batch, q_heads, kv_heads, page, n,
                                                                            head_dim, q.dtype)))
    if with_fa3 and 16 in page_sizes:  # FA3's own paged decode over the same 16-token pages (vLLM's call)
        out.append(fa3_paged(batch, n, out[1 + list(page_sizes).index(16)][3], q))
    flat = nbytes // 2  # bf16 elements
    src = torch.empty(flat, dtype=q.dtype, device=device)
    copy_sets = _rotated((src, torch.empty_like(src)), 2 * nbytes,
                         lambda: (torch.empty_like(src), torch.empty_like(src)))
    out.append(("copy", None, lambda s, d: d.copy_(s), copy_sets, None, lambda: None))
    return q, k, v, out


def _check(name, call, first, reference, device: str) -> float:
    import torch

    if first is None:
        return math.nan
    result = call(*first)  # the first call of a tuned kernel times its launch settings
    if device == "cuda":
        torch.cuda.synchronize()
    err = (result.float() - reference.float()).abs().max().item()
    if not err <= MAX_ABS_ERR:
        raise LabError(f"{name}: max abs error {err:.3g} against the fp32 reference exceeds {MAX_ABS_ERR}")
    return err


def measure(batch: int, n: int, page_sizes, q_heads: int, kv_heads: int, rep_ms: int, rounds: int,
            progress=print, device: str = "cuda", dtype=None, timer=None, with_fa3: bool = False) -> list[dict]:
    """Check, then time every kernel of one shape in interleaved rounds; one row per kernel.

    ``device``, ``dtype`` and ``timer`` (in place of :func:`replay_ms`) exist for the CPU test.
    """
    import torch

    timer = timer or replay_ms
    q, k, v, kernels = candidates(batch, n, page_sizes, q_heads, kv_heads, device=device, dtype=dtype,
                                  with_fa3=with_fa3)
    reference = attention_torch(q, k, v)
    errors = {name: _check(name, call, first, reference, device) for name, _, call, _, first, _ in kernels}
    del reference
    names = [name for name, *_ in kernels]
    timed = timing.time_in_rounds(
        kernels, lambda kernel, _: timer(kernel[2], kernel[3], max(1, rep_ms // rounds)), rounds,
        after_round=lambda turn, times: progress(f"b={batch} n={n}: round {turn + 1}/{rounds} " + " ".join(
            f"{name} {t[-1]:.4f} ms" for name, t in zip(names, times, strict=True))))
    times = dict(zip(names, timed, strict=True))
    nbytes = kv_bytes(batch, kv_heads, n, q.shape[-1])
    ms = {name: statistics.median(t) for name, t in times.items()}
    copy_gbps = 2 * nbytes / (ms["copy"] * 1e-3) / 1e9  # read + write, as lab bench reports a copy
    rows = []
    for name, page, _, _, _, config in kernels:
        gbps = (2 if name == "copy" else 1) * nbytes / (ms[name] * 1e-3) / 1e9
        chosen = config()
        rows.append({"kernel": "paged" if name.startswith("paged-") else name, "page_size": page, "batch": batch, "n": n,
                     "ms": ms[name], "ms_rounds": timing.rounds_text(times[name]), "kv_bytes": nbytes, "gb_per_s": gbps,
                     "copy_gb_per_s": copy_gbps,
                     "fraction_of_contiguous": ms["contiguous"] / ms[name] if name != "copy" else math.nan,
                     "max_abs_err": errors[name], "fraction_of_copy": gbps / copy_gbps if name != "copy" else math.nan,
                     "config": " ".join(f"{key}={val}" for key, val in (chosen or {}).items())})
    del q, k, v, kernels
    if device == "cuda":
        torch.cuda.empty_cache()
    return rows


# --- CLI ---------------------------------------------------------------------------------------

def add_arguments(parser) -> None:
    parser.add_argument("--out", type=path_arg, default=DEFAULT_OUT,
                        help=f"output folder (default {DEFAULT_OUT.relative_to(REPO_ROOT)})")
    parser.add_argument("--shapes", default="16x32k,1x32k,16x128k,1x128k",
                        help="batch x context pairs, most important first (a deadline keeps the first ones)")
    parser.add_argument("--page-sizes", default="16,128", help="tokens per page (powers of two)")
    parser.add_argument("--q-heads", type=positive_count, default=28)
    parser.add_argument("--kv-heads", type=positive_count, default=4)
    parser.add_argument("--rep-ms", type=positive_count, default=90, help="ms of graph replays per kernel and shape, "
                        "shared among the rounds")
    parser.add_argument("--rounds", type=positive_count, default=3)
    parser.add_argument("--fa3", action="store_true", help="also time FA3's paged decode (vLLM's vllm_flash_attn, "
                        "which must be importable) on the same 16-token pages")
    parser.add_argument("--deadline-s", type=number_or_zero, default=0, help="start no new shape after this many seconds "
                        "(0: no deadline); what was measured is written")


def parse_shapes(text: str) -> list[tuple[int, int]]:
    shapes = []
    for item in text.split(","):
        batch, _, n = item.partition("x")
        if not n:
            raise LabError(f"--shapes: expected BATCHxCONTEXT such as 16x32k; got {item!r}")
        shapes.append((sizes(batch, option="--shapes")[0], sizes(n, option="--shapes")[0]))
    return shapes


@writes_folder("--out")
def main(args) -> int:
    import pandas as pd

    shapes, page_sizes = parse_shapes(args.shapes), sizes(args.page_sizes, option="--page-sizes")
    if any(p & (p - 1) for p in page_sizes):
        raise LabError(f"--page-sizes must be powers of two; got {args.page_sizes}")
    if args.q_heads % args.kv_heads or args.rep_ms < args.rounds:
        raise LabError("--q-heads must be a multiple of --kv-heads and --rep-ms at least --rounds")
    caps = env.detect()
    if not caps.has_gpu or caps.triton_mode != "gpu":
        raise LabError("no CUDA GPU here (or TRITON_INTERPRET=1): the paged-decode benchmark times kernels on a GPU; "
                       "the committed H200 run is data/h200/paged-decode/")
    out_dir = args.out if args.out.is_absolute() else Path.cwd() / args.out
    set_aside(out_dir / "measurements.jsonl")  # an earlier run's measurements stay, as measurements.1.jsonl
    flags = {"experiment": EXPERIMENT, "q_heads": args.q_heads, "kv_heads": args.kv_heads, "head_dim": 128,
             "page_sizes": list(page_sizes), "shapes": args.shapes, "rep_ms": args.rep_ms, "rounds": args.rounds,
             "pages": "every sequence's pages scattered over the pool in a random order (torch.randperm)",
             "timer": "median of CUDA-graph replays (triton.testing.do_bench_cudagraph), inputs rotated over "
                      ">= 256 MB so K/V come from HBM; kernels of a shape timed in interleaved rounds, ms the median "
                      "round (ms_rounds lists them)",
             "reference": "fp32 naive attention (lab.measure.attention.reference.attention_torch)",
             "max_abs_err": MAX_ABS_ERR, "fa3": "FA3's paged decode, vllm_flash_attn.flash_attn_varlen_func(..., "
             "block_table, seqused_k, causal=True, fa_version=3), on the 16-token pages" if args.fa3 else None}
    if args.fa3:
        try:
            from vllm.vllm_flash_attn import flash_attn_varlen_func  # noqa: F401  (fail before any shape is timed)
        except ImportError as exc:
            raise LabError(f"--fa3 needs vLLM's vllm_flash_attn ({exc}); put vLLM on PYTHONPATH or leave --fa3 out") from None
    store.write_provenance(out_dir, store.new_provenance("kernels", dtype="bfloat16", flags=flags, complete=False))
    started, rows = time.time(), []
    say = lambda text: print(f"[{time.time() - started:5.0f}s] {text}", file=sys.stderr, flush=True)
    for batch, n in shapes:
        if args.deadline_s and time.time() - started > args.deadline_s:
            say(f"deadline: skip batch {batch} x {n}")
            continue
        measured = measure(batch, n, page_sizes, args.q_heads, args.kv_heads, args.rep_ms, args.rounds, say,
                           with_fa3=args.fa3)
        for row in measured:  # nothing measured is lost if a later shape crashes
            store.append_jsonl(out_dir / "measurements.jsonl", row)
        rows += measured
        store.write_csv(out_dir, "paged.csv", pd.DataFrame(rows).reindex(columns=COLUMNS))
    store.write_provenance(out_dir, store.new_provenance("kernels", dtype="bfloat16", flags=flags,
                                                       complete=len(rows) == len(shapes) * (len(page_sizes) + 2 + args.fa3),
                                                       seconds=round(time.time() - started, 1)))
    if rows:
        table = pd.DataFrame(rows)
        with pd.option_context("display.width", 200):
            print("paged decode: GB/s of K/V read (fraction of contiguous)")
            print(table.assign(page=table.page_size.fillna(0).astype(int)).round(3)[
                ["kernel", "page", "batch", "n", "ms", "gb_per_s", "fraction_of_contiguous", "fraction_of_copy"]]
                  .to_string(index=False))
    return 0


if __name__ == "__main__":

    from lab.cli import OneLineParser, run_command

    parser = OneLineParser(prog="python -m lab.measure.paged_bench", description=__doc__.splitlines()[0])
    add_arguments(parser)
    sys.exit(run_command(main, parser.parse_args()))
