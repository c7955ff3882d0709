"""lab.results.roofline: intensities worked out by hand, the roof, and the model's phases."""

import json

import pytest

from lab import LabError
from lab.results import roofline
from lab.results.hardware import device
from lab.results.modelshape import QWEN25_7B, from_hf_config, qwen25_7b

H100 = roofline.roof(device("H100-SXM"))


def test_square_matmul_intensity():
    # 2·1024³ FLOPs over 2 bytes·3·1024² = 1024/3 FLOP per byte
    k = roofline.matmul_kernel(1024, 1024, 1024)
    assert k.flops == 2 * 1024**3 and k.bytes == 6 * 1024**2
    assert k.intensity == pytest.approx(1024 / 3)
    assert roofline.matmul_intensity(1024, 1024, 1024, "fp32") == pytest.approx(1024 / 6)


def test_decode_matmul_is_memory_bound():
    # one token times a 3584×3584 weight: 2·3584² FLOPs over 2·(3584 + 3584² + 3584) bytes ≈ 1 FLOP/byte
    k = roofline.matmul_kernel(1, 3584, 3584)
    assert k.intensity == pytest.approx(2 * 3584**2 / (2 * (3584**2 + 2 * 3584)))
    assert k.bound(H100) == "memory"


def test_attainable_is_the_min_of_the_roofs():
    assert roofline.attainable(100, 989.4e12, 3.35e12) == pytest.approx(3.35e14)
    assert roofline.attainable(1000, 989.4e12, 3.35e12) == 989.4e12
    assert H100.attainable(H100.ridge) == pytest.approx(H100.peak_flops)
    with pytest.raises(LabError):
        roofline.attainable(-1, 1, 1)


def test_naive_stages_1024_d128():
    qk, softmax, pv = roofline.attention_stages(1024, 1024, 128)
    # QKᵀ: 2·1024²·128 FLOPs; bytes 2·(2·1024·128 + 1024²) = 2_621_440 -> 102.4 FLOP/byte
    assert qk.flops == 2 * 1024**2 * 128 and qk.bytes == 2_621_440
    assert qk.intensity == pytest.approx(102.4)
    # softmax: 5 FLOPs per score, S read + P written = 4 bytes per score -> 1.25 FLOP/byte
    assert softmax.intensity == pytest.approx(1.25)
    assert pv.bytes == qk.bytes
    assert all(s.bound(H100) == "memory" for s in (qk, softmax, pv))


def test_fused_softmax_moves_nothing_and_total_matches_iomodel():
    from lab.results import iomodel
    stages = roofline.attention_stages(2048, 2048, 128, fused=True, sram_bytes=228 * 1024)
    assert stages[1].bytes == 0 and stages[1].intensity == float("inf")
    assert sum(s.bytes for s in stages) == iomodel.flash_attention_hbm_bytes(2048, 2048, 128, 228 * 1024, 2, True)
    naive = roofline.attention_kernel(2048, 2048, 128)
    fused = roofline.attention_kernel(2048, 2048, 128, fused=True, sram_bytes=228 * 1024)
    assert fused.intensity > naive.intensity and fused.flops < naive.flops  # causal tiles skipped
    with pytest.raises(LabError):
        roofline.attention_stages(16, 16, 16, fused=True)


def test_kernel_time_is_the_slower_roof():
    k = roofline.Kernel("x", flops=989.4e12, bytes=3.35e12 * 2)  # 1 s of compute, 2 s of memory
    assert k.time(H100) == pytest.approx(2.0) and k.bound(H100) == "memory"


def test_prefill_compute_bound_decode_memory_bound():
    prefill = roofline.model_phase(QWEN25_7B, "prefill", 4096, sram_bytes=228 * 1024)
    decode = roofline.model_phase(QWEN25_7B, "decode", 4096, sram_bytes=228 * 1024)
    assert prefill["linear"].bound(H100) == "compute"
    assert decode["total"].bound(H100) == "memory"
    # decode at batch 1 reads every weight once: bytes at least 2 × (28 layers × W + LM head)
    assert decode["linear"].bytes >= 2 * (28 * QWEN25_7B.linear_weights_per_layer + QWEN25_7B.lm_head_weights)
    assert decode["total"].intensity < 2


def test_decode_intensity_grows_with_batch():
    values = [roofline.model_phase(QWEN25_7B, "decode", 1024, sram_bytes=228 * 1024, batch=b)["linear"].intensity
              for b in (1, 8, 64)]
    assert values == sorted(values)


def test_model_shape_matches_config_and_counts_7_6b_weights(tmp_path):
    assert qwen25_7b() == QWEN25_7B or qwen25_7b().hidden == 3584
    assert 7.60e9 < QWEN25_7B.parameters < 7.62e9  # Qwen2.5-7B: 7.61B parameters
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                               "intermediate_size": 128, "vocab_size": 100}))
    small = from_hf_config(cfg)
    assert small.kv_heads == 4 and small.head_dim == 16
    cfg.write_text("{}")
    with pytest.raises(LabError):
        from_hf_config(cfg)


def test_roof_from_measured_ceilings():
    from lab.results.hardware import Ceilings
    r = roofline.roof(Ceilings("CPU (x86_64)", "fp32", 1e11, 1e10))
    assert r.ridge == pytest.approx(10) and "measured" in r.name
    with pytest.raises(LabError):
        roofline.roof("H100")


def test_roofline_plot_places_kernels():
    from lab.book.plots.roofline import plot_roofline
    kernels = roofline.attention_stages(1024, 1024, 128) + [roofline.matmul_kernel(1024, 1024, 1024)]
    ax = plot_roofline([H100, roofline.roof(device("A10G"))], kernels, source="test")
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(label.startswith("softmax+mask: 1.25 FLOP/B, memory") for label in labels)
    assert any("compute-bound" in label for label in labels)


def test_decode_attention_intensity_is_query_rows_per_kv_head():
    # 28 query heads over 4 KV heads: 4·28·d FLOPs per cached token against 2·4·d bf16 elements = 7 FLOP/byte
    assert roofline.decode_attention_intensity(28, 4) == pytest.approx(4 * 28 * 128 / (2 * 4 * 128 * 2))
    assert roofline.decode_attention_intensity(28, 4, query_tokens=8) == pytest.approx(56)  # a speculative step
    assert roofline.decode_attention_intensity(28, 4, dtype="fp32") == pytest.approx(3.5)


def test_mla_decode_intensity_counts_one_shared_latent():
    from lab.results.modelshape import DEEPSEEK_V2_MLA as mla

    key, value = mla.latent_dim + mla.rope_dim, mla.latent_dim  # 576 and 512: K and V are the same cached vector
    flops, nbytes = 2 * mla.heads * (key + value), 2 * key
    assert roofline.mla_decode_attention_intensity(mla.heads, mla.latent_dim, mla.rope_dim) == pytest.approx(flops / nbytes)
    assert roofline.mla_decode_attention_intensity(mla.heads, mla.latent_dim, mla.rope_dim) > 200  # ~ 2 x heads
