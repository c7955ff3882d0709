"""Closed-form checks of lab.iomodel, each worked out by hand in the comments."""

import pytest

from lab import LabError
from lab.iomodel import tiled_attention_hbm_bytes


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
