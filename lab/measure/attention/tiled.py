"""Attention over tiles with an online softmax, in NumPy: FlashAttention's algorithm without a GPU.

For each tile of queries, walk the key/value tiles once, keeping per query row a running maximum
``m``, a running sum of exponentials ``l`` and an unnormalised output ``acc``. When a new tile raises
the maximum, everything accumulated so far is rescaled by ``exp(m_old - m_new)``; at the end,
``acc / l`` is exactly softmax(QK^T)V. The n_q x n_k score matrix never exists: only one
block_q x block_k tile of it at a time.

:func:`tiled_attention_traffic` runs the same loop and also counts the bytes each tile reads from
and writes to "HBM" (the input and output arrays), to check against :mod:`lab.results.iomodel`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lab import positive_int
from lab.measure.attention.reference import check_shapes, softmax_scale


@dataclass
class TileTraffic:
    """Bytes moved between the arrays (HBM) and the working tiles (on-chip), per tile step."""

    steps: list[tuple[int, int, int, int, int, int]] = field(default_factory=list)
    # each step: (batch, head, q_tile, k_tile or -1 for the query tile's own Q read / O write, bytes read, bytes written)

    def add(self, b: int, h: int, q_tile: int, k_tile: int, read: int, written: int) -> None:
        self.steps.append((b, h, q_tile, k_tile, read, written))

    @property
    def bytes_read(self) -> int:
        return sum(s[4] for s in self.steps)

    @property
    def bytes_written(self) -> int:
        return sum(s[5] for s in self.steps)

    @property
    def total_bytes(self) -> int:
        return self.bytes_read + self.bytes_written



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


def attend_one_query_tile(q_tile, k, v, q_start, n_q, n_k, scale, causal, block_k, on_key_tile=None):
    """Online softmax of one query tile (rows q_start..) over the key tiles it must visit; returns O tile."""
    rows = q_tile.shape[0]
    state = np.promote_types(q_tile.dtype, np.float32)    # the running state in fp32 at least, as a GPU kernel keeps it
    m = np.full(rows, -np.inf, dtype=state)                # running max of each row's scores
    row_sum = np.zeros(rows, dtype=state)                  # running sum of exp(score - m)
    acc = np.zeros(q_tile.shape, dtype=state)              # running sum of exp(score - m) * v
    row_pos = np.arange(q_start, q_start + rows)[:, None] + (n_k - n_q)
    for t in visited_key_tiles(q_start, q_start + rows, n_q, n_k, block_k, causal):
        k_start, k_stop = t * block_k, min(n_k, (t + 1) * block_k)
        k_tile, v_tile = k[k_start:k_stop], v[k_start:k_stop]
        if on_key_tile is not None:
            on_key_tile(t, k_tile.nbytes + v_tile.nbytes)
        s = (q_tile @ k_tile.T) * scale                    # one block_q x block_k tile of the scores
        if causal:
            s = np.where(np.arange(k_start, k_stop)[None, :] <= row_pos, s, -np.inf)
        m_new = np.maximum(m, s.max(axis=1))               # finite: key tile 0 is visible to every row
        rescale = np.exp(m - m_new)                        # shrink what was summed under the old max
        p = np.exp(s - m_new[:, None])
        row_sum = row_sum * rescale + p.sum(axis=1)
        acc = acc * rescale[:, None] + p @ v_tile
        m = m_new
    return (acc / row_sum[:, None]).astype(q_tile.dtype)   # O written in the inputs' dtype


def _tiled(q, k, v, causal, block_q, block_k, scale, traffic: TileTraffic | None):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    batch, q_heads, kv_heads, n_q, n_k, d = check_shapes(q.shape, k.shape, v.shape, causal)
    positive_int("block_q", block_q), positive_int("block_k", block_k)
    scale = softmax_scale(d, scale)
    group = q_heads // kv_heads
    out = np.empty_like(q)
    for b in range(batch):
        for h in range(q_heads):
            kh, vh = k[b, h // group], v[b, h // group]
            for i, q_start in enumerate(range(0, n_q, block_q)):
                q_tile = q[b, h, q_start:q_start + block_q]
                hook = None
                if traffic is not None:
                    def hook(t, nbytes, b=b, h=h, i=i):
                        traffic.add(b, h, i, t, nbytes, 0)
                o_tile = attend_one_query_tile(q_tile, kh, vh, q_start, n_q, n_k, scale, causal, block_k, hook)
                out[b, h, q_start:q_start + block_q] = o_tile
                if traffic is not None:
                    traffic.add(b, h, i, -1, q_tile.nbytes, o_tile.nbytes)
    return out


def tiled_attention(q, k, v, causal: bool = False, block_q: int = 64, block_k: int = 64,
                    scale: float | None = None) -> np.ndarray:
    """Attention computed tile by tile with an online softmax; same result as the naive reference."""
    return _tiled(q, k, v, causal, block_q, block_k, scale, None)


def tiled_attention_traffic(q, k, v, causal: bool = False, block_q: int = 64, block_k: int = 64,
                            scale: float | None = None) -> tuple[np.ndarray, TileTraffic]:
    """Like :func:`tiled_attention`, and also return the bytes each tile step read and wrote.

    Counted as in :func:`lab.results.iomodel.tiled_attention_hbm_bytes`: a Q tile read and an O tile written
    once per query tile, a K and a V tile read once per key tile the query tile visits. The running
    statistics live on chip and are not counted.
    """
    traffic = TileTraffic()
    out = _tiled(q, k, v, causal, block_q, block_k, scale, traffic)
    return out, traffic



def online_softmax_trace(scores, block: int) -> tuple[list[dict], np.ndarray]:
    """Softmax of one row of scores read ``block`` at a time; returns each step's running state and the result.

    Each step records the tile, the running max ``m`` and running sum ``l`` after it, and the factor
    ``exp(m_old - m_new)`` that rescaled what had been summed before. The probabilities are formed at
    the end from the final ``m`` and ``l`` -- what the attention kernels do with the output instead.
    """
    scores = np.asarray(scores, dtype=np.float64)
    positive_int("block", block)
    m, total, steps = -np.inf, 0.0, []
    for start in range(0, len(scores), block):
        tile = scores[start:start + block]
        m_new = max(m, float(tile.max()))
        rescale = float(np.exp(m - m_new))
        total = total * rescale + float(np.exp(tile - m_new).sum())
        steps.append({"tile": tile.tolist(), "m": m_new, "rescale": rescale, "l": total})
        m = m_new
    return steps, np.exp(scores - m) / total
