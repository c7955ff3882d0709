"""lab.results.sweeps and lab.book.plots.vllm: studies, fits, roofline floors and the explorer, with and
without H200 data (a made-up H200 study stands in until the real one is committed)."""

import shutil
from pathlib import Path

import matplotlib
import pytest
import synthetic_sweeps

from lab.book.sweep_explorer import sweep_explorer
from lab.results import data
from lab.results import sweeps as report
from lab.results.hardware import device
from lab.results.modelshape import qwen25_7b

#: An H200 read stream (made-up numbers): a data tree with H200 studies draws their floors under its ceiling.
BANDWIDTH_FIXTURE = Path(__file__).parent / "fixtures" / "bandwidth"


@pytest.fixture
def with_h200(tmp_path, monkeypatch):
    monkeypatch.setattr(data, "DATA_DIR", tmp_path)
    shutil.copytree(BANDWIDTH_FIXTURE, tmp_path, dirs_exist_ok=True)
    synthetic_sweeps.write_study(tmp_path)
    synthetic_sweeps.write_study(tmp_path, study="h200/vllm0.26-qwen2.5-7b-chunk2048", chunk=2048,
                                 arms={"FLASH_ATTN/FA3": (0.03, 26e-6, 300e-12, 5.0, 0.01)}, with_reference=False)
    return report.sweeps(tmp_path)


def test_studies_are_found_by_gpu_and_chunk_size(with_h200):
    table = with_h200
    assert report.find_study(table, "A10G") == report.A10G_STUDY
    assert report.find_study(table, "H200") == "h200/vllm0.26-qwen2.5-7b"  # the one with most arms
    assert report.find_study(table, "H200", chunk=2048) == "h200/vllm0.26-qwen2.5-7b-chunk2048"
    assert report.find_study(table, "B200") is None
    assert report.find_study(table, "H200", gpus=2) is None
    only_fa3 = table[~table["arm"].isin(["FLEX_ATTENTION", "FLASH_ATTN/FA2"])]
    assert report.find_study(only_fa3, "H200") == "h200/vllm0.26-qwen2.5-7b"  # a tie on arms: more rows wins
    assert report.chunk_size(table, report.A10G_STUDY) == 2048
    assert report.flag_values(table, "h200/vllm0.26-qwen2.5-7b", "max_num_batched_tokens") == [8192]


def test_fit_summary_recovers_the_formulas(with_h200):
    fits = report.fit_summary(with_h200, "h200/vllm0.26-qwen2.5-7b").set_index("arm")
    assert fits.loc["FLEX_ATTENTION", "c_ps_per_token2"] == pytest.approx(3000, rel=1e-6)
    assert fits.loc["FLASH_ATTN/FA3", "b_us_per_token"] == pytest.approx(25, rel=1e-6)
    # ITL grows by 1.5 ms per 1000 tokens from 5.4 ms: (5.4 + 49.152) / (5.4 + 0.384) - 1
    assert fits.loc["FLEX_ATTENTION", "itl_growth_pct"] == pytest.approx(((5.4 + 49.152) / (5.4 + 0.384) - 1) * 100)


def test_the_a10g_study_alone_still_works():
    table = report.sweeps()
    assert report.find_study(table, "A10G") == report.A10G_STUDY
    fits = report.fit_summary(table, report.A10G_STUDY).set_index("arm")
    assert fits.loc["FLASH_ATTN", "share_32768_pct"] == pytest.approx(35.8, abs=0.05)


def test_floors_by_hand():
    shape, a10g = qwen25_7b(), device("A10G")
    floor = report.floors("NVIDIA A10G", [1000, 30720])
    # the matmul floor per token: 2 FLOPs per weight of every layer and the LM head... over 70 TFLOP/s
    matmul_flops = shape.linear_flops_per_token()
    assert floor["b_floor"] == pytest.approx(matmul_flops / a10g.bf16_flops, rel=0.01)
    # a decode step reads at least the layer and LM-head weights (2 bytes each) and the KV cache of n tokens
    weights = 2 * (shape.layers * shape.linear_weights_per_layer + shape.lm_head_weights)
    kv = 30720 * shape.kv_bytes_per_token()
    assert floor["decode_s"][1] >= (weights + kv) / a10g.bandwidth
    assert floor["decode_s"][1] == pytest.approx((weights + kv) / a10g.bandwidth, rel=0.01)
    # causal attention: about 4·d FLOPs per (query, key) pair, n²/2 pairs, for every head of every layer
    attention = 4 * shape.head_dim * 30720**2 / 2 * shape.q_heads * shape.layers
    assert floor["c_floor"] * 30720**2 * a10g.bf16_flops == pytest.approx(attention, rel=0.05)
    with pytest.raises(Exception, match="no datasheet figures"):
        report.floors("Some GPU", [1000])


def test_kv_read_rate_of_the_a10g_backends():
    table = report.sweeps()
    flash = report.kv_read_rate(table, report.A10G_STUDY, "FLASH_ATTN")
    flex = report.kv_read_rate(table, report.A10G_STUDY, "FLEX_ATTENTION")
    assert 300 < flash["kv_gb_per_s"] < 600 and flex["kv_gb_per_s"] < 60  # A10G: 600 GB/s datasheet
    assert flash["kv_bytes_per_token"] == 57344  # 2 (K,V) x 28 layers x 4 heads x 128 x 2 bytes


def test_compare_and_against_floor(with_h200):
    table = with_h200
    ratio = report.compare_arms(table, "h200/vllm0.26-qwen2.5-7b", "FLASH_ATTN/FA2", "FLASH_ATTN/FA3")
    assert list(ratio["n"]) == synthetic_sweeps.LENGTHS and (ratio["TTFT ratio"] > 1).all()
    against = report.against_floor(table, report.A10G_STUDY)
    assert (against["ttft_x_floor"] > 1).all() and (against["itl_x_floor"] > 1).all()


def test_figures_and_explorer_with_both_gpus(with_h200, tmp_path):
    from lab.book.plots.vllm import plot_decode, plot_prefill

    studies = [report.A10G_STUDY, "h200/vllm0.26-qwen2.5-7b"]
    for plot in (plot_prefill, plot_decode):
        fig = plot(with_h200, studies)
        assert len(fig.axes) == 2
        matplotlib.pyplot.close(fig)
    explorer = sweep_explorer(tmp_path)
    assert explorer.controls[2].values[0] == report.A10G_STUDY
    view = explorer.compute(length=32768, backend="FLEX_ATTENTION", study="h200/vllm0.26-qwen2.5-7b", metric="ITL")
    values = {r.name: r.value for r in view.readouts}
    assert values["itl"] == pytest.approx(5.4 + 1.5 * 32.768)
    assert values["itl_range"].endswith("ms")
    missing = explorer.compute(length=24576, backend="FLASH_ATTN/FA2", study="h200/vllm0.26-qwen2.5-7b")
    assert missing.note.startswith("No FLASH_ATTN/FA2 measurement at 24576 tokens")
    assert len(explorer.combinations()) <= 1500


def test_floors_split_over_gpus():
    one, two = report.floors("NVIDIA H200", [2048]), report.floors("NVIDIA H200", [2048], gpus=2)
    assert two["decode_s"][0] == pytest.approx(one["decode_s"][0] / 2)
    assert two["b_floor"] == pytest.approx(one["b_floor"] / 2)


def test_tensor_parallel_study(with_h200, tmp_path):
    from lab.book.sweep_explorer import sweep_explorer
    from lab.results import sweep_variants

    assert sweep_variants.tensor_parallel(with_h200) is None
    synthetic_sweeps.write_study(tmp_path, study="h200x2/vllm0.26-qwen2.5-7b-tp2", tp=2, with_reference=False,
                                 arms={"FLASH_ATTN/FA3": (0.015, 13e-6, 160e-12, 3.5, 0.006)})
    table = report.sweep_table(tmp_path)
    study = "h200x2/vllm0.26-qwen2.5-7b-tp2"
    assert report.gpu_count(table, study) == 2 and report.study_label(table, study).startswith("2x NVIDIA H200")
    assert report.find_study(table, "H200") == "h200/vllm0.26-qwen2.5-7b"
    split = sweep_variants.tensor_parallel(table)
    assert split.gpus == 2 and split.lengths == synthetic_sweeps.LENGTHS
    # ITL 3.5 ms + ... against 5.0 ms + ...: the overhead is measured minus floor, split against one GPU
    assert split.itl_overhead_ms()[0] == pytest.approx(
        (split.itl_split[0] - split.decode_floor_split_ms[0]) - (split.itl_one[0] - split.decode_floor_one_ms[0]))
    from lab.book.plots.vllm import plot_tensor_parallel

    fig = plot_tensor_parallel(split)
    assert len(fig.axes) == 2
    matplotlib.pyplot.close(fig)
    explorer = sweep_explorer(tmp_path)
    studies = {c.name: c for c in explorer.controls}["study"]
    assert study in studies.values
    view = explorer.compute(study=study, backend="FLASH_ATTN/FA3", length=4096)
    assert view.readouts[0].value == pytest.approx(0.015 + 13e-6 * 4096 + 160e-12 * 4096**2)


def test_chunk_comparison_names_what_moved(with_h200):
    from lab.results import sweep_variants

    comparison = sweep_variants.chunk_comparison(with_h200)
    assert (comparison.small_chunk, comparison.large_chunk) == (2048, 8192)
    assert comparison.ratio("b") == pytest.approx(26 / 25) and comparison.ratio("c") == pytest.approx(1.0)
    assert comparison.moved("b")


def test_b_and_c_trade_off():
    from lab.results import sweep_variants

    lengths = [256 * 2**k for k in range(8)]
    assert sweep_variants.coefficient_correlation(lengths) < -0.9
    seconds = [0.02 + 20e-6 * n + 300e-12 * n * n for n in lengths]
    assert sweep_variants.refit_with_b(lengths, seconds, 20e-6) == pytest.approx(300e-12)
    assert sweep_variants.refit_with_b(lengths, seconds, 19e-6) > 300e-12  # a lower b pushes c up
