"""What lab's Triton attention kernels (forward and decode) take, and where they run: the input check, the
strides a kernel is given, the GPU's name (launches are remembered per GPU model) and whether Triton's CPU
interpreter runs them (importing this module before Triton sets the interpreter up where there is no GPU).
"""

from __future__ import annotations

import os

from lab import LabError, env
from lab.measure.attention.reference import check_shapes

env.use_triton_interpreter_without_gpu()

import torch  # noqa: E402

from lab.measure import triton_interpreter  # noqa: E402


def interpreting() -> bool:
    """Triton's CPU interpreter runs the kernels (no GPU, or TRITON_INTERPRET=1)."""
    return os.environ.get("TRITON_INTERPRET") == "1"


if interpreting():
    triton_interpreter.apply()


def check_inputs(q, k, v, causal: bool):
    """Validate tensors for the Triton kernels; returns (q, k, v) with unit last stride and the sizes
    (batch, q_heads, kv_heads, n_q, n_k, d)."""
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


def dot_precision(dtype) -> str:
    """``tl.dot``'s input precision: fp32 inputs get exact fp32 products ("ieee"); 16-bit inputs are exact anyway."""
    return "ieee" if dtype == torch.float32 else "tf32"


def strides(q, k, v, o) -> tuple[int, ...]:
    """The batch, head and row strides of Q, K, V and O, in the order the forward kernels take them."""
    return (*q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *o.stride()[:3])


def gpu_name(q) -> str:
    """The name of the GPU holding ``q`` (the launch cache is kept per GPU model)."""
    return torch.cuda.get_device_name(q.device)
