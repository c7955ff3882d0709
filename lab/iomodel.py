"""Bytes moved through HBM by attention: standard (the n×n matrix goes to memory) vs tiled (FlashAttention).

Counts are for the forward pass and count only traffic to and from device memory (HBM); what the
kernel keeps in registers or shared memory is free here. Caches (L2) are ignored: the model is an
upper bound on what a kernel must move, as in the FlashAttention paper (Dao et al., 2022,
"FlashAttention: Fast and Memory-Efficient Exact Attention with IO-Awareness", arXiv:2205.14135).
"""

from __future__ import annotations

from lab import LabError


def _positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise LabError(f"{name} must be a positive integer, got {value!r}")
    return value


# --- tiled attention: the closed form the instrumented NumPy kernel is tested against -----------

def visited_key_tiles(q_start: int, q_end: int, n_q: int, n_k: int, block_k: int, causal: bool) -> range:
    """Key tiles a query tile [q_start, q_end) must visit.

    Without a mask: all of them. With a causal mask, query row i (0-based) sees keys
    0 .. i + (n_k - n_q): queries are aligned to the end of the keys, as in decode over a KV cache
    (for n_q == n_k this is the usual lower triangle). A key tile is visited when its first key is
    visible to the tile's last query, i.e. key tile start <= query tile end.
    """
    n_tiles = -(-n_k // block_k)
    if not causal:
        return range(n_tiles)
    last_visible_key = (q_end - 1) + (n_k - n_q)  # position of the last key the last query row may see
    if last_visible_key < 0:
        return range(0)
    return range(min(n_tiles, last_visible_key // block_k + 1))


def tiled_attention_hbm_bytes(n_q: int, n_k: int, d: int, block_q: int, block_k: int,
                              bytes_per_element: int, causal: bool) -> int:
    """HBM bytes moved by one head of tiled (FlashAttention-2 order) attention, forward pass.

    Counted, per query tile (outer loop): its Q tile read once; each K tile and V tile it visits read
    once (causal: only key tiles that intersect the visible triangle, i.e. key tile start <= query tile
    end); its O tile written once. Tiles at the end may be partial and count their real rows. Softmax
    statistics (running max and sum, log-sum-exp) are not counted: they are O(n) and fp32, not part of
    this interface.
    """
    n_q, n_k, d = _positive_int("n_q", n_q), _positive_int("n_k", n_k), _positive_int("d", d)
    block_q, block_k = _positive_int("block_q", block_q), _positive_int("block_k", block_k)
    bpe = _positive_int("bytes_per_element", bytes_per_element)
    if causal and n_q > n_k:
        raise LabError(f"causal attention with more queries ({n_q}) than keys ({n_k}) leaves rows with no key to see")
    elements = 0
    for q_start in range(0, n_q, block_q):
        q_end = min(q_start + block_q, n_q)
        rows = q_end - q_start
        elements += 2 * rows * d  # Q tile in, O tile out
        tiles = visited_key_tiles(q_start, q_end, n_q, n_k, block_k, causal)
        keys = min(len(tiles) * block_k, n_k)  # the visited tiles are the first len(tiles), last maybe partial
        elements += 2 * keys * d  # each visited K tile and V tile
    return elements * bpe
