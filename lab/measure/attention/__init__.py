"""Attention, built up step by step: the naive reference, NumPy tiles with an online softmax,
FlashAttention forward in Triton, its backward (P recomputed), split-KV decode in Triton, and the forward a
server calls (:mod:`paged_prefill`: packed varlen chunks over a cached prefix in paged K/V).

Shapes follow torch's SDPA: ``q`` is (batch, q_heads, n_q, d); ``k`` and ``v`` are
(batch, kv_heads, n_k, d), with ``q_heads`` a multiple of ``kv_heads`` (grouped-query attention:
query head ``h`` reads KV head ``h // (q_heads // kv_heads)``). A causal mask aligns the queries to the
end of the keys (query ``i`` sees keys ``0 .. i + n_k - n_q``), as in decode over a KV cache.
"""
