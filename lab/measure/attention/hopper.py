"""FlashAttention forward for Hopper in Gluon: the matrix products scheduled by hand.

The tuned Triton kernel (:mod:`lab.measure.attention.tuned`) leaves the order of the two matrix
products and the softmax to Triton, which waits for each tile's scores ``S = Q K^T`` before it does
anything else: the tensor cores sit idle while the softmax runs. FlashAttention 3 overlaps them
(its "intra-warpgroup overlap", Shah et al. 2024, section 3.2). Gluon, Triton's lower-level
language, lets a kernel issue Hopper's asynchronous ``wgmma`` itself and say how many may still be
in flight, so this kernel does the same:

    issue S_j = Q K_j^T            (tensor cores)
    issue O  += P_{j-1} V_{j-1}    (tensor cores)
    wait for S_j only              -> softmax of tile j runs while P_{j-1} V_{j-1} is computed
    wait for O, rescale it by exp2(m_old - m_new)

Tiles arrive by TMA into a ring of ``STAGES`` shared-memory buffers, the load of tile j+STAGES-1
issued as soon as tile j-1's buffers are free. Work is ordered as in the tuned kernel: one KV
head's query heads and tiles together, the heaviest causal tiles first.

Scope: Hopper (compute capability 9.0), 16-bit inputs, head dim 64 or 128, sequence lengths that
are whole tiles (:func:`supports`). There is no CPU interpreter for Gluon: the kernel is compiled
for sm_90a on any machine (``compile_for_hopper``) and checked against a reference on the GPU.
"""

import os

import torch

from lab import LabError, env
from lab.measure.attention.reference import LOG2E, check_shapes, max_errors, softmax_scale

# Before Triton is imported, as every kernel module of lab does: without a GPU, Triton's interpreter runs the
# other kernels, whichever module is imported first (this one has no interpreter and refuses to run there).
env.use_triton_interpreter_without_gpu()

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.experimental import gluon  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402
from triton.experimental.gluon._runtime import GluonASTSource  # noqa: E402
from triton.experimental.gluon.language.nvidia.hopper import (  # noqa: E402
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor  # noqa: E402
from triton.language.core import _aggregate as aggregate  # noqa: E402
from triton.runtime.jit import mangle_type  # noqa: E402

ROWS = 128  # query rows per program: two warpgroups of 64 rows, as in FlashAttention 3
BLOCK_M = gl.constexpr(ROWS)
NUM_WARPS = 4          # the default partition: consumer 0; consumer 1 and the producer warp are workers
CONSUMER_WARPS = gl.constexpr(4)    # consumer 1: one warpgroup
PRODUCER_WARPS = gl.constexpr(1)    # the producer: one warp (Triton pads the workers to whole warpgroups)
CONSUMER_REGS = gl.constexpr(240)   # registers per thread of each consumer warpgroup (setmaxnreg)
PRODUCER_REGS = gl.constexpr(24)    # and of the producer warp: it only issues copies
KERNEL_REGS = 168      # 12 warps * 32 * 168 <= 65536: what setmaxnreg redistributes (producer 24, consumers 240);
                       # 12: the default 4 warps and the workers' 4 + 1, padded by Triton to two warpgroups
HEAD_DIMS = (64, 128)


@aggregate
class Schedule:
    """The kernel's compile-time choices, as one value (warp_specialize turns loose integers into tensors)."""
    BLOCK_N: gl.constexpr
    STAGES: gl.constexpr
    CAUSAL: gl.constexpr
    OVERLAP: gl.constexpr
    PINGPONG: gl.constexpr

    @gluon.constexpr_function
    def __init__(self, BLOCK_N, STAGES, CAUSAL, OVERLAP, PINGPONG):  # noqa: N803 (constexpr names)
        self.BLOCK_N = gl.constexpr(BLOCK_N)
        self.STAGES = gl.constexpr(STAGES)
        self.CAUSAL = gl.constexpr(CAUSAL)
        self.OVERLAP = gl.constexpr(OVERLAP)
        self.PINGPONG = gl.constexpr(PINGPONG)


@gluon.constexpr_function
def mma_layout(n):
    # one warpgroup (4 warps) per consumer, 64 query rows
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, n, 16])


@gluon.jit
def tile_softmax(s, m_i, rows, cols, qk_scale, diag, MASKED: gl.constexpr):
    """Tile scores in, (p, new row max) out; scores are scaled into log2 units on the way."""
    if MASKED:
        s = gl.where(cols[None, :] <= rows[:, None] + diag, s * qk_scale, float("-inf"))
        m_new = gl.maximum(m_i, gl.max(s, 1))
        s = s - m_new[:, None]
    else:  # the scale folded into the subtraction: one fused multiply-add per score
        m_new = gl.maximum(m_i, gl.max(s, 1) * qk_scale)
        s = s * qk_scale - m_new[:, None]
    return gl.exp2(s), m_new


@gluon.jit
def work_unit(unit, q_heads, group, n_q, n_k):
    """Unit of work ``unit`` in launch order (one KV head's query heads and tiles together, the heaviest
    causal tiles first): (its first query row, first key row, query tile)."""
    n_m = n_q // BLOCK_M
    kv = unit // (n_m * group)
    start_m = n_m - 1 - unit % (n_m * group) // group
    kv_heads = q_heads // group
    h = kv % kv_heads * group + unit % group
    q_row = (kv // kv_heads * q_heads + h) * n_q + start_m * BLOCK_M
    return q_row, kv * n_k, start_m


@gluon.jit
def key_tiles(start_m, n_q, n_k, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr):
    """(key tiles this query tile reads, of which the first ones are seen whole by every row)."""
    diag = n_k - n_q
    if CAUSAL:
        n_full = gl.minimum(start_m * BLOCK_M + diag + 1, n_k) // BLOCK_N
        n_tiles = gl.cdiv(gl.minimum((start_m + 1) * BLOCK_M + diag, n_k), BLOCK_N)
    else:
        n_full = n_k // BLOCK_N
        n_tiles = n_full
    return n_tiles, n_full


@gluon.jit
def producer(q_desc, k_desc, v_desc, o_desc, q_smem, k_smem, v_smem, bars, qk_scale, n_q, n_k, q_heads, group, sched):
    """One warp: Q once, then each key tile's K and V into the ring (:func:`into_ring`). K and V have barriers of
    their own: a K slot is free once both consumers have their scores, a V slot once their P V is done."""
    BLOCK_N: gl.constexpr = sched.BLOCK_N
    STAGES: gl.constexpr = sched.STAGES
    q_ready, k_ready, v_ready, k_empty, v_empty, turn = bars
    q_row, kv_row0, start_m = work_unit(gl.program_id(0), q_heads, group, n_q, n_k)
    n_tiles, _ = key_tiles(start_m, n_q, n_k, BLOCK_N, sched.CAUSAL)
    mbarrier.expect(q_ready, q_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(q_desc, [q_row, 0], q_ready, q_smem)
    for i in range(n_tiles):
        into_ring(k_desc, kv_row0 + i * BLOCK_N, i, k_ready, k_empty, k_smem, STAGES)
        into_ring(v_desc, kv_row0 + i * BLOCK_N, i, v_ready, v_empty, v_smem, STAGES)


@gluon.jit
def into_ring(desc, row, slot, ready, empty, smem, STAGES: gl.constexpr):
    """Copy the tile at ``row`` of ``desc`` into ring slot ``slot`` (modulo STAGES) once that slot is free; its
    ``ready`` barrier completes when the bytes have arrived."""
    stage = slot % STAGES
    mbarrier.wait(empty.index(stage), (slot // STAGES & 1) ^ 1)      # a fresh barrier passes phase 1
    mbarrier.expect(ready.index(stage), desc.block_type.nbytes)
    tma.async_copy_global_to_shared(desc, [row, 0], ready.index(stage), smem.index(stage))


@gluon.jit
def wait_turn(turn, event, C: gl.constexpr, PINGPONG: gl.constexpr):
    """Ping-pong: consumer C issues its products for step ``event`` only once the other consumer has issued
    its own for the step before (consumer 0 goes first)."""
    if PINGPONG:
        mbarrier.wait(turn.index(C), (event + 1 - C) & 1)


@gluon.jit
def pass_turn(turn, C: gl.constexpr, PINGPONG: gl.constexpr):
    """Ping-pong: consumer C has issued this step's products; the other consumer may issue its own."""
    if PINGPONG:
        mbarrier.arrive(turn.index(1 - C), count=1)


@gluon.jit
def consumer(q_desc, k_desc, v_desc, o_desc, q_smem, k_smem, v_smem, bars, qk_scale, n_q, n_k, q_heads, group, sched,
             C: gl.constexpr):
    """One warpgroup, rows C*64 .. C*64+63 of the query tile: its rows of the output (:func:`attend`), stored."""
    q_row, kv_row0, start_m = work_unit(gl.program_id(0), q_heads, group, n_q, n_k)
    n_tiles, n_full = key_tiles(start_m, n_q, n_k, sched.BLOCK_N, sched.CAUSAL)
    q = q_smem.slice(C * (BLOCK_M // 2), BLOCK_M // 2)
    acc, l_i = attend(q, k_smem, v_smem, bars, qk_scale, start_m, n_tiles, n_full, n_k - n_q, sched, C, 0, 0, 0)
    store_rows(acc, l_i, q, o_desc, q_row + C * (BLOCK_M // 2), 0)


@gluon.jit
def attend(q, k_smem, v_smem, bars, qk_scale, start_m, n_tiles, n_full, diag, sched, C: gl.constexpr, first, event,
           q_phase):
    """Online softmax of one warpgroup's 64 query rows ``q`` (shared memory) over the key tiles the producer
    brings, the first ``n_full`` seen whole, the causal diagonal ``diag`` keys right; returns (acc, l_i), the
    output's rows not yet divided by their sums. Its K and V slots are handed back as it goes. A program that
    walks several units passes where the ring stands: its first tile in slot ``first``, ping-pong at step
    ``event``, Q's barrier in phase ``q_phase`` (0, 0, 0 for a program's first unit).

    OVERLAP: S_j = Q K_j^T and P_{j-1} V_{j-1} issued together, tile j's softmax computed while the
    second runs (FA3's intra-warpgroup overlap); else each product waited for before the next step."""
    BLOCK_N: gl.constexpr = sched.BLOCK_N
    STAGES: gl.constexpr = sched.STAGES
    OVERLAP: gl.constexpr = sched.OVERLAP
    PINGPONG: gl.constexpr = sched.PINGPONG
    HEAD_DIM: gl.constexpr = v_smem.type.shape[2]
    ROWS: gl.constexpr = BLOCK_M // 2
    s_layout: gl.constexpr = mma_layout(BLOCK_N)
    o_layout: gl.constexpr = mma_layout(HEAD_DIM)
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    q_ready, k_ready, v_ready, k_empty, v_empty, turn = bars
    rows = start_m * BLOCK_M + C * ROWS + gl.arange(0, ROWS, layout=gl.SliceLayout(1, s_layout))
    cols0 = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
    zeros = gl.zeros([ROWS, BLOCK_N], gl.float32, s_layout)

    # key tile 0: scores and softmax, nothing to overlap with yet
    mbarrier.wait(q_ready, q_phase)
    mbarrier.wait(k_ready.index(first % STAGES), first // STAGES & 1)
    wait_turn(turn, event, C, PINGPONG)
    s = warpgroup_mma(q, k_smem.index(first % STAGES).permute((1, 0)), zeros, use_acc=False, is_async=True)
    pass_turn(turn, C, PINGPONG)
    s = warpgroup_mma_wait(num_outstanding=0, deps=(s,))
    mbarrier.arrive(k_empty.index(first % STAGES), count=1)
    m_i = gl.full([ROWS], float("-inf"), gl.float32, gl.SliceLayout(1, s_layout))
    if n_full > 0:
        p0, m_i = tile_softmax(s, m_i, rows, cols0, qk_scale, diag, False)
    else:
        p0, m_i = tile_softmax(s, m_i, rows, cols0, qk_scale, diag, sched.CAUSAL)
    l_i = gl.sum(p0, 1)
    p = gl.convert_layout(p0.to(q.dtype), p_layout)
    acc = gl.zeros([ROWS, HEAD_DIM], gl.float32, o_layout)

    for j in range(1, n_tiles):
        slot = first + j
        stage = slot % STAGES
        prev = (slot - 1) % STAGES
        mbarrier.wait(k_ready.index(stage), slot // STAGES & 1)
        mbarrier.wait(v_ready.index(prev), (slot - 1) // STAGES & 1)
        wait_turn(turn, event + j, C, PINGPONG)
        s = warpgroup_mma(q, k_smem.index(stage).permute((1, 0)), zeros, use_acc=False, is_async=True)
        if OVERLAP:
            acc = warpgroup_mma(p, v_smem.index(prev), acc, is_async=True)
            pass_turn(turn, C, PINGPONG)
            s = warpgroup_mma_wait(num_outstanding=1, deps=(s,))     # the scores; P_{j-1} V_{j-1} runs on
        else:
            pass_turn(turn, C, PINGPONG)
            s = warpgroup_mma_wait(num_outstanding=0, deps=(s,))
            acc = warpgroup_mma(p, v_smem.index(prev), acc)
        mbarrier.arrive(k_empty.index(stage), count=1)
        if j < n_full:
            p_new, m_new = tile_softmax(s, m_i, rows, j * BLOCK_N + cols0, qk_scale, diag, False)
        else:
            p_new, m_new = tile_softmax(s, m_i, rows, j * BLOCK_N + cols0, qk_scale, diag, sched.CAUSAL)
        rescale = gl.exp2(m_i - m_new)
        l_i = l_i * rescale + gl.sum(p_new, 1)
        if OVERLAP:
            acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        mbarrier.arrive(v_empty.index(prev), count=1)
        acc = acc * gl.convert_layout(rescale, gl.SliceLayout(1, o_layout))[:, None]
        p = gl.convert_layout(p_new.to(q.dtype), p_layout)
        m_i = m_new

    # the last key tile's P V
    last = first + n_tiles - 1
    mbarrier.wait(v_ready.index(last % STAGES), last // STAGES & 1)
    wait_turn(turn, event + n_tiles, C, PINGPONG)
    acc = warpgroup_mma(p, v_smem.index(last % STAGES), acc, is_async=True)
    pass_turn(turn, C, PINGPONG)
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
    mbarrier.arrive(v_empty.index(last % STAGES), count=1)
    return acc, l_i


@gluon.jit
def store_rows(acc, l_i, smem, o_desc, row, col):
    """Normalise a warpgroup's rows and copy them out to ``[row, col]`` of ``o_desc`` through ``smem`` (its Q rows,
    no longer read)."""
    acc = acc / gl.convert_layout(l_i, gl.SliceLayout(1, acc.type.layout))[:, None]
    smem.store(acc.to(smem.dtype))
    fence_async_shared()
    tma.async_copy_shared_to_global(o_desc, [row, col], smem)
    tma.store_wait(pendings=0)


@gluon.jit
def consumer0(q_desc, k_desc, v_desc, o_desc, q_smem, k_smem, v_smem, bars, qk_scale, n_q, n_k, q_heads, group, sched):
    consumer(q_desc, k_desc, v_desc, o_desc, q_smem, k_smem, v_smem, bars, qk_scale, n_q, n_k, q_heads, group, sched, 0)


@gluon.jit
def consumer1(q_desc, k_desc, v_desc, o_desc, q_smem, k_smem, v_smem, bars, qk_scale, n_q, n_k, q_heads, group, sched):
    consumer(q_desc, k_desc, v_desc, o_desc, q_smem, k_smem, v_smem, bars, qk_scale, n_q, n_k, q_heads, group, sched, 1)


@gluon.jit
def allocate(q_desc, kv_desc, BLOCK_N: gl.constexpr, STAGES: gl.constexpr):
    """Shared memory of one program: a 128-row Q tile, rings of ``STAGES`` K and V tiles, and the barriers
    (q_ready, k_ready, v_ready, k_empty, v_empty, turn)."""
    dtype: gl.constexpr = q_desc.dtype
    HEAD_DIM: gl.constexpr = q_desc.block_type.shape[1]
    q_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, HEAD_DIM], q_desc.layout)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], kv_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], kv_desc.layout)
    q_ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(q_ready, count=1)
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(i), count=1)     # the copy engine's bytes arrived
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(k_empty.index(i), count=2)     # both consumers are done with the slot
        mbarrier.init(v_empty.index(i), count=2)
    turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(turn.index(i), count=1)
    return q_smem, k_smem, v_smem, (q_ready, k_ready, v_ready, k_empty, v_empty, turn)


@gluon.jit
def hopper_kernel(q_desc, k_desc, v_desc, o_desc, qk_scale, n_q, n_k, q_heads, group,
                  BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr, STAGES: gl.constexpr, OVERLAP: gl.constexpr,
                  PINGPONG: gl.constexpr):
    # FlashAttention 3's structure: a producer warp fills rings of K and V tiles by TMA; two consumer
    # warpgroups (64 query rows each) take turns on the tensor cores
    q_smem, k_smem, v_smem, bars = allocate(q_desc, k_desc, BLOCK_N, STAGES)
    args = (q_desc, k_desc, v_desc, o_desc, q_smem, k_smem, v_smem, bars, qk_scale, n_q, n_k,
            q_heads, group, Schedule(BLOCK_N, STAGES, CAUSAL, OVERLAP, PINGPONG))
    gl.warp_specialize([(consumer0, args), (consumer1, args), (producer, args)], [CONSUMER_WARPS, PRODUCER_WARPS],
                       [CONSUMER_REGS, PRODUCER_REGS])


#: (BLOCK_N, STAGES) per head dim: two stages of 128-key tiles at d=128, FlashAttention 3's choice
LAUNCH = {128: (128, 2), 64: (128, 3)}


def hopper_refusal(device=None) -> str | None:
    """Why a Gluon kernel for Hopper cannot run on ``device`` (default: the current GPU), or None: it can."""
    on_gpu = torch.cuda.is_available() and (device is None or torch.device(device).type == "cuda")
    if not on_gpu or torch.cuda.get_device_capability(device)[0] != 9:
        return "needs a Hopper GPU (compute capability 9.0)"
    return None


def supports(q, k, v, block_n: int | None = None) -> str | None:
    """Why this kernel cannot run these tensors (None: it can)."""
    if why := hopper_refusal(q.device):
        return why
    if q.dtype not in (torch.float16, torch.bfloat16) or k.dtype != q.dtype or v.dtype != q.dtype:
        return f"needs float16 or bfloat16 q, k, v; got {q.dtype}, {k.dtype}, {v.dtype}"
    d, n_q, n_k = q.shape[-1], q.shape[2], k.shape[2]
    if d not in HEAD_DIMS:
        return f"head dim must be one of {HEAD_DIMS}, got {d}"
    block_n = block_n or LAUNCH[d][0]
    if n_q % ROWS or n_k % block_n:
        return f"sequence lengths must be multiples of {ROWS} (queries) and {block_n} (keys); got {n_q}, {n_k}"
    return None


def descriptors(q, k, v, o, block_n: int):
    """TMA descriptors over (batch * heads * n, d) views (a tile never crosses a head: whole tiles only).
    Q comes in 128-row tiles, K and V in block_n rows, and each consumer stores its own 64 rows of O."""
    element = gl.float16 if str(q.dtype) == "torch.float16" else gl.bfloat16
    out = []
    for t, rows in ((q, ROWS), (k, block_n), (v, block_n), (o, ROWS // 2)):
        flat = t.reshape(-1, t.shape[-1])
        layout = gl.NVMMASharedLayout.get_default_for([rows, t.shape[-1]], element)
        out.append(TensorDescriptor(flat, list(flat.shape), list(flat.stride()), [rows, t.shape[-1]], layout))
    return out


def launch_args(q, k, v, causal: bool, scale: float | None, launch: tuple[int, int] | None):
    """What a launch of this kernel's layout needs: (units of work, BLOCK_N, STAGES, output, the arguments up to
    ``group``). Raises LabError for what it cannot run (:func:`supports`)."""
    batch, q_heads, kv_heads, n_q, n_k, d = check_shapes(q.shape, k.shape, v.shape, causal)
    why = supports(q, k, v, launch[0] if launch else None)
    if why:
        raise LabError(f"the Hopper kernel {why}")
    block_n, stages = launch or LAUNCH[d]
    q, k, v = (t.contiguous() for t in (q, k, v))
    o = q.new_empty(q.shape)
    args = (*descriptors(q, k, v, o, block_n), softmax_scale(d, scale) * LOG2E, n_q, n_k, q_heads, q_heads // kv_heads)
    return n_q // ROWS * batch * q_heads, block_n, stages, o, args


def hopper_forward(q, k, v, causal: bool = False, scale: float | None = None, launch: tuple[int, int] | None = None,
                   overlap: bool = True, pingpong: bool = True):
    """Attention with the Gluon kernel: q (batch, q_heads, n_q, d), k and v (batch, kv_heads, n_k, d).

    ``launch`` = (BLOCK_N, STAGES) overrides :data:`LAUNCH`; ``overlap`` and ``pingpong`` switch off
    the two schedules (what each buys). Raises LabError for what it cannot run (:func:`supports`)."""
    n_units, block_n, stages, o, args = launch_args(q, k, v, causal, scale, launch)
    hopper_kernel[(n_units,)](*args, BLOCK_N=block_n, CAUSAL=causal, STAGES=stages, OVERLAP=overlap,
                              PINGPONG=pingpong, num_warps=NUM_WARPS, maxnreg=KERNEL_REGS)
    return o


def compile_for_hopper(head_dim: int = 128, causal: bool = True, launch: tuple[int, int] | None = None,
                       fp16: bool = False, overlap: bool = True, pingpong: bool = True):
    """Compile the kernel for sm_90a without a GPU (Triton ships ptxas); returns Triton's compiled
    kernel, whose ``asm`` holds the IR, PTX and cubin (what a CPU test can check). Needs Triton's compiler,
    not its interpreter: on a machine without a GPU, in a process started with ``TRITON_INTERPRET=0``."""
    block_n, stages = launch or LAUNCH[head_dim]
    return compile_sm90(hopper_kernel, signature(head_dim, block_n, fp16),
                        {"BLOCK_N": block_n, "CAUSAL": causal, "STAGES": stages, "OVERLAP": overlap,
                         "PINGPONG": pingpong})


def signature(head_dim: int, block_n: int, fp16: bool = False, **more: str) -> dict:
    """The types of this kernel layout's arguments for compiling without a GPU: the four descriptors, the scalars up to
    ``group``, then ``more`` (name -> type) and the schedule's constexprs."""
    stand_in = torch.empty(ROWS, head_dim, dtype=torch.float16 if fp16 else torch.bfloat16)  # for the types only
    sig = {name: mangle_type(desc) for name, desc in
           zip(("q_desc", "k_desc", "v_desc", "o_desc"), descriptors(stand_in, stand_in, stand_in, stand_in, block_n),
               strict=True)}
    return sig | dict(qk_scale="fp32", n_q="i32", n_k="i32", q_heads="i32", group="i32", **more) | dict.fromkeys(
        ("BLOCK_N", "CAUSAL", "STAGES", "OVERLAP", "PINGPONG"), "constexpr")


def compile_sm90(kernel, signature: dict, constexprs: dict):
    """A Gluon kernel of this launch shape (NUM_WARPS, KERNEL_REGS) compiled for sm_90a with Triton's own ptxas, no
    GPU needed; refused while Triton's interpreter is on (lab turns it on without a GPU)."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        raise LabError(f"compiling {kernel.__name__} for Hopper needs Triton's compiler, but its interpreter is on "
                       "(TRITON_INTERPRET=1, which lab sets without a GPU): run it in a process started with "
                       "TRITON_INTERPRET=0")
    src = GluonASTSource(kernel, signature, constexprs=constexprs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": NUM_WARPS,
                                                                          "maxnreg": KERNEL_REGS})


def check(n: int = 256, q_heads: int = 4, kv_heads: int = 2, head_dim: int = 128, seed: int = 0) -> dict[str, float]:
    """The Gluon kernel against the float64 reference on random bf16 inputs (``n`` a multiple of 128): the largest
    absolute error of its output, ``{"no mask": ..., "causal": ...}``. Gluon has no CPU interpreter: without a
    Hopper GPU this raises LabError (:func:`compile_for_hopper` compiles the kernel for sm_90a anywhere)."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    return max_errors(hopper_forward, n, q_heads, kv_heads, head_dim, torch.bfloat16, device, seed)
