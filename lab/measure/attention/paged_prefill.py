"""FlashAttention forward for a server's batch, in Triton: packed varlen queries over a cached prefix and a paged KV cache.

A serving engine's attention call is not one (batch, heads, n, d) block. Each step it packs the new tokens of
many sequences into one tensor: a chunk of a long prompt being prefilled, the whole of a short prompt, one
token of a sequence being decoded. Every chunk attends to the sequence's cached prefix and to itself, causally,
with the mask aligned to the end of the keys (bottom-right): query ``i`` of a chunk of ``q_len`` new tokens over
``seq_len`` keys (the prefix and the chunk) sees keys ``0 .. seq_len - q_len + i``. The keys and values live in
pages, found through the block table as in :mod:`lab.measure.attention.triton_paged_decode`.

The kernel (:func:`paged_prefill_kernel`) is the tuned forward of :mod:`lab.measure.attention.tuned` with three
changes: a program first finds its sequence's queries and length (``cu_seqlens_q``, ``seq_lens``) and exits if
its query tile lies past the sequence's chunk; the causal diagonal sits ``seq_len - q_len`` keys to the right;
and a key's address goes through the block table (:func:`paged_tiles`). The rest is the tuned loop: scores in
log2 units and ``exp2``, the key tiles every row sees whole first (no mask), then those across the diagonal and
the end of the keys (masked), the query heads of one KV head side by side, heaviest query tiles first.
Decode rows (``q_len`` 1) run too, one row in a tile of ``BLOCK_M``; a server sends pure decode batches to
the split-KV kernel of :mod:`triton_paged_decode`, which packs a KV head's query heads into the rows instead.

Layout (vLLM's for its FlashAttention backend): ``q`` is (total query tokens, q_heads, head_dim), sequence
``b``'s queries being rows ``cu_seqlens_q[b] .. cu_seqlens_q[b + 1]`` (int32, batch + 1); ``k_cache``, ``v_cache``
are (num_pages, page_size, kv_heads, head_dim); ``block_table`` is (batch, max_pages) int32; ``seq_lens`` is
(batch,) int32, the keys of each sequence, prefix and new tokens together. The output has q's shape and dtype.
Supported: head dims 64 and 128; fp16, bf16, fp32; query heads a multiple of KV heads; page sizes that divide
the key tile (``BLOCK_N``: 64 on a GPU, 16 in the interpreter) or are a multiple of it.
"""

from __future__ import annotations

from lab import LabError, env
from lab.measure.attention.reference import LOG2E, paged_varlen_attention_torch, softmax_scale

env.use_triton_interpreter_without_gpu()

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from lab.measure.attention.kernel_inputs import dot_precision, interpreting  # noqa: E402 (applies the interpreter fix)
from lab.measure.attention.triton_paged_decode import paginate  # noqa: E402

HEAD_DIMS = (64, 128)


@triton.jit
def paged_tiles(acc, l_i, m_i, q, k_head, v_head, pages, skp, skt, svp, svt, start, stop, rows, cols0, dims,
                n_k, diag, qk_scale, MASKED: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
                PAGE_SIZE: tl.constexpr, PRECISION: tl.constexpr):
    """Online softmax over key tiles [start, stop), as ``tuned_tiles``, each key found through the block table.
    MASKED=False tiles are whole and fully visible."""
    for start_n in range(start, stop, BLOCK_N):
        cols = start_n + cols0
        # the one change from the tuned loop: key t is row t % PAGE_SIZE of page pages[t // PAGE_SIZE]
        if PAGE_SIZE >= BLOCK_N:  # the tile lies inside one page: one page id, BLOCK_N rows in a row
            page = tl.load(pages + start_n // PAGE_SIZE).to(tl.int64)
            slot = start_n % PAGE_SIZE + cols0
        elif MASKED:  # the tile spans several pages: one page id per key (none past the sequence)
            page = tl.load(pages + cols // PAGE_SIZE, mask=cols < n_k, other=0).to(tl.int64)
            slot = cols % PAGE_SIZE
        else:
            page = tl.load(pages + cols // PAGE_SIZE).to(tl.int64)
            slot = cols % PAGE_SIZE
        k_rows, v_rows = page * skp + slot * skt, page * svp + slot * svt
        if MASKED:
            k = tl.load(k_head + k_rows[None, :] + dims[:, None], mask=cols[None, :] < n_k, other=0.0)
        else:
            k = tl.load(k_head + k_rows[None, :] + dims[:, None])
        s = tl.dot(q, k, input_precision=PRECISION)
        if MASKED:  # past the sequence, or right of the diagonal (the prefix moves it diag keys right)
            visible = (cols[None, :] < n_k) & (cols[None, :] <= rows[:, None] + diag)
            s = tl.where(visible, s * qk_scale, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            s = s - m_new[:, None]
        else:  # scale folded into the subtraction: one fused multiply-add per score
            m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
            s = s * qk_scale - m_new[:, None]
        p = tl.math.exp2(s)                             # scores are in log2 units: exp2 is one instruction
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        if MASKED:
            v = tl.load(v_head + v_rows[:, None] + dims[None, :], mask=cols[:, None] < n_k, other=0.0)
        else:
            v = tl.load(v_head + v_rows[:, None] + dims[None, :])
        acc = tl.dot(p.to(v.dtype), v, acc, input_precision=PRECISION)
        m_i = m_new
    return acc, l_i, m_i


# one compile per server: a step's tile count and its slices of the lengths and block table do not pick a variant
@triton.jit(do_not_specialize=["n_m"], do_not_specialize_on_alignment=["CuSeqlensQ", "SeqLens", "BlockTable"])
def paged_prefill_kernel(Q, K, V, Out, CuSeqlensQ, SeqLens, BlockTable, qk_scale, q_heads, group, n_m,
                         sqt, sqh, skp, skt, skh, svp, svt, svh, sot, soh, s_bt,
                         HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         PAGE_SIZE: tl.constexpr, PRECISION: tl.constexpr):
    # Program (b * q_heads + h, j): one query tile of one head of one sequence. Heads vary fastest, so the query
    # heads of one KV head run side by side (they read the same pages); j counts down from the n_m tiles of the
    # longest chunk, so the last query tiles, which see the most keys, start first.
    bh = tl.program_id(0)
    start_m = n_m - 1 - tl.program_id(1)
    b, h = bh // q_heads, bh % q_heads
    kv_h = h // group                                   # grouped-query attention: shared KV head
    q_start = tl.load(CuSeqlensQ + b)
    q_len = tl.load(CuSeqlensQ + b + 1) - q_start
    if start_m * BLOCK_M >= q_len:                      # this sequence's chunk is shorter than the longest
        return
    n_k = tl.load(SeqLens + b)
    diag = n_k - q_len                                  # the cached prefix: query i sees keys 0 .. diag + i
    rows = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols0 = tl.arange(0, BLOCK_N)
    dims = tl.arange(0, HEAD_DIM)
    tokens = q_start.to(tl.int64) + rows                # rows of the packed queries and output
    q = tl.load(Q + tokens[:, None] * sqt + h * sqh + dims[None, :], mask=rows[:, None] < q_len, other=0.0)
    pages = BlockTable + b * s_bt
    k_head, v_head = K + kv_h * skh, V + kv_h * svh
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    # keys every row of the tile sees, rounded down to whole tiles; then the tiles across the diagonal
    full_end = tl.minimum(start_m * BLOCK_M + diag + 1, n_k) // BLOCK_N * BLOCK_N
    hi = tl.minimum((start_m + 1) * BLOCK_M + diag, n_k)
    acc, l_i, m_i = paged_tiles(acc, l_i, m_i, q, k_head, v_head, pages, skp, skt, svp, svt, 0, full_end, rows,
                                cols0, dims, n_k, diag, qk_scale, False, BLOCK_N, HEAD_DIM, PAGE_SIZE, PRECISION)
    acc, l_i, m_i = paged_tiles(acc, l_i, m_i, q, k_head, v_head, pages, skp, skt, svp, svt, full_end, hi, rows,
                                cols0, dims, n_k, diag, qk_scale, True, BLOCK_N, HEAD_DIM, PAGE_SIZE, PRECISION)
    out = acc / l_i[:, None]
    tl.store(Out + tokens[:, None] * sot + h * soh + dims[None, :], out.to(Out.dtype.element_ty),
             mask=rows[:, None] < q_len)


def check_prefill_inputs(q, k_cache, v_cache, cu_seqlens_q, seq_lens, block_table, block_n: int,
                         read_lengths: bool = True) -> int | None:
    """Refuse, in one line, what the kernel cannot run. ``read_lengths`` also checks the lengths themselves (a
    read back to the host) and returns the longest chunk; without it nothing leaves the GPU and None comes back."""
    if q.dim() != 3 or k_cache.dim() != 4 or tuple(k_cache.shape) != tuple(v_cache.shape):
        raise LabError(f"q must be (tokens, q_heads, head_dim) and k_cache, v_cache (num_pages, page_size, kv_heads, "
                       f"head_dim); got {tuple(q.shape)}, {tuple(k_cache.shape)}, {tuple(v_cache.shape)}")
    _, q_heads, d = q.shape
    _, page_size, kv_heads, kd = k_cache.shape
    if d not in HEAD_DIMS or kd != d:
        raise LabError(f"head dim {d} (cache {kd}) is not supported: the paged prefill kernel takes head dims "
                       f"{' and '.join(map(str, HEAD_DIMS))}; use vLLM's FLASH_ATTN backend for others")
    if kv_heads == 0 or q_heads % kv_heads:
        raise LabError(f"query heads ({q_heads}) must be a multiple of KV heads ({kv_heads})")
    if page_size < 1 or (block_n % page_size if page_size < block_n else page_size % block_n):
        raise LabError(f"page size {page_size} does not fit {block_n}-key tiles: use a page size that divides "
                       f"{block_n} or is a multiple of it (16, 32, 64, 128, ...), or a config BLOCK_N that fits it")
    if q.dtype not in (torch.float16, torch.bfloat16, torch.float32) or k_cache.dtype != q.dtype \
            or v_cache.dtype != q.dtype:
        raise LabError(f"q and the caches must share one dtype among float16, bfloat16, float32; "
                       f"got {q.dtype}, {k_cache.dtype}, {v_cache.dtype}")
    batch = seq_lens.shape[0] if seq_lens.dim() == 1 else -1
    for name, t, shape in (("cu_seqlens_q", cu_seqlens_q, (batch + 1,)), ("seq_lens", seq_lens, (batch,))):
        if t.dtype != torch.int32 or tuple(t.shape) != shape:
            raise LabError(f"{name} must be int32 of shape {shape}; got {t.dtype} {tuple(t.shape)}")
    if block_table.dtype != torch.int32 or block_table.dim() != 2 or block_table.shape[0] != batch:
        raise LabError(f"block_table must be int32 of shape (batch={batch}, max_pages); "
                       f"got {block_table.dtype} {tuple(block_table.shape)}")
    for name, t in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache)):
        if t.stride(-1) != 1:
            raise LabError(f"{name} must have a contiguous last dimension")
    if not interpreting() and not q.is_cuda:
        raise LabError("tensors must be on the GPU (or run without a GPU, where Triton's interpreter is used)")
    return check_lengths(q.shape[0], cu_seqlens_q, seq_lens, block_table.shape[1] * page_size) if read_lengths \
        else None


def check_lengths(tokens: int, cu_seqlens_q, seq_lens, capacity: int) -> int:
    """Refuse lengths the batch cannot have (read back to the host): the chunks must tile the ``tokens`` packed
    queries, and each sequence hold its chunk and fit its block table (``capacity`` keys). Returns the longest chunk."""
    starts, lengths = cu_seqlens_q.tolist(), seq_lens.tolist()
    if starts[0] != 0 or starts[-1] != tokens:
        raise LabError(f"cu_seqlens_q must run from 0 to the {tokens} query tokens; got {starts[0]} .. {starts[-1]}")
    for b, n_k in enumerate(lengths):
        q_len = starts[b + 1] - starts[b]
        if q_len < 0 or n_k < q_len or n_k > capacity:
            raise LabError(f"sequence {b}: {q_len} new queries over seq_lens {n_k} keys; seq_lens counts the cached "
                           f"prefix and the new tokens, so it must lie in {max(q_len, 0)} .. max_pages x page_size = "
                           f"{capacity}")
    return max((stop - start for start, stop in zip(starts, starts[1:], strict=False)), default=0)


def paged_prefill(q, k_cache, v_cache, cu_seqlens_q, seq_lens, block_table, scale: float | None = None,
                  config: dict | None = None, max_seqlen_q: int | None = None, out=None):
    """Attention of packed varlen queries over a cached prefix in a paged KV cache (layout: the module docstring).

    ``config`` fixes the launch (BLOCK_M, BLOCK_N, num_warps, num_stages, and optionally maxnreg: a cap on registers
    per thread, as chapter 4's tuned kernel takes, ignored by the interpreter); by default 64 x 64 tiles, 4 warps,
    3 stages on a GPU (one of the tuned kernel's settings, not yet timed for this kernel) and 16 x 16 tiles in
    the interpreter. ``max_seqlen_q`` (the longest chunk, which a server's metadata holds) sizes the grid; pass it
    to skip reading the lengths back to the host, and their checks with them. ``out`` receives the result.
    """
    if config is None:
        config = {"BLOCK_M": 16, "BLOCK_N": 16} if interpreting() else \
            {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3}
    longest = check_prefill_inputs(q, k_cache, v_cache, cu_seqlens_q, seq_lens, block_table, config["BLOCK_N"],
                                   read_lengths=max_seqlen_q is None)
    max_seqlen_q = longest if max_seqlen_q is None else max_seqlen_q
    q_heads, d = q.shape[1], q.shape[2]
    page_size, kv_heads = k_cache.shape[1], k_cache.shape[2]
    out = torch.empty_like(q) if out is None else out
    n_m = triton.cdiv(max_seqlen_q, config["BLOCK_M"])
    if n_m == 0 or seq_lens.shape[0] == 0:
        return out
    register_cap = {"maxnreg": config["maxnreg"]} if config.get("maxnreg") and not interpreting() else {}
    paged_prefill_kernel[(seq_lens.shape[0] * q_heads, n_m)](
        q, k_cache, v_cache, out, cu_seqlens_q, seq_lens, block_table, softmax_scale(d, scale) * LOG2E,
        q_heads, q_heads // kv_heads, n_m, *q.stride()[:2], *k_cache.stride()[:3], *v_cache.stride()[:3],
        *out.stride()[:2], block_table.stride(0), HEAD_DIM=d, BLOCK_M=config["BLOCK_M"], BLOCK_N=config["BLOCK_N"],
        PAGE_SIZE=page_size, PRECISION=dot_precision(q.dtype), num_warps=config.get("num_warps", 4),
        num_stages=config.get("num_stages", 1 if interpreting() else 3), **register_cap)
    return out


def paged_batch(q_lens, prefix_lens, q_heads: int = 4, kv_heads: int = 2, head_dim: int = 64, page_size: int = 16,
                dtype=torch.float32, device: str = "cpu", seed: int = 0, shuffle: bool = True, spare_pages: int = 3):
    """Random inputs of one server step: sequence ``b`` has ``prefix_lens[b]`` cached tokens and ``q_lens[b]`` new
    ones, its K/V (prefix and new tokens) in pages scattered over the pool (``shuffle``) as an engine hands them out.
    Returns (q, k_cache, v_cache, cu_seqlens_q, seq_lens, block_table)."""
    if len(q_lens) != len(prefix_lens):
        raise LabError(f"one prefix length per chunk; got {len(q_lens)} chunks and {len(prefix_lens)} prefixes")
    gen = torch.Generator(device=device).manual_seed(seed)
    seq_lens = [prefix + q_len for prefix, q_len in zip(prefix_lens, q_lens, strict=True)]
    k, v = (torch.randn(len(q_lens), kv_heads, max(seq_lens), head_dim, generator=gen, device=device).to(dtype)
            for _ in range(2))
    q = torch.randn(sum(q_lens), q_heads, head_dim, generator=gen, device=device).to(dtype)
    k_cache, v_cache, block_table, seq_lens = paginate(k, v, page_size, seq_lens, shuffle, seed, spare_pages)
    cu_seqlens_q = torch.tensor([0, *torch.tensor(q_lens).cumsum(0).tolist()], dtype=torch.int32, device=device)
    return q, k_cache, v_cache, cu_seqlens_q, seq_lens, block_table


#: The batches :func:`check` runs: (query tokens per sequence, cached prefix per sequence, q_heads, kv_heads).
CHECK_CASES = {
    "ragged": ([1, 7, 130], [0, 0, 0], 4, 2),
    "prefix + chunk": ([16, 40, 3, 70], [0, 5, 33, 200], 4, 2),
    "prefill + decode": ([1, 37, 1, 1, 20], [99, 0, 0, 250, 12], 4, 2),
    "GQA 7:1": ([9, 1, 25], [30, 64, 0], 7, 1),
}


def check(head_dim: int = 64, page_size: int = 16, dtype=torch.float32, seed: int = 0, forward=paged_prefill,
          cases: dict | None = None) -> dict[str, float]:
    """The kernel against the float64 reference (:func:`~lab.measure.attention.reference.paged_varlen_attention_torch`)
    on random batches with shuffled pages (on the GPU, or in Triton's interpreter without one): the largest
    absolute error of the output per case of :data:`CHECK_CASES`. ``forward`` takes the kernel's arguments
    (q, k_cache, v_cache, cu_seqlens_q, seq_lens, block_table); pass another to check it."""
    device = "cpu" if interpreting() else "cuda"
    errors = {}
    for name, (q_lens, prefixes, q_heads, kv_heads) in (cases or CHECK_CASES).items():
        inputs = paged_batch(q_lens, prefixes, q_heads, kv_heads, head_dim, page_size, dtype, device, seed)
        exact = paged_varlen_attention_torch(*(t.double() if t.is_floating_point() else t for t in inputs),
                                             compute_dtype=torch.float64)
        errors[name] = (forward(*inputs).double() - exact).abs().max().item()
    return errors
