"""Bytes moved through HBM by attention: standard (the n×n matrix goes to memory) vs tiled (FlashAttention).

Counts are for the forward pass (the backward's, with P recomputed or stored: :func:`backward_hbm_bytes`)
and count only traffic to and from device memory (HBM); what the kernel keeps in registers or shared
memory is free here. A fused (tiled) kernel gets two counts,
and the truth lies between them:

- **compulsory bytes** (:func:`attention_compulsory_bytes`): Q, K, V read once, O written once. No
  kernel can move less: the lower bound on bytes, so the upper bound on intensity.
- **the tile re-read count** (:func:`tiled_attention_hbm_bytes`, :func:`attention_hbm_bytes` with
  "flash"): every K/V tile read again by every query tile and every query head that needs it, as in
  the FlashAttention paper's IO analysis (Dao et al., 2022, arXiv:2205.14135). That is what a GPU
  with no cache reuse would move: an upper estimate, not a lower bound. On a real GPU the L2 cache
  serves most re-reads (query tiles of one head, and query heads of one KV group, stream the same
  K/V tiles at about the same time).
"""

from __future__ import annotations

from lab import LabError, positive_int
from lab.measure.attention.tiled import visited_key_tiles

# --- tiled attention: the closed form the instrumented NumPy kernel is tested against -----------

def tiled_attention_hbm_bytes(n_q: int, n_k: int, d: int, block_q: int, block_k: int,
                              bytes_per_element: int, causal: bool) -> int:
    """HBM bytes moved by one head of tiled (FlashAttention-2 order) attention, forward pass.

    Counted, per query tile (outer loop): its Q tile read once; each K tile and V tile it visits read
    once (causal: only key tiles that intersect the visible triangle, i.e. key tile start <= query tile
    end); its O tile written once. Tiles at the end may be partial and count their real rows. Softmax
    statistics (running max and sum, log-sum-exp) are not counted: they are O(n) and fp32, not part of
    this interface.
    """
    n_q, n_k, d = positive_int("n_q", n_q), positive_int("n_k", n_k), positive_int("d", d)
    block_q, block_k = positive_int("block_q", block_q), positive_int("block_k", block_k)
    bpe = positive_int("bytes_per_element", bytes_per_element)
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


def tiled_attention_pairs(n_q: int, n_k: int, block_q: int, block_k: int, causal: bool) -> int:
    """Query-key pairs a tiled kernel computes scores for (masked pairs inside a visited tile included)."""
    pairs = 0
    for q_start in range(0, n_q, block_q):
        q_end = min(q_start + block_q, n_q)
        tiles = visited_key_tiles(q_start, q_end, n_q, n_k, block_k, causal)
        pairs += (q_end - q_start) * min(len(tiles) * block_k, n_k)
    return pairs


# --- FlashAttention: tile sizes from the SRAM budget ----------------------------------------------

def flash_block_size(d: int, sram_bytes: int, bytes_per_element: int) -> int:
    """Tile rows B so that a Q, K, V and O tile (4·B·d elements) fit in SRAM of M bytes.

    The FlashAttention paper sets the key block to ⌈M/(4d)⌉ (M counted in elements); real kernels round
    to a power of two, so this takes the largest power of two ≤ M/(4·d·bytes), and at least 16 (the
    smallest tensor-core tile). H100 (228 KiB), d=128, bf16: 228 -> 128, the tile FlashAttention-2/3 use.
    """
    d, sram_bytes = positive_int("d", d), positive_int("sram_bytes", sram_bytes)
    limit = sram_bytes // (4 * d * positive_int("bytes_per_element", bytes_per_element))
    block = 16
    while block * 2 <= limit:
        block *= 2
    return block


def flash_attention_hbm_bytes(n_q: int, n_k: int, d: int, sram_bytes: int, bytes_per_element: int,
                              causal: bool) -> int:
    """One head of FlashAttention (forward) with tiles sized from the SRAM: Θ(n²·d²/M) bytes for long n."""
    block = flash_block_size(d, sram_bytes, bytes_per_element)
    return tiled_attention_hbm_bytes(n_q, n_k, d, block, block, bytes_per_element, causal)


# --- standard attention: the n×n matrix goes through HBM --------------------------------------------

def naive_attention_passes(n_q: int, n_k: int, d: int, bytes_per_element: int,
                           separate_mask: bool = False) -> list[dict]:
    """The HBM passes of standard attention for one head, each with the bytes it reads and writes.

    1. S = Q·Kᵀ: read Q (n_q·d) and K (n_k·d), write S (n_q·n_k).
    2. P = softmax(mask(S)): read S, write P (the mask applied while softmax reads S), or, with
       ``separate_mask``, first a masking pass that reads S and writes it back.
    3. O = P·V: read P and V (n_k·d), write O (n_q·d).
    This is Algorithm 0 of the FlashAttention paper: Θ(n·d + n²) bytes.
    """
    n_q, n_k, d = positive_int("n_q", n_q), positive_int("n_k", n_k), positive_int("d", d)
    b = positive_int("bytes_per_element", bytes_per_element)
    nn = n_q * n_k
    passes = [dict(stage="QK^T", read=b * (n_q * d + n_k * d), written=b * nn)]
    if separate_mask:
        passes.append(dict(stage="mask", read=b * nn, written=b * nn))
    passes.append(dict(stage="softmax", read=b * nn, written=b * nn))
    passes.append(dict(stage="PV", read=b * (nn + n_k * d), written=b * n_q * d))
    return passes


def naive_attention_hbm_bytes(n_q: int, n_k: int, d: int, bytes_per_element: int, separate_mask: bool = False) -> int:
    """Total HBM bytes of :func:`naive_attention_passes` (2·(n_q+n_k)·d + 4·n_q·n_k elements without a mask pass)."""
    return sum(p["read"] + p["written"] for p in naive_attention_passes(n_q, n_k, d, bytes_per_element, separate_mask))


# --- per layer and per model ----------------------------------------------------------------------

METHODS = ("naive", "flash")
PHASES = ("prefill", "decode")


def attention_hbm_bytes(shape, n: int, phase: str, method: str, sram_bytes: int, bytes_per_element: int = 2,
                        batch: int = 1, per: str = "model") -> int:
    """HBM bytes of attention for a model shape (see lab.results.modelshape) at prompt/context length n.

    prefill: n queries over n keys, causal, every query head (K and V read per query head: the per-head
      model above; a GQA kernel may share them through L2, which this ignores).
    decode: one new query per sequence over n cached keys. The KV cache is read once per KV head
      (query heads of a group share it), plus, for naive attention, S and P written and read per query
      head (4·n elements each).
    ``per``: "head", "layer" or "model" (all layers), times ``batch`` sequences.
    """
    if phase not in PHASES:
        raise LabError(f"unknown phase {phase!r}; expected one of {', '.join(PHASES)}")
    if method not in METHODS:
        raise LabError(f"unknown method {method!r}; expected one of {', '.join(METHODS)}")
    if per not in ("head", "layer", "model"):
        raise LabError(f"per must be head, layer or model, got {per!r}")
    d, b = shape.head_dim, bytes_per_element
    if phase == "prefill":
        if method == "naive":
            head = naive_attention_hbm_bytes(n, n, d, b)
        else:
            head = flash_attention_hbm_bytes(n, n, d, sram_bytes, b, causal=True)
        layer = shape.q_heads * head
    else:
        kv_read = 2 * n * shape.kv_dim * b
        q_and_o = 2 * shape.q_dim * b
        scores = 4 * n * shape.q_heads * b if method == "naive" else 0
        layer = kv_read + q_and_o + scores
        head = layer // shape.q_heads
    value = {"head": head, "layer": layer, "model": layer * shape.layers}[per]
    return value * positive_int("batch", batch)


def attention_compulsory_bytes(shape, n: int, phase: str, bytes_per_element: int = 2, batch: int = 1,
                               per: str = "model") -> int:
    """The least any attention kernel must move: Q read, K and V read once per KV head, O written.

    A fused kernel re-reads K and V tiles once per query tile (:func:`attention_hbm_bytes` with "flash"
    counts every re-read); on a GPU most re-reads are served by L2, because the thread blocks working on
    neighbouring query tiles of one head stream the same K/V tiles at about the same time. Real HBM
    traffic of a fused kernel lies between this floor and the tile count.
    """
    if phase not in PHASES:
        raise LabError(f"unknown phase {phase!r}; expected one of {', '.join(PHASES)}")
    queries = n if phase == "prefill" else 1
    layer = bytes_per_element * (2 * queries * shape.q_dim + 2 * n * shape.kv_dim)
    if per not in ("layer", "model"):
        raise LabError(f"per must be layer or model, got {per!r}")
    return positive_int("batch", batch) * layer * (shape.layers if per == "model" else 1)


def naive_intermediate_bytes(shape, n: int, bytes_per_element: int = 2, copies: int = 2, batch: int = 1) -> int:
    """Memory that standard attention holds for one layer: S and P (``copies``) for every query head, n×n each."""
    return copies * batch * shape.q_heads * n * n * bytes_per_element


def max_naive_length(shape, memory_bytes: float, bytes_per_element: int = 2, copies: int = 2,
                     reserved_bytes: float | None = None) -> int:
    """Longest prompt whose n×n intermediates (one layer, all query heads) fit beside the weights.

    ``reserved_bytes`` defaults to the model's weights at the same dtype; the KV cache and activations are
    not subtracted, so the true limit is lower.
    """
    reserved = shape.parameters * bytes_per_element if reserved_bytes is None else reserved_bytes
    free = memory_bytes - reserved
    if free <= 0:
        return 0
    per_n2 = copies * shape.q_heads * bytes_per_element
    n = int((free / per_n2) ** 0.5)
    while per_n2 * (n + 1) ** 2 <= free:
        n += 1
    while n > 0 and per_n2 * n * n > free:
        n -= 1
    return n


# --- FLOPs: when does attention outweigh the matmuls in prefill? ----------------------------------

def prefill_flops(shape, n: int) -> dict:
    """FLOPs of a causal prefill of n tokens: the layers' matmuls vs attention (QKᵀ and PV).

    Attention counts the n·(n+1)/2 query-key pairs a causal mask keeps, 4·d FLOPs each per query head
    (2·d for a score, 2·d for its share of P·V). The LM head is left out: a server computes logits for
    the last position only.
    """
    n = positive_int("n", n)
    linear = n * shape.linear_flops_per_token()
    attention = 4 * shape.head_dim * shape.q_heads * shape.layers * (n * (n + 1) // 2)
    return {"linear": linear, "attention": attention, "share": attention / (attention + linear)}


def attention_flop_share(shape, n: int) -> float:
    """Attention's fraction of prefill FLOPs at prompt length n."""
    return prefill_flops(shape, n)["share"]


def crossover_length(shape) -> int:
    """Smallest prompt length at which attention's prefill FLOPs reach the matmuls'.

    Per layer, matmuls are 2·n·W (W weights) and causal attention ≈ 2·n²·d·H, so n ≈ W / (d·H).
    """
    lo, hi = 1, 1
    while prefill_flops(shape, hi)["share"] < 0.5:
        hi *= 2
    while lo < hi:
        mid = (lo + hi) // 2
        if prefill_flops(shape, mid)["share"] >= 0.5:
            hi = mid
        else:
            lo = mid + 1
    return lo


def implied_throughputs(shape, b_s_per_token: float, c_s_per_token2: float) -> dict:
    """FLOP/s a fitted TTFT curve implies: matmuls from the linear term, attention from the quadratic one.

    Assumes the linear term is all matmul work and the quadratic term all attention; both are
    approximations (the linear term also holds norms, activations and attention's own O(n) part).
    """
    attention_per_token2 = 2 * shape.head_dim * shape.q_heads * shape.layers  # causal: 4·d·H·L·n²/2
    return {"linear_flops": shape.linear_flops_per_token() / b_s_per_token,
            "attention_flops": attention_per_token2 / c_s_per_token2}


def chunked_prefill_kv_reread_bytes(shape, n: int, chunk: int, bytes_per_element: int = 2) -> int:
    """Extra KV-cache bytes a chunked prefill reads under the *compulsory* count (whole model).

    With chunks of c tokens, chunk i (0-based) reads the i·c cached tokens' K and V once per KV head in
    every layer; a single pass would read each K/V once in all. Grows as n²/(2c). Under the tile
    re-read count chunking adds nothing (see :func:`chunked_prefill_bytes`): every query tile already
    re-reads all the keys before it, whichever chunk it belongs to.
    """
    n, chunk = positive_int("n", n), positive_int("chunk", chunk)
    per_token = shape.kv_bytes_per_token(bytes_per_element)
    return sum(start * per_token for start in range(0, n, chunk))


# --- the two counts for a fused prefill, for any head layout ---------------------------------------

def attention_flops(n_q: int, n_k: int, q_heads: int, head_dim: int, causal: bool = True, batch: int = 1) -> int:
    """Matmul FLOPs of attention (QKᵀ and PV, 4·d per kept query-key pair per query head).

    Causal with n_q == n_k keeps n(n+1)/2 pairs; with n_q < n_k the queries are the last n_q positions.
    The softmax's few FLOPs per score are left out, as benchmarks' TFLOP/s figures leave them out.
    """
    pairs = kept_pairs(n_q, n_k, causal)
    return 4 * positive_int("head_dim", head_dim) * positive_int("q_heads", q_heads) * pairs * positive_int("batch", batch)


def kept_pairs(n_q: int, n_k: int, causal: bool) -> int:
    """Query-key pairs one head scores: n_q·n_k, or under a causal mask (queries the last n_q positions)
    n_q·(n_k − n_q) + n_q(n_q + 1)/2."""
    n_q, n_k = positive_int("n_q", n_q), positive_int("n_k", n_k)
    if causal and n_q > n_k:
        raise LabError(f"causal attention with more queries ({n_q}) than keys ({n_k}) leaves rows with no key to see")
    return n_q * (n_k - n_q) + n_q * (n_q + 1) // 2 if causal else n_q * n_k


def prefill_byte_counts(n: int, q_heads: int, kv_heads: int, head_dim: int, block: int, bytes_per_element: int = 2,
                        causal: bool = True, batch: int = 1, n_k: int | None = None) -> dict:
    """One layer's fused attention over n queries (and ``n_k`` keys, default n): the two byte counts.

    ``compulsory``: Q and O once per query head, K and V once per KV head. ``reread``: the tile count
    with square tiles of ``block`` rows, K/V tiles charged once per query tile per *query* head (no
    reuse through the cache). Returns {"compulsory", "reread", "flops"}.
    """
    n_k = n if n_k is None else n_k
    q_heads, kv_heads = positive_int("q_heads", q_heads), positive_int("kv_heads", kv_heads)
    if q_heads % kv_heads:
        raise LabError(f"{q_heads} query heads cannot share {kv_heads} KV heads evenly")
    d, b, batch = positive_int("head_dim", head_dim), positive_int("bytes_per_element", bytes_per_element), \
        positive_int("batch", batch)
    compulsory = b * (2 * n * q_heads * d + 2 * n_k * kv_heads * d)
    reread = q_heads * tiled_attention_hbm_bytes(n, n_k, d, block, block, b, causal)
    return {"compulsory": batch * compulsory, "reread": batch * reread,
            "flops": attention_flops(n, n_k, q_heads, d, causal, batch)}


def chunked_prefill_bytes(shape, n: int, chunk: int, block: int, bytes_per_element: int = 2) -> dict:
    """One layer's attention bytes for a prompt of n tokens prefilled in chunks, under both counts.

    Chunk i holds queries [i·c, i·c + c) and attends to keys [0, i·c + c) (the cache so far plus
    itself). Returns {"chunked": {"compulsory", "reread"}, "single": {...}} so the extra that
    chunking costs can be read under either count.
    """
    n, chunk = positive_int("n", n), positive_int("chunk", chunk)
    heads = (shape.q_heads, shape.kv_heads, shape.head_dim, block, bytes_per_element)
    chunked = {"compulsory": 0, "reread": 0}
    for start in range(0, n, chunk):
        end = min(start + chunk, n)
        counts = prefill_byte_counts(end - start, *heads, n_k=end)
        chunked["compulsory"] += counts["compulsory"]
        chunked["reread"] += counts["reread"]
    single = prefill_byte_counts(n, *heads)
    return {"chunked": chunked, "single": {"compulsory": single["compulsory"], "reread": single["reread"]}}


# --- the backward pass: recompute P, or store it ---------------------------------------------------

def backward_hbm_bytes(n_q: int, n_k: int, q_heads: int, kv_heads: int, head_dim: int, causal: bool = True,
                       batch: int = 1, bytes_per_element: int = 2) -> dict:
    """One layer's attention backward, the least bytes through HBM two ways (the IO argument for recomputation).

    ``recompute`` (what FlashAttention does): read Q, O, dO once per query head and K, V once per KV head,
    read each query row's log-sum-exp (fp32), write dQ, dK, dV once. P is rebuilt from Q, K and the
    log-sum-exp in the kernel, at the price of one more Q·Kᵀ product. ``stored_p``: the same plus reading
    P back (one element per kept query-key pair per query head, in the inputs' dtype), which the forward
    must also have written and kept: ``p_bytes``, the memory P holds from the forward to the backward.
    Softmax's D = rowsum(dO ∘ O) is left out of both (a few bytes per row, the same either way).
    Returns {"recompute", "recompute_reads" (its reads alone), "stored_p", "p_bytes"} in bytes.
    """
    q_heads, kv_heads = positive_int("q_heads", q_heads), positive_int("kv_heads", kv_heads)
    if q_heads % kv_heads:
        raise LabError(f"{q_heads} query heads cannot share {kv_heads} KV heads evenly")
    d, b, batch = positive_int("head_dim", head_dim), positive_int("bytes_per_element", bytes_per_element), \
        positive_int("batch", batch)
    pairs = kept_pairs(n_q, n_k, causal)
    # read Q, O, dO (query heads), K, V (KV heads) and the fp32 log-sum-exp; write dQ, dK, dV
    reads = b * d * (3 * n_q * q_heads + 2 * n_k * kv_heads) + 4 * n_q * q_heads
    recompute = reads + b * d * (n_q * q_heads + 2 * n_k * kv_heads)
    p_bytes = b * pairs * q_heads
    return {"recompute": batch * recompute, "recompute_reads": batch * reads,
            "stored_p": batch * (recompute + p_bytes), "p_bytes": batch * p_bytes}
