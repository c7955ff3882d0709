"""FlexAttention as a programming model: attention variants written as two small Python functions.

PyTorch's FlexAttention (``torch.nn.attention.flex_attention``) takes the attention variant as code:

* a ``score_mod(score, b, h, q_idx, kv_idx)`` returns a new value for one score before the softmax
  (a bias, a soft cap);
* a ``mask_mod(b, h, q_idx, kv_idx)`` returns whether query ``q_idx`` may see key ``kv_idx``;
* a ``BlockMask`` is the mask_mod evaluated once per tile of 128 x 128 (query block x key block):
  blocks with nothing visible are skipped, fully visible blocks are computed without evaluating
  the mask, and only partial blocks apply it element by element.

``torch.compile(flex_attention)`` turns these into one fused Triton kernel. Run without compile
(as the CPU tests do) it materialises the scores, which is slow but exact.

This module writes three masks (causal, causal + sliding window, documents packed into one
sequence) and one score_mod (a tanh soft cap) in a few lines each, and the naive reference with an
equivalent dense boolean mask they are checked against. On a GPU,
``python -m lab.measure.attention.flex_masks`` times each mask through compiled FlexAttention and
through SDPA (flash for plain causal; a dense mask for the efficient and cuDNN backends), writing
``masks.csv`` and ``provenance.json``.
"""

from __future__ import annotations

import math
import statistics
import sys
import time
import warnings
from pathlib import Path

from lab import REPO_ROOT, LabError, env, store
from lab.cli import number_or_zero, path_arg, positive_count
from lab.folders import writes_folder
from lab.measure.attention.reference import check_shapes, softmax_scale
from lab.measure.timing import rounds_text, time_in_rounds

#: The sliding window the book uses: each query sees itself and the previous WINDOW - 1 keys.
WINDOW = 2048
MASKS = ("causal", "sliding-window", "document")


# --- the variants, a few lines each -------------------------------------------------------------

def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def sliding_window(window: int = WINDOW):
    """Causal, and no further back than ``window - 1`` keys (Mistral-style local attention)."""
    def mask_mod(b, h, q_idx, kv_idx):
        return (q_idx >= kv_idx) & (q_idx - kv_idx < window)
    return mask_mod


def document(doc_ids):
    """Several documents packed into one sequence: causal, and only within a query's own document.

    ``doc_ids`` is a 1-D integer tensor, the document of every position (see :func:`document_ids`).
    """
    def mask_mod(b, h, q_idx, kv_idx):
        return (doc_ids[q_idx] == doc_ids[kv_idx]) & (q_idx >= kv_idx)
    return mask_mod


def soft_cap(cap: float):
    """score_mod: squash every score into (-cap, cap) with tanh before the softmax (Gemma 2's logit soft cap)."""
    import torch

    def score_mod(score, b, h, q_idx, kv_idx):
        return cap * torch.tanh(score / cap)
    return score_mod


def document_ids(n: int, mean_length: int, seed: int = 0, device="cpu"):
    """Document id of each of ``n`` positions: documents of random lengths (1 .. 2 x mean) packed end to end."""
    import torch

    if n < 1 or mean_length < 1:
        raise LabError(f"need n >= 1 and mean_length >= 1; got n={n}, mean_length={mean_length}")
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 2 * mean_length + 1, (n // mean_length * 2 + 2,), generator=gen)
    ids = torch.repeat_interleave(torch.arange(len(lengths)), lengths)[:n]
    if len(ids) < n:  # the random lengths fell short: one last document fills the rest
        ids = torch.cat([ids, torch.full((n - len(ids),), len(lengths))])
    return ids.to(device)


def mask_mod_for(name: str, n: int, device="cpu", window: int = WINDOW):
    """The mask_mod the book times as ``name`` at sequence length ``n``."""
    if name == "causal":
        return causal
    if name == "sliding-window":
        return sliding_window(window)
    if name == "document":
        return document(document_ids(n, mean_length=max(1, n // 8), device=device))
    raise LabError(f"unknown mask {name!r}; choose from {', '.join(MASKS)}")


# --- what a mask means, without FlexAttention ---------------------------------------------------

def dense_mask(mask_mod, n_q: int, n_k: int, device="cpu"):
    """The (n_q, n_k) boolean matrix a mask_mod stands for, evaluated on broadcast index tensors."""
    import torch

    q_idx = torch.arange(n_q, device=device)[:, None]
    kv_idx = torch.arange(n_k, device=device)[None, :]
    zero = torch.zeros((), dtype=torch.long, device=device)
    return mask_mod(zero, zero, q_idx, kv_idx).expand(n_q, n_k)


def masked_reference(q, k, v, mask, score_mod=None, scale: float | None = None, compute_dtype=None,
                     chunk_bytes: int = 2 << 30):
    """Naive attention with a dense boolean ``mask`` (n_q, n_k): scores, optional score_mod, mask, softmax, V.

    Shapes as SDPA: q (batch, q_heads, n_q, d); k, v (batch, kv_heads, n_k, d), q_heads a multiple of
    kv_heads. Computed in float32 (or ``compute_dtype``) in query chunks; returns q's dtype.
    """
    import torch

    batch, q_heads, kv_heads, n_q, n_k, d = check_shapes(q.shape, k.shape, v.shape, causal=False)
    if tuple(mask.shape) != (n_q, n_k):
        raise LabError(f"mask must be ({n_q}, {n_k}) for these inputs; got {tuple(mask.shape)}")
    dtype = compute_dtype or torch.float32
    scale = softmax_scale(d, scale)
    group = q_heads // kv_heads
    kc, vc = k.to(dtype)[:, :, None], v.to(dtype)[:, :, None]      # one KV head broadcast over its group
    qg = q.reshape(batch, kv_heads, group, n_q, d)
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    og = out.view(batch, kv_heads, group, n_q, d)
    chunk = max(1, min(n_q, chunk_bytes // max(1, batch * q_heads * n_k * 8)))
    for start in range(0, n_q, chunk):
        stop = min(n_q, start + chunk)
        scores = torch.matmul(qg[:, :, :, start:stop].to(dtype), kc.transpose(-1, -2)) * scale
        if score_mod is not None:
            scores = _apply_score_mod(score_mod, scores, start, stop, group)
        scores = scores.masked_fill(~mask[start:stop], float("-inf"))
        og[:, :, :, start:stop] = torch.matmul(torch.softmax(scores, dim=-1), vc).to(q.dtype)
    return out


def _apply_score_mod(score_mod, scores, start, stop, group):
    import torch

    batch, kv_heads, _, rows, n_k = scores.shape
    dev = scores.device
    b = torch.arange(batch, device=dev)[:, None, None, None, None]
    h = (torch.arange(kv_heads, device=dev)[:, None] * group + torch.arange(group, device=dev))[None, :, :, None, None]
    q_idx = torch.arange(start, stop, device=dev)[:, None]
    kv_idx = torch.arange(n_k, device=dev)[None, :]
    return score_mod(scores, b, h, q_idx, kv_idx)


def attention_flops_masked(batch: int, q_heads: int, d: int, visible: int) -> float:
    """FLOPs of the two matrix products over the visible score entries only (4 d per entry per head)."""
    return 4.0 * batch * q_heads * d * visible


# --- FlexAttention --------------------------------------------------------------------------------

def block_mask(mask_mod, n_q: int, n_k: int, device="cpu", block_size: int = 128):
    """The mask_mod summarised per (query block, key block) tile: FlexAttention's BlockMask."""
    from torch.nn.attention.flex_attention import create_block_mask

    return create_block_mask(mask_mod, None, None, n_q, n_k, device=device, BLOCK_SIZE=block_size)


def block_counts(mask_mod, n_q: int, n_k: int, block_size: int = 128, device="cpu") -> dict:
    """Tiles of the BlockMask: how many it skips, computes whole (no mask evaluated), and masks element by
    element (partial; a tile cut by the end of the sequence counts here), plus the visible score entries."""
    mask = block_mask(mask_mod, n_q, n_k, device, block_size)
    partial = int(mask.kv_num_blocks.sum())
    full = int(mask.full_kv_num_blocks.sum()) if mask.full_kv_num_blocks is not None else 0
    tiles = math.ceil(n_q / block_size) * math.ceil(n_k / block_size)
    return {"tiles": tiles, "skipped": tiles - partial - full, "full": full, "partial": partial,
            "visible": int(dense_mask(mask_mod, n_q, n_k, device).sum())}


def flex(q, k, v, mask=None, score_mod=None, compiled: bool = False):
    """flex_attention with GQA; ``compiled`` uses torch.compile (a fused kernel), else the eager reference path."""
    from torch.nn.attention.flex_attention import flex_attention

    fn = _compiled_flex() if compiled else flex_attention
    with warnings.catch_warnings():  # eager flex warns that it is unfused: here that is the point
        warnings.filterwarnings("ignore", message=".*flex_attention called without torch.compile.*")
        return fn(q, k, v, score_mod=score_mod, block_mask=mask, enable_gqa=q.shape[1] != k.shape[1])


_COMPILED = {}


def _compiled_flex():
    import torch
    from torch.nn.attention.flex_attention import flex_attention

    if "fn" not in _COMPILED:
        torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 64)
        _COMPILED["fn"] = torch.compile(flex_attention, dynamic=False)
    return _COMPILED["fn"]


# --- timing on a GPU: each mask through FlexAttention and through SDPA -------------------------------

IMPLS = ("flex", "sdpa-flash", "sdpa-efficient", "sdpa-cudnn")
MASK_COLUMNS = ("mask", "impl", "n", "ms", "ms_rounds", "tflops_effective", "max_abs_err", "note")
MAX_ABS_ERR = 2e-2  # bf16 outputs against the fp32 reference


def _sdpa(backend: str, q, k, v, dense):
    """SDPA with a dense boolean mask (K/V expanded to the query heads; not every backend takes GQA)."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    def run():
        with sdpa_kernel(getattr(SDPBackend, backend)):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=dense)
    return run


def mask_candidates(name: str, q, k, v, n: int, compiled: bool = True):
    """(impl, call or None with the reason) for one mask; and the dense mask the reference uses."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    mask_mod = mask_mod_for(name, n, device=q.device)
    dense = dense_mask(mask_mod, n, n, q.device)
    blocks = block_mask(mask_mod, n, n, q.device)
    def run_flash():
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    calls = {"flex": lambda: flex(q, k, v, blocks, compiled=compiled),
             "sdpa-flash": run_flash if name == "causal" else "flash takes no mask but plain causal",
             "sdpa-efficient": _sdpa("EFFICIENT_ATTENTION", q, k, v, dense),
             "sdpa-cudnn": _sdpa("CUDNN_ATTENTION", q, k, v, dense)}
    return calls, dense


def time_mask(name: str, n: int, rep_ms: int = 90, rounds: int = 3, q_heads: int = 28, kv_heads: int = 4,
              head_dim: int = 128, progress=print, device: str = "cuda", dtype=None, timer=None) -> list[dict]:
    """Check every implementation of one mask against the fp32 reference, then time them in interleaved rounds.

    ``device``, ``dtype`` and ``timer`` (in place of triton's do_bench) exist for the CPU test, which
    runs FlexAttention uncompiled.
    """
    import torch

    if timer is None:
        from triton.testing import do_bench as timer
    gen = torch.Generator(device=device).manual_seed(n)
    q, k, v = (torch.randn(1, h, n, head_dim, generator=gen, device=device).to(dtype or torch.bfloat16)
               for h in (q_heads, kv_heads, kv_heads))
    calls, dense = mask_candidates(name, q, k, v, n, compiled=device == "cuda")
    reference = masked_reference(q, k, v, dense)
    visible = int(dense.sum())
    rows, ready = [], []
    for impl, call in calls.items():
        row = {"mask": name, "impl": impl, "n": n, "ms": math.nan, "max_abs_err": math.nan, "note": ""}
        rows.append(row)
        if isinstance(call, str):
            row["note"] = call
            continue
        try:
            row["max_abs_err"] = (call().float() - reference.float()).abs().max().item()
        except Exception as exc:  # a backend that refuses this mask is a result
            row["note"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:140] if str(exc) else ''}"
            continue
        if not row["max_abs_err"] <= MAX_ABS_ERR:
            row["note"] = f"wrong: max abs error {row['max_abs_err']:.3g}"
            continue
        ready.append((row, call))
    del reference
    timed = time_in_rounds(
        ready, lambda item, _: timer(item[1], warmup=5, rep=max(1, rep_ms // rounds), return_mode="median"), rounds,
        after_round=lambda turn, times: progress(f"{name} n={n}: round {turn + 1}/{rounds} " + " ".join(
            f"{row['impl']} {t[-1]:.3f} ms" for (row, _), t in zip(ready, times, strict=True))))
    for (row, _), times in zip(ready, timed, strict=True):
        row["ms"] = statistics.median(times)
        row["ms_rounds"] = rounds_text(times)
        row["tflops_effective"] = attention_flops_masked(1, q_heads, head_dim, visible) / (row["ms"] * 1e-3) / 1e12
    if device == "cuda":
        torch.cuda.empty_cache()
    return rows


def add_arguments(parser) -> None:
    parser.add_argument("--out", default=REPO_ROOT / "data" / "local" / "flex-masks", type=path_arg, help="output folder")
    parser.add_argument("--lengths", default="16384,4096", help="sequence lengths, most important first")
    parser.add_argument("--masks", default=",".join(MASKS), help=f"subset of {','.join(MASKS)}")
    parser.add_argument("--rep-ms", type=positive_count, default=90, help="ms of timed repeats per implementation, shared among rounds")
    parser.add_argument("--rounds", type=positive_count, default=3)
    parser.add_argument("--deadline-s", type=number_or_zero, default=0, help="start no new (mask, length) after this many "
                        "seconds (0: none); what was measured is written")


@writes_folder("--out")
def main(args) -> int:
    """Time causal, sliding-window and document masks: FlexAttention vs SDPA; writes masks.csv + provenance."""
    import pandas as pd

    masks = [m for m in args.masks.split(",") if m]
    if unknown := [m for m in masks if m not in MASKS]:
        raise LabError(f"unknown mask {unknown[0]!r}; choose from {', '.join(MASKS)}")
    try:
        lengths = [int(x) for x in args.lengths.split(",") if x]
    except ValueError:
        raise LabError(f"--lengths: expected integers such as 16384,4096; got {args.lengths!r}") from None
    if not lengths or min(lengths) < 128 or args.rounds < 1 or args.rep_ms < args.rounds:
        raise LabError("--lengths must be >= 128, --rounds >= 1 and --rep-ms >= --rounds")
    if not env.detect().has_gpu or env.detect().triton_mode != "gpu":
        raise LabError("no CUDA GPU here: the mask timings need one; the committed H200 run is data/h200/flex-masks/")
    out = Path(args.out).absolute()
    out.mkdir(parents=True, exist_ok=True)
    flags = {"experiment": "flex-masks", "batch": 1, "q_heads": 28, "kv_heads": 4, "head_dim": 128, "window": WINDOW,
             "document_mean_length": "n / 8 (random lengths 1 .. n / 4, seeded)", "block_size": 128,
             "timer": "triton.testing.do_bench median (L2 flushed); implementations of a mask timed in interleaved "
                      "rounds, ms the median round", "flex": "torch.compile(flex_attention, dynamic=False), BlockMask",
             "sdpa": "flash: is_causal=True (plain causal only); efficient and cuDNN: dense boolean attn_mask, "
                     "K/V repeated to the query heads",
             "tflops_effective": "4 * heads * d * visible score entries / time", "max_abs_err": MAX_ABS_ERR}
    store.write_provenance(out, store.new_provenance("kernels", dtype="bfloat16", flags=flags, complete=False))
    started, rows = time.time(), []
    say = lambda text: print(f"[{time.time() - started:5.0f}s] {text}", file=sys.stderr, flush=True)
    for n in lengths:
        for name in masks:
            if args.deadline_s and time.time() - started > args.deadline_s:
                say(f"deadline: skip {name} n={n}")
                continue
            rows += time_mask(name, n, args.rep_ms, args.rounds, progress=say)
            store.write_csv(out, "masks.csv", pd.DataFrame(rows).reindex(columns=MASK_COLUMNS))
    store.write_provenance(out, store.new_provenance("kernels", dtype="bfloat16", flags=flags,
                                                    complete=len(rows) == len(IMPLS) * len(masks) * len(lengths),
                                                    seconds=round(time.time() - started, 1)))
    if rows:
        table = pd.DataFrame(rows)
        print("masks: ms (effective TFLOP/s over the visible scores)")
        print(table.pivot_table(index=["mask", "n"], columns="impl", values="ms").round(3).to_string())
    return 0


if __name__ == "__main__":
    import sys

    from lab.cli import OneLineParser, run_command

    parser = OneLineParser(prog="python -m lab.measure.attention.flex_masks", description=main.__doc__)
    add_arguments(parser)
    sys.exit(run_command(main, parser.parse_args()))
