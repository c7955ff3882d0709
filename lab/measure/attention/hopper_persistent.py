"""The Gluon forward for Hopper launched persistently: a program per multiprocessor, each walking a list of units.

:mod:`lab.measure.attention.hopper` launches a program per unit of work (a 128-row query tile of one head) and the
GPU's block scheduler hands the next unit to whichever multiprocessor frees up. Each program then pays for its
own start (Q's copy, the first K tile) and end. FlashAttention 3 launches one program per multiprocessor instead
and lets each walk many units, so the copies of the next unit start while the last one finishes. This kernel
does the same with the scheduled loop of ``hopper`` unchanged (:func:`~lab.measure.attention.hopper.attend`):

* the ring of K and V tiles and the consumers' ping-pong carry on from one unit to the next;
* the producer copies a unit's first K tile before its Q tile, which waits until both consumers have finished
  the last unit's products (``q_free``), and the output leaves through a buffer of its own, so the next Q tile
  arrives while this one's rows are stored.

Which units a program walks is a plan made on the host (:func:`plan`): ``strided`` gives program p every
P-th unit; ``balanced`` gives each unit, heaviest first in launch order, to the program whose units so far cost
least, imitating with costs estimated in advance what the block scheduler appears to do for a launch of a program
per tile (NVIDIA does not document its order). FA3 takes its
tiles from a shared counter at run time instead (its ``VarlenDynamicPersistentTileScheduler``).

Scope as ``hopper``'s, plus: the shared memory of a Q, an output and the ring fits one program per multiprocessor.
"""

import functools

import torch

from lab import LabError, env

env.use_triton_interpreter_without_gpu()   # before Triton is imported, as every kernel module of lab does

from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma  # noqa: E402

from lab.measure.attention.hopper import (  # noqa: E402
    BLOCK_M,
    CONSUMER_REGS,
    CONSUMER_WARPS,
    KERNEL_REGS,
    LAUNCH,
    NUM_WARPS,
    PRODUCER_REGS,
    PRODUCER_WARPS,
    ROWS,
    Schedule,
    allocate,
    attend,
    compile_sm90,
    gl,
    gluon,
    into_ring,
    key_tiles,
    launch_args,
    signature,
    store_rows,
    work_unit,
)

PLANS = ("strided", "balanced")
SHARED_BYTES = 227 * 1024   # Hopper's shared memory per program (one program per multiprocessor)


def shared_bytes(head_dim: int, block_n: int, stages: int) -> int:
    """The 16-bit tiles a persistent program keeps in shared memory: Q, its output buffer, and the K and V rings."""
    return 2 * head_dim * (2 * ROWS + 2 * stages * block_n)


@gluon.jit
def planned_unit(plan, k):
    """Unit ``k`` of the plan: after the P + 1 offsets of its programs' lists, the units themselves."""
    return gl.load(plan + gl.num_programs(0) + 1 + k)


@gluon.jit
def persistent_producer(q_desc, k_desc, v_desc, o_desc, q_smem, k_smem, v_smem, bars, qk_scale, n_q, n_k, q_heads,
                        group, sched, q_free, o_smem, plan):
    """The producer: this program's units in the plan's order, the ring carrying on from one to the next. A unit's
    first K tile is copied before its Q tile, which waits until both consumers are done with the last one."""
    BLOCK_N: gl.constexpr = sched.BLOCK_N
    STAGES: gl.constexpr = sched.STAGES
    q_ready, k_ready, v_ready, k_empty, v_empty, turn = bars
    begin = gl.load(plan + gl.program_id(0))
    first = 0
    for k in range(begin, gl.load(plan + gl.program_id(0) + 1)):
        q_row, kv_row0, start_m = work_unit(planned_unit(plan, k), q_heads, group, n_q, n_k)
        n_tiles, _ = key_tiles(start_m, n_q, n_k, BLOCK_N, sched.CAUSAL)
        for i in range(n_tiles):
            into_ring(k_desc, kv_row0 + i * BLOCK_N, first + i, k_ready, k_empty, k_smem, STAGES)
            if i == 0:
                mbarrier.wait(q_free, (k - begin & 1) ^ 1)
                mbarrier.expect(q_ready, q_desc.block_type.nbytes)
                tma.async_copy_global_to_shared(q_desc, [q_row, 0], q_ready, q_smem)
            into_ring(v_desc, kv_row0 + i * BLOCK_N, first + i, v_ready, v_empty, v_smem, STAGES)
        first += n_tiles


@gluon.jit
def persistent_consumer(q_desc, k_desc, v_desc, o_desc, q_smem, k_smem, v_smem, bars, qk_scale, n_q, n_k, q_heads,
                        group, sched, q_free, o_smem, plan, C: gl.constexpr):
    """A consumer: the producer's units in its order; its Q rows handed back once a unit's products are done, its
    output stored through its rows of ``o_smem``."""
    begin = gl.load(plan + gl.program_id(0))
    first = 0
    event = 0
    for k in range(begin, gl.load(plan + gl.program_id(0) + 1)):
        q_row, kv_row0, start_m = work_unit(planned_unit(plan, k), q_heads, group, n_q, n_k)
        n_tiles, n_full = key_tiles(start_m, n_q, n_k, sched.BLOCK_N, sched.CAUSAL)
        q = q_smem.slice(C * (BLOCK_M // 2), BLOCK_M // 2)
        acc, l_i = attend(q, k_smem, v_smem, bars, qk_scale, start_m, n_tiles, n_full, n_k - n_q, sched, C, first,
                          event, k - begin & 1)
        mbarrier.arrive(q_free, count=1)
        store_rows(acc, l_i, o_smem.slice(C * (BLOCK_M // 2), BLOCK_M // 2), o_desc, q_row + C * (BLOCK_M // 2), 0)
        first += n_tiles
        event += n_tiles + 1          # ping-pong steps: one per key tile's scores, one for the last P V


@gluon.jit
def persistent_consumer0(q_desc, k_desc, v_desc, o_desc, q_smem, k_smem, v_smem, bars, qk_scale, n_q, n_k, q_heads,
                         group, sched, q_free, o_smem, plan):
    persistent_consumer(q_desc, k_desc, v_desc, o_desc, q_smem, k_smem, v_smem, bars, qk_scale, n_q, n_k, q_heads,
                        group, sched, q_free, o_smem, plan, 0)


@gluon.jit
def persistent_consumer1(q_desc, k_desc, v_desc, o_desc, q_smem, k_smem, v_smem, bars, qk_scale, n_q, n_k, q_heads,
                         group, sched, q_free, o_smem, plan):
    persistent_consumer(q_desc, k_desc, v_desc, o_desc, q_smem, k_smem, v_smem, bars, qk_scale, n_q, n_k, q_heads,
                        group, sched, q_free, o_smem, plan, 1)


@gluon.jit
def persistent_kernel(q_desc, k_desc, v_desc, o_desc, qk_scale, n_q, n_k, q_heads, group, plan,
                      BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr, STAGES: gl.constexpr, OVERLAP: gl.constexpr,
                      PINGPONG: gl.constexpr):
    # hopper_kernel's partitions, each walking the plan's units; Q's barrier to hand it back and an output buffer
    q_smem, k_smem, v_smem, bars = allocate(q_desc, k_desc, BLOCK_N, STAGES)
    q_free = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(q_free, count=2)                                    # both consumers are done with their Q rows
    o_smem = gl.allocate_shared_memory(q_desc.dtype, q_desc.block_type.shape, o_desc.layout)
    args = (q_desc, k_desc, v_desc, o_desc, q_smem, k_smem, v_smem, bars, qk_scale, n_q, n_k, q_heads, group,
            Schedule(BLOCK_N, STAGES, CAUSAL, OVERLAP, PINGPONG), q_free, o_smem, plan)
    gl.warp_specialize([(persistent_consumer0, args), (persistent_consumer1, args), (persistent_producer, args)],
                       [CONSUMER_WARPS, PRODUCER_WARPS], [CONSUMER_REGS, PRODUCER_REGS])


def unit_tiles(n_q: int, n_k: int, q_heads: int, group: int, batch: int, causal: bool, block_n: int) -> list[int]:
    """Key tiles of each unit of work in launch order (``hopper.work_unit``'s order): the cost a plan balances."""
    n_m, diag = n_q // ROWS, n_k - n_q
    tiles = []
    for unit in range(n_m * q_heads * batch):
        start_m = n_m - 1 - unit % (n_m * group) // group
        tiles.append(-(-min((start_m + 1) * ROWS + diag, n_k) // block_n) if causal else n_k // block_n)
    return tiles


def unit_cost(n_tiles: int) -> int:
    """What a plan counts a unit as: its key tiles and one tile more for its start and end."""
    return n_tiles + 1


def program_units(planned: list[int], programs: int) -> list[list[int]]:
    """A plan's lists back: the units each program walks, in its order."""
    offsets, units = planned[:programs + 1], planned[programs + 1:]
    return [units[offsets[p]:offsets[p + 1]] for p in range(programs)]


def program_costs(tiles: list[int], planned: list[int], programs: int) -> list[int]:
    """Each program's units' cost (:func:`unit_cost`) under a plan: what the costliest leaves the others waiting for."""
    return [sum(unit_cost(tiles[u]) for u in units) for units in program_units(planned, programs)]


def plan(tiles: list[int], programs: int, how: str = "balanced") -> list[int]:
    """The units each of ``programs`` programs walks, as one list: P + 1 offsets, then the units program by program.
    ``strided``: every P-th unit from its own; ``balanced``: each unit in launch order to the program whose units so
    far cost least (:func:`unit_cost`)."""
    if how not in PLANS:
        raise LabError(f"no plan {how!r}; choose one of {', '.join(PLANS)}")
    lists = [[] for _ in range(programs)]
    if how == "strided":
        for unit in range(len(tiles)):
            lists[unit % programs].append(unit)
    else:
        cost = [0] * programs
        for unit, n in enumerate(tiles):
            p = min(range(programs), key=cost.__getitem__)
            lists[p].append(unit)
            cost[p] += unit_cost(n)
    offsets = [0]
    for units in lists:
        offsets.append(offsets[-1] + len(units))
    return offsets + [unit for units in lists for unit in units]


@functools.cache
def _plan_on(device: str, shape: tuple, programs: int, how: str) -> torch.Tensor:
    return torch.tensor(plan(unit_tiles(*shape), programs, how), dtype=torch.int32, device=device)


def persistent_forward(q, k, v, causal: bool = False, scale: float | None = None,
                       launch: tuple[int, int] | None = None, how: str = "balanced", programs: int | None = None):
    """Attention with the persistent Gluon kernel: as :func:`~lab.measure.attention.hopper.hopper_forward`, on
    ``programs`` programs (default: one per multiprocessor) walking the units of plan ``how`` (:data:`PLANS`)."""
    n_units, block_n, stages, o, args = launch_args(q, k, v, causal, scale, launch)
    if shared_bytes(q.shape[-1], block_n, stages) > SHARED_BYTES:
        raise LabError(f"the persistent Hopper kernel needs {shared_bytes(q.shape[-1], block_n, stages):,} bytes of "
                       f"shared memory at head dim {q.shape[-1]} with {stages} stages of {block_n} keys, more than "
                       f"Hopper's {SHARED_BYTES:,}: use fewer stages (launch=({block_n}, 2))")
    programs = min(n_units, programs or torch.cuda.get_device_properties(q.device).multi_processor_count)
    *_, n_q, n_k, q_heads, group = args
    units = _plan_on(str(q.device), (n_q, n_k, q_heads, group, q.shape[0], causal, block_n), programs, how)
    persistent_kernel[(programs,)](*args, units, BLOCK_N=block_n, CAUSAL=causal, STAGES=stages, OVERLAP=True,
                                   PINGPONG=True, num_warps=NUM_WARPS, maxnreg=KERNEL_REGS)
    return o


def compile_persistent_for_hopper(head_dim: int = 128, causal: bool = True, launch: tuple[int, int] | None = None):
    """The persistent kernel compiled for sm_90a without a GPU (as ``hopper.compile_for_hopper``)."""
    block_n, stages = launch or LAUNCH[head_dim]
    return compile_sm90(persistent_kernel, signature(head_dim, block_n, plan="*i32"),
                        {"BLOCK_N": block_n, "CAUSAL": causal, "STAGES": stages, "OVERLAP": True, "PINGPONG": True})
