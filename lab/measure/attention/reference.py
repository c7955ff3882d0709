"""Naive attention: materialise the whole score matrix, softmax it, multiply by V.

This is the ground truth every faster version is checked against. It works on NumPy arrays (any
float dtype; pass float64 for exactness) and on torch tensors (computed in float32 or float64 on
the tensors' device, in query chunks so that long sequences fit in memory).
"""

from __future__ import annotations

import math

import numpy as np

from lab import LabError

#: log2(e): exp(x) = exp2(x * LOG2E), so a kernel that uses exp2 has its softmax scale carry it.
LOG2E = 1.4426950408889634


def softmax_scale(head_dim: int, scale: float | None = None) -> float:
    """The factor scores are multiplied by before the softmax: ``scale``, or 1/sqrt(head_dim) by default."""
    return 1.0 / math.sqrt(head_dim) if scale is None else scale


def check_shapes(q_shape, k_shape, v_shape, causal: bool) -> tuple[int, int, int, int, int, int]:
    """Validate (batch, heads, n, d) shapes; return (batch, q_heads, kv_heads, n_q, n_k, d)."""
    if len(q_shape) != 4 or len(k_shape) != 4 or len(v_shape) != 4:
        raise LabError(f"q, k, v must be 4-D (batch, heads, n, d); got shapes {tuple(q_shape)}, {tuple(k_shape)}, {tuple(v_shape)}")
    batch, q_heads, n_q, d = q_shape
    if tuple(k_shape) != tuple(v_shape):
        raise LabError(f"k and v must have the same shape; got {tuple(k_shape)} and {tuple(v_shape)}")
    kb, kv_heads, n_k, kd = k_shape
    if kb != batch or kd != d:
        raise LabError(f"k's batch and head dim must match q's; got q {tuple(q_shape)} and k {tuple(k_shape)}")
    if kv_heads == 0 or q_heads % kv_heads:
        raise LabError(f"query heads ({q_heads}) must be a multiple of KV heads ({kv_heads})")
    if causal and n_q > n_k:
        raise LabError(f"causal attention with more queries ({n_q}) than keys ({n_k}) leaves rows with no key to see")
    return batch, q_heads, kv_heads, n_q, n_k, d


def causal_mask(n_q: int, n_k: int) -> np.ndarray:
    """Boolean (n_q, n_k) mask, True where query i may see key j (queries aligned to the end of the keys)."""
    rows = np.arange(n_q)[:, None] + (n_k - n_q)
    return np.arange(n_k)[None, :] <= rows


def attention_numpy(q, k, v, causal: bool = False, scale: float | None = None) -> np.ndarray:
    """softmax(q k^T * scale) v with the full score matrix in memory, in q's dtype (float64 for exactness)."""
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    _, q_heads, kv_heads, n_q, n_k, d = check_shapes(q.shape, k.shape, v.shape, causal)
    scale = softmax_scale(d, scale)
    group = q_heads // kv_heads
    k = np.repeat(k, group, axis=1)  # every query head gets its own copy of its KV head
    v = np.repeat(v, group, axis=1)
    scores = np.einsum("bhqd,bhkd->bhqk", q, k) * scale
    if causal:
        scores = np.where(causal_mask(n_q, n_k), scores, -np.inf)
    scores = scores - scores.max(axis=-1, keepdims=True)  # subtract the row max so exp never overflows
    weights = np.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    return np.einsum("bhqk,bhkd->bhqd", weights, v).astype(q.dtype, copy=False)


def attention_torch(q, k, v, causal: bool = False, scale: float | None = None, *,
                    compute_dtype=None, chunk_bytes: int = 2 << 30, return_lse: bool = False):
    """The same on torch tensors: upcast (float32 by default), chunk the queries, return q's dtype.

    Each chunk still materialises its rows of the score matrix (chunk x n_k per head); chunking only
    bounds the memory, so a 32k-token reference fits on one GPU. ``return_lse=True`` returns
    ``(out, lse)`` with ``lse`` each row's log-sum-exp of its scaled scores (natural log, in the compute
    dtype, shape [batch, q_heads, n_q]): what a FlashAttention forward saves for its backward.
    """
    import torch

    batch, q_heads, kv_heads, n_q, n_k, d = check_shapes(q.shape, k.shape, v.shape, causal)
    compute_dtype = compute_dtype or torch.float32
    scale = softmax_scale(d, scale)
    group = q_heads // kv_heads
    # (batch, kv_heads, group, n, d): the query heads of a group broadcast against their one KV head,
    # so K and V are never copied per query head
    kc = k.to(compute_dtype)[:, :, None]
    vc = v.to(compute_dtype)[:, :, None]
    qg = q.reshape(batch, kv_heads, group, n_q, d)
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    og = out.view(batch, kv_heads, group, n_q, d)
    bytes_per_row = batch * q_heads * n_k * torch.finfo(compute_dtype).bits // 8 * 2  # scores + probabilities
    chunk = max(1, min(n_q, chunk_bytes // max(1, bytes_per_row)))
    lse = torch.empty(batch, kv_heads, group, n_q, dtype=compute_dtype, device=q.device) if return_lse else None
    key_pos = torch.arange(n_k, device=q.device)
    for start in range(0, n_q, chunk):
        stop = min(n_q, start + chunk)
        scores = torch.matmul(qg[:, :, :, start:stop].to(compute_dtype), kc.transpose(-1, -2)) * scale
        if causal:
            visible = key_pos[None, :] <= torch.arange(start, stop, device=q.device)[:, None] + (n_k - n_q)
            scores.masked_fill_(~visible, float("-inf"))
        og[:, :, :, start:stop] = torch.matmul(torch.softmax(scores, dim=-1), vc).to(q.dtype)
        if return_lse:
            lse[:, :, :, start:stop] = torch.logsumexp(scores, dim=-1)
        del scores
    return (out, lse.view(batch, q_heads, n_q)) if return_lse else out


def attention_gradients_torch(q, k, v, d_out, causal: bool = False, scale: float | None = None, *,
                              compute_dtype=None, chunk_bytes: int = 2 << 30):
    """(dq, dk, dv): torch's autograd through :func:`attention_torch`, upcast (float32 by default), for the
    upstream gradient ``d_out`` (q's shape). The ground truth every backward kernel is checked against.

    One query chunk at a time, so that a 32k-token reference fits on one GPU: a chunk's output depends on
    its own queries and on the keys they may see, so each chunk's backward gives its rows of dq and adds
    its share to dk and dv (with a causal mask its keys are cut where its last query stops seeing).
    """
    import torch

    batch, q_heads, kv_heads, n_q, n_k, d = check_shapes(q.shape, k.shape, v.shape, causal)
    if tuple(d_out.shape) != tuple(q.shape):
        raise LabError(f"d_out must have q's shape {tuple(q.shape)}; got {tuple(d_out.shape)}")
    compute_dtype = compute_dtype or torch.float32
    kc = k.detach().to(compute_dtype).requires_grad_()
    vc = v.detach().to(compute_dtype).requires_grad_()
    dq = torch.empty(q.shape, dtype=compute_dtype, device=q.device)
    # the autograd graph of a chunk holds ~4 chunk x n_k matrices per head (scores, probabilities, their grads)
    bytes_per_row = 4 * batch * q_heads * n_k * torch.finfo(compute_dtype).bits // 8
    chunk = max(1, min(n_q, chunk_bytes // max(1, bytes_per_row)))
    for start in range(0, n_q, chunk):
        stop = min(n_q, start + chunk)
        keys = stop + (n_k - n_q) if causal else n_k
        qc = q[:, :, start:stop].detach().to(compute_dtype).requires_grad_()
        out = attention_torch(qc, kc[:, :, :keys], vc[:, :, :keys], causal, scale, compute_dtype=compute_dtype,
                              chunk_bytes=chunk_bytes)
        out.backward(d_out[:, :, start:stop].to(compute_dtype))
        dq[:, :, start:stop] = qc.grad
        del out, qc
    return dq, kc.grad, vc.grad


def attention(q, k, v, causal: bool = False, scale: float | None = None):
    """Naive attention on NumPy arrays or torch tensors (dispatches on the type of ``q``)."""
    if isinstance(q, np.ndarray):
        return attention_numpy(q, k, v, causal, scale)
    return attention_torch(q, k, v, causal, scale)


def attention_flops(batch: int, q_heads: int, n_q: int, n_k: int, d: int, causal: bool) -> float:
    """Matrix-multiply FLOPs of the forward pass: 2 products of 2*n_q*n_k*d each, per head.

    With a causal mask (n_q == n_k) only half of the score matrix is needed, so half is counted:
    the convention FlashAttention's papers and benchmarks use.
    """
    full = 4.0 * batch * q_heads * n_q * n_k * d
    return full / 2 if causal else full


def max_errors(forward, n: int = 50, q_heads: int = 4, kv_heads: int = 2, head_dim: int = 64, dtype=None,
               device: str = "cpu", seed: int = 0) -> dict[str, float]:
    """How far ``forward(q, k, v, causal)`` lands from this reference in float64, on random inputs of one
    sequence (``n`` queries and keys, ``q_heads`` query heads over ``kv_heads`` KV heads): the largest
    absolute error of the output, ``{"no mask": ..., "causal": ...}``. What each kernel's ``check()`` runs."""
    import torch

    gen = torch.Generator(device=device).manual_seed(seed)
    q, k, v = (torch.randn(1, heads, n, head_dim, generator=gen, device=device).to(dtype or torch.float32)
               for heads in (q_heads, kv_heads, kv_heads))
    exact = lambda causal: attention_torch(q.double(), k.double(), v.double(), causal, compute_dtype=torch.float64)
    return {mask: (forward(q, k, v, causal).double() - exact(causal)).abs().max().item()
            for mask, causal in (("no mask", False), ("causal", True))}


def decode_errors(decode, n_k: int = 300, splits=(1, 3, 7), dtype=None, device: str = "cpu",
                  seed: int = 1) -> dict[str, float]:
    """How far ``decode(q, k, v, num_splits)`` lands from this reference in float64, on one random decode step
    (2 sequences of ``n_k`` cached tokens, 8 query heads over 2 KV heads, head dim 64), the cache cut into each
    number of ``splits``: the largest absolute error of the output, ``{"1 piece": ..., "3 pieces": ...}``. What
    each decode kernel's ``check()`` runs."""
    import torch

    gen = torch.Generator(device=device).manual_seed(seed)
    q, k, v = (torch.randn(2, heads, n, 64, generator=gen, device=device).to(dtype or torch.float32)
               for heads, n in ((8, 1), (2, n_k), (2, n_k)))
    exact = attention_torch(q.double(), k.double(), v.double(), compute_dtype=torch.float64)
    return {f"{pieces} piece{'s' if pieces > 1 else ''}": (decode(q, k, v, pieces).double() - exact).abs().max().item()
            for pieces in splits}


def paged_varlen_attention_torch(q, k_cache, v_cache, cu_seqlens_q, seq_lens, block_table, scale: float | None = None,
                                 *, compute_dtype=None):
    """The same for a server's batch: packed queries of many sequences over a paged KV cache (vLLM's layout).

    ``q`` is (total query tokens, q_heads, d), sequence ``b``'s queries being rows ``cu_seqlens_q[b] ..
    cu_seqlens_q[b + 1]``; ``k_cache``, ``v_cache`` are (num_pages, page_size, kv_heads, d), token ``t`` of
    sequence ``b`` at row ``t % page_size`` of page ``block_table[b, t // page_size]``; ``seq_lens[b]`` counts
    its keys, the cached prefix and the new queries together. Each sequence's pages are gathered into one
    contiguous K and V and run through :func:`attention_torch` with its causal mask aligned to the end of the
    keys (bottom-right): query ``i`` of a chunk of ``q_len`` sees keys ``0 .. seq_len - q_len + i``.
    Returns the packed output, q's shape and dtype.
    """
    import torch

    out = torch.empty_like(q)
    page_size = k_cache.shape[1]
    starts = cu_seqlens_q.tolist()
    for b, n_k in enumerate(seq_lens.tolist()):
        start, stop = starts[b], starts[b + 1]
        if stop == start:
            continue
        pages = block_table[b, : -(-n_k // page_size)].long()
        # (pages, page_size, kv_heads, d) -> (1, kv_heads, n_k, d)
        k, v = (cache[pages].flatten(0, 1)[:n_k].transpose(0, 1)[None] for cache in (k_cache, v_cache))
        out[start:stop] = attention_torch(q[start:stop].transpose(0, 1)[None], k, v, causal=True, scale=scale,
                                          compute_dtype=compute_dtype)[0].transpose(0, 1)
    return out
