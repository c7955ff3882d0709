"""One server step with the book's kernels (lab.measure.attention.serving), as the vLLM backend calls it: a decode
step goes to the split-KV kernel, anything else to the varlen prefill kernel, results land in the engine's output
buffer, padding rows of a captured graph (sequences with no keys) come out as zeros, and the split plan may be
sized for a longer bound than the step's longest sequence. Triton's interpreter on CPU in fp32/fp16; bf16 on a GPU."""

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from kernel_device import DEVICE, ON_GPU, TOLERANCE  # noqa: E402

from lab import LabError  # noqa: E402
from lab.measure.attention.paged_prefill import paged_batch  # noqa: E402
from lab.measure.attention.reference import paged_varlen_attention_torch, softmax_scale  # noqa: E402
from lab.measure.attention.serving import server_step  # noqa: E402

DTYPES = [torch.float32, torch.float16] + ([torch.bfloat16] if ON_GPU else [])


def _step(q_lens, prefixes, dtype, split_keys=None, pad_rows: int = 0, head_dim: int = 64, q_heads=4, kv_heads=2,
          num_decodes: int = 0):
    q, k_cache, v_cache, cu, seq_lens, table = paged_batch(q_lens, prefixes, q_heads, kv_heads, head_dim, 16, dtype,
                                                           DEVICE, seed=3)
    exact = paged_varlen_attention_torch(*(t.double() if t.is_floating_point() else t
                                           for t in (q, k_cache, v_cache, cu, seq_lens, table)),
                                         compute_dtype=torch.float64)
    if pad_rows:  # a captured graph's padding: extra rows with no keys and one (ignored) query each
        q = torch.cat([q, torch.randn(pad_rows, *q.shape[1:], device=DEVICE).to(dtype)])
        seq_lens = torch.cat([seq_lens, torch.zeros(pad_rows, dtype=torch.int32, device=DEVICE)])
        table = torch.cat([table, torch.zeros(pad_rows, table.shape[1], dtype=torch.int32, device=DEVICE)])
        cu = torch.arange(q.shape[0] + 1, dtype=torch.int32, device=DEVICE)
    out = torch.full_like(q, float("nan"))
    returned = server_step(q, k_cache, v_cache, out, cu, seq_lens, table, max_query_len=max(q_lens),
                           scale=softmax_scale(head_dim), split_keys=split_keys or int(seq_lens.max()),
                           num_decodes=num_decodes)
    assert returned is out  # the engine's whole buffer, not the part one kernel wrote
    return out, exact


@pytest.mark.parametrize("dtype", DTYPES)
def test_decode_step_uses_the_engines_buffer(dtype):
    out, exact = _step([1, 1, 1], [40, 7, 129], dtype)
    assert torch.isfinite(out).all()
    assert (out.double() - exact).abs().max().item() < TOLERANCE[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
def test_mixed_step_prefill_chunk_and_decodes(dtype):
    out, exact = _step([1, 37, 1, 20], [99, 0, 250, 12], dtype)
    assert (out.double() - exact).abs().max().item() < TOLERANCE[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
def test_mixed_step_sends_its_leading_decodes_to_the_decode_kernel(dtype):
    # vLLM puts a step's decoding sequences first for this backend; their rows go to the split-KV kernel
    out, exact = _step([1, 1, 1, 37, 1, 20], [99, 250, 3, 0, 12, 40], dtype, num_decodes=3)
    assert torch.isfinite(out).all()
    assert (out.double() - exact).abs().max().item() < TOLERANCE[dtype]


def test_the_decode_count_routes_the_rows(monkeypatch):
    # the first num_decodes sequences reach the decode kernel and the rest the prefill kernel, with starts from 0
    from lab.measure.attention import serving

    seen = {}
    monkeypatch.setattr(serving, "paged_decode", lambda q, *a, **k: seen.setdefault("decode", q.shape[0]))
    monkeypatch.setattr(serving, "paged_prefill",
                        lambda q, kc, vc, cu, *a, **k: seen.setdefault("prefill", (q.shape[0], cu.tolist())))
    _step([1, 1, 37, 20], [99, 250, 0, 40], torch.float32, num_decodes=2)
    assert seen == {"decode": 2, "prefill": (57, [0, 37, 57])}


def test_decode_split_for_a_longer_bound_than_the_step():
    # a captured graph plans its splits for the longest sequence the server allows; most splits then see no keys
    out, exact = _step([1, 1], [30, 90], torch.float32, split_keys=2048)
    assert (out.double() - exact).abs().max().item() < TOLERANCE[torch.float32]


def test_padding_rows_come_out_zero():
    out, exact = _step([1, 1], [30, 90], torch.float32, split_keys=512, pad_rows=2)
    assert (out[:2].double() - exact).abs().max().item() < TOLERANCE[torch.float32]
    assert torch.equal(out[2:], torch.zeros_like(out[2:]))


def test_a_planted_bug_fails_the_comparison():
    # one key short per sequence (seq_lens off by one): the check must see it
    q, k_cache, v_cache, cu, seq_lens, table = paged_batch([1, 1], [30, 90], 4, 2, 64, 16, torch.float32, DEVICE)
    exact = paged_varlen_attention_torch(q, k_cache, v_cache, cu, seq_lens, table, compute_dtype=torch.float64)
    out = torch.empty_like(q)
    server_step(q, k_cache, v_cache, out, cu, seq_lens - 1, table, max_query_len=1, split_keys=128, scale=0.125)
    assert (out.double() - exact).abs().max().item() > 100 * TOLERANCE[torch.float32]


def test_an_empty_step_is_refused():
    q, k_cache, v_cache, cu, seq_lens, table = paged_batch([1], [3], 4, 2, 64, 16, torch.float32, DEVICE)
    with pytest.raises(LabError, match="at least one new token"):
        server_step(q, k_cache, v_cache, torch.empty_like(q), cu, seq_lens, table, max_query_len=0, split_keys=8,
                    scale=0.125)


def test_the_arm_refuses_the_head_sizes_the_kernels_refuse():
    # lab.measure.vllm.arms says it before a server starts, without importing the kernels: the same sizes
    from lab.measure.attention.paged_prefill import HEAD_DIMS
    from lab.measure.vllm.arms import OURS_HEAD_SIZES

    assert tuple(OURS_HEAD_SIZES) == tuple(HEAD_DIMS)


@pytest.mark.parametrize("text, why", [("{not json", "not JSON"), ('{"BLOCK_M": 64}', "needs BLOCK_M, BLOCK_N"),
                                       ('{"kernel": "gluon", "BLOCK_N": 128}', "needs BLOCK_N, STAGES"),
                                       ('[64, 64]', "needs BLOCK_M, BLOCK_N")])
def test_a_prefill_setting_a_server_cannot_run_is_refused_when_it_starts(monkeypatch, text, why):
    from lab.measure.attention.serving import prefill_config_from_env

    monkeypatch.setenv("LAB_OURS_PREFILL_CONFIG", text)
    with pytest.raises(LabError, match=why):
        prefill_config_from_env()


def test_the_gluon_prefill_is_refused_without_a_hopper_gpu(monkeypatch):
    from lab.measure.attention.serving import GLUON_PREFILL_CONFIG, PREFILL_CONFIG, prefill_config_from_env

    monkeypatch.setenv("LAB_OURS_PREFILL_CONFIG", json.dumps(PREFILL_CONFIG))
    assert prefill_config_from_env() == PREFILL_CONFIG
    monkeypatch.setenv("LAB_OURS_PREFILL_CONFIG", json.dumps(GLUON_PREFILL_CONFIG))
    if ON_GPU and torch.cuda.get_device_capability()[0] == 9:
        assert prefill_config_from_env() == GLUON_PREFILL_CONFIG
    else:
        with pytest.raises(LabError, match="needs a Hopper GPU"):
            prefill_config_from_env()


# Run with TRITON_INTERPRET=0 (the kernels must be Triton's JIT functions, whose binder computes the key a launch is
# compiled under); the kernels are not launched: each launch's arguments are recorded and keyed for sm_90.
_VARIANTS = """
import json, sys
import torch
from triton.backends.compiler import GPUTarget
from triton.compiler import make_backend
from triton.runtime.jit import create_function_from_signature
from lab.measure.attention import hopper_paged, paged_prefill, serving
from lab.measure.attention.paged_prefill import paged_batch

launches = []
class Recorder:
    def __init__(self, kernel):
        self.kernel = kernel
    def __getitem__(self, grid):
        return lambda *args, **kwargs: launches.append((self.kernel, args, kwargs))
hopper_paged.supports = lambda *args, **kwargs: None   # a CPU tensor is no Hopper GPU; the launch is not run
paged_prefill.interpreting = lambda: True                # CPU tensors pass the device check
hopper_paged.hopper_paged_kernel = Recorder(hopper_paged.hopper_paged_kernel)
paged_prefill.paged_prefill_kernel = Recorder(paged_prefill.paged_prefill_kernel)
serving.paged_decode = lambda *args, **kwargs: None     # the decode rows are another kernel's
for config in (serving.GLUON_PREFILL_CONFIG, serving.PREFILL_CONFIG):
    for q_lens, prefixes, decodes in json.loads(sys.argv[1]):
        q, k_cache, v_cache, cu, seq_lens, table = paged_batch(q_lens, prefixes, 28, 4, 128, 16, torch.bfloat16,
                                                               "cpu", seed=0)
        table = torch.nn.functional.pad(table, (0, 96 - table.shape[1]))  # vLLM's: one row width for the server
        serving.server_step(q, k_cache, v_cache, torch.empty_like(q), cu, seq_lens, table,
                            max_query_len=max(q_lens), split_keys=1536, scale=0.088, num_decodes=decodes,
                            prefill_config=config)
    if sys.argv[2] == "warm-up":   # the server's warm-up, at the width of vLLM's block table for 1,536 tokens
        serving.warm_up(28, 4, 128, 16, torch.bfloat16, "cpu", table_width=96, prefill_config=config)
backend = make_backend(GPUTarget("cuda", 90, 32))
keys = {}
for recorder_kernel, args, kwargs in launches:
    binder = create_function_from_signature(recorder_kernel.signature, recorder_kernel.params, backend)
    keys.setdefault(recorder_kernel.__name__, set()).add(repr(binder(*args, **kwargs)[1:]))
print(json.dumps({name: len(found) for name, found in keys.items()}))
"""


def test_a_server_compiles_each_prefill_kernel_once_whatever_its_steps():
    """A step's shape must not pick a new compiled variant: a server that meets one mid-load compiles it while
    every request waits (vLLM's JIT monitor logged a JIT event of the Gluon kernel mid-load). Steps: whole prompts, a short chunk
    (one 128-row tile), a 2,048-token chunk (16 tiles), and mixed steps whose 3 or 4 leading decodes slice the
    lengths at an offset of 12 or 16 bytes."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    steps = [([1024, 1024], [0, 0], 0), ([100], [300], 0), ([2048], [0], 0),
             ([1, 1, 1, 1024], [200, 300, 400, 0], 3), ([1, 1, 1, 1, 700], [200, 300, 400, 500, 324], 4)]
    # with the server's warm-up (lab.measure.attention.serving.warm_up) beside them: it compiles that one variant
    for warm_up in ("none", "warm-up"):
        found = subprocess.run([sys.executable, "-c", _VARIANTS, json.dumps(steps), warm_up], capture_output=True,
                               text=True, env={**os.environ, "TRITON_INTERPRET": "0"},
                               cwd=Path(__file__).resolve().parent.parent, timeout=600)
        assert found.returncode == 0, found.stderr[-2000:]
        assert json.loads(found.stdout.splitlines()[-1]) == {"hopper_paged_kernel": 1, "paged_prefill_kernel": 1}


def test_the_warm_up_builds_vllms_block_table_width():
    """vLLM 0.26 rounds a row of blocks up to a multiple of 128 / block size (MultiGroupBlockTable)."""
    from lab.measure.attention.serving import vllm_table_width

    assert vllm_table_width(1536, 16) == 96 and vllm_table_width(1000, 16) == 64
    assert vllm_table_width(131072, 64) == 2048 and vllm_table_width(4000, 256) == 16
