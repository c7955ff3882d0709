"""PagedAttention decode in Triton: the split-KV kernel of :mod:`split_kv_tuned`, reading K/V through a block table.

A serving engine does not give each sequence one contiguous stretch of cache. It cuts the cache into
pages of ``page_size`` tokens, hands pages out as sequences grow, and keeps per sequence a *block
table*: entry ``j`` is the page that holds tokens ``j * page_size .. (j + 1) * page_size - 1``
(Kwon et al., "Efficient Memory Management for Large Language Model Serving with PagedAttention",
SOSP 2023). The kernel changes in one place only, the address of a key: token ``t`` of sequence
``b`` lives at row ``t % page_size`` of page ``block_table[b, t // page_size]``.

The algorithm (:func:`paged_split_kernel`) is otherwise the GQA-packed split-KV decode of
:func:`split_kv_tuned.tuned_decode`:
one program per (split, sequence, KV head) serves the query heads of that KV head, every split
writes a partial output and its log-sum-exp, and a combine kernel merges the splits exactly.
A tile of ``BLOCK_N`` keys gathers one page id per key, so a tile may span several small pages
(16-token pages, 32-key tiles) and the loads stay as wide as in the contiguous kernel: each key's
row of ``head_dim`` values is contiguous in memory whichever page it sits in.

Layout (vLLM's for its FlashAttention backend): ``k_cache``, ``v_cache`` are
(num_pages, page_size, kv_heads, head_dim); ``block_table`` is (batch, max_pages) int32;
``seq_lens`` is (batch,) int32, each at least 1 (sequences of one batch may differ in length);
``q`` is (batch, q_heads, 1, head_dim) as for the contiguous kernel; the result has q's shape and dtype.
"""

from __future__ import annotations

from lab import LabError, env
from lab.measure.attention.reference import LOG2E, softmax_scale

env.use_triton_interpreter_without_gpu()

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.testing import do_bench  # noqa: E402

from lab.measure.attention.kernel_inputs import interpreting  # noqa: E402 (also applies the interpreter fix)
from lab.measure.attention.split_kv import combine  # noqa: E402
from lab.measure.attention.split_kv_tuned import DECODE_SPACE, split_buffers  # noqa: E402


@triton.jit
def paged_split_kernel(Q, K, V, BlockTable, SeqLens, O_part, LSE_part, qk_scale, keys_per_split, num_splits,
                       kv_heads, group, sqb, sqh, s_bt, skp, skt, skh, svp, svt, svh,
                       HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_PAD: tl.constexpr,
                       PAGE_SIZE: tl.constexpr, PRECISION: tl.constexpr, SPLIT_EACH_SEQUENCE: tl.constexpr = False):
    split, bkv = tl.program_id(0), tl.program_id(1)
    b, kv_h = bkv // kv_heads, bkv % kv_heads
    heads = tl.arange(0, GROUP_PAD)                                    # the query heads of this KV head
    dims = tl.arange(0, HEAD_DIM)
    cols0 = tl.arange(0, BLOCK_N)
    q_heads = kv_heads * group
    q = tl.load(Q + b * sqb + (kv_h * group + heads)[:, None] * sqh + dims[None, :],
                mask=heads[:, None] < group, other=0.0)                # GROUP_PAD x HEAD_DIM
    n_k = tl.load(SeqLens + b)                                         # this sequence's length
    if SPLIT_EACH_SEQUENCE:  # a grid fixed for the longest allowed sequence (a CUDA graph): spread this one's keys
        keys_per_split = tl.cdiv(tl.cdiv(n_k, num_splits), BLOCK_N) * BLOCK_N
    pages = BlockTable + b * s_bt
    k_head, v_head = K + kv_h * skh, V + kv_h * svh
    start = split * keys_per_split
    stop = tl.minimum(start + keys_per_split, n_k)                     # stop <= start: an empty split
    m_i = tl.full([GROUP_PAD], float("-inf"), tl.float32)
    l_i = tl.zeros([GROUP_PAD], tl.float32)
    acc = tl.zeros([GROUP_PAD, HEAD_DIM], tl.float32)
    for start_n in tl.range(start, stop, BLOCK_N):
        cols = start_n + cols0
        valid = cols < stop
        # the one change from the contiguous kernel: each key's page from the block table
        page = tl.load(pages + cols // PAGE_SIZE, mask=valid, other=0).to(tl.int64)
        slot = cols % PAGE_SIZE
        k = tl.load(k_head + (page * skp + slot * skt)[None, :] + dims[:, None], mask=valid[None, :], other=0.0)
        s = tl.dot(q, k, input_precision=PRECISION) * qk_scale        # log2 units
        s = tl.where(valid[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.math.exp2(m_i - m_new)
        p = tl.math.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_head + (page * svp + slot * svt)[:, None] + dims[None, :], mask=valid[:, None], other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision=PRECISION)
        m_i = m_new
    bh = b * q_heads + kv_h * group + heads                             # rows of the partial buffers
    real = heads < group
    # an empty split (a sequence shorter than the longest) contributes output 0 with weight exp(-inf) = 0
    has_keys = l_i > 0
    out = acc / tl.where(has_keys, l_i, 1.0)[:, None]
    lse = tl.where(has_keys, (m_i + tl.log2(tl.where(has_keys, l_i, 1.0))) * 0.6931471805599453, float("-inf"))
    tl.store(O_part + (bh[:, None] * num_splits + split) * HEAD_DIM + dims[None, :], out, mask=real[:, None])
    tl.store(LSE_part + bh * num_splits + split, lse, mask=real)


def check_paged_inputs(q, k_cache, v_cache, block_table, seq_lens) -> tuple[int, int, int, int, int]:
    """Validate the paged layout; returns (batch, q_heads, kv_heads, page_size, head_dim)."""
    if q.dim() != 4 or q.shape[2] != 1:
        raise LabError(f"q must be (batch, q_heads, 1, head_dim) for decode; got shape {tuple(q.shape)}")
    batch, q_heads, _, d = q.shape
    if k_cache.dim() != 4 or tuple(k_cache.shape) != tuple(v_cache.shape):
        raise LabError("k_cache and v_cache must both be (num_pages, page_size, kv_heads, head_dim); "
                       f"got {tuple(k_cache.shape)} and {tuple(v_cache.shape)}")
    _, page_size, kv_heads, kd = k_cache.shape
    if kd != d or kv_heads == 0 or q_heads % kv_heads:
        raise LabError(f"cache {tuple(k_cache.shape)} does not fit q {tuple(q.shape)}: same head dim, "
                       "and query heads a multiple of KV heads")
    if page_size < 1 or page_size & (page_size - 1):
        raise LabError(f"page size must be a power of two, got {page_size}")
    if q.dtype not in (torch.float16, torch.bfloat16, torch.float32) or k_cache.dtype != q.dtype \
            or v_cache.dtype != q.dtype:
        raise LabError(f"q and the caches must share one dtype among float16, bfloat16, float32; "
                       f"got {q.dtype}, {k_cache.dtype}, {v_cache.dtype}")
    if d < 16 or d > 256 or d & (d - 1):
        raise LabError(f"head dim must be a power of two from 16 to 256, got {d}")
    if block_table.dtype != torch.int32 or block_table.dim() != 2 or block_table.shape[0] != batch:
        raise LabError(f"block_table must be int32 of shape (batch={batch}, max_pages); "
                       f"got {block_table.dtype} {tuple(block_table.shape)}")
    if seq_lens.dtype != torch.int32 or tuple(seq_lens.shape) != (batch,):
        raise LabError(f"seq_lens must be int32 of shape ({batch},); got {seq_lens.dtype} {tuple(seq_lens.shape)}")
    longest, shortest = int(seq_lens.max()), int(seq_lens.min())
    if shortest < 1 or longest > block_table.shape[1] * page_size:
        raise LabError(f"sequence lengths must be 1 .. max_pages x page_size = {block_table.shape[1] * page_size}; "
                       f"got {shortest} .. {longest}")
    for name, t in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache)):
        if t.stride(-1) != 1:
            raise LabError(f"{name} must have a contiguous last dimension")
    return batch, q_heads, kv_heads, page_size, d


def _launch(q, k_cache, v_cache, block_table, seq_lens, scale, cfg, longest: int, out=None):
    batch, q_heads, kv_heads, page_size, d = q.shape[0], q.shape[1], k_cache.shape[2], k_cache.shape[1], q.shape[3]
    group = q_heads // kv_heads
    num_splits, keys_per_split, o_part, lse_part = split_buffers(q, longest, batch * kv_heads, cfg)
    paged_split_kernel[(num_splits, batch * kv_heads)](
        q, k_cache, v_cache, block_table, seq_lens, o_part, lse_part, scale * LOG2E, keys_per_split, num_splits,
        kv_heads, group, q.stride(0), q.stride(1), block_table.stride(0), *k_cache.stride()[:3],
        *v_cache.stride()[:3], HEAD_DIM=d, BLOCK_N=cfg["BLOCK_N"], GROUP_PAD=max(16, triton.next_power_of_2(group)),
        PAGE_SIZE=page_size, PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
        SPLIT_EACH_SEQUENCE=cfg.get("split_each_sequence", False),
        num_warps=cfg.get("num_warps", 4), num_stages=cfg.get("num_stages", 3))
    return combine(o_part, lse_part, torch.empty_like(q) if out is None else out, num_splits)


#: Launch settings timed once per shape on a GPU (the fastest kept): the contiguous kernel's space
#: (split_kv_tuned.DECODE_SPACE) with the same tiles, so neither kernel is tuned more than the other.
PAGED_SPACE = DECODE_SPACE
_BEST: dict[tuple, dict] = {}


def paged_decode(q, k_cache, v_cache, block_table, seq_lens, scale: float | None = None, config: dict | None = None,
                 max_seq_len: int | None = None, out=None):
    """Split-KV decode over a paged KV cache (see the module docstring for the layout).

    ``config`` fixes the launch (BLOCK_N, num_warps, num_stages, and programs_per_sm or num_splits; with
    ``split_each_sequence`` each sequence divides its own keys evenly among the splits instead of every
    split taking a fixed share of the longest);
    without it a GPU times every setting of :data:`PAGED_SPACE` on the first call for a shape and keeps
    the fastest (:func:`best_paged_config`); the interpreter uses 16-key tiles. ``max_seq_len`` (the
    longest sequence, or a bound on it) sizes the splits; pass it to skip reading ``seq_lens`` back to the host,
    which a CUDA graph cannot do. ``out`` (q's shape) receives the result.
    """
    if max_seq_len is None:
        batch, q_heads, kv_heads, page_size, d = check_paged_inputs(q, k_cache, v_cache, block_table, seq_lens)
        max_seq_len = int(seq_lens.max())
    else:
        batch, q_heads, _, d = q.shape
        kv_heads, page_size = k_cache.shape[2], k_cache.shape[1]
    scale = softmax_scale(d, scale)
    if config is None and interpreting():
        config = {"BLOCK_N": 16, "num_stages": 1, "programs_per_sm": 4}
    if config is None:
        key = (batch, q_heads, kv_heads, page_size, max_seq_len, d, str(q.dtype))
        if key not in _BEST:
            times = [do_bench(lambda cfg=cfg: _launch(q, k_cache, v_cache, block_table, seq_lens, scale, cfg,
                                                      max_seq_len), warmup=5, rep=20, return_mode="median")
                     for cfg in PAGED_SPACE]
            _BEST[key] = PAGED_SPACE[min(range(len(times)), key=times.__getitem__)]
        config = _BEST[key]
    return _launch(q, k_cache, v_cache, block_table, seq_lens, scale, {"BLOCK_N": 64, "programs_per_sm": 4, **config},
                   max_seq_len, out)


def best_paged_config(batch: int, q_heads: int, kv_heads: int, page_size: int, max_seq_len: int, head_dim: int,
                      dtype) -> dict | None:
    """The setting :func:`paged_decode` chose for this shape (None before its first call)."""
    return _BEST.get((batch, q_heads, kv_heads, page_size, max_seq_len, head_dim, str(dtype)))


def paginate(k, v, page_size: int, seq_lens=None, shuffle: bool = True, seed: int = 0, spare_pages: int = 0):
    """A paged copy of contiguous caches ``k``, ``v`` (batch, kv_heads, n, d), as an engine would hold them.

    Sequence ``b`` keeps its first ``seq_lens[b]`` tokens (all ``n`` by default) in
    ceil(len / page_size) pages; with ``shuffle`` the pages of all sequences are scattered over the
    pool in a random order (an engine hands out whatever page is free), and ``spare_pages`` unused
    pages are added to the pool. Returns (k_cache, v_cache, block_table, seq_lens); unused block-table
    entries point at page 0 and are never read.
    """
    if page_size < 1 or page_size & (page_size - 1):
        raise LabError(f"page size must be a power of two, got {page_size}")
    batch, kv_heads, n, d = k.shape
    if seq_lens is None:
        seq_lens = torch.full((batch,), n, dtype=torch.int32)
    seq_lens = torch.as_tensor(seq_lens, dtype=torch.int32).cpu()
    if seq_lens.shape != (batch,) or int(seq_lens.min()) < 1 or int(seq_lens.max()) > n:
        raise LabError(f"seq_lens must hold {batch} lengths from 1 to {n}; got {seq_lens.tolist()}")
    pages_per_seq = [-(-int(length) // page_size) for length in seq_lens]
    max_pages, total = max(pages_per_seq), sum(pages_per_seq) + spare_pages
    gen = torch.Generator().manual_seed(seed)
    order = torch.randperm(total, generator=gen) if shuffle else torch.arange(total)
    k_cache = torch.zeros((total, page_size, kv_heads, d), dtype=k.dtype, device=k.device)
    v_cache = torch.zeros_like(k_cache)
    block_table = torch.zeros((batch, max_pages), dtype=torch.int32)
    used = 0
    for b, count in enumerate(pages_per_seq):
        ids = order[used:used + count]
        used += count
        block_table[b, :count] = ids.to(torch.int32)
        padded = count * page_size  # the last page's unused slots stay zero
        for cache, src in ((k_cache, k), (v_cache, v)):
            rows = torch.zeros((padded, kv_heads, d), dtype=k.dtype, device=k.device)
            rows[: int(seq_lens[b])] = src[b, :, : int(seq_lens[b])].transpose(0, 1)
            cache[ids.to(k.device)] = rows.view(count, page_size, kv_heads, d)
    return k_cache, v_cache, block_table.to(k.device), seq_lens.to(k.device)
