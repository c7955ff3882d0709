"""lab.results readers for chapters 6 and 7: the Flex decomposition, values vs shapes, batch decode
floors and the trace readings; each absent-safe (None while its data is not on file) and checked
on a small fixture by value."""

from __future__ import annotations

import json
import math
import shutil

import pytest
import synthetic_sweeps

from lab import REPO_ROOT, LabError
from lab.results import census_windows as cd
from lab.results import concurrency, flex_decomposition, ours_serving, trace_analysis, value_dependence
from lab.results.bandwidth import ceiling
from lab.results.modelshape import qwen25_7b


def _provenance(folder, kind="kernels"):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "provenance.json").write_text(json.dumps(
        {"kind": kind, "gpu": "NVIDIA H200", "driver": None, "cuda": None, "torch": "2.11.0", "triton": None,
         "vllm": None, "model": "Qwen2.5-7B shape", "dtype": "bfloat16", "flags": {}, "date": "2026-11-30",
         "command": "test"}))


def test_readers_say_not_measured_while_absent(tmp_path):
    assert flex_decomposition.read(tmp_path) is None
    assert value_dependence.read(tmp_path) is None
    assert concurrency.load_points(root=tmp_path).empty
    assert concurrency.point(concurrency.load_points(root=tmp_path), "FLASH_ATTN/FA3", 2048, 1) is None


KERNELS = "kernels: triton_poi_fused_ones_0 grid=[1, 1, 1]; triton_tem_fused_flex_attention_0 grid=[{grid}]{extra}"


BANDWIDTH_FIXTURE = REPO_ROOT / "tests" / "fixtures" / "bandwidth"  # an H200 read stream whose slope is 4.5 TB/s


def test_flex_decomposition_factors(tmp_path):
    shutil.copytree(BANDWIDTH_FIXTURE, tmp_path, dirs_exist_ok=True)
    folder = tmp_path / flex_decomposition.DATASET
    _provenance(folder)
    rows = ["phase,batch,n,variant,ms,ms_rounds,kv_bytes,gb_per_s,tflops,max_abs_err,note"]
    for variant, ms, grid, extra in (("flex-default", 1.0, "1, 1, 28", ""), ("flex-forced", 1.0, "1, 1, 28", ""),
                                     ("flex-tiles16", 3.0, "1, 1, 28", ""), ("flex-paged", 12.0, "1, 1, 28", ""),
                                     ("flex-pad8", 2.0, "1, 4, 66", "; triton_red_fused_1 grid=[16, 1, 1]"),
                                     ("copy", 0.5, "", "")):
        note = KERNELS.format(grid=grid, extra=extra) if grid else ""
        rows.append(f'decode,1,32768,{variant},{ms},,{4e9},{4e9 / ms / 1e6},,0.001,"{note}"')
    rows.append("prefill,1,16384,flex-default,10.0,,,,400.0,0.002,")
    (folder / flex_decomposition.FILE).write_text("\n".join(rows) + "\n")
    dec = flex_decomposition.read(tmp_path)
    assert dec.factor("decode", 1, "flex-forced", "flex-default") == pytest.approx(1.0)
    assert dec.factor("decode", 1, "flex-paged", "flex-tiles16") == pytest.approx(4.0)
    assert dec.rate("prefill", 1, "flex-default") == 400.0 and dec.rate("decode", 1, "copy") == pytest.approx(8000)
    assert dec.factor("decode", 16, "flex-forced", "flex-default") is None
    assert dec.grid("decode", 1, "flex-pad8") == (1, 4, 66) and dec.programs("decode", 1, "flex-paged") == 28
    assert dec.extra_kernels("decode", 1, "flex-pad8") == 1 and dec.extra_kernels("decode", 1, "flex-default") == 0
    assert dec.programs("decode", 1, "copy") is None and dec.torch_checks_power_of_two() is None
    ladder = flex_decomposition.ladder(dec, "decode", 1, ceiling_bytes_per_s=8e12).set_index("variant")
    assert list(ladder.index) == ["flex-default", "flex-forced", "flex-tiles16", "flex-paged", "flex-pad8", "copy"]
    assert ladder.loc["flex-tiles16", "x_step"] == pytest.approx(3.0) and ladder.loc["flex-tiles16", "over"] == "flex-forced"
    assert ladder.loc["flex-paged", "x_step"] == pytest.approx(4.0)
    assert ladder.loc["flex-pad8", "x_step"] == pytest.approx(2.0) and ladder.loc["flex-pad8", "over"] == "flex-default"
    assert ladder.loc["flex-default", "pct_of_ceiling"] == pytest.approx(50.0)  # 4000 GB/s of an 8 TB/s ceiling
    assert math.isnan(ladder.loc["copy", "pct_of_ceiling"])  # a copy reads and writes: no share of a read ceiling
    assert dec.batches("decode") == [1] and dec.length("prefill") == 16384
    vllm = flex_decomposition.VllmFlex(None, 2000.0 / 3, None, None)  # GB/s: the paged variant reads at 1000/3
    assert flex_decomposition.vllm_over(dec, vllm) == pytest.approx(0.5)
    assert flex_decomposition.vllm_over(None, vllm) is None


def test_kernel_grids_from_a_note():
    note = "enable_gqa=True; " + KERNELS.format(grid="1, 64, 4", extra="; triton_poi_fused_2 grid=[8, 2, 1]")
    assert flex_decomposition.kernels(note)[-1] == ("triton_poi_fused_2", (8, 2, 1))
    assert flex_decomposition.template_grid(note) == (1, 64, 4)
    assert flex_decomposition.template_grid("enable_gqa=True") is None


def test_vllm_flex_rates_from_our_traces():
    flex = flex_decomposition.vllm_flex()
    shape, n = qwen25_7b(), flex_decomposition.VLLM_WINDOW_TOKENS
    # the KV cache of one step over the attention time of one step
    assert flex.decode_gb_per_s == pytest.approx(n * shape.kv_bytes_per_token() / (flex.decode_ms_per_step / 1e3) / 1e9)
    assert 10 < flex.decode_gb_per_s < 200 and 5 < flex.prefill_tflops < 100
    # vLLM's own decode kernel: one launch per layer and step, one program per query head
    decode = flex_decomposition.vllm_kernels(f"decode-{n}")
    assert decode[0].grid == (1, 1, shape.q_heads) and decode[0].calls % shape.layers == 0
    assert decode[0].ms_per_call * shape.layers == pytest.approx(flex.decode_ms_per_step, rel=0.05)
    assert flex_decomposition.vllm_kernels("decode-1") == []


def test_vllm_flex_without_a_census_is_not_measured(tmp_path):
    assert flex_decomposition.vllm_flex(tmp_path).decode_gb_per_s is None


def test_value_dependence(tmp_path):
    folder = tmp_path / value_dependence.DATASET
    _provenance(folder)
    (folder / value_dependence.FILE).write_text(
        "op,inputs,ms,ms_rounds,sm_mhz,power_w,clock_limit\n"
        "matmul,random,2.0,,1600,690,sw_power_cap\nmatmul,zeros,1.8,,1980,400,none\nmatmul,small,1.9,,1900,500,none\n"
        "kernel,random,1.0,,1980,450,none\nkernel,zeros,1.01,,1980,300,none\n")
    data = value_dependence.read(tmp_path)
    assert data.ops() == ["matmul", "kernel"]
    assert data.get("matmul", "zeros").vs_random_pct == pytest.approx(-10.0)
    assert data.largest_change_pct("matmul") == pytest.approx(10.0)
    assert data.largest_change_pct("kernel") == pytest.approx(1.0)
    assert data.power_range("matmul") == (400.0, 690.0)


def test_batch_floor_by_hand_and_failed_points_are_not_shown(tmp_path):
    shape = qwen25_7b()
    weights = 2 * (shape.layers * shape.linear_weights_per_layer + shape.lm_head_weights)
    assert concurrency.floor_step_s(16, 32768, 4.8e12) == pytest.approx((weights + 16 * 32768 * 57344) / 4.8e12)
    n = concurrency.kv_bound_batch(32768)
    assert concurrency.kv_bytes_per_step(int(n) + 1, 32768) > weights > concurrency.kv_bytes_per_step(int(n), 32768)
    with pytest.raises(LabError, match="not measured"):  # no datasheet fallback: the ceiling or nothing
        concurrency.floor_bandwidth("H200-SXM", tmp_path)
    assert concurrency.floor_bandwidth("H200-SXM", BANDWIDTH_FIXTURE)[0] == pytest.approx(4.5e12)
    folder = tmp_path / concurrency.H200_STUDY / "flash_attn-fa3"
    _provenance(folder, kind="vllm-sweep")
    (folder / concurrency.CSV).write_text("arm,context,concurrency,admitted,itl_ms,decode_tok_s,window_s,steps,ok\n"
                                          "FLASH_ATTN/FA3,32768,16,16,11.0,1450,5.0,400,True\n"
                                          "FLASH_ATTN/FA3,32768,64,40,30.0,1300,5.0,150,False\n")
    table = concurrency.with_floor(concurrency.load_points(root=tmp_path), 4.8e12)
    assert concurrency.point(table, "FLASH_ATTN/FA3", 32768, 16)["itl_ms"] == 11.0
    assert concurrency.point(table, "FLASH_ATTN/FA3", 32768, 64) is None  # a failed point is not shown


def test_concurrency_explorer_puts_each_point_on_the_floor_of_the_batch_vllm_ran(tmp_path):
    from lab.book.batch_explorer import concurrency_explorer

    empty = concurrency_explorer(tmp_path).view(16, 32768, "FLASH_ATTN/FA3")
    readouts = {r.name: r.value for r in empty.readouts}
    assert readouts["itl"] is None and "No measurement on file" in empty.note
    points = concurrency.load_points()
    if points.empty:
        pytest.skip("no concurrency sweep committed")
    top = points[(points.arm == "FLASH_ATTN/FA3") & (points.context == 32768)].sort_values("concurrency").iloc[-1]
    view = concurrency_explorer().view(int(top.concurrency), 32768, "FLASH_ATTN/FA3")
    readouts = {r.name: r.value for r in view.readouts}
    bandwidth, _ = concurrency.floor_bandwidth()
    floor_ms = 1e3 * concurrency.floor_step_s(int(top.admitted), 32768, bandwidth)
    assert readouts["admitted"] == top.admitted and readouts["floor_itl"] == pytest.approx(floor_ms)
    assert readouts["itl_floor"] == pytest.approx(top.itl_ms / floor_ms)


def test_trace_readings_of_the_published_a10g_census():
    table = cd.census_table()
    control = trace_analysis.control(table, "A10G")
    assert (control.matmul_flash, control.matmul_flex) == (5756.0, 5755.0) and control.holds
    assert control.attention_ratio == pytest.approx(8389 / 3098)
    naive = trace_analysis.naive_window(table, "FlashAttention", itl_ms=37.33)
    assert naive.window_s == pytest.approx(10.3) and naive.prefill_kernels_s == pytest.approx((3098 + 5756) / 1000)
    assert naive.decode_s == pytest.approx(30 * 37.33 / 1000)
    h200 = trace_analysis.control(table, "H200")
    assert not h200.holds  # the power cap: FA3's window runs its matmuls slower
    steps = trace_analysis.decode_per_step(table)
    assert steps["FlexAttention", 28672]["attention"] > 10 * steps["FlashAttention", 28672]["attention"]


def test_chapter_facts_glue_every_name_the_chapters_use():
    import re
    from pathlib import Path

    from lab.book.pages import ch06, ch06b, ch06c

    root = Path(__file__).resolve().parents[1] / "book"
    for chapter, facts in (("06-vllm-sweeps.md", ch06.facts()), ("06b-busy-server.md", ch06b.facts()),
                           ("06c-our-kernels-in-vllm.md", ch06c.facts())):
        used = set(re.findall(r"\{glue:text\}`([a-z0-9_]+)", (root / chapter).read_text()))
        assert used <= set(facts), sorted(used - set(facts))
        for name in used:  # a number glued with a format spec must be measured (missing ones are glued as text)
            spec = re.search(rf"`{name}:", (root / chapter).read_text())
            if spec:
                assert facts[name].measured and not facts[name].fmt, name


def test_chapter_facts_fill_in_when_the_data_lands(tmp_path):
    from lab.book.pages import ch06

    test_flex_decomposition_factors(tmp_path)
    test_value_dependence(tmp_path)
    empty = tmp_path / "empty"
    absent = ch06.flex_arm_facts(empty) | ch06.values_facts(empty)
    assert not absent["flexdec_b1_forced_x"].measured and not absent["values_matmul_max_pct"].measured
    assert not absent["flexdec_b1_flex_pad8_programs"].measured and absent["vllm_flex_decode_programs"].measured
    present = ch06.flex_arm_facts(tmp_path) | ch06.values_facts(tmp_path)
    text = lambda name: present[name].text().value  # noqa: E731  (what the page shows)
    assert text("flexdec_b1_forced_x") == "1.00×" and text("flexdec_b1_paged_x") == "4.00×"
    assert text("flexdec_b1_tiles16_x") == "3.00×" and text("flexdec_b1_flex_pad8_programs") == "264"
    assert text("flexdec_b1_pad8_combine") == "1" and text("vllm_flex_decode_programs") == "28"
    assert text("flexdec_b1_flex_default_pct") == f"{100 * 4000e9 / ceiling('H200-SXM'):.1f}%"
    assert present["flexdec_status"].value.endswith(f", {present['flexdec_status'].source}")
    assert text("values_matmul_max_pct") == "10.0%" and present["values_matmul_power"].value == "400 to 690 W"


def test_arms_sweep_puts_every_arm_of_a_lease_side_by_side(tmp_path):
    with pytest.raises(LabError, match="no arm's sweep.csv"):
        ours_serving.arms_sweep(tmp_path, run="h100/nothing")
    arms = {label: synthetic_sweeps.ARMS[label] for label in ("FLASH_ATTN/FA3", "FLEX_ATTENTION")}
    synthetic_sweeps.write_study(tmp_path, study="h100/lease", arms=arms, with_reference=False)
    synthetic_sweeps.write_study(tmp_path, study="h100/lease", with_reference=False, lengths=[256, 1024],
                                 arms={"FLASH_ATTN/FA2": synthetic_sweeps.ARMS["FLASH_ATTN/FA2"]})
    ttft = ours_serving.arms_sweep(tmp_path, run="h100/lease")
    assert list(ttft.columns) == ["FLASH_ATTN/FA3", "FLASH_ATTN/FA2", "FLEX_ATTENTION"]   # the book's order
    assert list(ttft.index) == synthetic_sweeps.LENGTHS
    a, b, c, *_ = synthetic_sweeps.ARMS["FLEX_ATTENTION"]
    assert ttft.loc[4096, "FLEX_ATTENTION"] == pytest.approx(a + b * 4096 + c * 4096 ** 2)
    assert math.isnan(ttft.loc[4096, "FLASH_ATTN/FA2"]) and not math.isnan(ttft.loc[1024, "FLASH_ATTN/FA2"])
    itl = ours_serving.arms_sweep(tmp_path, run="h100/lease", metric="itl_ms")
    assert itl.loc[32768, "FLASH_ATTN/FA3"] == pytest.approx(5.0 + 0.01 * 32.768)
    assert ours_serving.arms_partial(tmp_path, run="h100/lease") == {}
    # a row the lease's deadline cut short is kept and named; a failed one is not
    path = tmp_path / "h100/lease/flash_attn-fa3/sweep.csv"
    with path.open("a") as f:
        f.write("FLASH_ATTN/FA3,FLASH_ATTN,65536,65536,3.0,0.05,6.0,5.9,6.1,2,partial,2 of 3 repetitions measured\n"
                "FLASH_ATTN/FA3,FLASH_ATTN,131072,131072,,,,,,0,failed,server died\n")
    ttft = ours_serving.arms_sweep(tmp_path, run="h100/lease")
    assert ttft.loc[65536, "FLASH_ATTN/FA3"] == 3.0 and 131072 not in ttft.index
    assert ours_serving.arms_partial(tmp_path, run="h100/lease") == {
        ("FLASH_ATTN/FA3", 65536): "2 of 3 repetitions measured"}
