"""The paged split-KV decode kernel against the contiguous kernel and the naive reference (Triton's interpreter
on CPU in fp32/fp16; bf16 at real sizes on a GPU, marked gpu), the paginate helper, and the benchmark's rows."""

import time

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from kernel_device import DEVICE, ON_GPU, TOLERANCE  # noqa: E402

from lab import LabError  # noqa: E402
from lab.measure import paged_bench  # noqa: E402
from lab.measure.attention import split_kv_tuned, triton_paged_decode  # noqa: E402
from lab.measure.attention.reference import attention_torch  # noqa: E402
from lab.measure.attention.triton_paged_decode import paged_decode, paginate  # noqa: E402

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
    contiguous = split_kv_tuned.tuned_decode(q, k, v)
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


def test_bench_rows_with_a_stand_in_timer():
    # the interpreter on CPU tensors; the compiled kernel on a GPU box (CPU tensors cannot reach it there)
    def timer(call, sets, rep_ms):  # stands in for the CUDA-graph timer
        started = time.perf_counter()
        call(*sets[0])
        return (time.perf_counter() - started) * 1e3

    rows = paged_bench.measure(2, 64, (4, 16), 4, 2, rep_ms=3, rounds=3, progress=lambda _: None,
                               device="cuda" if ON_GPU else "cpu", dtype=torch.float16, timer=timer)
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
    contiguous = split_kv_tuned.tuned_decode(q, k, v)
    assert (paged_decode(q, *full, config=config).float() - contiguous.float()).abs().max().item() <= 2e-2
    assert triton_paged_decode.best_paged_config(4, 28, 4, page_size, 32768, 128, torch.bfloat16) is not None \
        or config is not None


# --- lab.results.paged and the explorer (synthetic data; the committed run may be absent) ---------------

def write_synthetic_runs(root):
    """A paged-decode run and a flex-masks run shaped like the H200's, under ``root`` (numbers made up)."""
    import pandas as pd

    from lab import store

    rows = []
    for batch in (1, 16):
        for n in (32768, 131072):
            nbytes = paged_bench.kv_bytes(batch, 4, n, 128)
            base = nbytes / 4.0e12 * 1e3
            for kernel, page, ms in (("contiguous", None, base), ("paged", 16, base * 1.05), ("paged", 128, base * 1.01),
                                     ("fa3-paged", 16, base * (1.1 if batch == 1 else 1.02)), ("copy", None, 2 * base * 1.02)):
                rows.append({"kernel": kernel, "page_size": page, "batch": batch, "n": n, "ms": ms,
                             "ms_rounds": f"{ms:.5g} {ms:.5g} {ms:.5g}", "kv_bytes": nbytes,
                             "gb_per_s": (2 if kernel == "copy" else 1) * nbytes / ms / 1e6,
                             "copy_gb_per_s": nbytes / base / 1.02 / 1e6,
                             "fraction_of_contiguous": base / ms if kernel != "copy" else None,
                             "fraction_of_copy": base * 1.02 / ms if kernel != "copy" else None,
                             "max_abs_err": 0.004 if kernel != "copy" else None})
    folder = root / "h200" / "paged-decode"
    store.write_csv(folder, "paged.csv", pd.DataFrame(rows).reindex(columns=paged_bench.COLUMNS))
    store.write_provenance(folder, store.new_provenance("kernels", flags={"experiment": "paged-decode"}))
    masks = []
    for mask in ("causal", "sliding-window", "document"):
        for n in (16384, 4096):
            for impl, ms in (("flex", 1.0), ("sdpa-flash", 0.8 if mask == "causal" else None), ("sdpa-efficient", 3.0),
                             ("sdpa-cudnn", None)):
                masks.append({"mask": mask, "impl": impl, "n": n, "ms": ms * n / 16384 if ms else None,
                              "ms_rounds": "", "tflops_effective": 300.0 / ms if ms else None,
                              "max_abs_err": 0.004 if ms else None, "note": "" if ms else "refused"})
    folder = root / "h200" / "flex-masks"
    store.write_csv(folder, "masks.csv", pd.DataFrame(masks))
    store.write_provenance(folder, store.new_provenance("kernels", flags={"experiment": "flex-masks"}))


def test_paged_cache_arithmetic():
    from lab.results.paged import PagedCache

    cache = PagedCache(16, 4500, 2, bytes_per_token=100)
    assert cache.pages_per_sequence == 282 and cache.pages == 564
    assert cache.wasted_slots == 2 * 12 and cache.kv_bytes == 2 * 4500 * 100
    assert cache.allocated_bytes == cache.kv_bytes + cache.wasted_bytes
    assert cache.block_table_bytes == 564 * 4
    assert cache.reserved_waste_fraction(9000) == 0.5
    assert PagedCache(16, 32768, 1).wasted_slots == 0
    assert PagedCache(1, 4500, 1).wasted_slots == 0
    assert PagedCache(16, 1000, 1).bytes_per_token == 2 * 28 * 4 * 128 * 2  # Qwen2.5-7B, bf16
    with pytest.raises(LabError):
        PagedCache(0, 10, 1)
    with pytest.raises(LabError):
        cache.reserved_waste_fraction(100)


def test_results_say_not_measured_without_data(tmp_path):
    from lab.results import paged

    assert paged.paged_table(tmp_path) is None and paged.masks_table(tmp_path) is None
    assert paged.paged_value("ms", "paged", 16, 32768, 16, root=tmp_path) is None
    assert paged.mask_value("ms", "causal", "flex", 16384, root=tmp_path) is None
    assert paged.fastest_sdpa("causal", 16384, root=tmp_path) == (None, None)
    assert paged.measured_page_sizes(tmp_path) == []


def test_results_read_a_run(tmp_path):
    from lab.results import paged

    write_synthetic_runs(tmp_path)
    assert paged.measured_page_sizes(tmp_path) == [16, 128]
    assert paged.paged_value("fraction_of_contiguous", "paged", 16, 32768, 16, root=tmp_path) == pytest.approx(1 / 1.05)
    assert paged.paged_value("ms", "paged", 16, 32768, 64, root=tmp_path) is None  # a page size not measured
    assert paged.fastest_sdpa("sliding-window", 16384, root=tmp_path) == ("sdpa-efficient", 3.0)
    assert paged.fastest_sdpa("causal", 16384, root=tmp_path) == ("sdpa-flash", 0.8)
    assert paged.mask_value("ms", "causal", "sdpa-cudnn", 16384, root=tmp_path) is None  # refused: no time
    assert paged.measured_page_sizes(tmp_path) == [16, 128]  # FA3's rows add no page size of ours
    assert paged.paged_value("ms", "fa3-paged", 16, 32768, 128, root=tmp_path) is None  # FA3 ran 16-token pages only


def test_ours_against_fa3_paged_at_every_shape(tmp_path):
    from lab.results import paged

    assert paged.versus(root=tmp_path) is None  # not on file
    write_synthetic_runs(tmp_path)
    table = paged.versus(16, root=tmp_path).set_index(["batch", "n"])
    assert len(table) == 4
    assert table.loc[(1, 32768), "ours_vs_fa3"] == pytest.approx(1.1 / 1.05)
    assert table.loc[(16, 131072), "ours_vs_fa3"] == pytest.approx(1.02 / 1.05)
    assert table.loc[(16, 131072), "contiguous_vs_fa3"] == pytest.approx(1.02)


@pytest.mark.parametrize("with_data", [False, True], ids=["absent", "present"])
def test_explorer_shows_data_in_every_state(tmp_path, monkeypatch, with_data):
    from lab.book.paged_explorer import paged_explorer
    from lab.results import paged

    if with_data:
        write_synthetic_runs(tmp_path)
    monkeypatch.setattr(paged, "DATA_DIR", tmp_path)
    explorer = paged_explorer()
    measured_states = 0
    for combo in explorer.combinations():
        view = explorer.compute(**combo)
        texts = {r.name: r.text for r in view.readouts}
        assert all(texts[name] != "n/a" for name in ("kv", "pages", "wasted", "table"))
        assert "n/a" not in texts.values()  # a value, or why there is none
        measured_states += texts["paged_ms"].endswith(" ms")
        if with_data:  # elsewhere the nearest measured point, named in the note
            assert texts["paged_ms"].endswith((" ms", " ms (nearest measured)")), texts["paged_ms"]
        else:
            assert texts["paged_ms"] == texts["fa3_ms"] == "not measured yet"
        assert view.note
    assert measured_states == (2 * 2 * 2 if with_data else 0)  # page 16/128 x batch 1/16 x 32k/128k
    view = explorer.compute(page_size=16, context=32768, batch=16)
    assert ("measured on the H200" in view.note) == with_data
    explorer.static_html()  # the static page embeds every state


def test_an_unmeasured_point_shows_the_nearest_measured_one_and_says_so(tmp_path, monkeypatch):
    from lab.book.paged_explorer import paged_explorer
    from lab.results import paged

    write_synthetic_runs(tmp_path)
    monkeypatch.setattr(paged, "DATA_DIR", tmp_path)
    assert paged.nearest_measured(8, 64, 100000, root=tmp_path) == (16, 16, 131072)
    assert paged.nearest_measured(16, 16, 32768, root=tmp_path) == (16, 16, 32768)
    assert paged.nearest_measured(1, 1, 1000, root=tmp_path) == (16, 1, 32768)
    view = paged_explorer().compute(page_size=8, context=100000, batch=64)
    texts = {r.name: r.text for r in view.readouts}
    expected = paged.paged_value("ms", "paged", 16, 131072, 16, root=tmp_path)
    assert texts["paged_ms"] == f"{expected:.4f} ms (nearest measured)"
    assert "not measured at 8-token pages, batch 64, 100,000 tokens" in view.note
    assert "nearest measured point, 16-token pages, batch 16, 131,072 tokens" in view.note
