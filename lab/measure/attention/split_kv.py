"""Split-KV decode in Triton, the kernels to read: one new query token per sequence over a long KV cache.

In decode there is one query row per head, so the forward kernel's parallelism (one program per
tile of queries) collapses to batch x heads programs: 28 for one sequence of a 28-head model, on a
GPU with 132 multiprocessors. Split-KV (FlashDecoding) cuts the cache into ``num_splits`` pieces
(:func:`split_plan`), gives each piece its own program, and writes per split a partial output
normalised by its own sum plus that split's log-sum-exp ``lse_s``
(:func:`teaching_split_kernel`, one program per (sequence, query head, split); its dot products are
elementwise multiplies and sums, because one query row is too thin for a matrix instruction). A second
small kernel (:func:`combine_kernel`) merges them exactly: ``o = sum_s exp(lse_s - lse) * o_s`` with
``lse = log(sum_s exp(lse_s))``. :func:`teaching_decode` launches both; :func:`check` runs it against the
float64 reference. The kernel that reads each KV head once for its whole query group, tuned per shape,
is :mod:`lab.measure.attention.split_kv_tuned`; the one that reads a paged cache,
:mod:`lab.measure.attention.triton_paged_decode`. Both reuse the plan and the merge.

Shapes: ``q`` is (batch, q_heads, 1, d); ``k``, ``v`` are (batch, kv_heads, n_k, d) (every sequence
of the batch has n_k cached tokens); the result has q's shape and dtype.
"""

from __future__ import annotations

import torch

from lab import LabError, env
from lab.measure.attention.reference import decode_errors, softmax_scale

env.use_triton_interpreter_without_gpu()

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from lab.measure.attention.kernel_inputs import check_inputs, interpreting  # noqa: E402 (also applies the interpreter fix)


@triton.jit
def teaching_split_kernel(Q, K, V, O_part, LSE_part, scale, n_k, keys_per_split, num_splits, q_heads, group,
                          sqb, sqh, skb, skh, skn, svb, svh, svn,
                          HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr):
    bh, split = tl.program_id(0), tl.program_id(1)
    b, h = bh // q_heads, bh % q_heads
    kv_h = h // group
    dims = tl.arange(0, HEAD_DIM)
    cols0 = tl.arange(0, BLOCK_N)
    q = tl.load(Q + b * sqb + h * sqh + dims).to(tl.float32)          # the single query row
    k_base, v_base = K + b * skb + kv_h * skh, V + b * svb + kv_h * svh
    start = split * keys_per_split
    stop = tl.minimum(start + keys_per_split, n_k)
    m_i = tl.max(tl.full([BLOCK_N], float("-inf"), tl.float32), 0)     # running max (a scalar)
    l_i = tl.sum(tl.zeros([BLOCK_N], tl.float32), 0)                   # running sum
    acc = tl.zeros([HEAD_DIM], tl.float32)
    for start_n in range(start, stop, BLOCK_N):
        cols = start_n + cols0
        valid = cols < stop
        k = tl.load(k_base + cols[:, None] * skn + dims[None, :], mask=valid[:, None], other=0.0)
        s = tl.sum(k.to(tl.float32) * q[None, :], 1) * scale             # BLOCK_N scores
        s = tl.where(valid, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 0))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new)
        l_i = l_i * alpha + tl.sum(p, 0)
        v = tl.load(v_base + cols[:, None] * svn + dims[None, :], mask=valid[:, None], other=0.0)
        acc = acc * alpha + tl.sum(p[:, None] * v.to(tl.float32), 0)
        m_i = m_new
    # this split's output, normalised by its own sum, and its log-sum-exp (natural log)
    tl.store(O_part + (bh * num_splits + split) * HEAD_DIM + dims, acc / l_i)
    tl.store(LSE_part + bh * num_splits + split, m_i + tl.log(l_i))


@triton.jit
def combine_kernel(O_part, LSE_part, Out, num_splits, q_heads, sob, soh,
                   HEAD_DIM: tl.constexpr, SPLITS: tl.constexpr):
    # exact merge: weight each split's output by exp(lse_s - max) / sum of those weights; a split that saw no
    # keys (lse = -inf) gets weight 0, its output written as 0 by the paged kernel, which reuses this merge
    # (split_plan never makes an empty split for the kernels above)
    bh = tl.program_id(0)
    b, h = bh // q_heads, bh % q_heads
    splits = tl.arange(0, SPLITS)
    dims = tl.arange(0, HEAD_DIM)
    lse = tl.load(LSE_part + bh * num_splits + splits, mask=splits < num_splits, other=float("-inf"))
    top = tl.max(lse, 0)
    w = tl.exp(lse - tl.where(top == float("-inf"), 0.0, top))  # no keys at all (a padded row): every w is 0
    w = w / tl.maximum(tl.sum(w, 0), 1e-30)                        # ... and the output is 0, not 0/0
    o = tl.load(O_part + (bh * num_splits + splits[:, None]) * HEAD_DIM + dims[None, :],
                mask=splits[:, None] < num_splits, other=0.0)
    tl.store(Out + b * sob + h * soh + dims, tl.sum(w[:, None] * o, 0).to(Out.dtype.element_ty))


def check_decode_inputs(q, k, v):
    """Validate one decode step's tensors (one query token per sequence); returns (q, k, v) and the sizes
    (batch, q_heads, kv_heads, n_k, d)."""
    q, k, v, (batch, q_heads, kv_heads, n_q, n_k, d) = check_inputs(q, k, v, causal=False)
    if n_q != 1:
        raise LabError(f"decode takes one query token per sequence (q of shape (batch, heads, 1, d)); got n_q={n_q}")
    return q, k, v, (batch, q_heads, kv_heads, n_k, d)


def split_plan(n_k: int, programs_per_split: int, block_n: int, target_programs: int) -> tuple[int, int]:
    """(num_splits, keys_per_split): enough splits for ``target_programs`` programs, each a whole
    number of ``block_n`` tiles, and no split empty."""
    wanted = max(1, min(triton.cdiv(target_programs, programs_per_split), triton.cdiv(n_k, block_n)))
    keys_per_split = triton.cdiv(triton.cdiv(n_k, wanted), block_n) * block_n
    return triton.cdiv(n_k, keys_per_split), keys_per_split


def multiprocessors(device) -> int:
    """The GPU's multiprocessors, which the split count is sized to (4 in the interpreter)."""
    if interpreting():
        return 4
    return torch.cuda.get_device_properties(device).multi_processor_count


def combine(o_part, lse_part, o, num_splits: int):
    """Merge the splits' partial outputs into ``o`` (batch, q_heads, 1, d) with their log-sum-exps."""
    batch, q_heads, _, d = o.shape
    combine_kernel[(batch * q_heads,)](o_part, lse_part, o, num_splits, q_heads, o.stride(0), o.stride(1),
                                       HEAD_DIM=d, SPLITS=max(2, triton.next_power_of_2(num_splits)))
    return o


def teaching_decode(q, k, v, scale: float | None = None, num_splits: int | None = None, block_n: int | None = None):
    """Split-KV decode with one program per (sequence, query head, split), then the combine kernel."""
    q, k, v, (batch, q_heads, kv_heads, n_k, d) = check_decode_inputs(q, k, v)
    block_n = block_n or (16 if interpreting() else 64)
    scale = softmax_scale(d, scale)
    if num_splits is None:  # about two programs per multiprocessor
        num_splits, keys_per_split = split_plan(n_k, batch * q_heads, block_n, 2 * multiprocessors(q.device))
    else:
        num_splits, keys_per_split = split_plan(n_k, 1, block_n, num_splits)
    o_part = torch.empty((batch * q_heads, num_splits, d), dtype=torch.float32, device=q.device)
    lse_part = torch.empty((batch * q_heads, num_splits), dtype=torch.float32, device=q.device)
    teaching_split_kernel[(batch * q_heads, num_splits)](
        q, k, v, o_part, lse_part, scale, n_k, keys_per_split, num_splits, q_heads, q_heads // kv_heads,
        q.stride(0), q.stride(1), *k.stride()[:3], *v.stride()[:3], HEAD_DIM=d, BLOCK_N=block_n,
        num_warps=4)
    return combine(o_part, lse_part, torch.empty_like(q), num_splits)


def check(n_k: int = 300, splits: tuple[int, ...] = (1, 3, 7), dtype=torch.float32, seed: int = 1) -> dict[str, float]:
    """The teaching decode against the float64 reference on random inputs (2 sequences of ``n_k`` cached tokens,
    8 query heads over 2 KV heads, head dim 64; on the GPU, or in Triton's interpreter without one), the cache
    cut into each number of ``splits``: the largest absolute error of its output, ``{"1 piece": ..., ...}``."""
    return decode_errors(lambda q, k, v, pieces: teaching_decode(q, k, v, num_splits=pieces), n_k, splits, dtype,
                         "cpu" if interpreting() else "cuda", seed)
