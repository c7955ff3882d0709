"""The per-GPU launch cache: seeds from the committed benchmark, picks kept across processes, off switch."""

import json

import pytest

from lab.measure.attention import launch_cache


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setattr(launch_cache, "CACHE_DIR", tmp_path / "cache")
    monkeypatch.setattr(launch_cache, "_loaded", {})
    return tmp_path / "cache"


def test_the_committed_h200_run_seeds_forward_and_decode_picks(cache):
    seeded = launch_cache.seeds("NVIDIA H200")
    fwd = seeded[launch_cache.forward_key(4096, 4096, 128, True, "tf32")]
    assert {"BLOCK_M", "BLOCK_N", "num_warps", "num_stages", "tma"} <= set(fwd)
    assert isinstance(fwd["tma"], bool) and isinstance(fwd["BLOCK_M"], int)
    dec = seeded[launch_cache.decode_key(1, 28, 4, 32768, 128, "torch.bfloat16")]
    assert "programs_per_sm" in dec or "num_splits" in dec
    assert launch_cache.seeds("NVIDIA A10G") == {}     # another GPU model: no seeds


def test_a_pick_is_kept_on_disk_and_found_by_a_new_process(cache, monkeypatch):
    key = launch_cache.forward_key(1000, 1000, 64, False, "tf32")
    assert launch_cache.lookup("Some GPU", key) is None
    launch_cache.remember("Some GPU", key, {"BLOCK_M": 64, "BLOCK_N": 32, "tma": False})
    saved = json.loads((cache / "some-gpu.json").read_text())
    assert saved["launches"][key] == {"BLOCK_M": 64, "BLOCK_N": 32, "tma": False}
    monkeypatch.setattr(launch_cache, "_loaded", {})   # as a fresh process would see it
    assert launch_cache.lookup("Some GPU", key) == {"BLOCK_M": 64, "BLOCK_N": 32, "tma": False}
    assert launch_cache.lookup("Other GPU", key) is None


def test_the_switch_turns_it_off(cache, monkeypatch):
    monkeypatch.setenv("LAB_LAUNCH_CACHE", "0")
    launch_cache.remember("Some GPU", "fwd 1 1 16 True tf32", {"BLOCK_M": 16})
    assert not cache.exists()
    assert launch_cache.lookup("NVIDIA H200", launch_cache.forward_key(4096, 4096, 128, True, "tf32")) is None


def test_parse_config_reads_the_benchmark_column():
    assert launch_cache.parse_config("BLOCK_M=128 BLOCK_N=64 num_warps=8 maxnreg=128 tma=True") == \
        {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "maxnreg": 128, "tma": True}
