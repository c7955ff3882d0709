"""The paged split-KV decode kernel against the contiguous kernel and the naive reference (Triton's interpreter
on CPU in fp32/fp16; bf16 at real sizes on a GPU, marked gpu), the paginate helper, and the benchmark's rows."""

import os
import time

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from lab import LabError  # noqa: E402
from lab.measure import paged_bench  # noqa: E402
from lab.measure.attention import triton_decode, triton_paged_decode  # noqa: E402
from lab.measure.attention.reference import attention_torch  # noqa: E402
from lab.measure.attention.triton_paged_decode import paged_decode, paginate  # noqa: E402

ON_GPU = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"
DEVICE = "cuda" if ON_GPU else "cpu"
TOLERANCE = {torch.float32: 1e-5, torch.float16: 4e-3, torch.bfloat16: 2e-2}
needs_gpu = pytest.mark.skipif(not ON_GPU, reason="needs a CUDA GPU")


def _qkv(batch, q_heads, kv_heads, n, d, dtype, seed):
    gen = torch.Generator(device=DEVICE).manual_seed(seed)
    make = lambda *shape: torch.randn(*shape, generator=gen, device=DEVICE).to(dtype)
    return make(batch, q_heads, 1, d), make(batch, kv_heads, n, d), make(batch, kv_heads, n, d)


def _errors(out, q, k, v, lengths):
    """Max abs error of each sequence's output against the fp64 reference over its own first tokens."""
    assert out.shape == q.shape and out.dtype == q.dtype and torch.isfinite(out).all()
    errs = []
    for b, length in enumerate(lengths):
        ref = attention_torch(q[b:b + 1], k[b:b + 1, :, :length], v[b:b + 1, :, :length], compute_dtype=torch.float64)
        errs.append((out[b:b + 1].double() - ref.double()).abs().max().item())
    return max(errs)


# --- CPU (interpreter) -----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("page_size", [4, 16, 32])  # 4: several pages per 16-key tile; 32: a tile inside a page
@pytest.mark.parametrize("num_splits", [1, 3, 7])
def test_paged_matches_reference_ragged_and_shuffled(dtype, page_size, num_splits):
    lengths = [77, 13, 40]
    q, k, v = _qkv(3, 8, 2, 77, 32, dtype, seed=page_size + num_splits)
    k_cache, v_cache, table, lens = paginate(k, v, page_size, seq_lens=lengths, spare_pages=3, seed=num_splits)
    out = paged_decode(q, k_cache, v_cache, table, lens, config={"BLOCK_N": 16, "num_stages": 1,
                                                                 "num_splits": num_splits})
    assert _errors(out, q, k, v, lengths) <= TOLERANCE[dtype]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_paged_matches_contiguous_kernel(dtype):
    q, k, v = _qkv(2, 4, 1, 96, 64, dtype, seed=5)
    contiguous = triton_decode.tuned_decode(q, k, v)
    paged = paged_decode(q, *paginate(k, v, 16))
    assert (paged.double() - contiguous.double()).abs().max().item() <= TOLERANCE[dtype]


def test_page_order_does_not_matter_but_the_table_does():
    q, k, v = _qkv(1, 2, 1, 64, 16, torch.float32, seed=3)
    in_order = paged_decode(q, *paginate(k, v, 16, shuffle=False))
    shuffled = paged_decode(q, *paginate(k, v, 16, shuffle=True, seed=9))
    assert torch.allclose(in_order, shuffled, atol=1e-6)
    k_cache, v_cache, table, lens = paginate(k, v, 16, shuffle=True, seed=9)
    # two pages swapped in the table: the same set of keys (positions are already rotated into K by RoPE,
    # and softmax-weighted sums do not depend on the order), so the same output
    table[0, [0, 2]] = table[0, [2, 0]]
    assert torch.allclose(paged_decode(q, k_cache, v_cache, table, lens), in_order, atol=1e-6)
    table[0, 1] = table[0, 0]  # page 1 replaced by a second copy of page 0: a different set of keys
    assert not torch.allclose(paged_decode(q, k_cache, v_cache, table, lens), in_order, atol=1e-3)


def test_paginate_round_trip():
    k = torch.arange(2 * 3 * 10 * 4, dtype=torch.float32).view(2, 3, 10, 4)
    k_cache, v_cache, table, lens = paginate(k, -k, 4, seq_lens=[10, 5], spare_pages=2)
    assert table.dtype == torch.int32 and table.shape == (2, 3) and lens.tolist() == [10, 5]
    assert k_cache.shape == (3 + 2 + 2, 4, 3, 4)
    for b, length in enumerate([10, 5]):
        tokens = torch.arange(length)
        gathered = k_cache[table[b, tokens // 4].long(), tokens % 4]  # (length, kv_heads, d)
        assert torch.equal(gathered.transpose(0, 1), k[b, :, :length])
        assert torch.equal(v_cache[table[b, tokens // 4].long(), tokens % 4].transpose(0, 1), -k[b, :, :length])


@pytest.mark.parametrize("case", ["page", "dtype", "length", "zero", "table-dtype", "q"])
def test_bad_inputs_raise_one_clear_error(case):
    q, k, v = _qkv(2, 4, 2, 32, 16, torch.float32, seed=1)
    k_cache, v_cache, table, lens = paginate(k, v, 8)
    if case == "page":
        with pytest.raises(LabError, match="power of two"):
            paginate(k, v, 12)
        return
    if case == "dtype":
        k_cache = k_cache.half()
    elif case == "length":
        lens = torch.tensor([32, 33], dtype=torch.int32)
    elif case == "zero":
        lens = torch.tensor([32, 0], dtype=torch.int32)
    elif case == "table-dtype":
        table = table.long()
    elif case == "q":
        q = q.expand(2, 4, 2, 16)
    with pytest.raises(LabError):
        paged_decode(q, k_cache, v_cache, table, lens)


def test_bench_rows_on_cpu():
    def timer(call, sets, rep_ms):  # stands in for the CUDA-graph timer
        started = time.perf_counter()
        call(*sets[0])
        return (time.perf_counter() - started) * 1e3

    rows = paged_bench.measure(2, 64, (4, 16), 4, 2, rep_ms=3, rounds=3, progress=lambda _: None,
                               device="cpu", dtype=torch.float16, timer=timer)
    assert [(r["kernel"], r["page_size"]) for r in rows] == [("contiguous", None), ("paged", 4), ("paged", 16),
                                                            ("copy", None)]
    assert all(r["kv_bytes"] == 2 * 2 * 2 * 64 * 128 * 2 for r in rows)
    assert rows[0]["fraction_of_contiguous"] == 1.0
    assert all(r["max_abs_err"] <= 4e-3 for r in rows[:3])
    assert all(len(r["ms_rounds"].split()) == 3 for r in rows)
    assert set(paged_bench.COLUMNS) >= set(rows[0])


def test_bench_parses_shapes_and_refuses_bad_ones():
    assert paged_bench.parse_shapes("16x32k,1x128k") == [(16, 32768), (1, 131072)]
    with pytest.raises(LabError):
        paged_bench.parse_shapes("16,32k")
    assert paged_bench.kv_bytes(16, 4, 32768, 128) == 2 * 16 * 4 * 32768 * 128 * 2


# --- GPU, real sizes ---------------------------------------------------------------------------------

@pytest.mark.parametrize("page_size,config", [(16, None), (128, None), (16, {"BLOCK_N": 64, "num_warps": 4}),
                                              (128, {"BLOCK_N": 32, "num_warps": 4})],
                         ids=["16-tuned", "128-tuned", "16-wide-tiles", "128-narrow-tiles"])
@pytest.mark.gpu
@needs_gpu
def test_paged_bf16_at_real_sizes(page_size, config):
    lengths = [32768, 1000, 17, 20000]
    q, k, v = _qkv(4, 28, 4, 32768, 128, torch.bfloat16, seed=page_size)
    k_cache, v_cache, table, lens = paginate(k, v, page_size, seq_lens=lengths, spare_pages=100)
    out = paged_decode(q, k_cache, v_cache, table, lens, config=config)
    assert _errors(out, q, k, v, lengths) <= TOLERANCE[torch.bfloat16]
    full = paginate(k, v, page_size)
    contiguous = triton_decode.tuned_decode(q, k, v)
    assert (paged_decode(q, *full, config=config).float() - contiguous.float()).abs().max().item() <= 2e-2
    assert triton_paged_decode.best_paged_config(4, 28, 4, page_size, 32768, 128, torch.bfloat16) is not None \
        or config is not None
