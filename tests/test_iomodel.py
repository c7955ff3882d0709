"""Closed-form checks of lab.results.iomodel, each worked out by hand in the comments."""

import pytest

from lab import LabError
from lab.results.iomodel import tiled_attention_hbm_bytes


def test_tiled_full_1024_d128():
    # 8 query tiles of 128 rows. Each: Q tile + O tile = 2*128*128 elements; all of K and V = 2*1024*128.
    # 8 * (32768 + 262144) = 2_359_296 elements, 2 bytes each.
    assert tiled_attention_hbm_bytes(1024, 1024, 128, 128, 128, 2, causal=False) == 4_718_592


def test_tiled_causal_1024_d128():
    # query tile i visits key tiles 0..i: K+V = 2*(i+1)*128*128 = 32768*(i+1); sum over i=0..7 -> 32768*36.
    # plus Q and O: 8 * 32768.  (1_179_648 + 262_144) elements * 2 bytes.
    assert tiled_attention_hbm_bytes(1024, 1024, 128, 128, 128, 2, causal=True) == 2_883_584


def test_tiled_partial_tiles():
    # n=100, tiles of 64, d=4, fp32, causal. Query tile [0,64) sees key tile 0 (64 keys);
    # query tile [64,100) sees tiles 0 and 1 (64 + 36 = 100 keys).
    # Q+O: 2*100*4 = 800; K+V: 2*(64+100)*4 = 1312; (800 + 1312) * 4 bytes.
    assert tiled_attention_hbm_bytes(100, 100, 4, 64, 64, 4, causal=True) == 8448


def test_tiled_decode_sees_whole_cache():
    # one query at the end of a 1000-token cache sees every key: Q+O 2*128, K+V 2*1000*128 elements.
    assert tiled_attention_hbm_bytes(1, 1000, 128, 64, 64, 2, causal=True) == 2 * (256 + 256_000)


def test_tiled_causal_is_about_half_of_full_for_long_sequences():
    full = tiled_attention_hbm_bytes(8192, 8192, 128, 128, 128, 2, causal=False)
    causal = tiled_attention_hbm_bytes(8192, 8192, 128, 128, 128, 2, causal=True)
    assert 0.5 < causal / full < 0.52


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_tiled_rejects_bad_sizes(bad):
    with pytest.raises(LabError):
        tiled_attention_hbm_bytes(bad, 16, 16, 16, 16, 2, causal=False)


def test_tiled_causal_needs_enough_keys():
    with pytest.raises(LabError):
        tiled_attention_hbm_bytes(32, 16, 16, 16, 16, 2, causal=True)


# --- standard attention, FlashAttention tiles, model level --------------------------------------

import math  # noqa: E402

from lab.results import iomodel  # noqa: E402
from lab.results.modelshape import QWEN25_7B  # noqa: E402


def test_naive_bytes_1024_d128():
    # Q,K read (2·1024·128) + S written (1024²) | S read + P written (2·1024²) | P read (1024²) + V read + O written (2·1024·128)
    # = 4·1024·128 + 4·1024² = 524_288 + 4_194_304 elements, 2 bytes each.
    assert iomodel.naive_attention_hbm_bytes(1024, 1024, 128, 2) == 9_437_184


def test_naive_passes_name_every_pass():
    passes = iomodel.naive_attention_passes(1024, 1024, 128, 2, separate_mask=True)
    assert [p["stage"] for p in passes] == ["QK^T", "mask", "softmax", "PV"]
    assert passes[1]["read"] == passes[1]["written"] == 2 * 1024 * 1024
    assert sum(p["read"] + p["written"] for p in passes) == 9_437_184 + 4 * 1024 * 1024


def test_flash_block_from_sram():
    assert iomodel.flash_block_size(128, 228 * 1024, 2) == 128  # H100/H200: 228 KiB -> 228 rows -> 128
    assert iomodel.flash_block_size(128, 100 * 1024, 2) == 64   # A10G, L4, 4090: 100 KiB -> 100 -> 64
    assert iomodel.flash_block_size(64, 228 * 1024, 2) == 256


def test_flash_bytes_scale_as_n2_d2_over_m():
    # non-causal, n a multiple of B: bytes = b·(2nd + 2nd·n/B); B = 128 for 228 KiB, d = 128.
    n, d = 4096, 128
    assert iomodel.flash_attention_hbm_bytes(n, n, d, 228 * 1024, 2, causal=False) == 2 * (2 * n * d + 2 * n * d * n // 128)
    # halving SRAM halves B and roughly doubles the bytes: the 1/M of Θ(n²d²/M)
    big = iomodel.flash_attention_hbm_bytes(n, n, d, 256 * 1024, 2, causal=False)
    small = iomodel.flash_attention_hbm_bytes(n, n, d, 128 * 1024, 2, causal=False)
    assert 1.9 < small / big < 2.0


def test_monotone_in_length():
    lengths = [256, 1024, 4096, 16384]
    for method in iomodel.METHODS:
        for phase in iomodel.PHASES:
            values = [iomodel.attention_hbm_bytes(QWEN25_7B, n, phase, method, 228 * 1024) for n in lengths]
            assert values == sorted(values) and len(set(values)) == len(values), (method, phase)


def test_flash_beats_naive_in_prefill_and_gap_grows():
    ratios = [iomodel.attention_hbm_bytes(QWEN25_7B, n, "prefill", "naive", 228 * 1024)
              / iomodel.attention_hbm_bytes(QWEN25_7B, n, "prefill", "flash", 228 * 1024) for n in (512, 4096, 32768)]
    assert all(r > 1 for r in ratios) and ratios == sorted(ratios)


def test_decode_bytes_are_the_kv_cache():
    # flash decode, per layer: K and V of 1000 tokens × 4 KV heads × 128 (2·1000·512 elements) + q and o (2·3584)
    per_layer = iomodel.attention_hbm_bytes(QWEN25_7B, 1000, "decode", "flash", 228 * 1024, per="layer")
    assert per_layer == 2 * (2 * 1000 * 512 + 2 * 3584)
    model = iomodel.attention_hbm_bytes(QWEN25_7B, 1000, "decode", "flash", 228 * 1024, batch=3)
    assert model == 3 * 28 * per_layer
    naive = iomodel.attention_hbm_bytes(QWEN25_7B, 1000, "decode", "naive", 228 * 1024, per="layer")
    assert naive - per_layer == 2 * 4 * 1000 * 28  # S and P written and read, per query head


def test_max_naive_length_h200():
    # 141 GB minus bf16 weights (7_615_283_200 params × 2 B); S and P for 28 heads, 2 B each: 112 bytes per n².
    free = 141e9 - 2 * QWEN25_7B.parameters
    assert iomodel.max_naive_length(QWEN25_7B, 141e9) == math.isqrt(int(free // 112))
    assert iomodel.max_naive_length(QWEN25_7B, 10e9) == 0  # weights alone do not fit


def test_prefill_flops_and_crossover():
    one = iomodel.prefill_flops(QWEN25_7B, 1)
    assert one["linear"] == 2 * 28 * 233_046_016 and one["attention"] == 4 * 128 * 28 * 28
    # attention = 2·d·H·L·n(n+1), matmuls = 2·L·W·n: equal when n + 1 = W/(d·H) = 233_046_016 / 3584 = 65_024
    assert iomodel.crossover_length(QWEN25_7B) == 65_023
    shares = [iomodel.attention_flop_share(QWEN25_7B, n) for n in (2048, 8192, 32768)]
    assert shares == sorted(shares) and 0.03 < shares[0] < 0.035


def test_bad_phase_and_method():
    with pytest.raises(LabError):
        iomodel.attention_hbm_bytes(QWEN25_7B, 10, "training", "flash", 1024)
    with pytest.raises(LabError):
        iomodel.attention_hbm_bytes(QWEN25_7B, 10, "prefill", "magic", 1024)


def test_compulsory_bytes_floor():
    # prefill 1024 tokens, one layer: Q and O (2·1024·3584) + K and V once per KV head (2·1024·512), 2 bytes
    assert iomodel.attention_compulsory_bytes(QWEN25_7B, 1024, "prefill", per="layer") == 2 * (2 * 1024 * 3584 + 2 * 1024 * 512)
    for n in (1024, 8192):
        floor = iomodel.attention_compulsory_bytes(QWEN25_7B, n, "prefill")
        assert floor < iomodel.attention_hbm_bytes(QWEN25_7B, n, "prefill", "flash", 228 * 1024)
    # decode: the floor is the flash decode count (KV cache once, q and o)
    assert iomodel.attention_compulsory_bytes(QWEN25_7B, 4096, "decode") == \
        iomodel.attention_hbm_bytes(QWEN25_7B, 4096, "decode", "flash", 228 * 1024)


def test_chunked_prefill_rereads():
    # 4 chunks of 1024 over 4096 tokens re-read 0 + 1024 + 2048 + 3072 = 6144 tokens' KV (57_344 bytes each in bf16)
    assert QWEN25_7B.kv_bytes_per_token() == 2 * 28 * 512 * 2 == 57_344
    assert iomodel.chunked_prefill_kv_reread_bytes(QWEN25_7B, 4096, 1024) == 6144 * 57_344
    assert iomodel.chunked_prefill_kv_reread_bytes(QWEN25_7B, 1000, 2048) == 0  # one chunk: nothing to re-read


# --- the two counts of a fused prefill --------------------------------------------------------------

def test_attention_flops_causal_and_offset():
    # 4 queries over 4 keys, causal: pairs 1+2+3+4 = 10; 4·d per pair per head
    assert iomodel.attention_flops(4, 4, 2, 8) == 4 * 8 * 2 * 10
    assert iomodel.attention_flops(4, 4, 2, 8, causal=False) == 4 * 8 * 2 * 16
    # 2 queries at the end of 5 keys: they see 4 and 5 keys
    assert iomodel.attention_flops(2, 5, 1, 8) == 4 * 8 * 9


def test_prefill_counts_compulsory_floor_and_reread_ceiling():
    counts = iomodel.prefill_byte_counts(1024, 28, 4, 128, 128)
    # Q and O: 2·n·28·128 elements; K and V once per KV head: 2·n·4·128; bf16
    assert counts["compulsory"] == 2 * (2 * 1024 * 28 * 128 + 2 * 1024 * 4 * 128)
    assert counts["reread"] == 28 * tiled_attention_hbm_bytes(1024, 1024, 128, 128, 128, 2, True)
    assert counts["compulsory"] < counts["reread"]
    # long prompts: compulsory intensity grows with n, the re-read intensity settles near the tile height
    long = iomodel.prefill_byte_counts(32768, 28, 4, 128, 128)
    assert long["flops"] / long["compulsory"] > 10_000
    assert 120 < long["flops"] / long["reread"] < 128


def test_prefill_counts_need_whole_groups():
    with pytest.raises(LabError, match="evenly"):
        iomodel.prefill_byte_counts(64, 28, 5, 128, 64)


def test_chunking_costs_bytes_only_under_the_compulsory_count():
    counts = iomodel.chunked_prefill_bytes(QWEN25_7B, 8192, 2048, 64)
    # the re-read count already re-reads every earlier key once per query tile: chunks change nothing
    assert counts["chunked"]["reread"] == counts["single"]["reread"]
    # compulsory: chunk i reads the i·2048 earlier tokens' K and V once more (one layer)
    extra = counts["chunked"]["compulsory"] - counts["single"]["compulsory"]
    assert extra == iomodel.chunked_prefill_kv_reread_bytes(QWEN25_7B, 8192, 2048) // QWEN25_7B.layers


def test_backward_bytes_hand_count_with_p_recomputed_and_stored():
    # 4 queries and keys, causal (10 kept pairs), 2 query heads over 1 KV head, d=8, 2-byte elements
    counts = iomodel.backward_hbm_bytes(4, 4, 2, 1, 8, causal=True, bytes_per_element=2)
    reads = 2 * 8 * (3 * 4 * 2 + 2 * 4 * 1) + 4 * 4 * 2      # Q, O, dO; K, V; the fp32 log-sum-exp
    writes = 2 * 8 * (4 * 2 + 2 * 4 * 1)                      # dQ; dK, dV
    assert counts == {"recompute": reads + writes, "recompute_reads": reads, "p_bytes": 2 * 10 * 2,
                      "stored_p": reads + writes + 2 * 10 * 2}
    assert iomodel.backward_hbm_bytes(4, 4, 2, 1, 8, causal=True, batch=3)["p_bytes"] == 3 * 40


def test_storing_p_moves_the_score_matrix_and_recomputation_moves_only_n_d():
    short = iomodel.backward_hbm_bytes(1024, 1024, 28, 4, 128)
    long = iomodel.backward_hbm_bytes(16384, 16384, 28, 4, 128)
    assert long["recompute"] == pytest.approx(16 * short["recompute"], rel=1e-9)      # linear in n
    assert long["p_bytes"] / short["p_bytes"] == pytest.approx(256, rel=1e-3)           # quadratic in n
    assert long["stored_p"] > 10 * long["recompute"]


def test_kept_pairs_and_the_flops_built_on_them():
    assert iomodel.kept_pairs(4, 4, True) == 10 and iomodel.kept_pairs(2, 5, True) == 2 * 3 + 3
    assert iomodel.kept_pairs(3, 5, False) == 15
    assert iomodel.attention_flops(4, 4, 2, 8, causal=True) == 4 * 8 * 2 * 10
    with pytest.raises(LabError):
        iomodel.kept_pairs(5, 4, True)
    with pytest.raises(LabError):
        iomodel.backward_hbm_bytes(4, 4, 3, 2, 8)
