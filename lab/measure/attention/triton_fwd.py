"""FlashAttention forward in Triton: a teaching kernel, then a tuned one.

Both compute softmax(Q K^T * scale) V one tile of queries per program, walking the key/value tiles
with an online softmax (the NumPy loop of :mod:`lab.measure.attention.tiled`, moved onto the GPU). Causal
and not, grouped-query heads, head dims 16..256 (powers of two), any sequence lengths, fp16/bf16
(fp32 too, with exact fp32 products). Without a GPU they run in Triton's interpreter on the CPU.

* :func:`teaching_forward` -- the kernel to read: one loop, every tile masked, natural exp.
* :func:`tuned_forward` -- what it takes to be fast: log2(e) folded into the scale so the
  exponentials are ``exp2``; the causal loop split into off-diagonal tiles (no mask at all) and
  the diagonal tiles (masked); heaviest query tiles launched first, one KV head's query heads and
  tiles launched together (what runs at once reads the same K/V while it is in L2); block sizes,
  warps, pipeline stages and a register cap (two programs per multiprocessor) picked by
  ``triton.autotune`` from a small space. Further steps towards FlashAttention 3 (a persistent
  launch, warp specialisation, FA4's exponent tricks) are switches (:class:`Switches`), kept off
  where they did not pay on the H200.
"""

from __future__ import annotations

from lab import LabError, env
from lab.measure.attention import launch_cache
from lab.measure.attention.reference import softmax_scale

env.use_triton_interpreter_without_gpu()

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from lab.measure.attention.exp_tricks import exp2_split, next_max  # noqa: E402
from lab.measure.attention.switches import DEFAULT_SWITCHES, Switches  # noqa: E402
from lab.measure.attention.tma import descriptors, interpreting, tma_available, tma_mode  # noqa: E402

if env.use_triton_interpreter_without_gpu():
    from lab.measure import triton_interpreter

    triton_interpreter.apply()

LOG2E = 1.4426950408889634


# --- teaching kernel -----------------------------------------------------------------------------

@triton.jit
def _teaching_kernel(Q, K, V, Out, scale, n_q, n_k, q_heads, group,
                     sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, sob, soh, son,
                     HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     CAUSAL: tl.constexpr, PRECISION: tl.constexpr):
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


# --- tuned kernel --------------------------------------------------------------------------------

@triton.jit
def _tuned_tiles(acc, l_i, m_i, q, K, V, b, kv_h, k_base, v_base, skn, svn, start, stop, rows, cols0, dims,
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
def _tile_coords(tile, n_q, q_heads, group, batch, BLOCK_M: tl.constexpr, HEAVY_FIRST: tl.constexpr,
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
def _tuned_tile(Q, K, V, Out, tile, qk_scale, n_q, n_k, q_heads, group, batch,
                sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, sob, soh, son,
                HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
                PRECISION: tl.constexpr, SPLIT_DIAGONAL: tl.constexpr, HEAVY_FIRST: tl.constexpr, TMA: tl.constexpr,
                KV_MAJOR: tl.constexpr, WARP_SPECIALIZE: tl.constexpr, RESCALE_THRESHOLD: tl.constexpr,
                POLY_EXP2: tl.constexpr):
    start_m, b, h = _tile_coords(tile, n_q, q_heads, group, batch, BLOCK_M, HEAVY_FIRST, KV_MAJOR)
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
    acc, l_i, m_i = _tuned_tiles(acc, l_i, m_i, q, K, V, b, kv_h, k_base, v_base, skn, svn, 0, full_end, rows, cols0,
                                 dims, n_k, diag, qk_scale, False, CAUSAL, BLOCK_N, HEAD_DIM, PRECISION, TMA,
                                 WARP_SPECIALIZE, RESCALE_THRESHOLD, POLY_EXP2)
    acc, l_i, m_i = _tuned_tiles(acc, l_i, m_i, q, K, V, b, kv_h, k_base, v_base, skn, svn, full_end, hi, rows, cols0,
                                 dims, n_k, diag, qk_scale, True, CAUSAL, BLOCK_N, HEAD_DIM, PRECISION, TMA,
                                 WARP_SPECIALIZE, RESCALE_THRESHOLD, False)
    out = acc / l_i[:, None]
    if TMA:  # the copy engine clips rows past the sequence
        Out.store([b, h, start_m * BLOCK_M, 0], out.to(q.dtype).reshape(1, 1, BLOCK_M, HEAD_DIM))
    else:
        tl.store(Out + b * sob + h * soh + rows[:, None] * son + dims[None, :], out.to(Out.dtype.element_ty),
                 mask=rows[:, None] < n_q)


@triton.jit
def _tuned_kernel(Q, K, V, Out, Counter, qk_scale, n_q, n_k, q_heads, group, batch,
                  sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, sob, soh, son,
                  HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  CAUSAL: tl.constexpr, PRECISION: tl.constexpr,
                  SPLIT_DIAGONAL: tl.constexpr = True, HEAVY_FIRST: tl.constexpr = True, TMA: tl.constexpr = 0,
                  KV_MAJOR: tl.constexpr = False, PERSISTENT: tl.constexpr = False,
                  WARP_SPECIALIZE: tl.constexpr = False, RESCALE_THRESHOLD: tl.constexpr = 0.0,
                  POLY_EXP2: tl.constexpr = False):
    # One flat grid of (query tile, head) units in launch order (_tile_coords). TMA=1: Q/K/V/Out arrive
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
            _tuned_tile(Q, K, V, Out, tile, qk_scale, n_q, n_k, q_heads, group, batch,
                        sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, sob, soh, son, HEAD_DIM, BLOCK_M, BLOCK_N,
                        CAUSAL, PRECISION, SPLIT_DIAGONAL, HEAVY_FIRST, TMA, KV_MAJOR, WARP_SPECIALIZE,
                        RESCALE_THRESHOLD, POLY_EXP2)
            tile = tl.atomic_add(Counter, 1)
    else:
        _tuned_tile(Q, K, V, Out, tl.program_id(0), qk_scale, n_q, n_k, q_heads, group, batch,
                    sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, sob, soh, son, HEAD_DIM, BLOCK_M, BLOCK_N,
                    CAUSAL, PRECISION, SPLIT_DIAGONAL, HEAVY_FIRST, TMA, KV_MAJOR, WARP_SPECIALIZE,
                    RESCALE_THRESHOLD, POLY_EXP2)


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
#: alone on its multiprocessor (scripts/tune_kernels.py prints both).
TUNED_CONFIGS = [
    triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=w, num_stages=s, maxnreg=regs, pre_hook=_set_tma_blocks)
    for bm, bn, w, s, regs in [(128, 64, 8, 2, 128), (128, 128, 8, 3, None), (128, 64, 8, 3, None),
                               (64, 64, 4, 3, None), (256, 64, 8, 3, None), (64, 32, 4, 3, None)]
]
_tuned_autotuned = triton.autotune(configs=TUNED_CONFIGS,
                                   key=["n_q", "n_k", "HEAD_DIM", "CAUSAL", "PRECISION", "TMA", "SPLIT_DIAGONAL",
                                        "HEAVY_FIRST", "KV_MAJOR", "PERSISTENT", "WARP_SPECIALIZE",
                                        "RESCALE_THRESHOLD", "POLY_EXP2"])(_tuned_kernel)


# --- launchers -----------------------------------------------------------------------------------

def check_inputs(q, k, v, causal: bool):
    """Validate tensors for the Triton kernels; returns (q, k, v) with unit last stride and the sizes
    (batch, q_heads, kv_heads, n_q, n_k, d)."""
    import torch

    from lab.measure.attention.reference import check_shapes

    sizes = check_shapes(q.shape, k.shape, v.shape, causal)
    d = sizes[-1]
    if q.dtype not in (torch.float16, torch.bfloat16, torch.float32) or k.dtype != q.dtype or v.dtype != q.dtype:
        raise LabError(f"q, k, v must share one dtype among float16, bfloat16, float32; got {q.dtype}, {k.dtype}, {v.dtype}")
    if d < 16 or d > 256 or d & (d - 1):
        raise LabError(f"head dim must be a power of two from 16 to 256, got {d}")
    if not interpreting() and not q.is_cuda:
        raise LabError("tensors must be on the GPU (or run without a GPU, where Triton's interpreter is used)")
    q, k, v = (t if t.stride(-1) == 1 else t.contiguous() for t in (q, k, v))
    return q, k, v, sizes


def _prepare(q, k, v, causal: bool):
    import torch

    q, k, v, sizes = check_inputs(q, k, v, causal)
    precision = "ieee" if q.dtype == torch.float32 else "tf32"  # fp32 inputs: exact fp32 products
    return q, k, v, torch.empty_like(q), sizes, precision


def _strides(q, k, v, o):
    return (*q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *o.stride()[:3])


def teaching_forward(q, k, v, causal: bool = False, scale: float | None = None,
                     block_m: int | None = None, block_n: int | None = None):
    """Attention with the teaching kernel. Default tiles: 64 x 64 on a GPU, 16 x 16 in the interpreter."""
    q, k, v, o, (batch, q_heads, kv_heads, n_q, n_k, d), precision = _prepare(q, k, v, causal)
    scale = softmax_scale(d, scale)
    # 64 x 64 tiles and 4 warps: the fastest of the launches tried for this kernel on the H200
    block_m = block_m or (16 if interpreting() else 64)
    block_n = block_n or (16 if interpreting() else 32 if q.dtype.itemsize == 4 else 64)
    grid = (triton.cdiv(n_q, block_m), batch * q_heads)
    _teaching_kernel[grid](q, k, v, o, scale, n_q, n_k, q_heads, q_heads // kv_heads, *_strides(q, k, v, o),
                           HEAD_DIM=d, BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal, PRECISION=precision,
                           num_warps=4, num_stages=1 if interpreting() else 3)
    return o


_CHOSEN: dict[tuple, dict] = {}   # (n_q, n_k, d, causal, precision, tma) -> the autotuner's pick
_TMA_CHOICE: dict[tuple, bool] = {}


def _faster_loads(q, k, v, causal, scale, config, switches) -> bool:
    """On Hopper, time the pointer and the TMA versions once per shape and keep the faster."""
    key = (q.shape[2], k.shape[2], q.shape[-1], causal, str(q.dtype), str(config), switches)
    if key not in _TMA_CHOICE:
        from triton.testing import do_bench

        times = {tma: do_bench(lambda tma=tma: tuned_forward(q, k, v, causal, scale, config, tma=tma, switches=switches),
                               warmup=5, rep=50, return_mode="median")
                 for tma in (False, True)}
        _TMA_CHOICE[key] = times[True] < times[False]
    return _TMA_CHOICE[key]


def _grid(n_q: int, heads: int, persistent: bool, programs_per_sm: int, device):
    """The launch grid: one program per unit of work, or (persistent) a few per multiprocessor."""
    def grid(meta):
        units = triton.cdiv(n_q, meta["BLOCK_M"]) * heads
        if not persistent:
            return (units,)
        sms = 4 if interpreting() else _multiprocessors(device)
        return (min(units, sms * programs_per_sm),)
    return grid


def _multiprocessors(device) -> int:
    import torch

    return torch.cuda.get_device_properties(device).multi_processor_count


def tuned_forward(q, k, v, causal: bool = False, scale: float | None = None, config: dict | None = None,
                  tma: bool | str | None = None, switches: Switches = DEFAULT_SWITCHES):
    """Attention with the tuned kernel.

    ``config`` (keys BLOCK_M, BLOCK_N, and optionally num_warps, num_stages, maxnreg: a cap on registers
    per thread, so that more programs fit on a multiprocessor; programs_per_sm for a persistent launch,
    default 3: extra programs find no work left and exit) fixes the launch; without it a GPU autotunes
    over :data:`TUNED_CONFIGS` once per (n_q, n_k, head dim, causal, switches), and the interpreter
    uses 16 x 16 tiles. ``tma=True`` fetches tiles with tensor descriptors made on the host (the copy
    engine of Hopper and newer), ``tma="device"`` with descriptors made in the kernel; by default a
    Hopper GPU times pointers and host descriptors once per shape and keeps the faster. ``switches``
    turns the optional steps on and off (:class:`Switches`).
    """
    import torch

    q, k, v, o, (batch, q_heads, kv_heads, n_q, n_k, d), precision = _prepare(q, k, v, causal)
    if config is not None and not all(_power_of_two_from_16(config.get(key, 0)) for key in ("BLOCK_M", "BLOCK_N")):
        raise LabError(f"config needs BLOCK_M and BLOCK_N to be powers of two, at least 16; got {config}")
    choosing = config is None and tma is None and switches == DEFAULT_SWITCHES and not interpreting()
    if choosing:  # a launch already known for this shape skips the autotuning compiles (launch_cache)
        config, tma = _known_launch(q, n_q, n_k, d, causal, precision)
        choosing = config is None
    if tma is None:
        tma = _faster_loads(q, k, v, causal, scale, config, switches) if tma_available() else False
    mode = tma_mode(tma)
    if config is None and interpreting():
        config = {"BLOCK_M": 16, "BLOCK_N": 16}
    counter = q.new_zeros(1, dtype=torch.int32) if switches.persistent else None
    args = (*descriptors((q, k, v, o), mode, config, d), counter, softmax_scale(d, scale) * LOG2E, n_q, n_k,
            q_heads, q_heads // kv_heads, batch, *_strides(q, k, v, o))
    flags = dict(HEAD_DIM=d, CAUSAL=causal, PRECISION=precision, TMA=mode, **switches.constexprs(q.dtype.itemsize == 2))
    grid = _grid(n_q, batch * q_heads, switches.persistent, (config or {}).get("programs_per_sm", 3), q.device)
    if config is None:
        _tuned_autotuned[grid](*args, **flags)
        best = _tuned_autotuned.best_config
        _CHOSEN[(n_q, n_k, d, causal, precision, tma)] = {**best.kwargs, "num_warps": best.num_warps,
                                                           "num_stages": best.num_stages,
                                                           **({"maxnreg": best.maxnreg} if best.maxnreg else {})}
        if choosing:
            launch_cache.remember(gpu_name(q), launch_cache.forward_key(n_q, n_k, d, causal, precision),
                                  {**_CHOSEN[(n_q, n_k, d, causal, precision, tma)], "tma": tma})
    else:
        register_cap = {"maxnreg": config["maxnreg"]} if config.get("maxnreg") and not interpreting() else {}
        kernel = _tuned_kernel[grid](*args, **flags, BLOCK_M=config["BLOCK_M"], BLOCK_N=config["BLOCK_N"],
                                     num_warps=config.get("num_warps", 4),
                                     num_stages=config.get("num_stages", 1 if interpreting() else 3), **register_cap)
        if not interpreting():
            _LAST_KERNEL["kernel"] = kernel
    return o




#: Shapes this small are one or two tiles: every launch takes microseconds, so the first call does not
#: autotune (which would compile all of TUNED_CONFIGS, twice over for TMA) and takes this launch.
SMALL_SHAPE = 128
SMALL_LAUNCH = {"BLOCK_M": 32, "BLOCK_N": 32, "num_warps": 4, "num_stages": 2}


def gpu_name(q) -> str:
    """The name of the GPU holding ``q`` (the launch cache is kept per GPU model)."""
    import torch

    return torch.cuda.get_device_name(q.device)


def _known_launch(q, n_q, n_k, d, causal, precision) -> tuple[dict | None, bool | None]:
    """(config, tma) for a shape whose launch needs no autotuning: a small one, or one this GPU already
    tuned (``lab.measure.attention.launch_cache``); (None, None) otherwise. Recorded as the autotuner's
    pick would be, so :func:`best_config` reports it."""
    if max(n_q, n_k) <= SMALL_SHAPE:
        config, tma = dict(SMALL_LAUNCH), False
    else:
        config = launch_cache.lookup(gpu_name(q), launch_cache.forward_key(n_q, n_k, d, causal, precision))
        if config is None:
            return None, None
        tma = bool(config.pop("tma", False)) and tma_available()
    _CHOSEN[(n_q, n_k, d, causal, precision, tma)] = dict(config)
    _TMA_CHOICE[(n_q, n_k, d, causal, str(q.dtype), "known", True, True)] = tma
    return config, tma


def _power_of_two_from_16(value) -> bool:
    return isinstance(value, int) and value >= 16 and not value & (value - 1)


_LAST_KERNEL: dict = {}   # the compiled kernel of the last launch with a fixed config (for launch_resources)


def launch_resources() -> dict:
    """What the last fixed-config launch of the tuned kernel asked of each multiprocessor: registers per
    thread, spilled registers, shared memory, and how many of its programs fit on one multiprocessor
    at once (the CUDA occupancy calculator). Two resident programs can overlap one's matrix products
    with the other's softmax, which one program alone does not."""
    kernel = _LAST_KERNEL.get("kernel")
    if kernel is None:
        raise LabError("no fixed-config launch of the tuned kernel on a GPU yet: call tuned_forward(..., config=...) first")
    import ctypes

    threads = 32 * kernel.metadata.num_warps
    shared = kernel.metadata.shared
    resident = ctypes.c_int(-1)
    libcuda = ctypes.CDLL("libcuda.so.1")
    status = libcuda.cuOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(resident), ctypes.c_void_p(kernel.function),
                                                                 ctypes.c_int(threads), ctypes.c_size_t(shared))
    return {"registers": kernel.n_regs, "spills": kernel.n_spills, "shared_kib": round(shared / 1024, 1),
            "programs_per_sm": resident.value if status == 0 else None}


def best_config(n_q: int, n_k: int, head_dim: int, causal: bool, dtype_is_fp32: bool = False) -> dict | None:
    """The launch the tuned kernel settled on for this shape on a GPU (None before its first call)."""
    precision = "ieee" if dtype_is_fp32 else "tf32"
    for tma in (True, False):
        chosen = _CHOSEN.get((n_q, n_k, head_dim, causal, precision, tma))
        if chosen is not None and any(key[:4] == (n_q, n_k, head_dim, causal) and choice == tma
                                      for key, choice in _TMA_CHOICE.items()):
            return {**chosen, "tma": tma}
    return None
