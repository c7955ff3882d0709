"""Which launch the tuned forward kernel takes for a shape, and what the last one asked of the GPU.

A default call of :func:`lab.measure.attention.tuned.tuned_forward` on a GPU takes a known launch if there is
one (:data:`SMALL_LAUNCH` for a small shape, or the pick this GPU model made before, kept in
:mod:`lab.measure.attention.launch_cache`); otherwise Triton's autotuner picks, and on Hopper the pointer and
TMA versions are timed once per shape and the faster kept. Every pick is recorded for :func:`best_config`.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

from lab import LabError, env
from lab.measure.attention import launch_cache

env.use_triton_interpreter_without_gpu()

from triton.testing import do_bench  # noqa: E402

from lab.measure.attention.tma import tma_available  # noqa: E402

#: Shapes this small are one or two tiles: every launch takes microseconds, so the first call does not
#: autotune (which would compile all of TUNED_CONFIGS, twice over for TMA) and takes this launch.
SMALL_SHAPE = 128
SMALL_LAUNCH = {"BLOCK_M": 32, "BLOCK_N": 32, "num_warps": 4, "num_stages": 2}

_CHOSEN: dict[tuple, dict] = {}      # (n_q, n_k, d, causal, precision, tma) -> the autotuner's (or known) pick
_TMA_CHOICE: dict[tuple, bool] = {}  # (n_q, n_k, d, causal, dtype, how it was chosen...) -> TMA loads or not
_LAST_KERNEL: dict = {}              # the compiled kernel of the last launch with a fixed config


def known_launch(gpu: str, n_q: int, n_k: int, d: int, causal: bool, precision: str,
                 dtype) -> tuple[dict | None, bool | None]:
    """(config, tma) for a shape whose launch needs no autotuning: a small one, or one this GPU already
    tuned (``lab.measure.attention.launch_cache``); (None, None) otherwise. Recorded as the autotuner's
    pick would be, so :func:`best_config` reports it."""
    if max(n_q, n_k) <= SMALL_SHAPE:
        config, tma = dict(SMALL_LAUNCH), False
    else:
        config = launch_cache.lookup(gpu, launch_cache.forward_key(n_q, n_k, d, causal, precision))
        if config is None:
            return None, None
        tma = bool(config.pop("tma", False)) and tma_available()
    _CHOSEN[(n_q, n_k, d, causal, precision, tma)] = dict(config)
    _TMA_CHOICE[(n_q, n_k, d, causal, str(dtype), "known")] = tma
    return config, tma


def faster_loads(run: Callable[[bool], object], n_q: int, n_k: int, d: int, causal: bool, dtype, config,
                 switches) -> bool:
    """On Hopper, time the pointer and the TMA versions once per shape (``run(tma)`` launches one) and keep
    the faster."""
    key = (n_q, n_k, d, causal, str(dtype), str(config), switches)
    if key not in _TMA_CHOICE:
        times = {tma: do_bench(lambda tma=tma: run(tma), warmup=5, rep=50, return_mode="median")
                 for tma in (False, True)}
        _TMA_CHOICE[key] = times[True] < times[False]
    return _TMA_CHOICE[key]


def record_autotuned(best, n_q: int, n_k: int, d: int, causal: bool, precision: str, tma: bool,
                     gpu: str | None) -> None:
    """Keep the autotuner's pick (``best``, a ``triton.Config``) for :func:`best_config`, and in the launch
    cache of ``gpu`` when it was a default call's choice (``gpu`` None: not remembered)."""
    chosen = {**best.kwargs, "num_warps": best.num_warps, "num_stages": best.num_stages,
              **({"maxnreg": best.maxnreg} if best.maxnreg else {})}
    _CHOSEN[(n_q, n_k, d, causal, precision, tma)] = chosen
    launch_cache.remember(gpu, launch_cache.forward_key(n_q, n_k, d, causal, precision), {**chosen, "tma": tma})


def best_config(n_q: int, n_k: int, head_dim: int, causal: bool, dtype_is_fp32: bool = False) -> dict | None:
    """The launch the tuned kernel settled on for this shape on a GPU (None before its first call)."""
    precision = "ieee" if dtype_is_fp32 else "tf32"
    for tma in (True, False):
        chosen = _CHOSEN.get((n_q, n_k, head_dim, causal, precision, tma))
        if chosen is not None and any(key[:4] == (n_q, n_k, head_dim, causal) and choice == tma
                                      for key, choice in _TMA_CHOICE.items()):
            return {**chosen, "tma": tma}
    return None


def keep_last_launch(kernel) -> None:
    """Remember the compiled kernel of a fixed-config launch on the GPU, for :func:`launch_resources`."""
    _LAST_KERNEL["kernel"] = kernel


def launch_resources() -> dict:
    """What the last fixed-config launch of the tuned kernel asked of each multiprocessor: registers per
    thread, spilled registers, shared memory, and how many of its programs fit on one multiprocessor
    at once (the CUDA occupancy calculator). Two resident programs can overlap one's matrix products
    with the other's softmax, which one program alone does not."""
    kernel = _LAST_KERNEL.get("kernel")
    if kernel is None:
        raise LabError("no fixed-config launch of the tuned kernel on a GPU yet: call tuned_forward(..., config=...) first")
    threads = 32 * kernel.metadata.num_warps
    shared = kernel.metadata.shared
    resident = ctypes.c_int(-1)
    libcuda = ctypes.CDLL("libcuda.so.1")
    status = libcuda.cuOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(resident), ctypes.c_void_p(kernel.function),
                                                                 ctypes.c_int(threads), ctypes.c_size_t(shared))
    return {"registers": kernel.n_regs, "spills": kernel.n_spills, "shared_kib": round(shared / 1024, 1),
            "programs_per_sm": resident.value if status == 0 else None}
