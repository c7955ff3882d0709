"""FlashAttention forward of a server's batch on Hopper, in Gluon: the hand-scheduled kernel over a paged KV cache.

The kernel of :mod:`lab.measure.attention.hopper` (a producer warp filling rings of K and V tiles by TMA, two
consumer warpgroups overlapping the softmax with the tensor cores) reads one (batch, heads, n, d) block. A server's
step is the batch of :mod:`lab.measure.attention.paged_prefill` instead: packed varlen queries, each chunk over its
sequence's cached prefix and itself (bottom-right causal), K and V in pages found through the block table. Three
things change, and the scheduled loop (:func:`~lab.measure.attention.hopper.attend`) does not:

* a program is one 128-row query tile of one head of one sequence (:func:`paged_unit`): it reads its sequence's
  query start and length (``cu_seqlens_q``) and keys (``seq_lens``), and does nothing if its tile lies past the
  chunk. The causal diagonal sits ``seq_len - q_len`` keys to the right (:func:`~lab.measure.attention.hopper.key_tiles`);
* the producer copies a key tile page by page (:func:`copy_tile`): one TMA copy when a page holds the whole tile,
  else one per page into consecutive rows of the tile's shared memory;
* the consumers store their rows with a row mask (:func:`store_masked`): a tile's last rows may belong to the next
  sequence, which a TMA store would overwrite.

A tile's rows past the chunk and keys past the sequence are read (the next sequence's queries, the last page's
unused slots) and never reach a stored row: each row sees only keys ``<= row + seq_len - q_len``. Those unused
slots must hold finite values (a masked score's zero times a NaN value is NaN): unlike the Triton kernel, whose
loads are masked, this one leaves that to the cache (the lab's test batches zero them; in vLLM they hold whatever the
slot last held, and the agreement check of an OURS server found every output finite).

Layout: ``q`` (tokens, q_heads, head_dim), heads packed; ``k_cache`` and ``v_cache`` (num_pages, page_size,
kv_heads, head_dim) views with one token stride, as :func:`~lab.measure.attention.paged_prefill.paged_prefill`
takes them (vLLM's interleaved cache, where V is K's view shifted by head_dim, included). Scope (:func:`supports`):
Hopper, 16-bit, head dims 64 and 128, page sizes 16 to 256 that divide the key tile or are a multiple of it.
"""

import torch

from lab import LabError, env

# Before Triton is imported, as every kernel module of lab does (see hopper)
env.use_triton_interpreter_without_gpu()

import triton  # noqa: E402
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma  # noqa: E402
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor  # noqa: E402
from triton.runtime.jit import mangle_type  # noqa: E402

from lab.measure.attention import paged_prefill  # noqa: E402
from lab.measure.attention.hopper import (  # noqa: E402
    BLOCK_M,
    CONSUMER_WARPS,
    HEAD_DIMS,
    KERNEL_REGS,
    LAUNCH,
    NUM_WARPS,
    PRODUCER_WARPS,
    ROWS,
    Schedule,
    aggregate,
    allocate,
    attend,
    compile_sm90,
    gl,
    gluon,
    hopper_refusal,
    key_tiles,
)
from lab.measure.attention.reference import LOG2E, softmax_scale  # noqa: E402

PAGE_SIZES = (16, 32, 64, 128, 256)
# The producer issues a copy per page and reads the block table: at hopper's 24 registers it spills with 16-token
# pages. setmaxnreg moves registers between warpgroups within the launch's 12 warps x 168, so 2 x 232 + 40 = 2 x 240
# + 24: the consumers give up 8 each (none of them spills at 232).
CONSUMER_REGS = gl.constexpr(232)
PRODUCER_REGS = gl.constexpr(40)


@aggregate
class Paging:
    """The cache's page size and the rows of one TMA copy (a whole key tile, or one page when pages are smaller)."""
    PAGE_SIZE: gl.constexpr
    COPY_ROWS: gl.constexpr

    @gluon.constexpr_function
    def __init__(self, PAGE_SIZE, BLOCK_N):  # noqa: N803 (constexpr names)
        self.PAGE_SIZE = gl.constexpr(PAGE_SIZE)
        self.COPY_ROWS = gl.constexpr(min(PAGE_SIZE, BLOCK_N))


@gluon.jit
def paged_unit(seqs, q_heads, group, n_m):
    """This program's work: (sequence, query head, KV head, query tile, the chunk's first token, its length, the
    sequence's keys). Programs (b * q_heads + h, j): heads vary fastest, so the query heads of one KV head run side
    by side; j counts down from the longest chunk's tiles, so the tiles that see the most keys start first."""
    cu_seqlens_q, seq_lens, block_table, s_bt = seqs
    b = gl.program_id(0) // q_heads
    h = gl.program_id(0) % q_heads
    start_m = n_m - 1 - gl.program_id(1)
    q_start = gl.load(cu_seqlens_q + b)
    q_len = gl.load(cu_seqlens_q + b + 1) - q_start
    return b, h, h // group, start_m, q_start, q_len, gl.load(seq_lens + b)


@gluon.jit
def copy_tile(desc, pages, tile, last_page, col, bar, smem, BLOCK_N: gl.constexpr, paging):
    """Key tile ``tile`` (keys tile*BLOCK_N ...) of the KV head at column ``col`` into ``smem``, through the block
    table ``pages``; pages past the sequence's last are not read (its last page again: keys the mask hides)."""
    PAGE: gl.constexpr = paging.PAGE_SIZE
    COPIES: gl.constexpr = BLOCK_N // paging.COPY_ROWS
    mbarrier.expect(bar, desc.block_type.nbytes * COPIES)
    if COPIES == 1:
        key = tile * BLOCK_N
        page = gl.load(pages + key // PAGE)
        tma.async_copy_global_to_shared(desc, [page * PAGE + key % PAGE, col], bar, smem)
    else:
        for p in gl.static_range(COPIES):
            page = gl.load(pages + gl.minimum(tile * COPIES + p, last_page))
            tma.async_copy_global_to_shared(desc, [page * PAGE, col], bar, smem.slice(p * PAGE, PAGE))


@gluon.jit
def paged_producer(q_desc, k_desc, v_desc, out, q_smem, k_smem, v_smem, bars, qk_scale, seqs, strides, q_heads, group,
                   n_m, sched, paging):
    """One warp: the query tile once, then each key tile's K and V into the ring (as ``hopper.producer``)."""
    BLOCK_N: gl.constexpr = sched.BLOCK_N
    STAGES: gl.constexpr = sched.STAGES
    HEAD_DIM: gl.constexpr = q_desc.block_type.shape[1]
    q_ready, k_ready, v_ready, k_empty, v_empty, turn = bars
    b, h, kv_h, start_m, q_start, q_len, n_k = paged_unit(seqs, q_heads, group, n_m)
    if start_m * BLOCK_M < q_len:
        n_tiles, _ = key_tiles(start_m, q_len, n_k, BLOCK_N, True)
        mbarrier.expect(q_ready, q_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(q_desc, [q_start + start_m * BLOCK_M, h * HEAD_DIM], q_ready, q_smem)
        pages = seqs[2] + b * seqs[3]
        last_page = (n_k - 1) // paging.PAGE_SIZE
        col = kv_h * strides[2]
        for i in range(n_tiles):
            stage = i % STAGES
            free = (i // STAGES & 1) ^ 1                              # a fresh barrier passes phase 1
            mbarrier.wait(k_empty.index(stage), free)
            copy_tile(k_desc, pages, i, last_page, col, k_ready.index(stage), k_smem.index(stage), BLOCK_N, paging)
            mbarrier.wait(v_empty.index(stage), free)
            copy_tile(v_desc, pages, i, last_page, col, v_ready.index(stage), v_smem.index(stage), BLOCK_N, paging)


@gluon.jit
def paged_consumer(q_desc, k_desc, v_desc, out, q_smem, k_smem, v_smem, bars, qk_scale, seqs, strides, q_heads,
                   group, n_m, sched, C: gl.constexpr):
    """One warpgroup, rows C*64 .. C*64+63 of the query tile: :func:`~lab.measure.attention.hopper.attend`, then
    the rows that belong to the chunk stored."""
    b, h, kv_h, start_m, q_start, q_len, n_k = paged_unit(seqs, q_heads, group, n_m)
    if start_m * BLOCK_M < q_len:
        n_tiles, n_full = key_tiles(start_m, q_len, n_k, sched.BLOCK_N, True)
        q = q_smem.slice(C * (BLOCK_M // 2), BLOCK_M // 2)
        acc, l_i = attend(q, k_smem, v_smem, bars, qk_scale, start_m, n_tiles, n_full, n_k - q_len, sched, C, 0, 0, 0)
        store_masked(acc, l_i, out, q_start, start_m * BLOCK_M + C * (BLOCK_M // 2), q_len, h, strides)


@gluon.jit
def store_masked(acc, l_i, out, q_start, first, q_len, h, strides):
    """Normalise a warpgroup's rows (chunk rows ``first`` ...) and store those inside the chunk."""
    sot, soh, _ = strides
    layout: gl.constexpr = acc.type.layout
    acc = acc / gl.convert_layout(l_i, gl.SliceLayout(1, layout))[:, None]
    rows = first + gl.arange(0, acc.type.shape[0], layout=gl.SliceLayout(1, layout))
    dims = gl.arange(0, acc.type.shape[1], layout=gl.SliceLayout(0, layout))
    tokens = (q_start + rows).to(gl.int64)
    in_chunk = (rows[:, None] < q_len) & (dims[None, :] < acc.type.shape[1])
    gl.store(out + h * soh + tokens[:, None] * sot + dims[None, :], acc.to(out.dtype.element_ty), mask=in_chunk)


@gluon.jit
def paged_consumer0(q_desc, k_desc, v_desc, out, q_smem, k_smem, v_smem, bars, qk_scale, seqs, strides, q_heads,
                    group, n_m, sched, paging):
    paged_consumer(q_desc, k_desc, v_desc, out, q_smem, k_smem, v_smem, bars, qk_scale, seqs, strides, q_heads,
                   group, n_m, sched, 0)


@gluon.jit
def paged_consumer1(q_desc, k_desc, v_desc, out, q_smem, k_smem, v_smem, bars, qk_scale, seqs, strides, q_heads,
                    group, n_m, sched, paging):
    paged_consumer(q_desc, k_desc, v_desc, out, q_smem, k_smem, v_smem, bars, qk_scale, seqs, strides, q_heads,
                   group, n_m, sched, 1)


# one compile per server: a step's tile count and its slices of the lengths and block table do not pick a variant
@gluon.jit(do_not_specialize=["n_m"], do_not_specialize_on_alignment=["cu_seqlens_q", "seq_lens", "block_table"])
def hopper_paged_kernel(q_desc, k_desc, v_desc, out, qk_scale, cu_seqlens_q, seq_lens, block_table, s_bt, sot, soh,
                        head_stride, q_heads, group, n_m, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
                        PAGE_SIZE: gl.constexpr, OVERLAP: gl.constexpr, PINGPONG: gl.constexpr):
    q_smem, k_smem, v_smem, bars = allocate(q_desc, k_desc, BLOCK_N, STAGES)
    args = (q_desc, k_desc, v_desc, out, q_smem, k_smem, v_smem, bars, qk_scale,
            (cu_seqlens_q, seq_lens, block_table, s_bt), (sot, soh, head_stride), q_heads, group, n_m,
            Schedule(BLOCK_N, STAGES, True, OVERLAP, PINGPONG), Paging(PAGE_SIZE, BLOCK_N))
    gl.warp_specialize([(paged_consumer0, args), (paged_consumer1, args), (paged_producer, args)],
                       [CONSUMER_WARPS, PRODUCER_WARPS], [CONSUMER_REGS, PRODUCER_REGS])


def supports(q, k_cache, v_cache, block_n: int | None = None) -> str | None:
    """Why this kernel cannot run these tensors (None: it can); the batch itself is checked by
    :func:`~lab.measure.attention.paged_prefill.check_prefill_inputs`."""
    if why := hopper_refusal(q.device):
        return why
    if q.dtype not in (torch.float16, torch.bfloat16):
        return f"needs float16 or bfloat16; got {q.dtype}"
    d, page_size = q.shape[-1], k_cache.shape[1]
    if d not in HEAD_DIMS:
        return f"head dim must be one of {HEAD_DIMS}, got {d}"
    block_n = block_n or LAUNCH[d][0]
    if page_size not in PAGE_SIZES or max(page_size, block_n) % min(page_size, block_n):
        return f"page size {page_size} must be one of {PAGE_SIZES} and divide {block_n}-key tiles or be a multiple"
    if q.stride(1) != d or k_cache.stride() != v_cache.stride() or k_cache.stride(0) != page_size * k_cache.stride(1):
        return ("needs q's heads packed (stride head_dim), and K and V caches with one layout whose pages are "
                "consecutive runs of tokens")
    if any(t.data_ptr() % 16 or t.stride(0 if t is q else 1) * t.element_size() % 16 for t in (q, k_cache, v_cache)):
        return "needs 16-byte aligned tensors and token strides (TMA)"
    return None


def descriptors(q, k_cache, v_cache, block_n: int):
    """TMA descriptors: Q as (tokens, q_heads * d) in 128-row tiles at column h * d; K and V as (pages * page_size,
    width) rows of tokens, a KV head's d columns at column kv_h * head_stride, copied a tile or a page at a time."""
    element = gl.float16 if q.dtype == torch.float16 else gl.bfloat16
    d, page_size, kv_heads = q.shape[-1], k_cache.shape[1], k_cache.shape[2]
    q_layout = gl.NVMMASharedLayout.get_default_for([ROWS, d], element)
    q_desc = TensorDescriptor(q, [q.shape[0], q.shape[1] * d], [q.stride(0), 1], [ROWS, d], q_layout)
    kv_layout = gl.NVMMASharedLayout.get_default_for([block_n, d], element)  # the ring's tiles; a page lands inside
    rows, width = k_cache.shape[0] * page_size, (kv_heads - 1) * k_cache.stride(2) + d
    return [q_desc] + [TensorDescriptor(t, [rows, width], [t.stride(1), 1], [min(page_size, block_n), d], kv_layout)
                       for t in (k_cache, v_cache)]


def hopper_paged_prefill(q, k_cache, v_cache, cu_seqlens_q, seq_lens, block_table, scale: float | None = None,
                         launch: tuple[int, int] | None = None, max_seqlen_q: int | None = None, out=None,
                         overlap: bool = True, pingpong: bool = True):
    """Attention of packed varlen queries over a paged cache (the arguments of
    :func:`~lab.measure.attention.paged_prefill.paged_prefill`) with the Gluon kernel. ``launch`` = (BLOCK_N,
    STAGES) overrides :data:`~lab.measure.attention.hopper.LAUNCH`; ``max_seqlen_q`` sizes the grid without reading
    the lengths back to the host (and skips their checks). Raises LabError for what it cannot run."""
    d = q.shape[-1] if q.dim() == 3 else 0
    block_n, stages = launch or LAUNCH.get(d, (128, 2))
    longest = paged_prefill.check_prefill_inputs(q, k_cache, v_cache, cu_seqlens_q, seq_lens, block_table, block_n,
                                                 read_lengths=max_seqlen_q is None)
    why = supports(q, k_cache, v_cache, block_n)
    if why:
        raise LabError(f"the Hopper paged kernel {why}")
    max_seqlen_q = longest if max_seqlen_q is None else max_seqlen_q
    out = torch.empty_like(q) if out is None else out
    q_heads, kv_heads = q.shape[1], k_cache.shape[2]
    n_m = triton.cdiv(max_seqlen_q, ROWS)
    if n_m == 0 or seq_lens.shape[0] == 0:
        return out
    hopper_paged_kernel[(seq_lens.shape[0] * q_heads, n_m)](
        *descriptors(q, k_cache, v_cache, block_n), out, softmax_scale(d, scale) * LOG2E, cu_seqlens_q, seq_lens,
        block_table, block_table.stride(0), out.stride(0), out.stride(1), k_cache.stride(2), q_heads,
        q_heads // kv_heads, n_m, BLOCK_N=block_n, STAGES=stages, PAGE_SIZE=k_cache.shape[1], OVERLAP=overlap,
        PINGPONG=pingpong, num_warps=NUM_WARPS, maxnreg=KERNEL_REGS)
    return out


def compile_paged_for_hopper(head_dim: int = 128, page_size: int = 16, launch: tuple[int, int] | None = None,
                             fp16: bool = False, overlap: bool = True, pingpong: bool = True):
    """Compile the kernel for sm_90a without a GPU (:func:`~lab.measure.attention.hopper.compile_sm90`, in a process
    started with ``TRITON_INTERPRET=0``); returns Triton's compiled kernel."""
    block_n, stages = launch or LAUNCH[head_dim]
    dtype = torch.float16 if fp16 else torch.bfloat16
    q = torch.empty(ROWS, 2, head_dim, dtype=dtype)                                      # for the types only
    cache = torch.empty(2, page_size, 1, head_dim, dtype=dtype)
    sig = {name: mangle_type(desc) for name, desc in
           zip(("q_desc", "k_desc", "v_desc"), descriptors(q, cache, cache, block_n), strict=True)}
    sig.update(out="*fp16" if fp16 else "*bf16", qk_scale="fp32", cu_seqlens_q="*i32", seq_lens="*i32",
               block_table="*i32", s_bt="i32", sot="i32", soh="i32", head_stride="i32", q_heads="i32", group="i32",
               n_m="i32", BLOCK_N="constexpr", STAGES="constexpr", PAGE_SIZE="constexpr", OVERLAP="constexpr",
               PINGPONG="constexpr")
    return compile_sm90(hopper_paged_kernel, sig, {"BLOCK_N": block_n, "STAGES": stages, "PAGE_SIZE": page_size,
                                                   "OVERLAP": overlap, "PINGPONG": pingpong})


def check(head_dim: int = 128, page_size: int = 16, seed: int = 0) -> dict[str, float]:
    """The kernel against the float64 reference on :data:`~lab.measure.attention.paged_prefill.CHECK_CASES` (bf16,
    shuffled pages): the largest absolute error per case. Needs a Hopper GPU (Gluon has no CPU interpreter)."""
    if not torch.cuda.is_available():
        raise LabError("the Hopper paged kernel needs a Hopper GPU (Gluon has no CPU interpreter); "
                       "compile_paged_for_hopper compiles it for sm_90a anywhere")
    return paged_prefill.check(head_dim, page_size, torch.bfloat16, seed, forward=hopper_paged_prefill)
