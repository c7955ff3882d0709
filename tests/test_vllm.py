"""lab.measure.vllm without a GPU: command construction per release, log parsing on real lines, the probe
against a local server speaking vLLM's streaming protocol, and the server lifecycle (no orphans)."""

from __future__ import annotations

import argparse
import functools
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from fake_vllm import FakeVLLM

from lab import REPO_ROOT, LabError
from lab.measure.vllm import probe, serverlog
from lab.measure.vllm.server import Server, ServeSpec, build_command, group_members, parse_version

FAKE = str(Path(__file__).with_name("fake_vllm.py"))
LAUNCHER = (sys.executable, FAKE)
MODEL_128K = str(REPO_ROOT / "data" / "models" / "qwen2.5-7b-128k")


# --- command construction ------------------------------------------------------------------------

def _spec(**kw):
    base = dict(model="/m", backend="FLASH_ATTN", max_model_len=33024, port=8123)
    return ServeSpec(**{**base, **kw})


def _flag(argv, name):
    return argv[argv.index(name) + 1]


def test_command_for_current_vllm_uses_cli_flags():
    argv, env = build_command(_spec(fa_version=2, max_num_batched_tokens=8192), "0.26.0", launcher=("py", "-m", "v"))
    assert argv[:5] == ["py", "-m", "v", "serve", "/m"]
    assert _flag(argv, "--attention-backend") == "FLASH_ATTN"
    assert _flag(argv, "--attention-config.flash_attn_version") == "2"
    assert _flag(argv, "--max-num-batched-tokens") == "8192"
    assert _flag(argv, "--max-model-len") == "33024" and _flag(argv, "--port") == "8123"
    assert _flag(argv, "--load-format") == "dummy"
    assert {"--no-enable-prefix-caching", "--skip-tokenizer-init"} <= set(argv)
    assert "--disable-log-requests" not in argv
    assert env == {}


def test_command_for_vllm_0_11_selects_backend_through_the_environment():
    argv, env = build_command(_spec(backend="FLEX_ATTENTION"), "0.11.0")
    assert env == {"VLLM_ATTENTION_BACKEND": "FLEX_ATTENTION"}
    assert not any(a.startswith("--attention") for a in argv)
    argv, env = build_command(_spec(fa_version=2), "0.12.0")
    assert env == {"VLLM_ATTENTION_BACKEND": "FLASH_ATTN", "VLLM_FLASH_ATTN_VERSION": "2"}
    argv, _ = build_command(_spec(), "0.10.1")
    assert "--disable-log-requests" in argv  # those releases logged every prompt's ids


def test_command_without_chunk_size_or_fa_version_leaves_vllm_defaults():
    argv, _ = build_command(_spec(), "0.26.0")
    assert "--max-num-batched-tokens" not in argv
    assert "--attention-config.flash_attn_version" not in argv


def test_profiler_config_per_release():
    argv, env = build_command(_spec(profiler_dir="/tmp/traces", profiler_options={"torch_profiler_with_stack": False}),
                              "0.26.0")
    assert json.loads(_flag(argv, "--profiler-config")) == {
        "profiler": "torch", "torch_profiler_dir": "/tmp/traces", "torch_profiler_with_stack": False}
    argv, env = build_command(_spec(profiler_dir="/tmp/traces"), "0.11.0")
    assert env["VLLM_TORCH_PROFILER_DIR"] == "/tmp/traces" and "--profiler-config" not in argv


@pytest.mark.parametrize("spec, message", [
    (dict(backend="XFORMERS"), "unknown attention backend"),
    (dict(backend="FLEX_ATTENTION", fa_version=3), "applies to FLASH_ATTN only"),
    (dict(fa_version=5), "does not exist"),
    (dict(profiler_dir="relative/dir"), "absolute path"),
    (dict(gpu_memory_utilization=1.5), "must be in (0, 1]"),
])
def test_bad_specs_fail_with_one_line(spec, message):
    with pytest.raises(LabError, match=message.replace("(", r"\(").replace(")", r"\)").replace("]", r"\]")):
        build_command(_spec(**spec), "0.26.0")


def test_parse_version():
    assert parse_version("0.26.0") == (0, 26, 0)
    assert parse_version("0.11.1rc2.dev3+g1234") == (0, 11, 1)
    assert parse_version("v0.13") == (0, 13)
    with pytest.raises(LabError, match="cannot read a vLLM version"):
        parse_version("unknown")


# --- server log parsing (lines as vLLM printed them) ---------------------------------------------

A10G_FLASH = "(EngineCore_DP0 pid=1306673) INFO 09-30 19:34:10 [cuda.py:325] Using Flash Attention backend on V1 engine."
A10G_FLEX = "(EngineCore_DP0 pid=1329131) INFO 09-30 19:38:53 [cuda.py:319] Using FlexAttention backend on V1 engine."
H200_LOG = textwrap.dedent("""\
    (APIServer pid=1) INFO 11-30 05:01:41 [api_server.py:1951] vLLM API server version 0.26.0
    (APIServer pid=1) INFO 11-30 05:01:50 [model.py:1745] Using max model len 131328
    (APIServer pid=1) INFO 11-30 05:01:50 [scheduler.py:225] Chunked prefill is enabled with max_num_batched_tokens=8192.
    (EngineCore pid=212) INFO 11-30 05:02:11 [cuda.py:368] Using AttentionBackendEnum.FLASH_ATTN backend.
    (EngineCore pid=212) INFO 11-30 05:02:11 [flash_attn.py:598] Using FlashAttention version 3
    (EngineCore pid=212) INFO 11-30 05:02:40 [kv_cache_utils.py:1087] GPU KV cache size: 1,802,384 tokens
    (APIServer pid=1) INFO:     Application startup complete.
    """)


def test_log_facts_of_vllm_0_11_lines():
    assert serverlog.read_facts(A10G_FLASH).backend == "FLASH_ATTN"
    facts = serverlog.read_facts(A10G_FLEX)
    assert facts.backend == "FLEX_ATTENTION" and facts.fa_version is None and not facts.ready


def test_log_facts_of_vllm_0_26_lines():
    facts = serverlog.read_facts(H200_LOG)
    assert (facts.backend, facts.fa_version, facts.max_num_batched_tokens) == ("FLASH_ATTN", 3, 8192)
    assert (facts.kv_cache_tokens, facts.max_model_len, facts.vllm_version) == (1802384, 131328, "0.26.0")
    assert facts.ready and facts.backend_line.startswith("INFO 11-30 05:02:11")


def test_log_facts_of_automatic_choice_and_thousands_separators():
    text = ("(EngineCore pid=101) INFO 03-28 00:34:16 [cuda.py:317] Using FLASH_ATTN attention backend out of "
            "potential backends: ['FLASH_ATTN', 'FLASHINFER', 'TRITON_ATTN', 'FLEX_ATTENTION'].\n"
            "(EngineCore pid=101) INFO 03-28 00:34:16 [flash_attn.py:598] Using FlashAttention version 2\n"
            "INFO Chunked prefill is enabled with max_num_batched_tokens=8,192.\n")
    facts = serverlog.read_facts(text)
    assert (facts.backend, facts.fa_version, facts.max_num_batched_tokens) == ("FLASH_ATTN", 2, 8192)


def test_log_facts_ignore_lookalikes():
    text = ("INFO Using FlashInfer for top-p & top-k sampling.\nINFO Using NCCL backend.\n"
            "INFO Using Triton kernels for MoE.\n")
    facts = serverlog.read_facts(text)
    assert facts.backend is None and facts.backends_seen == []
    assert serverlog.read_facts("INFO Using TRITON_ATTN backend.").backend == "TRITON_ATTN"


def test_jit_events_are_read_plain_and_verbose():
    """vLLM 0.26's monitor (vllm/utils/jit_monitor.py): the first event per kernel, or with --jit-monitor-verbose
    every event with the kernel's specialization."""
    tail = ". This causes a latency spike; consider extending warmup to cover this shape/config."
    text = ("(EngineCore pid=7) INFO 12-07 02:15:10 [jit_monitor.py:79] Kernel JIT monitor activated; monitored JIT "
            "compilations during inference will use mode=warn.\n"
            "(EngineCore pid=7) WARNING 12-07 02:15:30 [jit_monitor.py:135] Triton kernel JIT compilation during "
            "inference: hopper_paged_kernel" + tail + "\n"
            "(EngineCore pid=7) WARNING 12-07 02:15:31 [jit_monitor.py:132] Triton kernel JIT compilation during "
            "inference: paged_split_kernel (constexprs={BLOCK_N=64, SPLITS=(2, 3)}; signature={q='*bf16'}; "
            "extra_compile_info={}; key='k')" + tail + "\n"
            "(EngineCore pid=7) WARNING 12-07 02:15:32 [jit_monitor.py:140] CuTeDSL JIT compilation during inference: "
            "fwd" + tail + "\n")
    events = serverlog.jit_events(text)
    assert [(e.stamp, e.runtime, e.kernel) for e in events] == [
        ("12-07 02:15:30", "Triton", "hopper_paged_kernel"), ("12-07 02:15:31", "Triton", "paged_split_kernel"),
        ("12-07 02:15:32", "CuTeDSL", "fwd")]
    assert events[0].detail == "" and events[1].detail.startswith("constexprs={BLOCK_N=64, SPLITS=(2, 3)}")
    assert serverlog.jit_events("Triton kernel JIT compilation during inference: x") == []   # no log prefix


def test_error_summary_prefers_the_root_cause():
    text = textwrap.dedent("""\
        (EngineCore pid=2) ERROR 11-30 05:01:55 [core.py:700] EngineCore failed to start.
        Traceback (most recent call last):
          File "core.py", line 1, in <module>
        (EngineCore pid=2) ValueError: Free memory on device (10.0/139.8 GiB) on startup is less than desired.
        RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
        """)
    summary = serverlog.error_summary(text)
    assert summary.startswith("ValueError: Free memory on device") and summary.endswith("Failed core proc(s): {}")
    assert serverlog.error_summary("INFO all good\n") is None


# --- the probe against a local streaming server ---------------------------------------------------

def test_stream_completion_times_every_chunk_and_counts_tokens():
    with FakeVLLM(prefill_s_per_token=1e-4, decode_s=0.002) as fake:
        result = probe.stream_completion(fake.base_url, fake.model, list(range(1000, 1500)), max_tokens=12)
    assert result.n_tokens == 12 and result.completion_tokens == 12 and result.prompt_tokens == 500
    assert result.ttft_s >= 0.05  # 500 tokens x 0.1 ms of fake prefill
    assert result.finish_reason == "length"
    times = [t for t, _ in result.chunks]
    assert times == sorted(times) and len(times) == 12
    sent = fake.requests[0]
    assert sent["prompt"] == list(range(1000, 1500)) and sent["ignore_eos"] and sent["stream"]
    assert sent["return_token_ids"] and sent["max_tokens"] == 12 and sent["temperature"] == 0.0


def test_stream_completion_with_several_tokens_per_chunk():
    with FakeVLLM(decode_s=0.001, tokens_per_chunk=3) as fake:
        result = probe.stream_completion(fake.base_url, fake.model, [5] * 10, max_tokens=10)
    assert [k for _, k in result.chunks] == [3, 3, 3, 1] and result.n_tokens == 10


def test_per_token_gaps_split_multi_token_chunks_and_drop_first_gaps():
    chunks = [(1.0, 1), (1.1, 1), (1.3, 2), (1.7, 4), (1.8, 1)]
    gaps = probe.per_token_gaps(chunks, drop_first=0)
    assert gaps == pytest.approx([0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1])
    assert len(probe.per_token_gaps(chunks)) == 6  # first two dropped
    assert probe.per_token_gaps([(0.5, 1)]) == []


def test_itl_summary_percentiles_by_hand():
    gaps = [0.010, 0.020, 0.030, 0.040, 0.050]  # seconds
    summary = probe.itl_summary(gaps)
    assert summary == {"itl_ms": 30.0, "itl_p10_ms": 14.0, "itl_p90_ms": 46.0}  # linear interpolation
    assert probe.itl_summary([]) == {"itl_ms": None, "itl_p10_ms": None, "itl_p90_ms": None}


def test_prompts_are_reproducible_distinct_and_in_range():
    a = probe.make_prompt(2048, probe.prompt_seed(0, 2048, 0))
    assert a == probe.make_prompt(2048, probe.prompt_seed(0, 2048, 0)) and len(a) == 2048
    assert a != probe.make_prompt(2048, probe.prompt_seed(0, 2048, 1))
    assert a[:100] != probe.make_prompt(2048, probe.prompt_seed(0, 2048, "warm"))[:100]
    low, high = probe.TOKEN_ID_RANGE
    assert low <= min(a) and max(a) < high


def _plan(lengths, **kw):
    return probe.ProbePlan(lengths=lengths, reps=2, max_tokens=8, warmup_tokens=4, run_key={"backend": "FAKE"}, **kw)


def test_sweep_appends_every_request_and_resumes(tmp_path):
    jsonl = tmp_path / "measurements.jsonl"
    with FakeVLLM() as fake:
        records = probe.run_probe(fake, _plan([16, 8]), jsonl, progress=False)
        assert len(fake.requests) == 6 and len(records) == 6  # 2 lengths x (warm-up + 2 reps)
        assert [json.loads(line)["target_len"] for line in jsonl.read_text().splitlines()] == [8, 8, 8, 16, 16, 16]
        records = probe.run_probe(fake, _plan([8, 16, 32]), jsonl, progress=False)
        assert len(fake.requests) == 9  # only 32 was new: its warm-up and 2 reps
        assert [len(r["prompt"]) for r in fake.requests[6:]] == [32, 32, 32]
        assert fake.requests[6]["max_tokens"] == 4 and fake.requests[7]["max_tokens"] == 8
    rows = probe.summarize(records, arm="FAKE", backend="FAKE")
    assert [(r["target_len"], r["actual_len"], r["reps"], r["status"]) for r in rows] == [
        (8, 8, 2, "ok"), (16, 16, 2, "ok"), (32, 32, 2, "ok")]
    assert all(r["ttft_s"] > 0 and r["itl_ms"] > 0 and r["itl_p10_ms"] <= r["itl_ms"] <= r["itl_p90_ms"] for r in rows)
    assert rows[0]["prefill_ms_per_token"] == pytest.approx(rows[0]["ttft_s"] * 1000 / 8)


def test_resume_refuses_a_file_of_another_run(tmp_path):
    jsonl = tmp_path / "measurements.jsonl"
    with FakeVLLM() as fake:
        probe.run_probe(fake, _plan([8]), jsonl, progress=False)
        other = probe.ProbePlan(lengths=[8], reps=1, max_tokens=8, run_key={"backend": "OTHER"})
        with pytest.raises(LabError, match="different run .*backend"):
            probe.run_probe(fake, other, jsonl, progress=False)


def test_a_torn_last_line_is_ignored_on_resume(tmp_path):
    jsonl = tmp_path / "measurements.jsonl"
    with FakeVLLM() as fake:
        probe.run_probe(fake, _plan([8]), jsonl, progress=False)
        with open(jsonl, "a") as fh:
            fh.write('{"target_len": 16, "rep": 0, "sta')  # a run killed mid-write
        records = probe.run_probe(fake, _plan([8]), jsonl, progress=False)
        assert len(records) == 3
        # the resume appends after the tear: the fragment is set aside, every record stays readable
        records = probe.run_probe(fake, _plan([8, 16]), jsonl, progress=False)
    assert [(r["target_len"], r["rep"]) for r in probe.read_records(jsonl)] == [
        (8, "warm"), (8, 0), (8, 1), (16, "warm"), (16, 0), (16, 1)]
    assert (tmp_path / "measurements.jsonl.torn").read_text() == '{"target_len": 16, "rep": 0, "sta\n'
    rows = probe.summarize(records, "FAKE", "FAKE")
    assert [(r["target_len"], r["status"]) for r in rows] == [(8, "ok"), (16, "ok")]


@pytest.mark.parametrize("line, message", [("42", "line 2 is 42, not a JSON object"),
                                           ("{}", "line 2 has no field 'target_len'")])
def test_a_sweep_file_with_a_line_that_is_no_record_is_one_line(tmp_path, line, message):
    jsonl = tmp_path / "measurements.jsonl"
    with FakeVLLM() as fake:
        probe.run_probe(fake, _plan([8]), jsonl, progress=False)
        lines = jsonl.read_text().splitlines()
        jsonl.write_text("\n".join([lines[0], line, *lines[1:]]) + "\n")
        before = jsonl.read_bytes()
        with pytest.raises(LabError, match=message):
            probe.run_probe(fake, _plan([8, 16]), jsonl, progress=False)
    assert jsonl.read_bytes() == before


def test_failures_at_one_length_are_recorded_and_the_sweep_goes_on(tmp_path):
    jsonl = tmp_path / "measurements.jsonl"
    with FakeVLLM(fail_lengths={16}, oom_lengths={24}) as fake:
        records = probe.run_probe(fake, _plan([8, 16, 24, 32]), jsonl, progress=False)
    by_len = {r["target_len"]: r for r in probe.summarize(records, "FAKE", "FAKE")}
    assert by_len[8]["status"] == by_len[32]["status"] == "ok"
    assert by_len[16]["status"] == "error" and "HTTP 400" in by_len[16]["error"] and by_len[16]["ttft_s"] is None
    assert by_len[24]["status"] == "error" and "out of memory" in by_len[24]["error"]
    errors = [r for r in records if r["status"] == "error"]
    assert {(r["target_len"], r["error_kind"]) for r in errors} == {(16, "http"), (24, "server_error")}
    assert len(errors) == 2  # after a failed warm-up the length is skipped, not retried rep by rep


def test_server_dying_mid_stream_stops_the_sweep_and_keeps_the_data(tmp_path):
    jsonl = tmp_path / "measurements.jsonl"
    with FakeVLLM(die_after_tokens=3, die_from_request=5) as fake:
        with pytest.raises(LabError, match="fake server died during a request of 16 tokens"):
            probe.run_probe(fake, _plan([8, 16, 32]), jsonl, progress=False)
    records = probe.read_records(jsonl)
    assert [(r["target_len"], r["rep"], r["status"]) for r in records][:3] == [(8, "warm", "ok"), (8, 0, "ok"), (8, 1, "ok")]
    assert records[-1]["error_kind"] == "server_died" and records[-1]["target_len"] == 16
    assert len(records[-1]["chunks"]) == 3  # the tokens that did arrive are kept


# --- server lifecycle with a fake `vllm` executable -----------------------------------------------

def _server(tmp_path, mode="ok", arm="FLASH_ATTN", version="0.26.0", **kw):
    env = {**os.environ, "FAKE_VLLM_MODE": mode, "FAKE_VLLM_CHILD_PID_FILE": str(tmp_path / "child.pid")}
    return Server(MODEL_128K, arm, log_path=tmp_path / "server.log", launcher=LAUNCHER, vllm_version=version,
                  env=env, **kw)


def _dead(pid: int) -> bool:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        if Path(f"/proc/{pid}/stat").exists() and Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] == "Z":
            return True  # a zombie holds no resources; its parent is gone
        time.sleep(0.1)
    return False


def test_server_starts_confirms_backend_from_its_log_and_stops_its_whole_group(tmp_path):
    with _server(tmp_path, arm="FLASH_ATTN/FA3", max_num_batched_tokens=8192, max_model_len=131328) as server:
        assert server.alive() and server.ready_s is not None
        assert (server.facts.backend, server.facts.fa_version, server.facts.max_num_batched_tokens) == ("FLASH_ATTN", 3, 8192)
        assert server.arm_label() == "FLASH_ATTN/FA3" and server.warnings == []
        result = probe.stream_completion(server.base_url, server.model_name, [11] * 64, max_tokens=5)
        assert result.n_tokens == 5
        assert server.post("/start_profile")[0] == 200
        pid, child = server.pid, int((tmp_path / "child.pid").read_text())
        record = server.record()
        assert record["log"]["backend"] == "FLASH_ATTN" and "--attention-backend FLASH_ATTN" in record["command"]
    assert not server.alive() and _dead(pid) and _dead(child) and group_members(pid) == []
    assert not (tmp_path / "server.pgid").exists()  # removed by a clean stop
    assert (tmp_path / "server.log").read_text().startswith("# lab.measure.vllm.server: ")


def test_old_release_is_confirmed_through_its_own_log_line(tmp_path):
    with _server(tmp_path, arm="FLEX_ATTENTION", version="0.11.0") as server:
        assert server.facts.backend == "FLEX_ATTENTION" and server.arm_label() == "FLEX_ATTENTION"
        assert "VLLM_ATTENTION_BACKEND=FLEX_ATTENTION" in server.command_line()


def test_server_that_dies_at_start_gives_one_line_with_the_root_cause(tmp_path):
    with pytest.raises(LabError) as info:
        _server(tmp_path, mode="die").start()
    message = str(info.value)
    assert "\n" not in message and "exited with status 1 before it was ready" in message
    assert "ValueError: Free memory on device" in message and "server.log" in message


def test_server_that_never_gets_ready_times_out_and_is_killed(tmp_path):
    log, give_up = tmp_path / "server.log", time.monotonic() + 120

    def clock() -> float:  # stands still until the fake has logged its last start phase, then the 2 s are over
        logged = log.exists() and "Capturing CUDA graphs" in log.read_text()
        return 100.0 if logged or time.monotonic() > give_up else 0.0
    server = _server(tmp_path, mode="never", ready_timeout=2, clock=clock)
    with pytest.raises(LabError, match="was not ready after 2 s") as info:
        server.start()
    assert "GPU KV cache size" in str(info.value)  # the log's last lines say where it stopped
    assert _dead(int((tmp_path / "child.pid").read_text()))


def test_a_mislabelled_arm_is_refused(tmp_path):
    with pytest.raises(LabError, match="asked vLLM for FLASH_ATTN but its log says it runs FLEX_ATTENTION"):
        _server(tmp_path, mode="wrong_backend").start()
    assert _dead(int((tmp_path / "child.pid").read_text()))


def test_an_fp8_kv_cache_is_confirmed_from_the_log_and_a_wrong_one_refused(tmp_path):
    with _server(tmp_path, arm="FLASH_ATTN/FA3-FP8") as server:
        assert server.facts.kv_cache_dtype == "fp8" and server.arm_label() == "FLASH_ATTN/FA3-FP8"
        assert "--kv-cache-dtype fp8" in server.command_line() and server.record()["kv_cache_dtype"] == "fp8"
    with pytest.raises(LabError, match="asked for KV-cache dtype auto but the log says fp8"):
        _server(tmp_path, mode="wrong_kv_dtype", arm="FLASH_ATTN/FA3").start()
    assert _dead(int((tmp_path / "child.pid").read_text()))


def test_waiting_for_gpu_memory_released_by_a_previous_server(monkeypatch):
    from lab.measure.vllm import server as server_module
    readings = iter([0.30, 0.60, 0.97])
    monkeypatch.setattr(server_module, "gpu_memory_fraction_free", lambda gpu: next(readings))
    monkeypatch.setattr(server_module.time, "sleep", lambda s: None)
    server_module.wait_for_gpu_memory(0.85)
    with pytest.raises(StopIteration):
        next(readings)  # it polled until the third reading
    monkeypatch.setattr(server_module, "gpu_memory_fraction_free", lambda gpu: None)
    server_module.wait_for_gpu_memory(0.85)  # no nvidia-smi: no wait


def test_a_server_that_ignores_sigterm_is_killed(tmp_path):
    server = _server(tmp_path, mode="stubborn").start()
    pid = server.pid
    started = time.monotonic()
    server.stop(grace_s=1)
    assert _dead(pid) and time.monotonic() - started < 15


def test_an_exception_inside_the_block_stops_the_server(tmp_path):
    with pytest.raises(RuntimeError, match="boom"):
        with _server(tmp_path) as server:
            pid = server.pid
            raise RuntimeError("boom")
    assert _dead(pid) and _dead(int((tmp_path / "child.pid").read_text()))


DRIVER = textwrap.dedent("""\
    import os, sys, time
    sys.path.insert(0, {tests!r})
    from lab.measure.vllm.server import Server
    env = dict(os.environ, FAKE_VLLM_MODE="ok", FAKE_VLLM_CHILD_PID_FILE={child!r})
    with Server({model!r}, "FLASH_ATTN", log_path={log!r}, launcher={launcher!r}, vllm_version="0.26.0", env=env) as s:
        print(s.pid, flush=True)
        time.sleep(60)
    """)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_no_orphan_when_the_driver_is_interrupted_or_killed(tmp_path, sig):
    if sig == signal.SIGKILL and not sys.platform.startswith("linux"):
        pytest.skip("the parent-death signal is Linux only")
    script = DRIVER.format(tests=str(Path(__file__).parent), child=str(tmp_path / "child.pid"), model=MODEL_128K,
                           log=str(tmp_path / "server.log"), launcher=list(LAUNCHER))
    driver = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT,
                              env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    pid = int(driver.stdout.readline())
    driver.send_signal(sig)
    driver.wait(timeout=60)
    assert _dead(pid), f"server {pid} outlived its driver ({sig.name})"
    child = int((tmp_path / "child.pid").read_text())
    if sig != signal.SIGKILL:
        assert _dead(child)
    else:  # after kill -9 only the direct child is sure to die; the group's pid file lets a script finish the job
        assert int((tmp_path / "server.pgid").read_text()) == pid
        os.killpg(pid, signal.SIGKILL)
        assert _dead(child)


# --- the sweep command end to end ---------------------------------------------------------------

def _args(tmp_path, **kw):
    from lab.measure.vllm import sweep
    parser = argparse.ArgumentParser()
    sweep.add_arguments(parser)
    argv = ["--backend", "FLASH_ATTN", "--fa-version", "3", "--lengths", "8,16", "--reps", "2", "--max-tokens", "6",
            "--warmup-tokens", "4", "--out", str(tmp_path / "arm"), "--model", MODEL_128K, "--quiet",
            "--max-num-batched-tokens", "8192"]
    for key, value in kw.items():
        argv += [f"--{key.replace('_', '-')}", str(value)]
    return parser.parse_args(argv)


def test_sweep_writes_a_dataset_that_load_sweeps_reads(tmp_path, monkeypatch):
    from lab.measure.vllm import sweep
    from lab.results import data
    monkeypatch.setenv("FAKE_VLLM_MODE", "ok")
    monkeypatch.setattr(sweep, "Server", functools.partial(Server, launcher=LAUNCHER))
    args = _args(tmp_path)
    out = tmp_path / "arm"
    assert sweep.run_arm(args, MODEL_128K, [8, 16], 256, out, "0.26.0") == 0
    ds = data.load(out)
    flags = ds.provenance["flags"]
    assert ds.kind == "vllm-sweep" and ds.provenance["arm"] == "FLASH_ATTN/FA3"
    assert (flags["fa_version"], flags["max_num_batched_tokens"], flags["max_model_len"]) == (3, 8192, 256)
    table = ds.csv("sweep.csv", data.SWEEP_COLUMNS + ("itl_p10_ms", "itl_p90_ms", "status"))
    assert table["target_len"].tolist() == [8, 16] and set(table["status"]) == {"ok"}
    assert (table["arm"] == "FLASH_ATTN/FA3").all()
    sweeps = data.load_sweeps(root=tmp_path)
    assert len(sweeps) == 2 and set(sweeps["dataset"]) == {str(out)} or len(sweeps) == 2
    # resuming with one more length measures only that length and keeps the earlier log as server.1.log
    assert sweep.run_arm(args, MODEL_128K, [8, 16, 24], 256, out, "0.26.0") == 0
    assert len(probe.read_records(out / "measurements.jsonl")) == 9 and (out / "server.1.log").exists()


def test_sweep_keeps_data_and_provenance_when_the_server_dies(tmp_path, monkeypatch):
    from lab.measure.vllm import sweep
    from lab.results import data
    monkeypatch.setenv("FAKE_VLLM_MODE", "die_midstream")
    monkeypatch.setattr(sweep, "Server", functools.partial(Server, launcher=LAUNCHER))
    out = tmp_path / "arm"
    with pytest.raises(LabError, match="exited with status 1 during a request of 8 tokens"):
        sweep.run_arm(_args(tmp_path), MODEL_128K, [8, 16], 256, out, "0.26.0")
    table = data.load(out).csv("sweep.csv")
    assert table["status"].tolist() == ["partial"] and table["reps"].tolist() == [1]


def test_sweep_cli_without_gpu_says_what_to_do(tmp_path, capsys):
    from lab import env
    from lab.measure.vllm import sweep
    if env.detect().has_gpu:
        pytest.skip("this machine has a GPU")
    assert sweep.cli(["--backend", "FLEX_ATTENTION", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: no CUDA GPU") and "\n" not in err


@pytest.mark.parametrize("argv, message", [
    (["--lengths", "256,abc"], "--lengths '256,abc': expected comma-separated counts"),
    (["--model", str(REPO_ROOT / "data" / "models" / "qwen2.5-7b"), "--lengths", "32768"], "exceeds the model's max_position_embeddings"),
    (["--max-model-len", "1000", "--lengths", "1000"], "exceeds --max-model-len 1000"),
    (["--model", "data/models/nope"], "no such model folder"),
    (["--max-model-len", "0"], "argument --max-model-len: expected a positive integer, got '0'"),
])
def test_sweep_cli_rejects_bad_input_before_starting_anything(argv, message, capsys):
    from lab.measure.vllm import sweep
    assert sweep.cli(["--backend", "FLASH_ATTN", *argv]) == 2
    assert message in capsys.readouterr().err


def test_sweep_dry_run_prints_the_command_without_a_gpu(capsys):
    from lab.measure.vllm import sweep
    assert sweep.cli(["--backend", "FLASH_ATTN", "--fa-version", "2", "--dry-run", "--vllm-version", "0.26.0",
                      "--lengths", "256,131072", "--long-reps", "2", "--max-num-batched-tokens", "8192"]) == 0
    out = capsys.readouterr().out
    assert "--attention-config.flash_attn_version 2" in out and "--max-model-len 131328" in out
    assert "131072 tokens: 1 warm-up (16 tokens) + 2 x 64 tokens" in out


def test_sweep_help_works():
    proc = subprocess.run([sys.executable, "-m", "lab", "vllm-sweep", "--help"], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and "--fa-version" in proc.stdout and "--max-num-batched-tokens" in proc.stdout
