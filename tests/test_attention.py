"""Attention kernels against the naive reference: NumPy tiles (exact in fp64, bytes vs lab.results.iomodel),
Triton forward and split-KV decode (interpreter on CPU; the same tests on a GPU when there is one)."""

import math

import numpy as np
import pytest

from lab import LabError
from lab.measure.attention.reference import attention, attention_flops, attention_numpy, causal_mask
from lab.measure.attention.tiled import tiled_attention, tiled_attention_traffic
from lab.results import kernel_runs
from lab.results.iomodel import tiled_attention_hbm_bytes


def _qkv(rng, batch, q_heads, kv_heads, n_q, n_k, d, dtype=np.float64):
    q = rng.standard_normal((batch, q_heads, n_q, d)).astype(dtype)
    k = rng.standard_normal((batch, kv_heads, n_k, d)).astype(dtype)
    v = rng.standard_normal((batch, kv_heads, n_k, d)).astype(dtype)
    return q, k, v


# --- reference -------------------------------------------------------------------------------------

def test_reference_one_key_returns_its_value():
    # with a single key, softmax is 1 whatever the score: the output is that key's value row
    q = np.ones((1, 1, 3, 4))
    k = np.full((1, 1, 1, 4), 7.0)
    v = np.arange(4.0).reshape(1, 1, 1, 4)
    assert np.array_equal(attention(q, k, v), np.broadcast_to(v, (1, 1, 3, 4)))


def test_reference_hand_computed_two_keys():
    # q.k = [0, 2] scaled by 1/sqrt(4) -> [0, 1]; weights [1, e] / (1 + e)
    q = np.array([[[[1.0, 1.0, 0.0, 0.0]]]])
    k = np.array([[[[0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0]]]])
    v = np.array([[[[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]]]])
    e = math.e
    assert np.allclose(attention(q, k, v)[0, 0, 0], [1 / (1 + e), e / (1 + e), 0, 0], atol=1e-15)


def test_reference_causal_first_row_copies_first_value():
    rng = np.random.default_rng(1)
    q, k, v = _qkv(rng, 1, 2, 1, 5, 5, 8)
    out = attention(q, k, v, causal=True)
    assert np.allclose(out[:, :, 0], v[:, :, 0])


def test_causal_mask_aligns_queries_to_the_end():
    # 2 queries over 4 keys: the last query sees all 4 keys, the one before it 3
    assert causal_mask(2, 4).tolist() == [[True, True, True, False], [True, True, True, True]]


def test_reference_gqa_equals_repeated_heads():
    rng = np.random.default_rng(2)
    q, k, v = _qkv(rng, 2, 6, 2, 7, 9, 8)
    kr, vr = np.repeat(k, 3, axis=1), np.repeat(v, 3, axis=1)
    assert np.allclose(attention(q, k, v), attention(q, kr, vr), atol=0)


@pytest.mark.parametrize("shapes", [
    ((1, 3, 4, 8), (1, 2, 4, 8), (1, 2, 4, 8)),   # 3 query heads over 2 KV heads
    ((1, 2, 4, 8), (1, 2, 4, 4), (1, 2, 4, 4)),   # head dims differ
    ((1, 2, 4), (1, 2, 4, 8), (1, 2, 4, 8)),      # not 4-D
])
def test_reference_rejects_bad_shapes(shapes):
    with pytest.raises(LabError):
        attention(*(np.zeros(s) for s in shapes))


def test_reference_rejects_causal_with_more_queries_than_keys():
    rng = np.random.default_rng(3)
    with pytest.raises(LabError):
        attention(*_qkv(rng, 1, 1, 1, 8, 4, 4), causal=True)


def test_flops_causal_is_half():
    # 4 * n^2 * d per head: 4 * 1024^2 * 128 = 536_870_912; 28 heads; causal halves it
    assert attention_flops(1, 28, 1024, 1024, 128, causal=False) == 28 * 536_870_912
    assert attention_flops(1, 28, 1024, 1024, 128, causal=True) == 14 * 536_870_912


def test_torch_reference_matches_numpy():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    q, k, v = _qkv(rng, 2, 4, 2, 33, 40, 16)
    for causal in (False, True):
        expected = attention_numpy(q, k, v, causal)
        tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))
        got = attention(tq, tk, tv, causal).numpy()  # float64 tensors keep float64
        assert np.abs(got - expected).max() < 1e-6
        # chunked over queries (a tiny chunk budget forces one row at a time): same answer
        from lab.measure.attention.reference import attention_torch
        got = attention_torch(tq, tk, tv, causal, compute_dtype=torch.float64, chunk_bytes=1).numpy()
        assert np.abs(got - expected).max() < 1e-12


# --- NumPy tiles with an online softmax ---------------------------------------------------------------

@pytest.mark.parametrize("n_q,n_k,block_q,block_k", [
    (64, 64, 16, 16), (100, 100, 32, 48), (1, 257, 16, 64), (37, 50, 64, 7), (5, 5, 1, 1),
])
@pytest.mark.parametrize("causal", [False, True])
def test_tiled_exact_to_reference_fp64(n_q, n_k, block_q, block_k, causal):
    rng = np.random.default_rng(n_q * 1000 + n_k)
    q, k, v = _qkv(rng, 2, 4, 2, n_q, n_k, 16)
    q *= 3.0  # larger scores: the running max changes often, exercising the rescale
    got = tiled_attention(q, k, v, causal, block_q, block_k)
    assert np.abs(got - attention(q, k, v, causal)).max() < 1e-6


def test_tiled_rejects_bad_blocks():
    rng = np.random.default_rng(5)
    with pytest.raises(LabError):
        tiled_attention(*_qkv(rng, 1, 1, 1, 4, 4, 4), block_q=0)


@pytest.mark.parametrize("n_q,n_k,block_q,block_k,causal", [
    (128, 128, 32, 32, True), (128, 128, 32, 32, False), (100, 100, 32, 48, True),
    (3, 200, 16, 64, True), (70, 130, 64, 16, False),
])
@pytest.mark.parametrize("dtype", [np.float64, np.float16])
def test_tiled_traffic_matches_iomodel(n_q, n_k, block_q, block_k, causal, dtype):
    rng = np.random.default_rng(6)
    batch, q_heads, kv_heads, d = 2, 4, 2, 8
    q, k, v = _qkv(rng, batch, q_heads, kv_heads, n_q, n_k, d, dtype)
    _, traffic = tiled_attention_traffic(q, k, v, causal, block_q, block_k)
    per_head = tiled_attention_hbm_bytes(n_q, n_k, d, block_q, block_k, np.dtype(dtype).itemsize, causal)
    assert traffic.total_bytes == batch * q_heads * per_head
    assert traffic.bytes_written == q.nbytes  # O written exactly once


def test_tiled_traffic_hand_count():
    # one head, n=4, d=2, fp64 (8 bytes), tiles of 2, causal: query tile 0 visits key tile 0, tile 1 visits 0 and 1.
    # reads: Q 2 tiles * 2*2*8 = 64; K+V: 3 tile visits * 2 * 2*2*8 = 192. writes: O = 4*2*8 = 64.
    rng = np.random.default_rng(7)
    _, traffic = tiled_attention_traffic(*_qkv(rng, 1, 1, 1, 4, 4, 2), causal=True, block_q=2, block_k=2)
    assert (traffic.bytes_read, traffic.bytes_written) == (256, 64)
    assert [s[3] for s in traffic.steps] == [0, -1, 0, 1, -1]


# --- Triton kernels (interpreter on CPU, compiled on a GPU) -------------------------------------------

torch = pytest.importorskip("torch")
pytest.importorskip("triton")


import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from kernel_device import DEVICE, ON_GPU, TOLERANCE  # noqa: E402

from lab.measure.attention import launch_policy, split_kv, split_kv_tuned, teaching, tuned  # noqa: E402
from lab.measure.attention.exp_tricks import exp2_fma  # noqa: E402
from lab.measure.attention.reference import attention_torch, decode_errors, max_errors  # noqa: E402
from lab.measure.attention.switches import Switches  # noqa: E402

DTYPES = [torch.float32, torch.float16] + ([torch.bfloat16] if ON_GPU else [])
gpu_only = pytest.mark.skipif(not ON_GPU, reason="needs a GPU (long shapes are too slow for the interpreter)")


def _torch_qkv(batch, q_heads, kv_heads, n_q, n_k, d, dtype, seed):
    gen = torch.Generator(device=DEVICE).manual_seed(seed)  # fresh random inputs, never zeros
    make = lambda h, n: torch.randn(batch, h, n, d, generator=gen, device=DEVICE, dtype=torch.float32).to(dtype)  # noqa: E731
    return make(q_heads, n_q), make(kv_heads, n_k), make(kv_heads, n_k)


def _max_error(out, q, k, v, causal):
    assert out.shape == q.shape and out.dtype == q.dtype
    assert torch.isfinite(out).all()
    expected = attention_torch(q, k, v, causal, compute_dtype=torch.float64)
    return (out.double() - expected.double()).abs().max().item()


FWD_SHAPES = [(1, 4, 2, 37, 37, 64), (2, 2, 1, 48, 48, 128), (1, 4, 4, 20, 45, 64)]
if ON_GPU:
    FWD_SHAPES += [(2, 28, 4, 1000, 1000, 128), (1, 28, 4, 2048, 2048, 64), (1, 8, 2, 300, 777, 128)]


@pytest.mark.parametrize("shape", FWD_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("kernel", ["teaching", "tuned"])
def test_triton_forward_matches_reference(kernel, causal, dtype, shape):
    q, k, v = _torch_qkv(*shape, dtype, seed=sum(shape))
    if kernel == "teaching":
        out = teaching.teaching_forward(q, k, v, causal)
    elif ON_GPU and dtype != torch.bfloat16:  # autotuning is exercised in bf16; fixed tiles keep the GPU run short
        out = tuned.tuned_forward(q, k, v, causal, config={"BLOCK_M": 64, "BLOCK_N": 32, "num_warps": 4, "num_stages": 2},
                                  tma=False)  # the pointer path (bf16 on Hopper takes the TMA path)
    else:
        out = tuned.tuned_forward(q, k, v, causal)
    assert _max_error(out, q, k, v, causal) <= TOLERANCE[dtype]


@pytest.mark.parametrize("tma", [False, True], ids=["pointers", "tma"])
@pytest.mark.parametrize("config", [{"BLOCK_M": 32, "BLOCK_N": 16}, {"BLOCK_M": 16, "BLOCK_N": 16},
                                    {"BLOCK_M": 16, "BLOCK_N": 32}])
def test_triton_tuned_forward_tile_sizes(config, tma):
    # lengths that are not multiples of any tile: partial tiles on both sides of the diagonal;
    # with tensor descriptors (TMA), rows past the end must come back as zeros and never be stored
    q, k, v = _torch_qkv(2, 4, 2, 50, 50, 64, torch.float16, seed=11)
    for causal in (False, True):
        out = tuned.tuned_forward(q, k, v, causal, config=config, tma=tma)
        assert _max_error(out, q, k, v, causal) <= 4e-3


@gpu_only
@pytest.mark.parametrize("index", range(len(tuned.TUNED_CONFIGS)))
def test_triton_tuned_forward_every_autotune_config(index):
    config = tuned.TUNED_CONFIGS[index]
    as_dict = {**config.kwargs, "num_warps": config.num_warps, "num_stages": config.num_stages, "maxnreg": config.maxnreg}
    q, k, v = _torch_qkv(1, 28, 4, 333, 333, 128, torch.bfloat16, seed=index)
    for causal in (False, True):
        assert _max_error(tuned.tuned_forward(q, k, v, causal, config=as_dict), q, k, v, causal) <= 2e-2


def test_triton_forward_rejects_bad_input():
    q, k, v = _torch_qkv(1, 2, 1, 8, 8, 16, torch.float32, seed=0)
    with pytest.raises(LabError):
        tuned.tuned_forward(q[..., :12], k[..., :12], v[..., :12])     # head dim 12: not a power of two
    with pytest.raises(LabError):
        teaching.teaching_forward(q, k.half(), v)                        # mixed dtypes
    with pytest.raises(LabError):
        tuned.tuned_forward(q, k, v, config={"BLOCK_M": 16, "BLOCK_N": 8})          # tiles under 16
    with pytest.raises(LabError):
        tuned.tuned_forward(q, k, v, config={"BLOCK_M": 48, "BLOCK_N": 16})         # not a power of two



def test_launch_resources_before_any_gpu_launch_says_what_to_do():
    if ON_GPU:
        pytest.skip("on a GPU earlier tests have launched the kernel")
    with pytest.raises(LabError, match="call tuned_forward"):
        launch_policy.launch_resources()


@gpu_only
def test_launch_resources_describe_the_last_launch():
    q, k, v = _torch_qkv(1, 4, 2, 256, 256, 128, torch.bfloat16, seed=5)
    tuned.tuned_forward(q, k, v, True, config={"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 2}, tma=False)
    small = launch_policy.launch_resources()
    tuned.tuned_forward(q, k, v, True, config={"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3}, tma=False)
    large = launch_policy.launch_resources()
    assert small["registers"] > 0 and large["registers"] > 0
    assert 1 <= large["programs_per_sm"] <= small["programs_per_sm"]   # bigger tiles, fewer resident programs
    assert large["shared_kib"] > small["shared_kib"]

DECODE_SHAPES = [(2, 4, 2, 100, 64), (1, 7, 1, 37, 128), (3, 4, 4, 16, 64)]
if ON_GPU:
    DECODE_SHAPES += [(16, 28, 4, 4097, 128), (1, 28, 4, 32768, 128), (4, 32, 8, 1000, 64)]


@pytest.mark.parametrize("shape", DECODE_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("kernel", ["teaching", "tuned"])
def test_split_kv_decode_matches_reference(kernel, dtype, shape):
    batch, q_heads, kv_heads, n_k, d = shape
    q, k, v = _torch_qkv(batch, q_heads, kv_heads, 1, n_k, d, dtype, seed=n_k)
    if kernel == "teaching":
        out = split_kv.teaching_decode(q, k, v)
    elif ON_GPU and dtype != torch.bfloat16:  # settings are timed (autotuned) in bf16 only, to keep the GPU run short
        out = split_kv_tuned.tuned_decode(q, k, v, config={"BLOCK_N": 64, "num_warps": 4, "num_stages": 2})
    else:
        out = split_kv_tuned.tuned_decode(q, k, v)
    assert _max_error(out, q, k, v, False) <= TOLERANCE[dtype]


@pytest.mark.parametrize("splits", [1, 2, 5])
def test_split_kv_decode_any_split_count_is_exact(splits):
    # the combine step must give the same answer however the cache is cut
    q, k, v = _torch_qkv(1, 4, 2, 1, 90, 64, torch.float32, seed=splits)
    assert _max_error(split_kv.teaching_decode(q, k, v, num_splits=splits), q, k, v, False) <= 1e-5
    assert _max_error(split_kv_tuned.tuned_decode(q, k, v, config={"num_splits": splits}), q, k, v, False) <= 1e-5


@pytest.mark.parametrize("group", [64, 100, 130])
def test_split_kv_decode_spreads_a_large_group_over_row_blocks(group):
    # more query rows per KV head than one program holds (MAX_ROWS): row blocks read the same K/V
    q, k, v = _torch_qkv(1, 2 * group, 2, 1, 50, 16, torch.float32, seed=group)
    out = split_kv_tuned.tuned_decode(q, k, v, config={"BLOCK_N": 16, "num_stages": 1, "num_splits": 2})
    assert _max_error(out, q, k, v, False) <= 1e-5


def test_split_plan_covers_the_cache_without_empty_splits():
    # 32768 keys, 4 KV heads, 528 programs wanted -> 132 splits of 248.2 keys, rounded up to 256 (4 tiles of 64)
    assert split_kv.split_plan(32768, 4, 64, 528) == (128, 256)
    for n_k in (1, 63, 64, 65, 1000, 4097):
        splits, per = split_kv.split_plan(n_k, 3, 16, 50)
        assert per % 16 == 0 and (splits - 1) * per < n_k <= splits * per


def test_split_kv_decode_rejects_more_than_one_query():
    q, k, v = _torch_qkv(1, 2, 1, 2, 8, 16, torch.float32, seed=0)
    with pytest.raises(LabError):
        split_kv_tuned.tuned_decode(q, k, v)


@pytest.mark.parametrize("split_diagonal,heavy_first", [(False, False), (False, True), (True, False)])
def test_triton_tuned_forward_ablations_are_exact(split_diagonal, heavy_first):
    # the switches used to measure each optimisation must not change the answer
    q, k, v = _torch_qkv(1, 4, 2, 40, 40, 64, torch.float16, seed=3)
    config = {"BLOCK_M": 32, "BLOCK_N": 16}
    switches = Switches(split_diagonal=split_diagonal, heavy_first=heavy_first)
    out = tuned.tuned_forward(q, k, v, True, config=config, switches=switches)
    assert _max_error(out, q, k, v, True) <= 4e-3


FA3_SWITCHES = {"kv-major": {"kv_major": True}, "persistent": {"persistent": True},
                "kv-major-persistent": {"kv_major": True, "persistent": True},
                "warp-specialize": {"warp_specialize": True}, "lazy-rescale": {"rescale_threshold": 8.0},
                "poly-exp2": {"poly_exp2": True},
                "all": {"kv_major": True, "persistent": True, "rescale_threshold": 8.0, "poly_exp2": True}}


@pytest.mark.parametrize("tma", [False, True, "device"], ids=["pointers", "tma", "device-tma"])
@pytest.mark.parametrize("switch", FA3_SWITCHES, ids=str)
def test_triton_tuned_forward_fa3_steps_are_exact(switch, tma):
    # every step towards FA3, alone and combined, with each kind of tile load: causal and not, 7 query
    # heads per KV head (as Qwen2.5-7B), lengths that are no multiple of a tile, batch 2
    q, k, v = _torch_qkv(2, 7, 1, 50, 50, 32, torch.float16, seed=13)
    switches = Switches(**FA3_SWITCHES[switch])
    for causal in (False, True):
        out = tuned.tuned_forward(q, k, v, causal, config={"BLOCK_M": 32, "BLOCK_N": 16}, tma=tma, switches=switches)
        assert _max_error(out, q, k, v, causal) <= 4e-3


@pytest.mark.parametrize("switch", ["kv-major-persistent", "lazy-rescale", "all"])
def test_triton_tuned_forward_fa3_steps_fp32_and_more_keys_than_queries(switch):
    # fp32 stays exact (the polynomial exp2 is for 16-bit inputs only); queries aligned to the end of the keys
    q, k, v = _torch_qkv(1, 4, 2, 20, 45, 16, torch.float32, seed=17)
    for causal in (False, True):
        out = tuned.tuned_forward(q, k, v, causal, config={"BLOCK_M": 16, "BLOCK_N": 16},
                                  switches=Switches(**FA3_SWITCHES[switch]))
        assert _max_error(out, q, k, v, causal) <= 1e-5


def test_persistent_launch_is_exact_with_fewer_programs_than_units():
    # 2 programs for 2 x 4 heads x 4 query tiles: each program loops over many units of work
    q, k, v = _torch_qkv(2, 4, 2, 64, 64, 16, torch.float16, seed=19)
    out = tuned.tuned_forward(q, k, v, True, config={"BLOCK_M": 16, "BLOCK_N": 16, "programs_per_sm": 1},
                              switches=Switches(persistent=True))  # 4 "SMs" in the interpreter
    assert _max_error(out, q, k, v, True) <= 4e-3


@pytest.mark.parametrize("module", [teaching, tuned], ids=["teaching", "tuned"])
def test_check_runs_the_kernel_against_the_float64_reference(module):
    # what chapter 4 shows: 50 tokens, 4 query heads over 2 KV heads, fp32, without a mask and causal
    errors = module.check()
    assert set(errors) == {"no mask", "causal"}
    assert all(0 < error <= 1e-5 for error in errors.values()), errors   # (0: the kernel's own rounding)


def test_the_check_fails_a_wrong_kernel():
    wrong_mask = lambda q, k, v, causal: attention_torch(q, k, v, not causal)  # noqa: E731
    assert min(max_errors(wrong_mask).values()) > 0.1


@pytest.mark.parametrize("module", [split_kv, split_kv_tuned], ids=["teaching", "tuned"])
def test_decode_check_runs_the_kernel_against_the_float64_reference(module):
    # what chapter 5 shows: 300 cached tokens, 8 query heads over 2 KV heads, fp32, the cache cut into 1, 3, 7 pieces
    errors = module.check()
    assert set(errors) == {"1 piece", "3 pieces", "7 pieces"}
    assert all(0 < error <= 1e-5 for error in errors.values()), errors   # (0: the kernel's own rounding)


def test_decode_check_in_fp16():
    errors = split_kv.check(n_k=40, splits=(2,), dtype=torch.float16)
    assert 0 < errors["2 pieces"] <= TOLERANCE[torch.float16], errors


def test_the_decode_check_fails_a_wrong_kernel():
    # a kernel that never reads the last hundred cached keys (a split left out of the merge): the check must see it
    drops_keys = lambda q, k, v, pieces: attention_torch(q, k[:, :, :-100], v[:, :, :-100])  # noqa: E731
    assert min(decode_errors(drops_keys).values()) > 0.1


def _lse_reference(q, k, causal):
    """Each row's log-sum-exp of its scaled scores, in float64 (queries aligned to the end of the keys)."""
    n_q, n_k, d = q.shape[2], k.shape[2], q.shape[-1]
    keys = k.double().repeat_interleave(q.shape[1] // k.shape[1], dim=1)
    scores = q.double() @ keys.transpose(-1, -2) / d ** 0.5
    if causal:
        visible = torch.arange(n_k)[None, :] <= torch.arange(n_q)[:, None] + (n_k - n_q)
        scores = scores.masked_fill(~visible.to(scores.device), float("-inf"))
    return torch.logsumexp(scores, dim=-1)


LSE_CASES = {"teaching": (teaching.teaching_forward, torch.float32, {}),
             "tuned": (tuned.tuned_forward, torch.float32, {}),
             "tuned, TMA": (tuned.tuned_forward, torch.float32, {"config": {"BLOCK_M": 32, "BLOCK_N": 16}, "tma": True}),
             "tuned, persistent, lazy rescale": (tuned.tuned_forward, torch.float32,
                                                 {"config": {"BLOCK_M": 16, "BLOCK_N": 16, "programs_per_sm": 1},
                                                  "switches": Switches(persistent=True, rescale_threshold=8.0)}),
             "tuned, fp16, every switch": (tuned.tuned_forward, torch.float16,
                                           {"config": {"BLOCK_M": 32, "BLOCK_N": 16}, "tma": "device",
                                            "switches": Switches(**FA3_SWITCHES["all"])})}


@pytest.mark.parametrize("shape", [(2, 4, 2, 50, 50, 64), (1, 4, 2, 20, 45, 32)], ids=["50x50", "20x45"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("case", LSE_CASES)
def test_forward_returns_each_rows_log_sum_exp(case, causal, shape):
    forward, dtype, options = LSE_CASES[case]
    q, k, v = _torch_qkv(*shape, dtype, seed=29)
    out, lse = forward(q, k, v, causal, return_lse=True, **options)
    assert lse.shape == (shape[0], shape[1], shape[3]) and lse.dtype == torch.float32
    tolerance = 1e-5 if dtype == torch.float32 else 1e-3   # fp16: the polynomial exp2's 1e-4 relative error
    assert (lse.double() - _lse_reference(q, k, causal)).abs().max().item() <= tolerance
    assert torch.equal(out, forward(q, k, v, causal, **options))   # the output does not change with it


@pytest.mark.parametrize("forward", [teaching.teaching_forward, tuned.tuned_forward], ids=["teaching", "tuned"])
def test_a_row_that_sees_no_key_has_log_sum_exp_minus_infinity(forward):
    q, k, v = _torch_qkv(1, 2, 1, 5, 0, 16, torch.float32, seed=0)     # no keys at all: the only such rows
    with np.errstate(divide="ignore", invalid="ignore"):               # (the interpreter computes 0/0 and log 0)
        _, lse = forward(q, k, v, False, return_lse=True)
    assert torch.isneginf(lse).all()


@triton.jit
def _apply_exp2_fma(X, Y, N: tl.constexpr):
    offsets = tl.arange(0, N)
    tl.store(Y + offsets, exp2_fma(tl.load(X + offsets)))


def test_polynomial_exp2_within_bf16_rounding():
    # FA4's exp2 on the FMA units: relative error far below bf16's 2^-8, across the range scores take
    x = torch.linspace(-60.0, 8.0, 4096, device=DEVICE)
    y = torch.empty_like(x)
    _apply_exp2_fma[(1,)](x, y, N=4096)
    assert ((y.double() / torch.exp2(x.double()) - 1).abs().max().item()) < 1e-4


def test_tuned_forward_rejects_an_unknown_tile_load():
    q, k, v = _torch_qkv(1, 2, 1, 8, 8, 16, torch.float32, seed=0)
    with pytest.raises(LabError, match="tma must be"):
        tuned.tuned_forward(q, k, v, config={"BLOCK_M": 16, "BLOCK_N": 16}, tma="sometimes")


# --- the benchmark's bookkeeping (the timing itself needs a GPU) ----------------------------------------

def test_bench_measures_checks_and_ranks_on_cpu():
    from lab.measure import bench

    fake_ms = {"naive": 4.0, "ours-teaching": 2.0, "ours-tuned": 1.0}
    calls = iter(fake_ms.values())
    timer = lambda fn, **kw: (fn(), next(calls))[1]  # noqa: E731 - runs the candidate once, returns a made-up time
    shape = bench.Shape("prefill", 1, 4, 2, 40, head_dim=64)
    rows = bench.measure_shape(shape, ["naive", "ours-teaching", "ours-tuned"], 10, device=DEVICE, timer=timer,
                               dtype=torch.float16, rounds=1)
    assert [r["status"] for r in rows] == ["ok", "ok", "ok"]
    assert all(r["max_abs_err"] <= bench.MAX_ABS_ERR for r in rows)
    assert [r["speed_vs_fastest"] for r in rows] == [0.25, 0.5, 1.0]
    # causal prefill FLOPs: 4 * 40 * 40 * 64 * 4 heads / 2 = 819_200 per call; at 1 ms -> 8.192e-4 TFLOP/s
    assert rows[2]["tflops"] == pytest.approx(819_200 / 1e-3 / 1e12)


class _FakeClocks:
    """Stands in for lab.measure.gpuclocks.ClockSampler: records start/stop; each window holds two samples at
    1620 MHz and 690 W, the first with the software power cap (bit 0x4) active."""

    def __init__(self):
        self.log, self.running, self.samples = [], False, []

    def start(self):
        self.log.append("start")
        self.running = True

    def stop(self):
        self.log.append("stop")
        self.running = False
        self.samples = [{"timestamp": "t", "sm_mhz": 1620.0, "mem_mhz": 3201.0, "power_w": 690.0, "temp_c": 50.0,
                         "reasons": mask} for mask in (0x4, 0x0)]
        return {}


def test_bench_records_the_clocks_while_timing_and_stops_them_on_a_failure():
    from lab.measure import bench

    def timer(fn, **kw):
        if calls.pop(0) == "boom":
            raise RuntimeError("timing failed")
        fn()
        return 1.0

    calls = ["ok", "boom"]
    clocks = _FakeClocks()
    shape = bench.Shape("prefill", 1, 4, 2, 40, head_dim=64)
    rows = bench.measure_shape(shape, ["ours-teaching", "ours-tuned"], 10, device=DEVICE, timer=timer,
                               dtype=torch.float16, clocks=clocks, rounds=1)
    assert clocks.log == ["start", "stop", "start", "stop"] and not clocks.running
    assert (rows[0]["sm_mhz"], rows[0]["power_w"], rows[0]["clock_limit"]) == (1620.0, 690.0, "software power cap")
    assert rows[0]["clock_limit_share"] == 0.5
    assert rows[1]["status"] == "error" and "sm_mhz" not in rows[1]


def test_bench_times_candidates_in_interleaved_rounds(monkeypatch):
    # three rounds, each starting at a different candidate; a row's time is its median round
    from lab.measure import bench

    made_up = {"naive": [9.0, 5.0, 7.0], "ours-teaching": [2.0, 4.0, 3.0], "ours-tuned": [1.5, 1.0, 2.5]}
    order = []

    def timer(fn, **kw):
        name = current[0]
        order.append(name)
        return made_up[name][sum(1 for n in order if n == name) - 1]

    current = [None]
    real = bench.candidate_fn

    def tagged(name, phase):  # remember which candidate the timer is about to run
        inner = real(name, phase)

        def fn(*args):
            current[0] = name
            return inner(*args)
        return fn

    from lab.measure import timing

    monkeypatch.setattr(timing, "candidate_fn", tagged)   # where measure_shape looks the candidates up
    clocks = _FakeClocks()
    shape = bench.Shape("prefill", 1, 4, 2, 40, head_dim=64)
    rows = bench.measure_shape(shape, list(made_up), 30, device=DEVICE, timer=lambda fn, **kw: (fn(), timer(fn))[1],
                               dtype=torch.float16, clocks=clocks, rounds=3)
    assert order == ["naive", "ours-teaching", "ours-tuned", "ours-teaching", "ours-tuned", "naive",
                     "ours-tuned", "naive", "ours-teaching"]
    by_name = {r["candidate"]: r for r in rows}
    assert [by_name[n]["ms"] for n in made_up] == [7.0, 3.0, 1.5]
    assert by_name["naive"]["ms_rounds"] == "9 5 7"
    assert by_name["ours-tuned"]["speed_vs_fastest"] == 1.0 and by_name["naive"]["speed_vs_fastest"] == 1.5 / 7.0
    assert clocks.log.count("start") == 9 and not clocks.running
    assert by_name["naive"]["clock_limit_share"] == 0.5   # six samples over three windows, three capped


def test_round_order_starts_each_round_elsewhere():
    from lab.measure import bench

    assert [bench.round_order([1, 2, 3, 4, 5, 6], turn, 3) for turn in range(3)] == [
        [1, 2, 3, 4, 5, 6], [3, 4, 5, 6, 1, 2], [5, 6, 1, 2, 3, 4]]
    assert bench.round_order([1, 2], 0, 1) == [1, 2]


def test_the_one_rounds_loop_times_every_item_each_round_starting_elsewhere_and_stops_at_a_deadline():
    from lab.measure.timing import time_in_rounds

    seen, after = [], []
    items = ["a", "b", "a", "c"]                     # equal items are still timed apart
    times = time_in_rounds(items, lambda item, turn: seen.append((turn, item)) or (None if item == "c" else turn),
                           2, after_round=lambda turn, so_far: after.append([len(t) for t in so_far]))
    assert [item for _, item in seen] == ["a", "b", "a", "c", "a", "c", "a", "b"]
    assert times == [[0, 1], [0, 1], [0, 1], []] and after == [[1, 1, 1, 0], [2, 2, 2, 0]]
    assert time_in_rounds(items, lambda item, turn: turn, 5, stop=lambda turn: turn == 2) == [[0, 1]] * 4


def test_bench_bars_from_a_table():
    import pandas as pd

    from lab.measure import bench

    prefill = pd.DataFrame([
        {"candidate": c, "n": n, "status": "ok", "ms": ms}
        for n in (16384, 32768)
        for c, ms in (("sdpa-flash", 6.0), ("sdpa-cudnn", 3.0), ("flex", 5.0), ("ours-teaching", 7.0), ("ours-tuned", 4.0))
    ])
    decode = pd.DataFrame([
        {"candidate": "sdpa-flash", "n": 32768, "batch": 1, "status": "ok", "ms": 0.05, "bw_fraction": 0.3},
        {"candidate": "ours-tuned", "n": 32768, "batch": 1, "status": "ok", "ms": 0.04, "bw_fraction": 0.4},
        {"candidate": "ours-tuned", "n": 32768, "batch": 16, "status": "ok", "ms": 0.3, "bw_fraction": 0.75},
    ])
    table = {b["bar"]: b for b in bench.bars(prefill, decode)}
    assert table["prefill 16k: tuned speed vs SDPA flash"]["ratio"] == 1.5
    assert table["prefill 32k: tuned speed vs fastest torch backend"]["ratio"] == 0.75
    assert not table["prefill 32k: tuned speed vs fastest torch backend"]["met"]
    assert table["prefill 16k: teaching speed vs fastest torch backend"]["ratio"] == pytest.approx(3 / 7)
    assert table["decode 32k batch 1: tuned speed vs SDPA flash"]["ratio"] == pytest.approx(1.25)
    assert table["decode 32k batch 16: tuned bandwidth / copy bandwidth"]["met"]   # a run of before 2026-12
    decode["read_ceiling_gbps"] = 4500.0          # a run now: the share is of the read ceiling, and the bar says so
    table = {b["bar"]: b for b in bench.bars(prefill, decode)}
    assert table[bench.READ_BAR]["ratio"] == 0.75 and bench.COPY_BAR not in table


def test_a_decode_rows_bandwidth_share_is_of_the_read_ceiling_not_the_copy_rate():
    from lab.measure import timing

    shape = timing.Shape("decode", 1, 4, 2, 4096, 16)
    rows = [{"candidate": "ours-tuned", "status": "ok", "seconds": 0.0}]
    timed = timing._Rounds(shape, None, None, None, 1, sets=None)
    timed.timings["ours-tuned"] = [{"ms": 0.01}]
    timing._summarise(shape, rows, timed, None, 3000.0, 4000.0, None)
    row = rows[0]
    assert row["bw_fraction"] == pytest.approx(row["gbps"] / 4000.0) and row["copy_gbps"] == 3000.0
    assert row["read_ceiling_gbps"] == 4000.0


def test_bench_without_gpu_says_what_to_do(capsys):
    if ON_GPU:
        pytest.skip("this machine has a GPU")
    from lab.__main__ import main

    assert main(["bench"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: no CUDA GPU") and "\n" not in err


def test_bench_rejects_zero_rounds_in_one_line():
    from refusals import refused

    err = refused(["bench", "--rounds", "0"])
    assert "argument --rounds: expected a positive integer, got '0'" in err and err.count("\n") == 1


def test_bench_rebuild_from_measurements(tmp_path):
    # a run cut off midway leaves measurements.jsonl; --rebuild turns it into the tables without a GPU
    import json

    from lab.__main__ import main

    rows = [{"phase": "prefill", "candidate": c, "batch": 1, "q_heads": 28, "kv_heads": 4, "head_dim": 128, "n": 16384,
             "dtype": "bfloat16", "causal": True, "status": "ok", "ms": ms} for c, ms in (("sdpa-flash", 6.0), ("ours-tuned", 4.0))]
    rows.append({"phase": "decode", "candidate": "ours-tuned", "batch": 16, "n": 32768, "status": "ok", "ms": 0.25,
                 "bw_fraction": 0.9})
    (tmp_path / "measurements.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["bench", "--rebuild", str(tmp_path)]) == 0
    import pandas as pd
    assert list(pd.read_csv(tmp_path / "prefill.csv").candidate) == ["sdpa-flash", "ours-tuned"]
    bars = pd.read_csv(tmp_path / "bars.csv").set_index("bar")
    assert bars.loc["prefill 16k: tuned speed vs SDPA flash", "ratio"] == 1.5
    assert bars.loc["decode 32k batch 16: tuned bandwidth / copy bandwidth", "met"]


@pytest.mark.parametrize("content, message", [
    ("", "no measurements in it"),
    ('{"phase": "prefill", "note": "schema-less"}\n', "line 1 has no field 'candidate'"),
    ('{"candidate": "ours-tuned", "n": 16384, "status": "ok", "ms": 4.0}\n{}\n', "line 2 has no field 'candidate'"),
    ('{"candidate": "ours-tuned", "n": 16384, "status": "ok"}\n', "has status ok but ms None"),
    ('42\n', "line 1 is 42, not a JSON object"),
])
def test_bench_rebuild_refuses_a_file_without_measurements_and_keeps_the_tables(tmp_path, capsys, content, message):
    from lab.__main__ import main

    (tmp_path / "measurements.jsonl").write_text(content)
    for name in ("bars.csv", "prefill.csv"):
        (tmp_path / name).write_text(f"the tables of the run, {name}\n")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert main(["bench", "--rebuild", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_bench_keeps_the_names_other_modules_import():
    from lab.measure import bench, candidates, timing

    assert bench.Shape is candidates.Shape and bench.measure_shape is timing.measure_shape
    assert bench._inputs is bench.inputs is candidates.inputs
    for name in ("candidate_fn", "rotation", "round_order", "copy_bandwidth_gbps", "CANDIDATES", "ablation",
                 "graph_replay_ms", "rounds_text", "MAX_ABS_ERR", "OURS", "bars", "write_tables"):
        assert hasattr(bench, name), name


def test_cached_h200_kernels_dataset_is_readable():
    from lab.results import data

    ds = data.load("h200/kernels")
    assert ds.kind == "kernels" and ds.gpu == "NVIDIA H200"
    prefill = ds.csv("prefill.csv", ("candidate", "n", "status", "ms", "tflops", "max_abs_err"))
    ok = prefill[prefill.status == "ok"]
    assert (ok.max_abs_err <= 2e-2).all()  # every timed candidate was checked against the reference first
    decode = ds.csv("decode.csv", ("candidate", "batch", "n", "ms", "gbps", "bw_fraction"))
    assert set(decode.batch) == {1, 16}


def test_online_softmax_trace_hand_computed():
    from lab.measure.attention.tiled import online_softmax_trace

    # tile 1 = [1, 2]: m = 2, l = e^-1 + 1. tile 2 = [3]: m = 3, old sum rescaled by e^-1, plus e^0.
    steps, probs = online_softmax_trace([1.0, 2.0, 3.0], block=2)
    assert [s["m"] for s in steps] == [2.0, 3.0]
    assert steps[1]["rescale"] == pytest.approx(math.exp(-1))
    assert steps[1]["l"] == pytest.approx(math.exp(-2) + math.exp(-1) + 1)
    assert np.allclose(probs, np.exp([1, 2, 3]) / np.exp([1, 2, 3]).sum(), atol=1e-15)


def test_bars_over_runs_counts_met_and_ignores_unmeasured():
    import pandas as pd

    from lab.results.kernel_runs import bars_over_runs

    first = pd.DataFrame({"bar": ["a", "b"], "ratio": [0.9, 1.2], "need": [0.8, 1.0], "met": [True, True]})
    second = pd.DataFrame({"bar": ["a", "b"], "ratio": [0.75, float("nan")], "need": [0.8, 1.0], "met": [False, False]})
    table = bars_over_runs({"first": first, "second": second}).set_index("bar")
    assert table.loc["a", "met"] == 1 and table.loc["a", "measured"] == 2 and table.loc["a", "worst"] == 0.75
    assert table.loc["b", "met"] == 1 and table.loc["b", "measured"] == 1     # the empty ratio counts neither way
    assert list(table.index) == ["a", "b"]
    with pytest.raises(LabError):
        bars_over_runs({})


def test_stored_runs_label_a_bench_run_and_its_repeats(tmp_path):
    import json


    record = {"kind": "kernels", "gpu": "NVIDIA H200", "driver": "580", "cuda": "13.0", "torch": "2.11.0",
              "triton": "3.6.0", "vllm": None, "model": None, "dtype": "bfloat16", "flags": {},
              "date": "2026-11-30T08:00:00+00:00", "command": "python -m lab bench"}
    for folder in ("h200/k/bench", "h200/k/run2", "h200/k/run10", "h200/k/run1", "h200/k-other", "h200/k/runs"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "provenance.json").write_text(json.dumps(record))
    runs = kernel_runs.stored_runs("h200/k", root=tmp_path)
    assert list(runs) == ["bench run", "repeat 1", "repeat 2", "repeat 10"]
    assert runs["repeat 10"].path == tmp_path / "h200/k/run10"
    with pytest.raises(LabError, match="no bench runs under data/h200/none"):
        kernel_runs.stored_runs("h200/none", root=tmp_path)


def test_runs_of_record_and_their_rows(tmp_path):
    import json


    record = {"kind": "kernels", "gpu": "NVIDIA H200", "driver": "580", "cuda": "13.0", "torch": "2.11.0",
              "triton": "3.6.0", "vllm": None, "model": None, "dtype": "bfloat16", "flags": {},
              "date": "2026-11-30T08:00:00+00:00", "command": "python -m lab bench"}
    for folder, ms in ((kernel_runs.RECORD, 3.6), (f"{kernel_runs.RECORD_REPEATS}/run1", 3.7)):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "provenance.json").write_text(json.dumps(record))
        (tmp_path / folder / "prefill.csv").write_text(
            f"candidate,n,status,ms,ms_rounds\nours-tuned,16384,ok,{ms},{ms} 3.5 3.9\nours-tuned,32768,ok,14.9,14.9\n")
    runs = kernel_runs.runs_of_record(root=tmp_path)
    assert list(runs) == ["bench run", "repeat 1"]
    rows = kernel_runs.prefill_rows(runs, 16384, ("candidate", "n", "ms", "ms_rounds"))
    assert list(rows.run) == ["bench run", "repeat 1"] and list(rows.ms) == [3.6, 3.7]
    assert kernel_runs.round_times(rows.ms_rounds.iloc[0]) == [3.6, 3.5, 3.9]
    # without repeats, the bench run alone
    import shutil
    shutil.rmtree(tmp_path / kernel_runs.RECORD_REPEATS)
    assert list(kernel_runs.runs_of_record(root=tmp_path)) == ["bench run"]
