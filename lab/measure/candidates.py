"""The attention candidates the kernel benchmark times, the shapes it times them on, and their inputs.

Candidates: naive (torch SDPA's math backend: the score matrix in memory), torch SDPA with the flash and
cuDNN backends, FlexAttention (torch.compile'd), and this book's Triton kernels (teaching and tuned).
Each takes ``(q, k, v, causal)`` with q ``[batch, q_heads, n_q, d]`` and k, v ``[batch, kv_heads, n, d]``.

Peers (:data:`PEERS`): FlashAttention itself, as serving engines run it -- FA2 and FA3 from vLLM's bundled
``vllm_flash_attn`` (``flash_attn_varlen_func(..., fa_version=2 | 3)``, the call vLLM's FLASH_ATTN backend
makes), FA4's CuTeDSL kernel (``flash_attn.cute.flash_attn_func`` from the ``flash-attn-4`` wheel) and
FlexAttention with ``kernel_options={"BACKEND": "FLASH"}`` (torch 2.11 lowers it to that same CuTeDSL
kernel). Their inputs take another layout (tokens before heads), so each is a :class:`Prepared`: the
layout change is made once per input set, outside any timing, and undone only to check the output.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from lab import LabError
from lab.measure.attention.reference import attention_flops

CANDIDATES = ("naive", "sdpa-flash", "sdpa-cudnn", "flex", "ours-teaching", "ours-tuned")
OURS = ("ours-teaching", "ours-tuned")
PEERS = ("fa2", "fa3", "fa4", "flex-flash")
ALL_CANDIDATES = CANDIDATES + PEERS
#: Ours on Hopper only: the Gluon kernel (lab.measure.attention.hopper), FA3's schedule written by hand, launched a
#: program per query tile or (persistent, its balanced plan) a program per multiprocessor
HOPPER_ONLY = ("ours-hopper", "ours-persistent")
MAX_ABS_ERR = 2e-2  # bf16 outputs against the fp32 reference


@dataclass(frozen=True)
class Shape:
    phase: str          # "prefill" or "decode"
    batch: int
    q_heads: int
    kv_heads: int
    n: int              # prompt length (prefill) or cached context (decode)
    head_dim: int = 128

    @property
    def n_q(self) -> int:
        return self.n if self.phase == "prefill" else 1

    @property
    def causal(self) -> bool:
        return self.phase == "prefill"

    def flops(self) -> float:
        return attention_flops(self.batch, self.q_heads, self.n_q, self.n, self.head_dim, self.causal)

    def min_bytes(self, element_bytes: int = 2) -> int:
        """Each input read once, the output written once (the least any kernel must move)."""
        q_and_o = 2 * self.batch * self.q_heads * self.n_q * self.head_dim
        k_and_v = 2 * self.batch * self.kv_heads * self.n * self.head_dim
        return (q_and_o + k_and_v) * element_bytes


def _sdpa(backend_name: str):
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = getattr(SDPBackend, backend_name)

    def run(q, k, v, causal):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    return run


@dataclass(frozen=True)
class Prepared:
    """A candidate whose kernel wants another input layout.

    ``prepare(q, k, v)`` returns the kernel's arguments (made once per input set, outside timing);
    ``run(*args, causal)`` is what is timed; ``restore(out, q)`` turns its output back into q's layout,
    for the check against the reference only. Calling it does all three (for one-off calls)."""

    run: Callable
    prepare: Callable
    restore: Callable

    def __call__(self, q, k, v, causal):
        return self.restore(self.run(*self.prepare(q, k, v), causal), q)


def timed_call(fn, q, k, v, causal) -> Callable:
    """A no-argument call of candidate ``fn`` on (q, k, v) with any layout change already made."""
    if isinstance(fn, Prepared):
        args = fn.prepare(q, k, v)
        return lambda: fn.run(*args, causal)
    return lambda: fn(q, k, v, causal)


def _tokens_first(t):
    """[batch, heads, n, d] -> [batch * n, heads, d], the packed-token layout of vLLM's varlen calls."""
    return t.transpose(1, 2).reshape(t.shape[0] * t.shape[2], t.shape[1], t.shape[3]).contiguous()


def _varlen_prepare(q, k, v):
    import torch

    batch, n_q, n_k = q.shape[0], q.shape[2], k.shape[2]
    starts = torch.arange(batch + 1, dtype=torch.int32, device=q.device)
    return _tokens_first(q), _tokens_first(k), _tokens_first(v), starts * n_q, starts * n_k, n_q, n_k


def _varlen_restore(out, q):
    batch, heads, n_q, d = q.shape
    return out.view(batch, n_q, heads, d).transpose(1, 2)


def _vllm_flash_attn(version: int) -> Prepared:
    """FA2 or FA3 through vLLM's bundled ``vllm_flash_attn`` (the kernels of vLLM's FLASH_ATTN backend)."""
    from vllm.vllm_flash_attn import flash_attn_varlen_func

    def run(q, k, v, cu_q, cu_k, n_q, n_k, causal):
        return flash_attn_varlen_func(q, k, v, max_seqlen_q=n_q, cu_seqlens_q=cu_q, max_seqlen_k=n_k,
                                      cu_seqlens_k=cu_k, causal=causal, fa_version=version)
    return Prepared(run, _varlen_prepare, _varlen_restore)


def _fa4() -> Prepared:
    """FlashAttention 4's CuTeDSL kernel (``flash-attn-4``; on Hopper it runs ``flash_fwd_sm90``)."""
    from flash_attn.cute import flash_attn_func

    def run(q, k, v, causal):
        out = flash_attn_func(q, k, v, causal=causal)
        return out[0] if isinstance(out, tuple) else out
    return Prepared(run, lambda q, k, v: tuple(t.transpose(1, 2).contiguous() for t in (q, k, v)),
                    lambda out, q: out.transpose(1, 2))


_FLEX = {}


def _flex_flash(q, k, v, causal):
    """FlexAttention lowered to FA4's CuTeDSL kernel (torch 2.11: ``kernel_options={"BACKEND": "FLASH"}``)."""
    return _flex(q, k, v, causal, kernel_options={"BACKEND": "FLASH"})


def _flex(q, k, v, causal, kernel_options=None):
    import torch
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    if "fn" not in _FLEX:
        torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 64)
        _FLEX["fn"] = torch.compile(flex_attention)
    mask = None
    if causal:
        key = (q.shape[2], k.shape[2])
        if key not in _FLEX:
            _FLEX[key] = create_block_mask(lambda b, h, qi, ki: qi >= ki, None, None, key[0], key[1], device=q.device)
        mask = _FLEX[key]
    if kernel_options:
        return _FLEX["fn"](q, k, v, block_mask=mask, enable_gqa=True, kernel_options=kernel_options)
    return _FLEX["fn"](q, k, v, block_mask=mask, enable_gqa=True)


def candidate_fn(name: str, phase: str) -> Callable:
    from lab.measure.attention import (  # lazy: the kernels load triton and torch
        split_kv,
        split_kv_tuned,
        teaching,
        tuned,
    )

    if name == "naive":
        return _sdpa("MATH")
    if name == "sdpa-flash":
        return _sdpa("FLASH_ATTENTION")
    if name == "sdpa-cudnn":
        return _sdpa("CUDNN_ATTENTION")
    if name == "flex":
        return _flex
    if name == "flex-flash":
        return _flex_flash
    if name in ("fa2", "fa3"):
        return _vllm_flash_attn(int(name[-1]))
    if name == "fa4":
        return _fa4()
    if name == "ours-hopper" and phase == "prefill":
        from lab.measure.attention import hopper  # lazy: the kernels load triton and torch
        return lambda q, k, v, causal: hopper.hopper_forward(q, k, v, causal)
    if name == "ours-persistent" and phase == "prefill":
        from lab.measure.attention import hopper_persistent
        return lambda q, k, v, causal: hopper_persistent.persistent_forward(q, k, v, causal)
    if name not in OURS:
        raise LabError(f"no {phase} candidate {name!r}; choose from {', '.join(ALL_CANDIDATES + HOPPER_ONLY)}")
    if phase == "decode":
        fn = split_kv.teaching_decode if name == "ours-teaching" else split_kv_tuned.tuned_decode
        return lambda q, k, v, causal: fn(q, k, v)
    fn = teaching.teaching_forward if name == "ours-teaching" else tuned.tuned_forward
    return lambda q, k, v, causal: fn(q, k, v, causal)


def naive_bytes_needed(shape: Shape) -> int:
    """Rough peak memory of the math backend: the bf16 scores, their softmax and a copy, plus the mask."""
    matrix = shape.batch * shape.q_heads * shape.n_q * shape.n
    return 3 * 2 * matrix + shape.n_q * shape.n


def inputs(shape: Shape, seed: int, device: str = "cuda", dtype=None):
    """q, k, v for ``shape``: standard normal, reproducible from ``seed``, bf16 unless ``dtype`` says otherwise."""
    import torch

    gen = torch.Generator(device=device).manual_seed(seed)

    def make(h, n):
        return torch.randn(shape.batch, h, n, shape.head_dim, generator=gen, device=device).to(dtype or torch.bfloat16)
    return make(shape.q_heads, shape.n_q), make(shape.kv_heads, shape.n), make(shape.kv_heads, shape.n)


#: The old private name, kept while other modules move to :func:`inputs`.
_inputs = inputs


def tuned_config(shape: Shape, dtype) -> str:
    """The launch the tuned kernel chose for this shape, as 'KEY=value ...'."""
    from lab.measure.attention import launch_policy, split_kv_tuned  # lazy: the kernels load triton and torch

    if shape.phase == "prefill":
        config = launch_policy.best_config(shape.n, shape.n, shape.head_dim, True)
    else:
        config = split_kv_tuned.best_decode_config(shape.batch, shape.q_heads, shape.kv_heads, shape.n, shape.head_dim, dtype)
    return " ".join(f"{key}={val}" for key, val in (config or {}).items())
