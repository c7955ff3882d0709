"""The persistent Gluon kernel: its plans on the CPU, the kernel compiled for sm_90a anywhere, exact on a Hopper GPU.

The plans are plain Python (every unit exactly once, the balanced plan within one unit's cost of the least any plan
could do). The kernel itself runs only on a Hopper GPU: every plan, few programs (so each walks many units and the
ring's phases wrap many times), causal and not, grouped heads, batch > 1, more keys than queries.
"""

import pytest
import torch
from gluon_build import compile_variants, hopper_only, ptxas_report

from lab import LabError
from lab.measure.attention import hopper_persistent as hp
from lab.measure.attention.reference import attention_torch

VARIANTS = {"default": {}, "not causal": {"causal": False}, "d=64": {"head_dim": 64}, "64-key tiles": {"launch": [64, 4]}}


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    return compile_variants(tmp_path_factory.mktemp("persistent"),
                            "lab.measure.attention.hopper_persistent:compile_persistent_for_hopper", VARIANTS)


@pytest.mark.parametrize("name", VARIANTS)
def test_compiles_for_hopper_without_spills_in_one_program_per_multiprocessor(name, compiled):
    report = ptxas_report(compiled[name])
    assert "0 bytes spill stores, 0 bytes spill loads" in report, report
    assert int((compiled[name] / "shared").read_text()) <= 227 * 1024


@pytest.mark.parametrize("how", hp.PLANS)
@pytest.mark.parametrize("n, programs", [(4096, 132), (16384, 132), (1024, 5), (256, 132)])
def test_every_unit_is_walked_once_in_launch_order(how, n, programs):
    tiles = hp.unit_tiles(n, n, 28, 7, 1, True, 128)
    lists = hp.program_units(hp.plan(tiles, programs, how), programs)
    assert sorted(u for units in lists for u in units) == list(range(len(tiles)))
    assert all(units == sorted(units) for units in lists)


def test_unit_costs_follow_the_kernels_order():
    """Launch order puts the heaviest causal tiles of a KV head's query heads first: 7 heads of the last query tile
    (every key tile) before 7 of the one above it; without the mask every unit reads every key tile."""
    tiles = hp.unit_tiles(512, 512, 14, 7, 1, True, 128)
    assert tiles == [4] * 7 + [3] * 7 + [2] * 7 + [1] * 7 + [4] * 7 + [3] * 7 + [2] * 7 + [1] * 7
    assert hp.unit_tiles(512, 1024, 2, 1, 1, True, 128)[:4] == [8, 7, 6, 5]   # a cached prefix: 4 tiles more each
    assert set(hp.unit_tiles(512, 512, 14, 7, 1, False, 128)) == {4}


@pytest.mark.parametrize("n", [4096, 16384, 32768])
def test_the_balanced_plan_is_within_one_unit_of_the_mean(n):
    tiles = hp.unit_tiles(n, n, 28, 7, 1, True, 128)
    costs = {how: hp.program_costs(tiles, hp.plan(tiles, 132, how), 132) for how in hp.PLANS}
    mean = sum(t + 1 for t in tiles) / 132
    assert max(costs["balanced"]) - mean <= max(tiles) + 1
    assert max(costs["balanced"]) < max(costs["strided"])


def test_an_unknown_plan_is_refused():
    with pytest.raises(LabError, match="strided, balanced"):
        hp.plan([1, 2], 2, "random")


@hopper_only
@pytest.mark.parametrize("how, programs", [("balanced", None), ("strided", None), ("balanced", 3), ("strided", 1)])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("shape", [(1, 28, 4, 1024, 1024, 128), (2, 8, 8, 512, 512, 64), (1, 4, 2, 256, 768, 128)])
def test_exact_against_the_reference(how, programs, causal, shape):
    batch, q_heads, kv_heads, n_q, n_k, d = shape
    gen = torch.Generator(device="cuda").manual_seed(n_q + d)
    q = torch.randn(batch, q_heads, n_q, d, generator=gen, device="cuda").to(torch.bfloat16)
    k, v = (torch.randn(batch, kv_heads, n_k, d, generator=gen, device="cuda").to(torch.bfloat16) for _ in range(2))
    out = hp.persistent_forward(q, k, v, causal, how=how, programs=programs)
    expected = attention_torch(q, k, v, causal)
    assert (out.float() - expected.float()).abs().max().item() <= 2e-2


def test_the_shared_memory_count_matches_the_build_and_refuses_what_does_not_fit(compiled):
    """The tiles it counts are what the compiler allocated, less the barriers; a ring too deep for one program per
    multiprocessor is refused before it is launched."""
    for name, (head_dim, (block_n, stages)) in {"default": (128, hp.LAUNCH[128]), "d=64": (64, hp.LAUNCH[64]),
                                                "64-key tiles": (128, (64, 4))}.items():
        assert 0 <= int((compiled[name] / "shared").read_text()) - hp.shared_bytes(head_dim, block_n, stages) < 1024
    assert hp.shared_bytes(128, 128, 3) > hp.SHARED_BYTES >= hp.shared_bytes(128, 128, 2)


@hopper_only
def test_refuses_a_ring_too_deep_for_one_program_per_multiprocessor():
    q = torch.zeros(1, 2, 256, 128, dtype=torch.bfloat16, device="cuda")
    with pytest.raises(LabError, match="fewer stages"):
        hp.persistent_forward(q, q, q, True, launch=(128, 3))


def test_refuses_what_it_cannot_run():
    q = torch.zeros(1, 2, 128, 128, dtype=torch.bfloat16)
    with pytest.raises(LabError, match="Hopper"):
        hp.persistent_forward(q, q, q, True)
