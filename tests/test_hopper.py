"""The Gluon (Hopper) forward kernel: compiled for sm_90a on any machine; exact against the reference on a Hopper GPU.

Gluon has no CPU interpreter, so on the CPU the tests compile the kernel with Triton's own ptxas and read
what came out: no spilled registers, no serialised matrix products (ptxas's C7514 advisory), and the
schedule's instructions where the schedule says (softmax between the two product waits). The numbers are
checked on the GPU (every switch, causal and not, grouped heads, batch > 1, more keys than queries).
"""

import os
import re
import subprocess

import pytest
import torch
from gluon_build import HOPPER, PTXAS, compile_variants, hopper_only, ptxas_report

from lab import LabError
from lab.measure.attention import hopper
from lab.measure.attention.reference import attention_torch

VARIANTS = {"default": {}, "no overlap": {"overlap": False}, "no ping-pong": {"pingpong": False},
            "not causal": {"causal": False}, "d=64": {"head_dim": 64}, "fp16": {"fp16": True},
            "128-key tiles": {"launch": [128, 3]}, "6 stages": {"launch": [64, 6]}}


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    return compile_variants(tmp_path_factory.mktemp("gluon"), "lab.measure.attention.hopper:compile_for_hopper",
                            VARIANTS)


@pytest.mark.parametrize("name", VARIANTS)
def test_compiles_for_hopper_without_spills_or_serialised_products(name, compiled):
    folder = compiled[name]
    report = ptxas_report(folder)
    assert "0 bytes spill stores, 0 bytes spill loads" in report, report
    assert "C7514" not in report, report          # ptxas would wait after every wgmma
    assert int((folder / "shared").read_text()) <= 227 * 1024   # Hopper's shared memory per block


def test_the_workers_are_padded_to_whole_warpgroups(compiled):
    """Consumer 0 runs in the launch's 4 warps, consumer 1 (4 warps) and the producer (1 warp) are workers: Triton
    pads the workers to whole warpgroups (setmaxnreg sets a warpgroup's registers at once), so a program has 12 warps,
    the producer's warpgroup three idle warps besides it, all at the producer's register budget."""
    workers = hopper.CONSUMER_WARPS.value + hopper.PRODUCER_WARPS.value
    assert int((compiled["default"] / "warps").read_text()) == hopper.NUM_WARPS + 4 * -(-workers // 4) == 12
    ptx = (compiled["default"] / "k.ptx").read_text()
    for regs in (hopper.PRODUCER_REGS.value, hopper.CONSUMER_REGS.value):
        assert re.search(rf"setmaxnreg\.\w+\.sync\.aligned\.u32\s+{regs}\b", ptx), regs


def _sass(folder) -> str:
    return subprocess.run([str(PTXAS.parent / "cuobjdump"), "-sass", str(folder / "k.cubin")],
                          capture_output=True, text=True, check=True).stdout


def test_softmax_runs_between_the_two_waits_when_overlapped(compiled):
    """The schedule itself: in the key loop, the exponentials sit after 'wait for S' (at most one product
    in flight) and before 'wait for everything', so they overlap P V on the tensor cores."""
    sass = _sass(compiled["default"])
    ops = re.findall(r"(WARPGROUP\.DEPBAR\.LE gsb0, 0x[01]|MUFU\.EX2)", sass)
    wait_one = [i for i, op in enumerate(ops) if op.endswith("0x1")]
    assert wait_one, "no 'at most one product in flight' wait: the products are not overlapped"
    after = ops[wait_one[0] + 1:]
    exps_before_full_wait = next(i for i, op in enumerate(after) if op.endswith("0x0"))
    assert exps_before_full_wait >= 64, f"only {exps_before_full_wait} exponentials before the full wait"


def test_without_overlap_every_product_is_waited_for(compiled):
    sass = _sass(compiled["no overlap"])
    assert "WARPGROUP.DEPBAR.LE gsb0, 0x1" not in sass


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="the suite runs under the interpreter")
def test_compiling_under_the_interpreter_says_how_to_run_it():
    with pytest.raises(LabError, match="TRITON_INTERPRET=0"):
        hopper.compile_for_hopper()


def test_check_without_a_hopper_gpu_says_what_it_needs():
    if HOPPER:
        pytest.skip("on a Hopper GPU the check runs (below)")
    with pytest.raises(LabError, match="needs a Hopper GPU"):
        hopper.check()


@hopper_only
def test_check_runs_the_kernel_against_the_float64_reference():
    errors = hopper.check()
    assert set(errors) == {"no mask", "causal"}
    assert all(0 < error <= 2e-2 for error in errors.values()), errors   # bf16 output


def test_refuses_what_it_cannot_run():
    q = torch.zeros(1, 2, 128, 128, dtype=torch.bfloat16)
    with pytest.raises(LabError, match="Hopper"):
        hopper.hopper_forward(q, q, q, True)


@hopper_only
@pytest.mark.parametrize("why, shape", [("head dim", (1, 2, 256, 96)), ("multiples of 128", (1, 2, 200, 128))])
def test_refuses_shapes_on_the_gpu(why, shape):
    q = torch.zeros(shape, dtype=torch.bfloat16, device="cuda")
    with pytest.raises(LabError, match=why):
        hopper.hopper_forward(q, q, q, True)


@hopper_only
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("shape", [(1, 28, 4, 1024, 1024, 128), (2, 8, 8, 512, 512, 64), (1, 4, 2, 256, 768, 128)])
@pytest.mark.parametrize("switches", [{}, {"overlap": False}, {"pingpong": False}, {"launch": (128, 2)},
                                      {"launch": (64, 6)}])
def test_exact_against_the_reference(causal, shape, switches):
    batch, q_heads, kv_heads, n_q, n_k, d = shape
    gen = torch.Generator(device="cuda").manual_seed(n_q + d)
    q = torch.randn(batch, q_heads, n_q, d, generator=gen, device="cuda").to(torch.bfloat16)
    k, v = (torch.randn(batch, kv_heads, n_k, d, generator=gen, device="cuda").to(torch.bfloat16) for _ in range(2))
    out = hopper.hopper_forward(q, k, v, causal, **switches)
    expected = attention_torch(q, k, v, causal)
    assert (out.float() - expected.float()).abs().max().item() <= 2e-2
