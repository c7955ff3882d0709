"""Split-KV decode in Triton, tuned: each KV head read once for its whole query group, the launch tuned per shape.

The split plan and the exact merge are :mod:`lab.measure.attention.split_kv`'s. What changes is who a
program serves: :func:`tuned_split_kernel` runs one program per (split, sequence, KV head) for all the
query heads that share that KV head, so each K/V tile is read from memory once for the whole group
(7 query heads for 28 over 4), and the group's rows, padded to 16, make a small matrix for ``tl.dot``.
It works in base 2 (``exp2``, the scale folded into ``qk_scale``) and hands the merge a natural-log
log-sum-exp. The split count gives every multiprocessor several programs; tile size, warps, pipeline depth
and programs per multiprocessor are timed from a small space (:data:`DECODE_SPACE`) on the first call for
each shape (:func:`decode_config`). :func:`tuned_decode` launches it; :func:`check` runs it against the
float64 reference. The paged kernel (:mod:`lab.measure.attention.triton_paged_decode`) shares the space
and :func:`split_buffers`.

Shapes: ``q`` is (batch, q_heads, 1, d); ``k``, ``v`` are (batch, kv_heads, n_k, d); the result has q's
shape and dtype.
"""

from __future__ import annotations

import torch

from lab import env
from lab.measure.attention.reference import LOG2E, decode_errors, softmax_scale

env.use_triton_interpreter_without_gpu()

import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.testing import do_bench  # noqa: E402

from lab.measure.attention import launch_cache  # noqa: E402
from lab.measure.attention.kernel_inputs import gpu_name, interpreting  # noqa: E402 (also applies the interpreter fix)
from lab.measure.attention.split_kv import check_decode_inputs, combine, multiprocessors, split_plan  # noqa: E402


@triton.jit
def tuned_split_kernel(Q, K, V, O_part, LSE_part, qk_scale, n_k, keys_per_split, num_splits, kv_heads, group,
                       sqb, sqh, skb, skh, skn, svb, svh, svn,
                       HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_PAD: tl.constexpr,
                       PRECISION: tl.constexpr):
    # GROUP_PAD rows of the group per program: a group larger than that (many query heads, or several
    # query tokens per sequence folded into rows) is spread over row blocks, program_id(2)
    split, bkv, row_block = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    b, kv_h = bkv // kv_heads, bkv % kv_heads
    heads = row_block * GROUP_PAD + tl.arange(0, GROUP_PAD)            # the query heads of this KV head
    dims = tl.arange(0, HEAD_DIM)
    cols0 = tl.arange(0, BLOCK_N)
    q_heads = kv_heads * group
    q = tl.load(Q + b * sqb + (kv_h * group + heads)[:, None] * sqh + dims[None, :],
                mask=heads[:, None] < group, other=0.0)                # GROUP_PAD x HEAD_DIM
    k_base, v_base = K + b * skb + kv_h * skh, V + b * svb + kv_h * svh
    start = split * keys_per_split
    stop = tl.minimum(start + keys_per_split, n_k)
    m_i = tl.full([GROUP_PAD], float("-inf"), tl.float32)
    l_i = tl.zeros([GROUP_PAD], tl.float32)
    acc = tl.zeros([GROUP_PAD, HEAD_DIM], tl.float32)
    for start_n in tl.range(start, stop, BLOCK_N):
        cols = start_n + cols0
        k = tl.load(k_base + cols[None, :] * skn + dims[:, None], mask=cols[None, :] < stop, other=0.0)
        s = tl.dot(q, k, input_precision=PRECISION) * qk_scale        # log2 units
        s = tl.where(cols[None, :] < stop, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.math.exp2(m_i - m_new)
        p = tl.math.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_base + cols[:, None] * svn + dims[None, :], mask=cols[:, None] < stop, other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision=PRECISION)
        m_i = m_new
    bh = b * q_heads + kv_h * group + heads                             # rows of the partial buffers
    real = heads < group
    tl.store(O_part + (bh[:, None] * num_splits + split) * HEAD_DIM + dims[None, :], acc / l_i[:, None],
             mask=real[:, None])
    tl.store(LSE_part + bh * num_splits + split, (m_i + tl.log2(l_i)) * 0.6931471805599453, mask=real)


def split_buffers(q, n_keys: int, kv_programs: int, cfg: dict):
    """The split count of a tuned launch and its fp32 partial outputs: (num_splits, keys_per_split, o_part, lse_part).

    ``cfg`` fixes ``num_splits``, or asks for about ``programs_per_sm`` programs per multiprocessor, shared
    among ``kv_programs`` (sequence, KV head) pairs. Used by the contiguous and the paged kernels alike.
    """
    if "num_splits" in cfg:
        num_splits, keys_per_split = split_plan(n_keys, 1, cfg["BLOCK_N"], cfg["num_splits"])
    else:
        num_splits, keys_per_split = split_plan(n_keys, kv_programs, cfg["BLOCK_N"],
                                                cfg["programs_per_sm"] * multiprocessors(q.device))
    rows, d = q.shape[0] * q.shape[1], q.shape[3]
    o_part = torch.empty((rows, num_splits, d), dtype=torch.float32, device=q.device)
    lse_part = torch.empty((rows, num_splits), dtype=torch.float32, device=q.device)
    return num_splits, keys_per_split, o_part, lse_part


#: Launch settings the tuned decode kernel tries on a GPU, once per shape (the fastest is kept).
#: programs_per_sm sets the split count: about that many programs per multiprocessor.
DECODE_SPACE = [
    {"BLOCK_N": bn, "num_warps": w, "num_stages": st, "programs_per_sm": per_sm}
    for bn, w, st, per_sm in [(64, 4, 3, 4), (64, 4, 4, 2), (64, 4, 2, 8), (32, 4, 3, 4), (32, 4, 4, 8),
                              (128, 8, 3, 2), (128, 4, 2, 4), (64, 8, 3, 4)]
]
_BEST: dict[tuple, dict] = {}
#: Query rows (heads of one KV group) per program at most: 64 rows x d=128 fp32 accumulators is already
#: 64 registers per thread with 4 warps; a larger group is split into row blocks that read the same K/V.
MAX_ROWS = 64


def _launch_tuned(q, k, v, scale, cfg):
    batch, q_heads, _, d = q.shape
    kv_heads, n_k = k.shape[1], k.shape[2]
    group = q_heads // kv_heads
    rows = min(max(16, triton.next_power_of_2(group)), MAX_ROWS)
    row_blocks = triton.cdiv(group, rows)
    num_splits, keys_per_split, o_part, lse_part = split_buffers(q, n_k, batch * kv_heads * row_blocks, cfg)
    tuned_split_kernel[(num_splits, batch * kv_heads, row_blocks)](
        q, k, v, o_part, lse_part, scale * LOG2E, n_k, keys_per_split,
        num_splits, kv_heads, group, q.stride(0), q.stride(1), *k.stride()[:3], *v.stride()[:3],
        HEAD_DIM=d, BLOCK_N=cfg["BLOCK_N"], GROUP_PAD=rows,
        PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
        num_warps=cfg.get("num_warps", 4), num_stages=cfg.get("num_stages", 3))
    return combine(o_part, lse_part, torch.empty_like(q), num_splits)


def tuned_decode(q, k, v, scale: float | None = None, config: dict | None = None):
    """Split-KV decode with one program per (sequence, KV head, split) serving its whole head group.

    ``config`` fixes the launch (keys BLOCK_N, num_warps, num_stages, and programs_per_sm or
    num_splits); without it :func:`decode_config` picks one for the shape.
    """
    q, k, v, (batch, q_heads, kv_heads, n_k, d) = check_decode_inputs(q, k, v)
    scale = softmax_scale(d, scale)
    if config is None:
        config = decode_config(q, k, v, scale)
    return _launch_tuned(q, k, v, scale, {"BLOCK_N": 64, "programs_per_sm": 4, **config})


def decode_config(q, k, v, scale: float) -> dict:
    """The launch for this shape: on a GPU, the fastest setting of :data:`DECODE_SPACE`, timed on the first call
    for a shape (or found in the launch cache, tuned before on this GPU model) and kept
    (:func:`best_decode_config`); in the interpreter, 16-key tiles."""
    if interpreting():
        return {"BLOCK_N": 16, "num_stages": 1, "programs_per_sm": 4}
    key = (*q.shape[:2], *k.shape[1:3], q.shape[3], str(q.dtype))    # batch, q_heads, kv_heads, n_k, d, dtype
    cache_key = launch_cache.decode_key(*key)
    gpu = gpu_name(q)
    if key not in _BEST and (known := launch_cache.lookup(gpu, cache_key)) is not None:
        _BEST[key] = known  # tuned before on this GPU: no compiles of the other settings
    if key not in _BEST:
        times = [do_bench(lambda cfg=cfg: _launch_tuned(q, k, v, scale, cfg), warmup=5, rep=20,
                          return_mode="median") for cfg in DECODE_SPACE]
        _BEST[key] = DECODE_SPACE[min(range(len(times)), key=times.__getitem__)]
        launch_cache.remember(gpu, cache_key, _BEST[key])
    return _BEST[key]


def best_decode_config(batch: int, q_heads: int, kv_heads: int, n_k: int, head_dim: int, dtype) -> dict | None:
    """The setting the tuned decode kernel chose for this shape (None before its first call)."""
    return _BEST.get((batch, q_heads, kv_heads, n_k, head_dim, str(dtype)))


def check(n_k: int = 300, splits: tuple[int, ...] = (1, 3, 7), dtype=torch.float32, seed: int = 1) -> dict[str, float]:
    """The tuned decode (16-key tiles) against the float64 reference on random inputs (2 sequences of ``n_k``
    cached tokens, 8 query heads over 2 KV heads, head dim 64; on the GPU, or in Triton's interpreter without
    one), the cache cut into each number of ``splits``: the largest absolute error, ``{"1 piece": ..., ...}``."""
    return decode_errors(lambda q, k, v, pieces: tuned_decode(q, k, v, config={"num_splits": pieces, "BLOCK_N": 16}),
                         n_k, splits, dtype, "cpu" if interpreting() else "cuda", seed)
