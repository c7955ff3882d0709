"""FlexAttention masks and score_mods against the naive reference with the same dense boolean mask
(FlexAttention uncompiled on CPU; compiled, bf16, on a GPU: marked gpu), and what a BlockMask skips."""

import time

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch.nn.attention.flex_attention")

from kernel_device import ON_GPU  # noqa: E402

from lab import LabError  # noqa: E402
from lab.measure.attention import flex_masks as fm  # noqa: E402


def _qkv(q_heads, kv_heads, n, d, dtype, device="cpu", seed=0):
    gen = torch.Generator(device=device).manual_seed(seed)
    return (torch.randn(2 if device == "cpu" else 1, h, n, d, generator=gen, device=device).to(dtype)
            for h in (q_heads, kv_heads, kv_heads))


@pytest.mark.parametrize("mask_name", fm.MASKS)
@pytest.mark.parametrize("capped", [False, True], ids=["plain", "soft-cap"])
def test_flex_matches_reference_with_dense_mask(mask_name, capped):
    n = 320  # not a multiple of the 128-token block: the last block row and column are cut
    q, k, v = _qkv(4, 2, n, 32, torch.float32)
    mask_mod = fm.mask_mod_for(mask_name, n, window=50)
    score_mod = fm.soft_cap(4.0) if capped else None
    out = fm.flex(q, k, v, fm.block_mask(mask_mod, n, n), score_mod)
    expected = fm.masked_reference(q, k, v, fm.dense_mask(mask_mod, n, n), score_mod, compute_dtype=torch.float64)
    assert (out.double() - expected).abs().max().item() <= 1e-5


def test_a_wrong_mask_is_caught():
    q, k, v = _qkv(2, 1, 256, 16, torch.float32, seed=1)
    out = fm.flex(q, k, v, fm.block_mask(fm.causal, 256, 256))
    window = fm.masked_reference(q, k, v, fm.dense_mask(fm.sliding_window(32), 256, 256))
    assert (out - window).abs().max().item() > 1e-2


def test_dense_masks_by_hand():
    window = fm.dense_mask(fm.sliding_window(3), 5, 5)
    expected = torch.tensor([[q >= j and q - j < 3 for j in range(5)] for q in range(5)])
    assert torch.equal(window, expected)
    docs = torch.tensor([0, 0, 1, 1, 1])
    document = fm.dense_mask(fm.document(docs), 5, 5)
    assert document[3].tolist() == [False, False, True, True, False]
    assert document[1].tolist() == [True, True, False, False, False]


def test_soft_cap_bounds_scores():
    scores = torch.tensor([-100.0, -1.0, 0.0, 1.0, 100.0])
    capped = fm.soft_cap(5.0)(scores, 0, 0, 0, 0)
    assert capped.abs().max() <= 5.0 and capped[0] == -capped[4] and torch.allclose(capped[1:4], scores[1:4], atol=0.02)


def test_block_counts_causal():
    # 4 x 4 tiles of 128: 6 above the diagonal skipped, 6 below computed whole, 4 on it masked
    assert fm.block_counts(fm.causal, 512, 512) == {"tiles": 16, "skipped": 6, "full": 6, "partial": 4,
                                                    "visible": 512 * 513 // 2}


def test_sliding_window_skips_more_as_the_sequence_grows():
    short = fm.block_counts(fm.sliding_window(256), 1024, 1024)
    long = fm.block_counts(fm.sliding_window(256), 4096, 4096)
    assert short["skipped"] / short["tiles"] < long["skipped"] / long["tiles"]
    assert long["visible"] == sum(min(i + 1, 256) for i in range(4096))


def test_document_ids():
    ids = fm.document_ids(1000, mean_length=100, seed=3)
    assert ids.shape == (1000,) and ids[0] == 0 and bool((ids.diff() >= 0).all()) and ids.max() >= 3
    with pytest.raises(LabError):
        fm.document_ids(0, 10)
    with pytest.raises(LabError, match="unknown mask"):
        fm.mask_mod_for("diagonal", 16)


def test_time_mask_rows_on_cpu():
    def timer(call, warmup, rep, return_mode):
        started = time.perf_counter()
        call()
        return (time.perf_counter() - started) * 1e3

    rows = fm.time_mask("sliding-window", 256, rep_ms=3, rounds=3, q_heads=4, kv_heads=2, head_dim=32,
                        progress=lambda _: None, device="cpu", dtype=torch.float32, timer=timer)
    by_impl = {r["impl"]: r for r in rows}
    assert set(by_impl) == set(fm.IMPLS)
    assert by_impl["flex"]["max_abs_err"] <= 1e-5 and by_impl["flex"]["tflops_effective"] > 0
    assert "plain causal" in by_impl["sdpa-flash"]["note"]
    assert all(set(r) <= set(fm.MASK_COLUMNS) for r in rows)


@pytest.mark.gpu
@pytest.mark.skipif(not ON_GPU, reason="needs a CUDA GPU")
@pytest.mark.parametrize("mask_name", fm.MASKS)
def test_compiled_flex_bf16_on_gpu(mask_name):
    n = 2048
    q, k, v = _qkv(28, 4, n, 128, torch.bfloat16, device="cuda", seed=2)
    mask_mod = fm.mask_mod_for(mask_name, n, device="cuda", window=512)
    out = fm.flex(q, k, v, fm.block_mask(mask_mod, n, n, device="cuda"), compiled=True)
    expected = fm.masked_reference(q, k, v, fm.dense_mask(mask_mod, n, n, "cuda"))
    assert (out.float() - expected.float()).abs().max().item() <= 2e-2
