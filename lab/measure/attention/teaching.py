"""FlashAttention forward in Triton, the kernel to read: one loop, every tile masked, natural exp.

It computes softmax(Q K^T * scale) V one tile of queries per program, walking the key/value tiles with an
online softmax (the NumPy loop of :mod:`lab.measure.attention.tiled`, moved onto the GPU). Causal and not,
grouped-query heads, head dims 16..256 (powers of two), any sequence lengths, fp16/bf16 (fp32 too, with
exact fp32 products). Without a GPU it runs in Triton's interpreter on the CPU. What it takes to be fast
is :mod:`lab.measure.attention.tuned`.
"""

from __future__ import annotations

import torch

from lab import env
from lab.measure.attention.reference import max_errors, softmax_scale

env.use_triton_interpreter_without_gpu()

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from lab.measure.attention.kernel_inputs import check_inputs, dot_precision, interpreting, strides  # noqa: E402


@triton.jit
def teaching_kernel(Q, K, V, Out, Lse, scale, n_q, n_k, q_heads, group,
                    sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, sob, soh, son,
                    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    CAUSAL: tl.constexpr, PRECISION: tl.constexpr, STORE_LSE: tl.constexpr):
    # Which tile of which head: program (m, b*q_heads + h) owns query rows m*BLOCK_M .. +BLOCK_M.
    start_m, bh = tl.program_id(0), tl.program_id(1)
    b, h = bh // q_heads, bh % q_heads
    kv_h = h // group                                   # grouped-query attention: shared KV head
    rows = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols0 = tl.arange(0, BLOCK_N)
    dims = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + b * sqb + h * sqh + rows[:, None] * sqn + dims[None, :],
                mask=rows[:, None] < n_q, other=0.0)
    k_base, v_base = K + b * skb + kv_h * skh, V + b * svb + kv_h * svh

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)   # running row max
    l_i = tl.zeros([BLOCK_M], tl.float32)                 # running sum of exp(score - max)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)       # running sum of exp(score - max) * V
    hi = n_k
    if CAUSAL:  # no key tile after the last one this query tile can see
        hi = tl.minimum(n_k, (start_m + 1) * BLOCK_M + n_k - n_q)
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + cols0
        k = tl.load(k_base + cols[None, :] * skn + dims[:, None],
                    mask=cols[None, :] < n_k, other=0.0)
        s = tl.dot(q, k, input_precision=PRECISION) * scale     # BLOCK_M x BLOCK_N scores
        visible = cols[None, :] < n_k
        if CAUSAL:
            visible = visible & (cols[None, :] <= rows[:, None] + (n_k - n_q))
        s = tl.where(visible, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp(m_i - m_new)                     # rescale what was summed under the old max
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_base + cols[:, None] * svn + dims[None, :],
                    mask=cols[:, None] < n_k, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(Out + b * sob + h * soh + rows[:, None] * son + dims[None, :],
             out.to(Out.dtype.element_ty), mask=rows[:, None] < n_q)
    if STORE_LSE:  # each row's log-sum-exp of its scores, which the backward pass reuses
        tl.store(Lse + bh * n_q + rows, m_i + tl.log(l_i), mask=rows < n_q)


def teaching_forward(q, k, v, causal: bool = False, scale: float | None = None,
                     block_m: int | None = None, block_n: int | None = None, return_lse: bool = False):
    """Attention with the teaching kernel. Default tiles: 64 x 64 on a GPU, 16 x 16 in the interpreter.

    ``return_lse=True`` returns ``(o, lse)``: ``lse`` is each row's log-sum-exp of its scaled scores (natural
    log, fp32, shape (batch, q_heads, n_q); -inf for a row that sees no key, which only n_k == 0 makes)."""
    q, k, v, (batch, q_heads, kv_heads, n_q, n_k, d) = check_inputs(q, k, v, causal)
    o = torch.empty_like(q)
    lse = torch.empty(batch, q_heads, n_q, dtype=torch.float32, device=q.device) if return_lse else None
    scale = softmax_scale(d, scale)
    # 64 x 64 tiles and 4 warps: the fastest of the launches tried for this kernel on the H200
    block_m = block_m or (16 if interpreting() else 64)
    block_n = block_n or (16 if interpreting() else 32 if q.dtype.itemsize == 4 else 64)
    grid = (triton.cdiv(n_q, block_m), batch * q_heads)
    teaching_kernel[grid](q, k, v, o, lse, scale, n_q, n_k, q_heads, q_heads // kv_heads, *strides(q, k, v, o),
                          HEAD_DIM=d, BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal, PRECISION=dot_precision(q.dtype),
                          STORE_LSE=return_lse, num_warps=4, num_stages=1 if interpreting() else 3)
    return (o, lse) if return_lse else o


def check(n: int = 50, q_heads: int = 4, kv_heads: int = 2, head_dim: int = 64, dtype=torch.float32,
          seed: int = 0) -> dict[str, float]:
    """The teaching kernel against the float64 reference on random inputs (on the GPU, or in Triton's interpreter
    without one): the largest absolute error of its output, ``{"no mask": ..., "causal": ...}``."""
    return max_errors(teaching_forward, n, q_heads, kv_heads, head_dim, dtype, "cpu" if interpreting() else "cuda",
                      seed)
