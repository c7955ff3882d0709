"""Split-KV decode in Triton: one new query token per sequence attending over a long KV cache.

In decode there is one query row per head, so the forward kernel's parallelism (one program per
tile of queries) collapses to batch x heads programs: 28 for one sequence of a 28-head model, on a
GPU with 132 multiprocessors. Split-KV (FlashDecoding) cuts the cache into ``num_splits`` pieces,
gives each piece its own program, and writes per split a partial output normalised by its own sum
plus that split's log-sum-exp ``lse_s``. A second small kernel (:func:`combine_kernel`) combines them exactly:
``o = sum_s exp(lse_s - lse) * o_s`` with ``lse = log(sum_s exp(lse_s))``.

* :func:`teaching_decode` -- :func:`teaching_split_kernel`, one program per (sequence, query head, split); the
  dot products are elementwise multiplies and sums, because one query row is too thin for a matrix instruction.
* :func:`tuned_decode` -- :func:`tuned_split_kernel`, one program per (sequence, KV head, split) serving all the query heads
  that share that KV head: each K/V tile is read from memory once for the whole group (7 query
  heads for 28 over 4), and the group's rows, padded to 16, make a small matrix for ``tl.dot``;
  the split count gives every multiprocessor several programs; tile size, warps, pipeline depth
  and programs per multiprocessor are timed from a small space on the first call for each shape.

Shapes: ``q`` is (batch, q_heads, 1, d); ``k``, ``v`` are (batch, kv_heads, n_k, d) (every sequence
of the batch has n_k cached tokens); the result has q's shape and dtype.
"""

from __future__ import annotations

from lab import LabError, env
from lab.measure.attention.reference import softmax_scale

env.use_triton_interpreter_without_gpu()

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.testing import do_bench  # noqa: E402

from lab.measure.attention import launch_cache  # noqa: E402
from lab.measure.attention.kernel_inputs import check_inputs, gpu_name, interpreting  # noqa: E402 (also applies the interpreter fix)

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453


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
    # exact merge: weight each split's output by exp(lse_s - max) / sum of those weights (a split with
    # lse = -inf, one that saw no keys, gets weight 0); the paged kernel reuses it
    bh = tl.program_id(0)
    b, h = bh // q_heads, bh % q_heads
    splits = tl.arange(0, SPLITS)
    dims = tl.arange(0, HEAD_DIM)
    lse = tl.load(LSE_part + bh * num_splits + splits, mask=splits < num_splits, other=float("-inf"))
    w = tl.exp(lse - tl.max(lse, 0))
    w = w / tl.sum(w, 0)
    o = tl.load(O_part + (bh * num_splits + splits[:, None]) * HEAD_DIM + dims[None, :],
                mask=splits[:, None] < num_splits, other=0.0)
    tl.store(Out + b * sob + h * soh + dims, tl.sum(w[:, None] * o, 0).to(Out.dtype.element_ty))


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


def _prepare(q, k, v):
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


def _multiprocessors(device) -> int:
    if interpreting():
        return 4
    return torch.cuda.get_device_properties(device).multi_processor_count


def split_buffers(q, n_keys: int, kv_programs: int, cfg: dict):
    """The split count of a tuned launch and its fp32 partial outputs: (num_splits, keys_per_split, o_part, lse_part).

    ``cfg`` fixes ``num_splits``, or asks for about ``programs_per_sm`` programs per multiprocessor, shared
    among ``kv_programs`` (sequence, KV head) pairs. Used by the contiguous and the paged kernels alike.
    """
    if "num_splits" in cfg:
        num_splits, keys_per_split = split_plan(n_keys, 1, cfg["BLOCK_N"], cfg["num_splits"])
    else:
        num_splits, keys_per_split = split_plan(n_keys, kv_programs, cfg["BLOCK_N"],
                                                cfg["programs_per_sm"] * _multiprocessors(q.device))
    rows, d = q.shape[0] * q.shape[1], q.shape[3]
    o_part = torch.empty((rows, num_splits, d), dtype=torch.float32, device=q.device)
    lse_part = torch.empty((rows, num_splits), dtype=torch.float32, device=q.device)
    return num_splits, keys_per_split, o_part, lse_part


def combine(o_part, lse_part, o, num_splits: int):
    """Merge the splits' partial outputs into ``o`` (batch, q_heads, 1, d) with their log-sum-exps."""
    batch, q_heads, _, d = o.shape
    combine_kernel[(batch * q_heads,)](o_part, lse_part, o, num_splits, q_heads, o.stride(0), o.stride(1),
                                       HEAD_DIM=d, SPLITS=max(2, triton.next_power_of_2(num_splits)))
    return o


def teaching_decode(q, k, v, scale: float | None = None, num_splits: int | None = None, block_n: int | None = None):
    """Split-KV decode with one program per (sequence, query head, split), then the combine kernel."""
    q, k, v, (batch, q_heads, kv_heads, n_k, d) = _prepare(q, k, v)
    block_n = block_n or (16 if interpreting() else 64)
    scale = softmax_scale(d, scale)
    if num_splits is None:  # about two programs per multiprocessor
        num_splits, keys_per_split = split_plan(n_k, batch * q_heads, block_n, 2 * _multiprocessors(q.device))
    else:
        num_splits, keys_per_split = split_plan(n_k, 1, block_n, num_splits)
    o_part = torch.empty((batch * q_heads, num_splits, d), dtype=torch.float32, device=q.device)
    lse_part = torch.empty((batch * q_heads, num_splits), dtype=torch.float32, device=q.device)
    teaching_split_kernel[(batch * q_heads, num_splits)](
        q, k, v, o_part, lse_part, scale, n_k, keys_per_split, num_splits, q_heads, q_heads // kv_heads,
        q.stride(0), q.stride(1), *k.stride()[:3], *v.stride()[:3], HEAD_DIM=d, BLOCK_N=block_n,
        num_warps=4)
    return combine(o_part, lse_part, torch.empty_like(q), num_splits)


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
    num_splits); without it a GPU times every setting of :data:`DECODE_SPACE` on the first call for a
    shape and keeps the fastest (:func:`best_decode_config`), and the interpreter uses 16-key tiles.
    """
    q, k, v, (batch, q_heads, kv_heads, n_k, d) = _prepare(q, k, v)
    scale = softmax_scale(d, scale)
    if config is None and interpreting():
        config = {"BLOCK_N": 16, "num_stages": 1, "programs_per_sm": 4}
    if config is None:
        key = (batch, q_heads, kv_heads, n_k, d, str(q.dtype))
        cache_key = launch_cache.decode_key(*key)
        gpu = gpu_name(q)
        if key not in _BEST and (known := launch_cache.lookup(gpu, cache_key)) is not None:
            _BEST[key] = known  # tuned before on this GPU: no compiles of the other settings
        if key not in _BEST:
            times = [do_bench(lambda cfg=cfg: _launch_tuned(q, k, v, scale, cfg), warmup=5, rep=20,
                              return_mode="median") for cfg in DECODE_SPACE]
            _BEST[key] = DECODE_SPACE[min(range(len(times)), key=times.__getitem__)]
            launch_cache.remember(gpu, cache_key, _BEST[key])
        config = _BEST[key]
    return _launch_tuned(q, k, v, scale, {"BLOCK_N": 64, "programs_per_sm": 4, **config})


def best_decode_config(batch: int, q_heads: int, kv_heads: int, n_k: int, head_dim: int, dtype) -> dict | None:
    """The setting the tuned decode kernel chose for this shape (None before its first call)."""
    return _BEST.get((batch, q_heads, kv_heads, n_k, head_dim, str(dtype)))
