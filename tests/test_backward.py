"""The FlashAttention backward kernels (lab.measure.attention.backward): exact against autograd of the reference.

On the CPU they run in Triton's interpreter on small shapes (ragged lengths, causal and not, grouped heads,
more keys than queries, head dims 16 to 64) in fp32 and fp16, against fp64 autograd of
``attention_torch``; the tolerance is ``backward.GRAD_TOLERANCE`` (each gradient's largest error as a share
of its largest entry): fp32 1e-5 (exact fp32 products; seen ~5e-7), fp16 4e-3 (seen ~5e-4: fp16 rounding of
P, dS and the outputs). The autotuning spaces are compiled for sm_90a without a GPU and held to no spills.
On a GPU (``-m gpu``) the same check runs at 4k to 32k tokens, 28 query over 4 KV heads, d 64 and 128, bf16,
through the book's tuned forward, against fp32 autograd, with tolerance 2e-2 (why: GRAD_TOLERANCE's comment).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from kernel_device import DEVICE, ON_GPU

from lab import LabError
from lab.measure.attention import backward
from lab.measure.attention.reference import attention_flops, attention_gradients_torch, attention_torch


def _inputs(batch, q_heads, kv_heads, n_q, n_k, d, dtype, seed):
    gen = torch.Generator(device=DEVICE).manual_seed(seed)
    make = lambda h, n: torch.randn(batch, h, n, d, generator=gen, device=DEVICE).to(dtype)  # noqa: E731
    return make(q_heads, n_q), make(kv_heads, n_k), make(kv_heads, n_k), make(q_heads, n_q)


def _worst_share(grads, q, k, v, do, causal, compute_dtype):
    for grad, like in zip(grads, (q, k, v), strict=True):
        assert grad.shape == like.shape and grad.dtype == like.dtype and torch.isfinite(grad).all()
    reference = attention_gradients_torch(q, k, v, do, causal, compute_dtype=compute_dtype)
    return backward.gradient_errors(grads, reference)[1]


SHAPES = [(1, 4, 2, 37, 37, 16),     # GQA 4 over 2, a length that is no tile multiple
          (2, 2, 1, 20, 45, 32),     # batch 2, more keys than queries (causal: bottom-right aligned)
          (1, 2, 2, 48, 48, 64),     # whole tiles
          (1, 3, 1, 17, 64, 16)]     # a group of 3, one query past a tile, keys in whole tiles


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_backward_matches_fp64_autograd_of_the_reference(causal, dtype, shape):
    q, k, v, do = _inputs(*shape, dtype, seed=sum(shape))
    o, lse = backward.reference_forward_with_lse(q, k, v, causal)
    grads = backward.attention_backward(q, k, v, o, lse, do, causal)
    assert _worst_share(grads, q, k, v, do, causal, torch.float64) <= backward.GRAD_TOLERANCE[dtype]


@pytest.mark.parametrize("dkdv, dq", [((32, 16), (16, 32)), ((16, 32), (32, 16)), ((32, 32), (32, 32))])
def test_backward_tile_sizes_across_the_diagonal_and_ragged_ends(dkdv, dq):
    # tiles that do not divide the lengths, on both sides of the diagonal, with more keys than queries
    q, k, v, do = _inputs(1, 4, 2, 41, 59, 16, torch.float32, seed=5)
    for causal in (False, True):
        o, lse = backward.reference_forward_with_lse(q, k, v, causal)
        grads = backward.attention_backward(q, k, v, o, lse, do, causal,
                                            dkdv_config={"BLOCK_M": dkdv[0], "BLOCK_N": dkdv[1]},
                                            dq_config={"BLOCK_M": dq[0], "BLOCK_N": dq[1]})
        assert _worst_share(grads, q, k, v, do, causal, torch.float64) <= backward.GRAD_TOLERANCE[torch.float32]


def test_loss_backward_runs_the_kernels_and_saves_no_score_matrix():
    q, k, v, do = _inputs(1, 4, 2, 24, 40, 16, torch.float32, seed=3)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    saved = []

    def pack(tensor):
        saved.append(tuple(tensor.shape))
        return tensor
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        out = backward.attention(*leaves, True, forward=backward.reference_forward_with_lse)
    assert saved == [(1, 4, 24, 16), (1, 2, 40, 16), (1, 2, 40, 16), (1, 4, 24, 16), (1, 4, 24)]  # Q K V O L
    (out * do).sum().backward()
    expected = attention_torch(q, k, v, True)
    assert (out - expected).abs().max().item() <= 1e-5
    grads = [leaf.grad for leaf in leaves]
    assert _worst_share(grads, q, k, v, do, True, torch.float64) <= backward.GRAD_TOLERANCE[torch.float32]


def test_an_expanded_upstream_gradient_is_made_contiguous():
    q, k, v, _ = _inputs(1, 2, 1, 20, 20, 16, torch.float32, seed=8)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    backward.attention(*leaves, False, forward=backward.reference_forward_with_lse).sum().backward()  # dO: one expanded scalar
    ones = torch.ones_like(q)
    assert _worst_share([leaf.grad for leaf in leaves], q, k, v, ones, False, torch.float64) <= 1e-5


@pytest.mark.parametrize("causal", [False, True])
def test_the_default_forward_is_the_tuned_kernel_and_the_step_is_exact(causal):
    """loss.backward() through the book's own forward (tuned_forward with return_lse) and backward kernels."""
    q, k, v, do = _inputs(1, 4, 2, 50, 50, 16, torch.float32, seed=3)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = backward.attention(*leaves, causal)
    out.backward(do)
    reference = attention_torch(q.double(), k.double(), v.double(), causal, compute_dtype=torch.float64)
    assert (out.double() - reference).abs().max().item() < 1e-5
    assert _worst_share([leaf.grad for leaf in leaves], q, k, v, do, causal, torch.float64) <= backward.GRAD_TOLERANCE[torch.float32]


@pytest.mark.parametrize("change, message", [
    (lambda q, k, v, o, lse, do: (q[..., :12], k[..., :12], v[..., :12], o[..., :12], lse, do[..., :12]), "power of two"),
    (lambda q, k, v, o, lse, do: (q, k, v, o, lse[..., :-1], do), "lse must be"),
    (lambda q, k, v, o, lse, do: (q, k, v, o, lse, do[:, :1]), "o and do must have q's shape"),
    (lambda q, k, v, o, lse, do: (q, k.half(), v, o, lse, do), "share one dtype"),
    (lambda q, k, v, o, lse, do: tuple(t.bfloat16() if t is not lse else t for t in (q, k, v, o, lse, do)),
     "interpreter computes bfloat16"),
])
def test_bad_input_is_one_clear_line(change, message):
    if ON_GPU and "interpreter" in message:
        pytest.skip("a GPU computes bfloat16")
    q, k, v, do = _inputs(1, 2, 1, 16, 16, 16, torch.float32, seed=0)
    o, lse = backward.reference_forward_with_lse(q, k, v, False)
    with pytest.raises(LabError, match=message) as err:
        backward.attention_backward(*change(q, k, v, o, lse, do))
    assert "\n" not in str(err.value)


def test_a_launch_needs_power_of_two_tiles():
    q, k, v, do = _inputs(1, 2, 1, 16, 16, 16, torch.float32, seed=0)
    o, lse = backward.reference_forward_with_lse(q, k, v, False)
    for config in ({"BLOCK_M": 48, "BLOCK_N": 16}, {"BLOCK_M": 8, "BLOCK_N": 16}, {"BLOCK_N": 16}):
        with pytest.raises(LabError, match="powers of two"):
            backward.attention_backward(q, k, v, o, lse, do, dq_config=config)


def test_backward_flops_are_two_and_a_half_forwards_with_causal_halved():
    assert backward.backward_flops(1, 28, 16384, 16384, 128, True) == 2.5 * attention_flops(1, 28, 16384, 16384, 128, True)
    assert backward.backward_flops(1, 1, 8, 8, 16, False) == 2.5 * 4 * 8 * 8 * 16
    assert backward.backward_flops(1, 1, 8, 8, 16, True) == backward.backward_flops(1, 1, 8, 8, 16, False) / 2


def test_gradient_errors_are_shares_of_the_largest_entry():
    reference = [torch.tensor([2.0, -4.0]), torch.tensor([1.0]), torch.tensor([0.5, 0.5])]
    grads = [torch.tensor([2.0, -3.9]), torch.tensor([1.0]), torch.tensor([0.5, 0.45])]
    errors, worst = backward.gradient_errors(grads, reference)
    assert errors == pytest.approx([0.1, 0.0, 0.05]) and worst == pytest.approx(0.1)


# --- the autotuning spaces, compiled for Hopper without a GPU ---------------------------------------

# In a child process with TRITON_INTERPRET=0: the suite runs under the interpreter, which the compiler refuses.
COMPILE = """
import json
from lab.measure.attention import backward
out = {}
for name, configs in (("dkdv", backward.DKDV_CONFIGS), ("dq", backward.DQ_CONFIGS)):
    for config in configs:
        launch = {**config.kwargs, "num_warps": config.num_warps, "num_stages": config.num_stages}
        for d in (64, 128):
            out[f"{name} {launch} d={d}"] = backward.compile_for_hopper(name, launch, d, causal=True)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def compiled():
    done = subprocess.run([sys.executable, "-c", COMPILE], env={**os.environ, "TRITON_INTERPRET": "0"},
                          cwd=Path(__file__).resolve().parent.parent, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_autotune_config_compiles_for_hopper_without_spills(compiled):
    assert len(compiled) == 2 * (len(backward.DKDV_CONFIGS) + len(backward.DQ_CONFIGS))
    for launch, report in compiled.items():
        assert report["spill_bytes"] == 0, (launch, report)
        assert not report["serialised"], (launch, report)           # ptxas would wait after every wgmma
        assert report["shared_bytes"] <= 227 * 1024, (launch, report)  # Hopper's shared memory per block


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="the suite runs under the interpreter")
def test_compile_for_hopper_under_the_interpreter_says_what_to_do():
    with pytest.raises(LabError, match="TRITON_INTERPRET=0"):
        backward.compile_for_hopper("dq", {"BLOCK_M": 64, "BLOCK_N": 64})


# --- on the GPU ------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.skipif(not ON_GPU, reason="needs a CUDA GPU")
@pytest.mark.parametrize("n", [4096, 8192, 16384, 32768])
@pytest.mark.parametrize("d", [64, 128])
def test_gpu_training_step_matches_fp32_autograd(n, d):
    # causal GQA 28/4 in bf16, through the book's tuned forward and loss.backward(), as the race runs it
    q, k, v, do = _inputs(1, 28, 4, n, n, d, torch.bfloat16, seed=n + d)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = backward.attention(*leaves, True)
    out.backward(do)
    assert _worst_share([leaf.grad for leaf in leaves], q, k, v, do, True, torch.float32) \
        <= backward.GRAD_TOLERANCE[torch.bfloat16]


@pytest.mark.gpu
@pytest.mark.skipif(not ON_GPU, reason="needs a CUDA GPU")
@pytest.mark.parametrize("index", range(max(len(backward.DKDV_CONFIGS), len(backward.DQ_CONFIGS))))
def test_gpu_every_autotune_config_is_exact(index):
    as_launch = lambda c: {**c.kwargs, "num_warps": c.num_warps, "num_stages": c.num_stages}  # noqa: E731
    dkdv = as_launch(backward.DKDV_CONFIGS[index % len(backward.DKDV_CONFIGS)])
    dq = as_launch(backward.DQ_CONFIGS[index % len(backward.DQ_CONFIGS)])
    q, k, v, do = _inputs(2, 28, 4, 333, 500, 128, torch.bfloat16, seed=index)
    for causal in (False, True):
        o, lse = backward.reference_forward_with_lse(q, k, v, causal)
        grads = backward.attention_backward(q, k, v, o, lse, do, causal, dkdv_config=dkdv, dq_config=dq)
        assert _worst_share(grads, q, k, v, do, causal, torch.float32) <= backward.GRAD_TOLERANCE[torch.bfloat16]
