"""FlashAttention forward in Triton, tuned: what it takes to be fast on an H200.

The same algorithm as :mod:`lab.measure.attention.teaching` (one tile of queries per program, an online
softmax over the key/value tiles), with the changes that made it fast: log2(e) folded into the scale so
the exponentials are ``exp2``; the causal loop split into off-diagonal tiles (no mask at all) and the
diagonal tiles (masked); heaviest query tiles launched first, one KV head's query heads and tiles launched
together (what runs at once reads the same K/V while it is in L2); block sizes, warps, pipeline stages and
a register cap (two programs per multiprocessor) picked by ``triton.autotune`` from a small space
(:data:`TUNED_CONFIGS`; which launch a shape takes is :mod:`lab.measure.attention.launch_policy`). Further
steps towards FlashAttention 3 (a persistent launch, warp specialisation, FA4's exponent tricks) are
switches (:class:`~lab.measure.attention.switches.Switches`), kept off where they did not pay on the H200.
"""

from __future__ import annotations

import torch

from lab import LabError, env
from lab.measure.attention import launch_policy
from lab.measure.attention.reference import LOG2E, max_errors, softmax_scale

env.use_triton_interpreter_without_gpu()

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from lab.measure.attention.exp_tricks import exp2_split, next_max  # noqa: E402
from lab.measure.attention.kernel_inputs import check_inputs, dot_precision, gpu_name, interpreting, strides  # noqa: E402
from lab.measure.attention.switches import DEFAULT_SWITCHES, Switches  # noqa: E402
from lab.measure.attention.tma import descriptors, tma_available, tma_mode  # noqa: E402

LN2 = tl.constexpr(0.6931471805599453)  # (inside the kernel: log-sum-exp back from log2 units)


@triton.jit
def tuned_tiles(acc, l_i, m_i, q, K, V, b, kv_h, k_base, v_base, skn, svn, start, stop, rows, cols0, dims,
                n_k, diag, qk_scale, MASKED: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_N: tl.constexpr,
                HEAD_DIM: tl.constexpr, PRECISION: tl.constexpr, TMA: tl.constexpr,
                WARP_SPECIALIZE: tl.constexpr, RESCALE_THRESHOLD: tl.constexpr, POLY_EXP2: tl.constexpr):
    """Online softmax over key tiles [start, stop). MASKED=False tiles are whole and fully visible."""
    for start_n in tl.range(start, stop, BLOCK_N, warp_specialize=WARP_SPECIALIZE):
        cols = start_n + cols0
        if TMA:  # the copy engine fetches the tile (rows past the sequence come back as zeros)
            k = K.load([b, kv_h, start_n, 0]).reshape(BLOCK_N, HEAD_DIM).T
        elif MASKED:
            k = tl.load(k_base + cols[None, :] * skn + dims[:, None], mask=cols[None, :] < n_k, other=0.0)
        else:
            k = tl.load(k_base + cols[None, :] * skn + dims[:, None])
        s = tl.dot(q, k, input_precision=PRECISION)
        if MASKED:
            visible = cols[None, :] < n_k
            if CAUSAL:
                visible = visible & (cols[None, :] <= rows[:, None] + diag)
            s = tl.where(visible, s * qk_scale, float("-inf"))
            m_new = next_max(m_i, tl.max(s, 1), RESCALE_THRESHOLD)
            s = s - m_new[:, None]
        else:  # scale folded into the subtraction: one fused multiply-add per score
            m_new = next_max(m_i, tl.max(s, 1) * qk_scale, RESCALE_THRESHOLD)
            s = s * qk_scale - m_new[:, None]
        if POLY_EXP2 and not MASKED:  # (masked tiles hold -inf, which the polynomial does not)
            p = exp2_split(s)
        else:
            p = tl.math.exp2(s)                         # scores are in log2 units: exp2 is one instruction
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        if RESCALE_THRESHOLD > 0:
            if tl.min(alpha, 0) < 1.0:                  # only when some row's max moved
                acc = acc * alpha[:, None]
        else:
            acc = acc * alpha[:, None]
        if TMA:
            v = V.load([b, kv_h, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
        elif MASKED:
            v = tl.load(v_base + cols[:, None] * svn + dims[None, :],
                    mask=cols[:, None] < n_k, other=0.0)
        else:
            v = tl.load(v_base + cols[:, None] * svn + dims[None, :])
        acc = tl.dot(p.to(v.dtype), v, acc, input_precision=PRECISION)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def tile_coords(tile, n_q, q_heads, group, batch, BLOCK_M: tl.constexpr, HEAVY_FIRST: tl.constexpr,
                KV_MAJOR: tl.constexpr):
    """(query tile, batch, query head) of the tile-th unit of work in launch order."""
    n_m = tl.cdiv(n_q, BLOCK_M)
    if KV_MAJOR:  # one KV head's query heads and tiles together: what runs at once reads one head's K/V
        per_kv = n_m * group
        kv = tile // per_kv
        start_m = tile % per_kv // group
        kv_heads = q_heads // group
        b, h = kv // kv_heads, kv % kv_heads * group + tile % group
    else:  # every head of one query tile side by side
        n_heads = batch * q_heads
        start_m = tile // n_heads
        b, h = tile % n_heads // q_heads, tile % n_heads % q_heads
    if HEAVY_FIRST:  # under a causal mask the last query tiles have the most work
        start_m = n_m - 1 - start_m
    return start_m, b, h


@triton.jit
def tuned_tile(Q, K, V, Out, Lse, tile, qk_scale, n_q, n_k, q_heads, group, batch,
               sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, sob, soh, son,
               HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
               PRECISION: tl.constexpr, SPLIT_DIAGONAL: tl.constexpr, HEAVY_FIRST: tl.constexpr, TMA: tl.constexpr,
               KV_MAJOR: tl.constexpr, WARP_SPECIALIZE: tl.constexpr, RESCALE_THRESHOLD: tl.constexpr,
               POLY_EXP2: tl.constexpr, STORE_LSE: tl.constexpr):
    """One unit of work: one query tile of one head over its key tiles, those every row sees whole first
    (no mask), then those across the causal diagonal and the end of the keys (masked)."""
    start_m, b, h = tile_coords(tile, n_q, q_heads, group, batch, BLOCK_M, HEAVY_FIRST, KV_MAJOR)
    kv_h = h // group
    rows = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols0 = tl.arange(0, BLOCK_N)
    dims = tl.arange(0, HEAD_DIM)
    if TMA:
        q = Q.load([b, h, start_m * BLOCK_M, 0]).reshape(BLOCK_M, HEAD_DIM)
        k_base, v_base = 0, 0
    else:
        q = tl.load(Q + b * sqb + h * sqh + rows[:, None] * sqn + dims[None, :],
                mask=rows[:, None] < n_q, other=0.0)
        k_base, v_base = K + b * skb + kv_h * skh, V + b * svb + kv_h * svh
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    diag = n_k - n_q
    if CAUSAL:
        # keys every row of the tile sees, rounded down to whole tiles; then the tiles across the diagonal
        full_end = tl.minimum(start_m * BLOCK_M + diag + 1, n_k) // BLOCK_N * BLOCK_N
        hi = tl.minimum((start_m + 1) * BLOCK_M + diag, n_k)
    else:
        full_end = n_k // BLOCK_N * BLOCK_N
        hi = n_k
    if not SPLIT_DIAGONAL:  # (for measuring what the split buys) every tile masked
        full_end = 0
    acc, l_i, m_i = tuned_tiles(acc, l_i, m_i, q, K, V, b, kv_h, k_base, v_base, skn, svn, 0, full_end, rows, cols0,
                                dims, n_k, diag, qk_scale, False, CAUSAL, BLOCK_N, HEAD_DIM, PRECISION, TMA,
                                WARP_SPECIALIZE, RESCALE_THRESHOLD, POLY_EXP2)
    acc, l_i, m_i = tuned_tiles(acc, l_i, m_i, q, K, V, b, kv_h, k_base, v_base, skn, svn, full_end, hi, rows, cols0,
                                dims, n_k, diag, qk_scale, True, CAUSAL, BLOCK_N, HEAD_DIM, PRECISION, TMA,
                                WARP_SPECIALIZE, RESCALE_THRESHOLD, False)
    out = acc / l_i[:, None]
    if TMA:  # the copy engine clips rows past the sequence
        Out.store([b, h, start_m * BLOCK_M, 0], out.to(q.dtype).reshape(1, 1, BLOCK_M, HEAD_DIM))
    else:
        tl.store(Out + b * sob + h * soh + rows[:, None] * son + dims[None, :], out.to(Out.dtype.element_ty),
                 mask=rows[:, None] < n_q)
    if STORE_LSE:  # each row's log-sum-exp, in natural log (the scores are in log2 units), for the backward pass
        tl.store(Lse + (b * q_heads + h) * n_q + rows, (m_i + tl.math.log2(l_i)) * LN2, mask=rows < n_q)


@triton.jit
def tuned_kernel(Q, K, V, Out, Lse, Counter, qk_scale, n_q, n_k, q_heads, group, batch,
                 sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, sob, soh, son,
                 HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 CAUSAL: tl.constexpr, PRECISION: tl.constexpr,
                 SPLIT_DIAGONAL: tl.constexpr = True, HEAVY_FIRST: tl.constexpr = True, TMA: tl.constexpr = 0,
                 KV_MAJOR: tl.constexpr = False, PERSISTENT: tl.constexpr = False,
                 WARP_SPECIALIZE: tl.constexpr = False, RESCALE_THRESHOLD: tl.constexpr = 0.0,
                 POLY_EXP2: tl.constexpr = False, STORE_LSE: tl.constexpr = False):
    # One flat grid of (query tile, head) units in launch order (tile_coords). TMA=1: Q/K/V/Out arrive
    # as 4-D tensor descriptors (batch, heads, n, d); TMA=2: pointers, made into descriptors here.
    # PERSISTENT: a few programs per multiprocessor, each taking the next unit from a counter until none
    # is left (the heaviest come first, so the last to finish are light: the load balances itself).
    if TMA == 2:
        Q = tl.make_tensor_descriptor(Q, [batch, q_heads, n_q, HEAD_DIM], [sqb, sqh, sqn, 1], [1, 1, BLOCK_M, HEAD_DIM])
        Out = tl.make_tensor_descriptor(Out, [batch, q_heads, n_q, HEAD_DIM], [sob, soh, son, 1],
                                        [1, 1, BLOCK_M, HEAD_DIM])
        K = tl.make_tensor_descriptor(K, [batch, q_heads // group, n_k, HEAD_DIM], [skb, skh, skn, 1],
                                      [1, 1, BLOCK_N, HEAD_DIM])
        V = tl.make_tensor_descriptor(V, [batch, q_heads // group, n_k, HEAD_DIM], [svb, svh, svn, 1],
                                      [1, 1, BLOCK_N, HEAD_DIM])
    if PERSISTENT:
        units = tl.cdiv(n_q, BLOCK_M) * batch * q_heads
        tile = tl.atomic_add(Counter, 1)
        while tile < units:
            tuned_tile(Q, K, V, Out, Lse, tile, qk_scale, n_q, n_k, q_heads, group, batch,
                       sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, sob, soh, son, HEAD_DIM, BLOCK_M, BLOCK_N,
                       CAUSAL, PRECISION, SPLIT_DIAGONAL, HEAVY_FIRST, TMA, KV_MAJOR, WARP_SPECIALIZE,
                       RESCALE_THRESHOLD, POLY_EXP2, STORE_LSE)
            tile = tl.atomic_add(Counter, 1)
    else:
        tuned_tile(Q, K, V, Out, Lse, tl.program_id(0), qk_scale, n_q, n_k, q_heads, group, batch,
                   sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, sob, soh, son, HEAD_DIM, BLOCK_M, BLOCK_N,
                   CAUSAL, PRECISION, SPLIT_DIAGONAL, HEAVY_FIRST, TMA, KV_MAJOR, WARP_SPECIALIZE,
                   RESCALE_THRESHOLD, POLY_EXP2, STORE_LSE)


def _set_tma_blocks(nargs):
    """Autotuner pre-hook: give the tensor descriptors the tile shape of the config being tried."""
    if nargs.get("Counter") is not None:  # a persistent launch starts from the first unit of work
        nargs["Counter"].zero_()
    if nargs.get("TMA") == 1:
        for name, rows in (("Q", "BLOCK_M"), ("Out", "BLOCK_M"), ("K", "BLOCK_N"), ("V", "BLOCK_N")):
            nargs[name].block_shape = [1, 1, nargs[rows], nargs["HEAD_DIM"]]


#: The autotuning space: small on purpose (each config is compiled and timed once per shape key).
#: The first one caps registers at 128 per thread: with 8 warps and 2 stages two programs then fit on
#: one multiprocessor (registers and shared memory both allow it), and while one does its softmax
#: the other keeps the tensor cores busy. Without the cap the same launch needs ~184 registers and runs
#: alone on its multiprocessor (python -m lab tune-forward prints both).
TUNED_CONFIGS = [
    triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=w, num_stages=s, maxnreg=regs, pre_hook=_set_tma_blocks)
    for bm, bn, w, s, regs in [(128, 64, 8, 2, 128), (128, 128, 8, 3, None), (128, 64, 8, 3, None),
                               (64, 64, 4, 3, None), (256, 64, 8, 3, None), (64, 32, 4, 3, None)]
]
_tuned_autotuned = triton.autotune(configs=TUNED_CONFIGS,
                                   key=["n_q", "n_k", "HEAD_DIM", "CAUSAL", "PRECISION", "TMA", "SPLIT_DIAGONAL",
                                        "HEAVY_FIRST", "KV_MAJOR", "PERSISTENT", "WARP_SPECIALIZE",
                                        "RESCALE_THRESHOLD", "POLY_EXP2"])(tuned_kernel)




def _grid(n_q: int, heads: int, persistent: bool, programs_per_sm: int, device):
    """The launch grid: one program per unit of work, or (persistent) a few per multiprocessor."""
    def grid(meta):
        units = triton.cdiv(n_q, meta["BLOCK_M"]) * heads
        if not persistent:
            return (units,)
        sms = 4 if interpreting() else torch.cuda.get_device_properties(device).multi_processor_count
        return (min(units, sms * programs_per_sm),)
    return grid


def _power_of_two_from_16(value) -> bool:
    return isinstance(value, int) and value >= 16 and not value & (value - 1)


def tuned_forward(q, k, v, causal: bool = False, scale: float | None = None, config: dict | None = None,
                  tma: bool | str | None = None, switches: Switches = DEFAULT_SWITCHES, return_lse: bool = False):
    """Attention with the tuned kernel.

    ``config`` (keys BLOCK_M, BLOCK_N, and optionally num_warps, num_stages, maxnreg: a cap on registers
    per thread, so that more programs fit on a multiprocessor; programs_per_sm for a persistent launch,
    default 3: extra programs find no work left and exit) fixes the launch; without it a GPU takes a known
    launch or autotunes over :data:`TUNED_CONFIGS` once per (n_q, n_k, head dim, causal, switches)
    (:mod:`lab.measure.attention.launch_policy`), and the interpreter uses 16 x 16 tiles. ``tma=True``
    fetches tiles with tensor descriptors made on the host (the copy engine of Hopper and newer),
    ``tma="device"`` with descriptors made in the kernel; by default a Hopper GPU times pointers and host
    descriptors once per shape and keeps the faster. ``switches`` turns the optional steps on and off
    (:class:`Switches`).

    ``return_lse=True`` returns ``(o, lse)``: ``lse`` is each row's log-sum-exp of its scaled scores
    (natural log, fp32, shape (batch, q_heads, n_q); -inf for a row that sees no key, which only n_k == 0
    makes), what a backward pass needs to recompute the probabilities. Without it the store is compiled out.
    """
    q, k, v, (batch, q_heads, kv_heads, n_q, n_k, d) = check_inputs(q, k, v, causal)
    precision = dot_precision(q.dtype)
    o = torch.empty_like(q)
    lse = torch.empty(batch, q_heads, n_q, dtype=torch.float32, device=q.device) if return_lse else None
    if config is not None and not all(_power_of_two_from_16(config.get(key, 0)) for key in ("BLOCK_M", "BLOCK_N")):
        raise LabError(f"config needs BLOCK_M and BLOCK_N to be powers of two, at least 16; got {config}")
    choosing = config is None and tma is None and switches == DEFAULT_SWITCHES and not interpreting()
    if choosing:  # a launch already known for this shape skips the autotuning compiles
        config, tma = launch_policy.known_launch(gpu_name(q), n_q, n_k, d, causal, precision, q.dtype)
        choosing = config is None
    if tma is None:
        tma = launch_policy.faster_loads(
            lambda tma: tuned_forward(q, k, v, causal, scale, config, tma=tma, switches=switches),
            n_q, n_k, d, causal, q.dtype, config, switches) if tma_available() else False
    mode = tma_mode(tma)
    if config is None and interpreting():
        config = {"BLOCK_M": 16, "BLOCK_N": 16}
    counter = q.new_zeros(1, dtype=torch.int32) if switches.persistent else None
    args = (*descriptors((q, k, v, o), mode, config, d), lse, counter, softmax_scale(d, scale) * LOG2E, n_q, n_k,
            q_heads, q_heads // kv_heads, batch, *strides(q, k, v, o))
    flags = dict(HEAD_DIM=d, CAUSAL=causal, PRECISION=precision, TMA=mode, STORE_LSE=return_lse,
                 **switches.constexprs(q.dtype.itemsize == 2))
    grid = _grid(n_q, batch * q_heads, switches.persistent, (config or {}).get("programs_per_sm", 3), q.device)
    if config is None:
        _tuned_autotuned[grid](*args, **flags)
        launch_policy.record_autotuned(_tuned_autotuned.best_config, n_q, n_k, d, causal, precision, tma,
                                       gpu_name(q) if choosing else None)
    else:
        register_cap = {"maxnreg": config["maxnreg"]} if config.get("maxnreg") and not interpreting() else {}
        kernel = tuned_kernel[grid](*args, **flags, BLOCK_M=config["BLOCK_M"], BLOCK_N=config["BLOCK_N"],
                                    num_warps=config.get("num_warps", 4),
                                    num_stages=config.get("num_stages", 1 if interpreting() else 3), **register_cap)
        if not interpreting():
            launch_policy.keep_last_launch(kernel)
    return (o, lse) if return_lse else o


def check(n: int = 50, q_heads: int = 4, kv_heads: int = 2, head_dim: int = 64, dtype=torch.float32,
          seed: int = 0) -> dict[str, float]:
    """The tuned kernel, launched as a default call launches it, against the float64 reference on random
    inputs (on the GPU, or in Triton's interpreter without one): the largest absolute error of its output,
    ``{"no mask": ..., "causal": ...}``."""
    return max_errors(tuned_forward, n, q_heads, kv_heads, head_dim, dtype, "cpu" if interpreting() else "cuda", seed)
