"""The Gluon kernel over a paged cache: compiled for sm_90a on any machine; exact against the reference on a Hopper GPU.

On the CPU: every page regime compiles without spills or serialised products and fits shared memory, and what the
kernel cannot run is refused. On the GPU: the server's batches (ragged chunks, prefix + chunk, prefill mixed with
decode rows, grouped heads) against the float64 reference, for each page regime, vLLM's interleaved cache and
every switch.
"""

import os
import re

import pytest
import torch
from gluon_build import HOPPER, compile_variants, hopper_only, ptxas_report

from lab import LabError
from lab.measure.attention import hopper_paged
from lab.measure.attention.paged_prefill import CHECK_CASES, check, paged_batch
from lab.measure.attention.reference import paged_varlen_attention_torch

#: one key tile in many pages, a page per tile, many tiles in a page; head dim 64; three stages of 128 keys
VARIANTS = {"d=128, 16-token pages": {"page_size": 16}, "d=128, 128-token pages": {"page_size": 128},
            "d=128, 256-token pages": {"page_size": 256}, "d=64, 32-token pages": {"head_dim": 64, "page_size": 32},
            "3 stages": {"page_size": 16, "launch": [128, 3]}}


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    return compile_variants(tmp_path_factory.mktemp("gluon-paged"),
                            "lab.measure.attention.hopper_paged:compile_paged_for_hopper", VARIANTS)


@pytest.mark.parametrize("name", VARIANTS)
def test_compiles_for_hopper_without_spills_or_serialised_products(name, compiled):
    where = compiled[name]
    report = ptxas_report(where)
    assert "0 bytes spill stores, 0 bytes spill loads" in report, report
    assert "C7514" not in report, report
    assert int((where / "shared").read_text()) <= 227 * 1024


def test_registers_move_to_the_producer_within_the_launchs_budget(compiled):
    """setmaxnreg only moves registers the launch holds (12 warps at KERNEL_REGS): two consumer warpgroups and the
    producer's must add up to what hopper's 240 + 240 + 24 do."""
    from lab.measure.attention import hopper

    consumer, producer = hopper_paged.CONSUMER_REGS.value, hopper_paged.PRODUCER_REGS.value
    assert 2 * consumer + producer == 2 * hopper.CONSUMER_REGS.value + hopper.PRODUCER_REGS.value
    ptx = (compiled["d=128, 16-token pages"] / "k.ptx").read_text()
    for regs in (consumer, producer):
        assert re.search(rf"setmaxnreg\.\w+\.sync\.aligned\.u32\s+{regs}\b", ptx), regs


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="the suite runs under the interpreter")
def test_compiling_under_the_interpreter_says_how_to_run_it():
    with pytest.raises(LabError, match="TRITON_INTERPRET=0"):
        hopper_paged.compile_paged_for_hopper()


def test_without_a_hopper_gpu_it_says_what_it_needs():
    if HOPPER:
        pytest.skip("on a Hopper GPU the kernel runs (below)")
    inputs = paged_batch([5, 130], [0, 40], head_dim=128, dtype=torch.bfloat16)
    with pytest.raises(LabError, match="needs a Hopper GPU"):
        hopper_paged.hopper_paged_prefill(*inputs)
    with pytest.raises(LabError, match="needs a Hopper GPU"):
        hopper_paged.check()


def test_refuses_a_head_dim_before_anything_else():
    inputs = paged_batch([5], [0], head_dim=96, dtype=torch.bfloat16)
    with pytest.raises(LabError, match="head dim 96"):
        hopper_paged.hopper_paged_prefill(*inputs)


@hopper_only
@pytest.mark.parametrize("why, kw", [("page size 8", {"page_size": 8}), ("float16 or bfloat16", {"dtype": torch.float32})])
def test_refuses_what_it_cannot_run_on_the_gpu(why, kw):
    inputs = paged_batch([5, 130], [0, 40], head_dim=128, device="cuda", **{"dtype": torch.bfloat16, **kw})
    with pytest.raises(LabError, match=why):
        hopper_paged.hopper_paged_prefill(*inputs)


@hopper_only
@pytest.mark.parametrize("head_dim, page_size", [(128, 16), (128, 64), (128, 128), (128, 256), (64, 16), (64, 128)])
def test_exact_on_the_servers_batches(head_dim, page_size):
    errors = hopper_paged.check(head_dim, page_size)
    assert set(errors) == set(CHECK_CASES)
    assert all(0 < e <= 2e-2 for e in errors.values()), errors      # bf16 output


LONG = {"long chunks over long prefixes": ([300, 1000, 1, 129], [1500, 0, 700, 3000], 28, 4)}


@hopper_only
@pytest.mark.parametrize("switches", [{}, {"launch": (64, 3)}, {"launch": (128, 3)}, {"overlap": False},
                                      {"pingpong": False}])
def test_exact_on_long_chunks_under_every_switch(switches):
    errors = check(128, 16, torch.bfloat16, forward=lambda *a: hopper_paged.hopper_paged_prefill(*a, **switches),
                   cases=LONG)
    assert 0 < errors["long chunks over long prefixes"] <= 2e-2, errors


@hopper_only
def test_exact_in_fp16_with_the_grid_sized_by_the_caller():
    inputs = paged_batch([300, 1, 77], [900, 60, 0], 8, 2, 128, 16, torch.float16, "cuda")
    out = torch.full_like(inputs[0], float("nan"))
    hopper_paged.hopper_paged_prefill(*inputs, max_seqlen_q=300, out=out)
    exact = paged_varlen_attention_torch(*(t.double() if t.is_floating_point() else t for t in inputs),
                                         compute_dtype=torch.float64)
    assert (out.double() - exact).abs().max().item() <= 1e-2


@hopper_only
def test_exact_on_vllms_interleaved_cache():
    """The lab's vLLM backend stores a page as (tokens, kv_heads, 2 x head_dim): V is K's view shifted by head_dim."""
    q, k_cache, v_cache, cu, seq_lens, table = paged_batch([200, 1, 45], [130, 500, 0], 28, 4, 128, 16,
                                                           torch.bfloat16, "cuda")
    both = torch.cat([k_cache, v_cache], dim=-1)
    k_view, v_view = both[..., :128], both[..., 128:]
    out = hopper_paged.hopper_paged_prefill(q, k_view, v_view, cu, seq_lens, table)
    exact = paged_varlen_attention_torch(q.double(), k_cache.double(), v_cache.double(), cu, seq_lens, table,
                                         compute_dtype=torch.float64)
    assert (out.double() - exact).abs().max().item() <= 2e-2
