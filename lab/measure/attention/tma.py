"""Tile loads by Hopper's tensor memory accelerator (TMA): whether this GPU has it, and the descriptors.

A tensor descriptor names a tensor's shape, strides and tile shape, so that one instruction copies a
whole tile into shared memory (and zero-fills rows past the end). The tuned kernel takes them made on
the host (``TensorDescriptor``) or makes them itself (``tl.make_tensor_descriptor``, which needs a
scratch allocator for the descriptors).
"""

from __future__ import annotations

import torch

from lab import LabError, env

env.use_triton_interpreter_without_gpu()

import triton  # noqa: E402

from lab.measure.attention.kernel_inputs import interpreting  # noqa: E402


def tma_available() -> bool:
    """Hopper (compute capability 9) or newer: tiles can be fetched by the tensor memory accelerator."""
    if interpreting():
        return False
    try:
        from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: F401
    except ImportError:
        return False
    return torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 9


def tma_mode(tma) -> int:
    """0: pointers, 1: host-side tensor descriptors, 2: descriptors made in the kernel."""
    if tma not in (False, True, "device"):
        raise LabError(f"tma must be False, True (host-side descriptors) or 'device', got {tma!r}")
    return 2 if tma == "device" else int(tma)


def _allocate(size: int, alignment: int, stream):
    return torch.empty(size, dtype=torch.int8, device="cuda")


def descriptors(tensors, mode: int, config, d: int):
    """Q, K, V, Out as the kernel takes them: pointers, or host-side TMA descriptors (mode 1)."""
    if mode == 2:
        triton.set_allocator(_allocate)  # device-side descriptors live in a scratch buffer Triton asks for
    if mode != 1:
        return tensors
    from triton.tools.tensor_descriptor import TensorDescriptor

    bm, bn = (config["BLOCK_M"], config["BLOCK_N"]) if config else (16, 16)  # the autotuner re-sets them
    return tuple(TensorDescriptor.from_tensor(t, [1, 1, rows, d]) for t, rows in zip(tensors, (bm, bn, bn, bm), strict=True))
