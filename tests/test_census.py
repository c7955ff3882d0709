"""lab.measure.census on small synthetic traces shaped like torch.profiler output, with real kernel names."""

from __future__ import annotations

import gzip
import json

import pytest

from lab import LabError
from lab.__main__ import main as lab_main
from lab.measure import census
from lab.measure.census.synthetic import write_synthetic

# Real kernel names (as they appear in vLLM / torch.profiler traces on A10G and H200).
FA2_SPLITKV = ("void flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, "
               "cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 4, cutlass::bfloat16_t> >, false, true, "
               "false, false, true, true, false, false>(flash::Flash_fwd_params)")
FA2_COMBINE = ("void flash_fwd_splitkv_combine_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, "
               "cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 4, cutlass::bfloat16_t> >, 4, 3, "
               "true>(flash::Flash_fwd_params)")
FA3 = ("void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<"
       "flash::CollectiveMainloopFwdSm90<2, cute::tuple<cute::C<1>, cute::C<1>, cute::C<1> >, "
       "cute::tuple<cute::C<128>, cute::C<128>, cute::C<128> >, 128, cutlass::bfloat16_t, float, "
       "cutlass::arch::Sm90, true, false, false, true, true, false, false, true, true, false, false, false>, "
       "flash::CollectiveEpilogueFwd<cute::tuple<cute::C<128>, cute::C<128>, cute::C<128> >>, "
       "flash::VarlenDynamicPersistentTileScheduler<128, 256, 128, false, true, true> > > >(...)")
FA3_COMBINE = "void flash::FlashAttnFwdCombine<cute::tuple<cute::C<8>, cute::C<128> >, 7, 256, 1, false, true>(...)"
FLEX = "triton_tem_fused_flex_attention_0"
FLEX_A10G = "triton_tem_fused_0"
NVJET = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"
XMMA = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off"
CUTLASS = "cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8"
AMPERE = "ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x4_tn"
RMSNORM = "triton_poi_fused_add_mul_rms_norm_0"
RED_MM = "triton_red_fused__to_copy_add_mean_mm_pow_rsqrt_1"
CACHE = "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>(...)"


def make_trace(kernels, steps=(), *, with_flows=False, correlation_args=True, gpu_steps=()):
    """Events for kernels given as (name, launcher op or None, duration us[, runtime call]).

    Kernels run back to back; each launch sits inside its launcher op on CPU thread 1.
    ``steps`` are (first kernel index, last kernel index, ctx reqs, ctx tokens, gen reqs, gen tokens).
    """
    events = []
    cpu_t, gpu_t = 1000.0, 5000.0
    launch_ts = []
    gpu_ts = []
    for corr, spec in enumerate(kernels, start=1):
        name, op, dur = spec[:3]
        runtime = spec[3] if len(spec) > 3 else "cudaLaunchKernel"
        if op:
            events.append({"ph": "X", "cat": "cpu_op", "name": op, "pid": 1, "tid": 1, "ts": cpu_t, "dur": 8.0,
                           "args": {"External id": corr}})
        events.append({"ph": "X", "cat": "python_function", "name": "model.py(10): forward", "pid": 1,
                       "tid": 1, "ts": cpu_t, "dur": 9.0})
        events.append({"ph": "X", "cat": "cuda_runtime", "name": runtime, "pid": 1, "tid": 1, "ts": cpu_t + 2,
                       "dur": 3.0, "args": {"correlation": corr, "External id": corr}})
        kargs = {"device": 0, "stream": 7}
        if correlation_args:
            kargs["correlation"] = corr
        events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": gpu_t, "dur": dur,
                       "args": kargs})
        if with_flows:
            events.append({"ph": "s", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": 1, "tid": 1, "ts": cpu_t + 2})
            events.append({"ph": "f", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": 0, "tid": 7, "ts": gpu_t,
                           "bp": "e"})
        launch_ts.append(cpu_t + 2)
        gpu_ts.append((gpu_t, dur))
        cpu_t += 10.0
        gpu_t += dur + 1.0
    for first, last, *counts in steps:
        start, end = launch_ts[first] - 2, launch_ts[last] + 6
        events.append({"ph": "X", "cat": "user_annotation", "pid": 1, "tid": 1, "ts": start, "dur": end - start,
                       "name": "execute_context_{}({})_generation_{}({})".format(*counts)})
    for first, last, *counts in gpu_steps:
        start, end = gpu_ts[first][0], gpu_ts[last][0] + gpu_ts[last][1]
        events.append({"ph": "X", "cat": "gpu_user_annotation", "pid": 0, "tid": 7, "ts": start,
                       "dur": end - start, "name": "execute_context_{}({})_generation_{}({})".format(*counts)})
    return {"schemaVersion": 1, "deviceProperties": [{"name": "NVIDIA H200"}], "traceEvents": events}


def write(tmp_path, trace, name="t.json"):
    path = tmp_path / name
    data = json.dumps(trace, indent=1)
    if name.endswith(".gz"):
        with gzip.open(path, "wt") as fh:
            fh.write(data)
    else:
        path.write_text(data)
    return path


def families_of(c):
    return {name: (round(f["ms"], 6), f["count"]) for name, f in c["families"].items()}


@pytest.mark.parametrize("name, op, family", [
    (FA2_SPLITKV, "vllm::unified_attention_with_output", "attention"),
    (FA2_COMBINE, "vllm::unified_attention_with_output", "attention"),
    (FA3, "vllm::unified_attention_with_output", "attention"),
    (FA3_COMBINE, None, "attention"),
    (FLEX, "vllm::unified_attention_with_output", "attention"),
    (NVJET, "aten::mm", "matmul"),
    (XMMA, "aten::addmm", "matmul"),
    (CUTLASS, None, "matmul"),
    (AMPERE, "aten::linear", "matmul"),
    (RMSNORM, None, "other"),
    (CACHE, "vllm::unified_attention_with_output", "attention"),
    ("void flash::prepare_varlen_num_blocks_kernel<true>(int, int, int, int const*, int*)", None, "attention"),
    ("void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float, true>(...)", None, "matmul"),
    ("void at_cuda_detail::cub::DeviceRadixSortOnesweepKernel<...>(...)", None, "other"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, ...>(...)", None, "other"),
])
def test_real_kernel_names_are_classified_confidently(tmp_path, name, op, family):
    c = census.census(write(tmp_path, make_trace([(name, op, 10.0)])))
    assert c["families"][family]["count"] == 1
    assert c["unconfident"] == []


def test_hopper_matmul_without_gemm_in_its_name_is_matmul_not_other():
    # The reference study's substring rules (gemm, cutlass, matmul, ...) put this in "other".
    assert census.classify_name(NVJET).family == "matmul"
    assert not any(s in NVJET for s in ("gemm", "cutlass", "matmul", "_mm", "wgmma", "s16816"))


def test_fused_triton_kernel_with_mm_in_its_name_follows_its_launcher(tmp_path):
    # A substring rule on "_mm"/"mm" would call RED_MM a matmul; its launcher decides instead.
    trace = make_trace([(RED_MM, "aten::mm", 4.0), (RED_MM, None, 6.0), (RMSNORM, None, 2.0)])
    c = census.census(write(tmp_path, trace))
    assert families_of(c) == {"attention": (0.0, 0), "matmul": (0.004, 1), "communication": (0.0, 0), "other": (0.008, 2)}
    [u] = c["unconfident"]
    assert u["name"] == RED_MM and u["count"] == 1 and "no launching op" in u["why"]


def test_bare_triton_template_needs_its_launcher(tmp_path):
    trace = make_trace([(FLEX_A10G, "vllm::unified_attention_with_output", 30.0), (FLEX_A10G, None, 20.0)])
    c = census.census(write(tmp_path, trace))
    assert c["families"]["attention"]["count"] == 1
    assert [u["family"] for u in c["unconfident"]] == ["other"]
    assert c["unconfident"][0]["ms"] == pytest.approx(0.020)


def test_name_and_launcher_disagreeing_is_listed(tmp_path):
    trace = make_trace([(NVJET, "vllm::unified_attention_with_output", 5.0)])
    c = census.census(write(tmp_path, trace))
    [u] = c["unconfident"]
    assert u["family"] == "matmul" and "launcher says attention" in u["why"]


def test_graph_replay_is_named_as_the_reason(tmp_path):
    trace = make_trace([(FLEX_A10G, None, 5.0, "cudaGraphLaunch")])
    c = census.census(write(tmp_path, trace))
    assert "CUDA graph" in c["unconfident"][0]["why"]
    assert c["stats"]["graph_replayed"] == 1


def test_family_totals_and_shares_by_hand(tmp_path):
    # attention 30+10 us, matmul 40+15 us, other 5 us -> total 100 us = 0.1 ms
    trace = make_trace([(NVJET, "aten::mm", 40.0), (FA3, "vllm::unified_attention_with_output", 30.0),
                        (FA3_COMBINE, "vllm::unified_attention_with_output", 10.0), (RMSNORM, None, 5.0),
                        (XMMA, "aten::mm", 15.0)])
    c = census.census(write(tmp_path, trace))
    assert c["kernel_ms"] == pytest.approx(0.1)
    assert families_of(c) == {"attention": (0.04, 2), "matmul": (0.055, 2), "communication": (0.0, 0),
                              "other": (0.005, 1)}
    assert c["families"]["matmul"]["share"] == pytest.approx(0.55)
    # Kernels run back to back with 1 us gaps: span = 100 us + 4 gaps.
    assert c["span_ms"] == pytest.approx(0.104)
    assert c["top"][0]["name"] == NVJET
    assert "FlashAttention-3 with split-KV" in c["attention_signature"]["label"]


@pytest.mark.parametrize("names, label", [
    ([FA2_SPLITKV, FA2_COMBINE], "flash_fwd_splitkv_kernel + flash_fwd_splitkv_combine_kernel"),
    ([FA3], "FlashAttention-3, one kernel per layer"),
    ([FLEX], "one compiled Triton kernel per layer"),
])
def test_attention_signature(tmp_path, names, label):
    trace = make_trace([(n, "vllm::unified_attention_with_output", 3.0) for n in names])
    assert label in census.census(write(tmp_path, trace))["attention_signature"]["label"]


def decode_window():
    # one prefill step (kernels 0-1) then three single-token decode steps (2 kernels each)
    kernels = [(NVJET, "aten::mm", 100.0), (FA3, "vllm::unified_attention_with_output", 200.0)]
    kernels += [(NVJET, "aten::mm", 10.0), (FA3, "vllm::unified_attention_with_output", 4.0)] * 3
    steps = [(0, 1, 1, 28673, 0, 0), (2, 3, 0, 0, 1, 1), (4, 5, 0, 0, 1, 1), (6, 7, 0, 0, 1, 1)]
    return kernels, steps


def test_decode_phase_keeps_only_single_token_steps(tmp_path):
    kernels, steps = decode_window()
    path = write(tmp_path, make_trace(kernels, steps))
    everything = census.census(path)
    assert everything["steps"]["prefill"] == 1 and everything["steps"]["decode"] == 3
    assert everything["kernel_ms"] == pytest.approx(0.342)
    decode = census.census(path, phase="decode")
    assert decode["kernel_ms"] == pytest.approx(0.042)
    assert families_of(decode) == {"attention": (0.012, 3), "matmul": (0.03, 3), "communication": (0.0, 0),
                                   "other": (0.0, 0)}
    assert decode["steps"]["kept"] == 3
    prefill = census.census(path, phase="prefill")
    assert prefill["kernel_ms"] == pytest.approx(0.3)


def test_gpu_side_step_annotations_also_split_the_window(tmp_path):
    kernels, steps = decode_window()
    path = write(tmp_path, make_trace(kernels, gpu_steps=steps))
    decode = census.census(path, phase="decode")
    assert decode["steps"]["source"] == "gpu annotations"
    assert decode["kernel_ms"] == pytest.approx(0.042)


def test_phase_without_step_annotations_is_a_clear_error(tmp_path):
    path = write(tmp_path, make_trace([(NVJET, "aten::mm", 1.0)]))
    with pytest.raises(LabError, match="step annotations"):
        census.census(path, phase="decode")


def test_flow_events_link_kernels_without_a_correlation_arg(tmp_path):
    trace = make_trace([(FLEX_A10G, "vllm::unified_attention_with_output", 7.0)], with_flows=True,
                       correlation_args=False)
    c = census.census(write(tmp_path, trace))
    assert c["families"]["attention"]["count"] == 1 and c["unconfident"] == []


def test_gzip_and_bare_array_traces(tmp_path):
    trace = make_trace([(NVJET, "aten::mm", 3.0)])
    assert census.census(write(tmp_path, trace, "t.json.gz"))["families"]["matmul"]["count"] == 1
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(trace["traceEvents"]))
    assert census.census(bare)["families"]["matmul"]["count"] == 1


def test_synthetic_writer_matches_its_census(tmp_path):
    info = write_synthetic(tmp_path / "s.json.gz", 0.2)
    c = census.census(tmp_path / "s.json.gz")
    assert c["stats"]["kernels"] == info["kernels"]
    assert c["steps"]["prefill"] == 1 and c["steps"]["decode"] == info["steps"] - 1


# --- bad input: one line naming the file and the problem, exit status 2, no traceback -----------------

def _bad_inputs(tmp_path):
    good = json.dumps(make_trace([(NVJET, "aten::mm", 3.0)])).encode()
    truncated = tmp_path / "truncated.json.gz"
    truncated.write_bytes(gzip.compress(good)[:-40])
    cut_json = tmp_path / "cut.json"
    cut_json.write_bytes(good[: len(good) // 2])
    not_json = tmp_path / "notes.json"
    not_json.write_text("step,ms\n1,2\n")
    no_kernels = tmp_path / "frontend.json"
    no_kernels.write_text(json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::add",
                                                       "ts": 1, "dur": 2, "pid": 1, "tid": 1}]}))
    other_tool = tmp_path / "nsys.json"
    other_tool.write_text(json.dumps({"Type": 48, "CudaEvent": {"startNs": 1, "endNs": 2}}))
    empty = tmp_path / "empty.json"
    empty.write_text("")
    return {truncated: "truncated", cut_json: "truncated", not_json: "not JSON", no_kernels: "no GPU kernel",
            other_tool: "not a Chrome trace", empty: "empty", tmp_path / "missing.json": "not found"}


def test_bad_inputs_raise_lab_errors_naming_the_file(tmp_path):
    for path, problem in _bad_inputs(tmp_path).items():
        with pytest.raises(LabError) as info:
            census.census(path)
        assert str(path) in str(info.value) and problem in str(info.value), str(info.value)


def test_cli_bad_input_is_one_line_and_status_2(tmp_path, capsys):
    for path in _bad_inputs(tmp_path):
        assert lab_main(["census", str(path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err


def test_cli_table_json_and_compare(tmp_path, capsys):
    a = write(tmp_path, make_trace([(NVJET, "aten::mm", 50.0), (FA3, "vllm::unified_attention_with_output", 20.0)]),
              "a.json")
    b = write(tmp_path, make_trace([(NVJET, "aten::mm", 50.0), (FLEX, "vllm::unified_attention_with_output", 60.0)]),
              "b.json.gz")
    out = tmp_path / "census.json"
    assert lab_main(["census", str(a), "--json", str(out)]) == 0
    table = capsys.readouterr().out
    assert "matmul" in table and "unconfident: none" in table
    assert json.loads(out.read_text())["families"]["attention"]["ms"] == pytest.approx(0.02)
    assert lab_main(["census", "--compare", str(a), str(b)]) == 0
    lines = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()[2:8]}
    # attention: A 0.020 ms, B 0.060 ms -> B-A 0.040 ms, B/A 3.00; matmul identical -> 0.000, 1.00
    assert lines["attention"][-2:] == ["0.040", "3.00"]
    assert lines["matmul"][-2:] == ["0.000", "1.00"]
    assert lines["total"][-2:] == ["0.040", "1.57"]


def test_rules_have_reasons():
    for rule in census.NAME_RULES + census.LAUNCHER_RULES:
        assert rule.reason and rule.family in (None, *census.FAMILIES)


def test_window_time_is_split_by_step_phase(tmp_path):
    # The pitfall: a reference-style decode window is mostly its prefill step.
    kernels, steps = decode_window()
    c = census.census(write(tmp_path, make_trace(kernels, steps)))
    assert c["steps"]["kernel_ms_by_phase"]["prefill"] == pytest.approx(0.3)
    assert c["steps"]["kernel_ms_by_phase"]["decode"] == pytest.approx(0.042)


@pytest.mark.parametrize("name, substring_family, our_family", [
    (NVJET, "other", "matmul"),             # Hopper cuBLAS: no "gemm" in the name
    (RED_MM, "matmul", "other"),            # fused norm whose op list says "mm"
    (FA3, "attention", "attention"),        # "flash" wins before "cutlass"
    (FLEX_A10G, "other", None),             # bare template: only the launcher can tell
])
def test_reference_substring_rules_versus_ours(name, substring_family, our_family):
    assert census.reference_family(name) == substring_family
    assert census.classify_name(name).family == our_family


def test_a_trimmed_trace_keeps_the_flow_links_the_census_follows(tmp_path):
    from lab.measure import capture

    # no correlation id in the kernel's args: only the ac2g flow events link it to its launcher
    trace = make_trace([("triton_tem_fused_0", "aten::mm", 40.0)], with_flows=True, correlation_args=False)
    src = write(tmp_path, trace)
    full = census.census(src)
    assert full["families"]["matmul"]["count"] == 1
    capture.trim_trace(src, tmp_path / "trimmed.json.gz")
    again = census.census(tmp_path / "trimmed.json.gz")
    assert again["families"] == full["families"]


# --- communication: collectives between GPUs are their own family --------------------------------

@pytest.mark.parametrize("name, op", [
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "nccl:all_reduce"),
    ("ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWorkElem)", None),
    ("void vllm::cross_device_reduce_1stage<__nv_bfloat16, 2>(vllm::RankData*, vllm::RankSignals, "
     "vllm::Signal*, __nv_bfloat16*, int, int)", "_C_custom_ar::all_reduce"),
    ("void vllm::cross_device_reduce_2stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals, "
     "vllm::Signal*, __nv_bfloat16*, int, int)", None),
])
def test_collectives_are_communication(tmp_path, name, op):
    assert census.classify_name(name).family == "communication"
    c = census.census(write(tmp_path, make_trace([(name, op, 20.0), (NVJET, "aten::mm", 30.0)])))
    assert families_of(c)["communication"] == (0.02, 1) and c["families"]["communication"]["share"] == pytest.approx(0.4)
    assert c["unconfident"] == []


def test_compare_and_verify_read_a_census_stored_before_communication_existed(tmp_path, capsys):
    trace = write(tmp_path, make_trace([(NVJET, "aten::mm", 30.0)]), "prefill-8.trace.json.gz")
    old = census.census(trace)
    del old["families"]["communication"]
    (tmp_path / "prefill-8.census.json").write_text(json.dumps(old))
    assert census.verify_folder(tmp_path)[0][1].startswith("ok")
    assert "communication" in census.format_compare(old, census.census(trace))


# --- faults: wrong field types, negative durations, sizes and counts in the header (issue 18) ------

@pytest.mark.parametrize("change, message", [
    ({"ts": "abc"}, r'has "ts": \'abc\'; expected a number'),
    ({"dur": None}, r'has "dur": \'None\'; expected a number'),
    ({"args": [1, 2]}, r'has "args" of type list; expected an object'),
    ({"name": 42}, r'has "name": \'42\'; expected a string'),
    ({"dur": -5.0}, r"negative duration \(-5 us\); the trace is corrupt"),
])
def test_a_kernel_with_a_wrong_field_is_one_line(tmp_path, capsys, change, message):
    trace = make_trace([(NVJET, "aten::mm", 30.0), (FA3, "vllm::unified_attention_with_output", 10.0)])
    kernel = [e for e in trace["traceEvents"] if e["cat"] == "kernel"][1]
    kernel.update(change)
    path = write(tmp_path, trace)
    with pytest.raises(LabError, match=message):
        census.census(path)
    assert lab_main(["census", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_wrong_types_in_launches_and_flows_are_one_line(tmp_path):
    trace = make_trace([(NVJET, "aten::mm", 30.0)], with_flows=True)
    launch = next(e for e in trace["traceEvents"] if e["cat"] == "cuda_runtime")
    launch["args"] = "corr 1"
    with pytest.raises(LabError, match='cuda_runtime .* has "args" of type str'):
        census.census(write(tmp_path, trace))


def test_phase_header_counts_the_kept_kernels_and_both_sizes(tmp_path):
    kernels, steps = decode_window()
    path = write(tmp_path, make_trace(kernels, steps), "w.json.gz")
    decode = census.census(path, phase="decode")
    assert decode["stats"]["kernels_kept"] == 6 and decode["stats"]["kernels"] == len(kernels)
    text = census.format_census(decode)
    assert f"(6 kernels of {len(kernels)} in the trace," in text
    with gzip.open(path, "rb") as fh:
        json_bytes = len(fh.read())
    assert decode["stats"]["json_bytes"] == json_bytes > decode["stats"]["bytes"] == path.stat().st_size
    assert f"{json_bytes / 1e6:.1f} MB of JSON, {path.stat().st_size / 1e6:.1f} MB gzipped" in text
    assert "kernels of" not in census.format_census(census.census(path))


def test_json_to_a_folder_is_refused_before_reading_and_leaves_nothing(tmp_path, capsys):
    path = write(tmp_path, make_trace([(NVJET, "aten::mm", 30.0)]))
    folder = tmp_path / "adir"
    folder.mkdir()
    before = sorted(p.name for p in tmp_path.iterdir())
    assert lab_main(["census", str(path), "--json", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "adir: is a folder" in err and err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == before and not any(folder.iterdir())


@pytest.mark.parametrize("content", ['{"families": [1, 2]}', "[]", "not json", '{"families": {"matmul": {"ms": "x"}}}'])
def test_verify_with_a_malformed_stored_census_is_one_line(tmp_path, capsys, content):
    write(tmp_path, make_trace([(NVJET, "aten::mm", 30.0)]), "prefill-8.trace.json.gz")
    (tmp_path / "prefill-8.census.json").write_text(content)
    assert lab_main(["census", "--verify", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "prefill-8.census.json" in err and err.count("\n") == 1 and "Traceback" not in err


def test_synthetic_benchmark_command_refuses_a_bad_size(capsys):
    for bad in ("nan", "0", "-3", "abc"):
        with pytest.raises(SystemExit) as info:
            lab_main(["census-synthetic", "--bench", bad])
        assert info.value.code == 2
        err = capsys.readouterr().err
        assert "--bench" in err and "expected a positive number" in err and len(err.strip().splitlines()) == 1
    assert lab_main(["census-synthetic"]) == 2 and "--bench" in capsys.readouterr().err


def test_synthetic_benchmark_runs_on_a_small_trace(capsys):
    from lab.measure.census.synthetic import bench, print_bench

    r = bench(0.2, compare_mb=0.2)
    print_bench(r)
    assert r["kernels"] > 0 and r["mb_per_cpu_s"] > 0 and "census benchmark" in capsys.readouterr().out
