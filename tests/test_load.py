"""The busy-server study without a GPU: the `vllm bench serve` command, the check of its result, and the
runner's lifecycle, resume and deadline against the fake server and a fake `vllm bench serve`."""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

import pytest

from lab import LabError
from lab.measure.vllm import bench, load
from lab.measure.vllm.arms import FA3, FLEX
from lab.measure.vllm.server import Server
from lab.measure.vllm.tokenizer import text_of

TESTS = Path(__file__).parent
SERVER = (sys.executable, str(TESTS / "fake_vllm.py"))
BENCH = str(TESTS / "fake_vllm_bench.py")
WORKLOAD = bench.Workload("random-8-4", input_len=8, output_len=4)


def _flag(argv, name):
    return argv[argv.index(name) + 1]


def test_command_names_every_flag_of_vllm_bench_serve():
    point = bench.Point(2.5, 75, seed=3)
    argv = bench.command(point, WORKLOAD, base_url="http://h:1", model="/m", tokenizer="/m/tokenizer",
                         result_dir=Path("/o"), result_filename="rate-2.5.raw.json", launcher=("py",))
    assert argv[:3] == ["py", "bench", "serve"]
    expected = {"--backend": "vllm", "--base-url": "http://h:1", "--endpoint": "/v1/completions", "--model": "/m",
                "--tokenizer": "/m/tokenizer", "--dataset-name": "random", "--random-input-len": "8",
                "--random-output-len": "4", "--random-range-ratio": "0", "--num-prompts": "75",
                "--request-rate": "2.5", "--burstiness": "1", "--seed": "3", "--temperature": "0",
                "--percentile-metrics": "ttft,tpot,itl,e2el", "--metric-percentiles": "50,90,99",
                "--result-dir": "/o", "--result-filename": "rate-2.5.raw.json"}
    assert {k: _flag(argv, k) for k in expected} == expected
    assert {"--ignore-eos", "--save-result", "--save-detailed"} <= set(argv)
    assert argv[argv.index("--goodput") + 1:argv.index("--goodput") + 3] == ["ttft:500", "tpot:50"]
    assert "--max-concurrency" not in argv
    serial = bench.command(bench.Point(None, 20, max_concurrency=1), WORKLOAD, base_url="u", model="m", tokenizer="t",
                           result_dir=Path("o"), result_filename="f", launcher=("py",))
    assert _flag(serial, "--request-rate") == "inf" and _flag(serial, "--max-concurrency") == "1"
    assert bench.Point(None, 20, max_concurrency=1).slug == "rate-inf-c1" and point.slug == "rate-2.5"


def test_every_flag_exists_in_the_vllm_0_26_parser():
    """The flags are those of vllm/benchmarks/serve.py and datasets.py at v0.26.0 (copied here by name)."""
    lines = (TESTS / "fixtures" / "vllm-bench-serve-0.26-flags.txt").read_text().splitlines()
    known = {line.strip() for line in lines if line.startswith("--")}
    mix = bench.Workload("mix", dataset_path="/m.jsonl")
    argv = bench.command(bench.Point(None, 20, max_concurrency=1), mix, base_url="u", model="m", tokenizer="t",
                         result_dir=Path("o"), result_filename="f", launcher=("py",))
    used = {a for a in argv if a.startswith("--")}
    assert used <= known, used - known


def _result(point, **changes):
    n = point.num_prompts
    result = {k: 1.0 for k in bench.NUMERIC_FIELDS}
    result.update(num_prompts=n, completed=n, failed=0, request_rate="inf" if point.rate is None else point.rate,
                  request_goodput=0.5, ttfts=[0.1] * n, itls=[[0.01, 0.02]] * n, start_times=[0.0] * n,
                  input_lens=[8] * n, output_lens=[3] * n, errors=[""] * n)
    result.update({f"{s}_{m}_ms": 2.0 for m in bench.METRICS for s in ("mean", "median", "p50", "p90", "p99")})
    result.update(changes)
    return result


@pytest.mark.parametrize("changes, message", [
    ({"p99_ttft_ms": None}, "'p99_ttft_ms' is 'None'"),
    ({"request_throughput": "12"}, "'request_throughput' is '12'"),
    ({"duration": float("nan")}, "'duration' is 'nan'"),
    ({"completed": True}, "'completed' is 'True'"),
    ({"request_rate": 3.0}, "request_rate is 3.0"),
    ({"completed": 3}, "3 completed + 0 failed"),
    ({"ttfts": [0.1]}, "'ttfts' must list one value per prompt"),
    ({"itls": [["x"]] * 4}, "request 0 has a non-numeric"),
    ({"request_goodput": "a lot"}, "'request_goodput' is 'a lot'"),
    ({"completed": 2, "failed": 2, "errors": ["", "Bad Request", "", "Bad  Request"]},
     "2 of 4 requests failed (2 x 'Bad Request')"),
])
def test_a_bad_result_is_refused_with_its_reason(changes, message):
    point = bench.Point(2.0, 4)
    assert bench.check_result(_result(point), point, where="r.json")
    with pytest.raises(LabError, match="r.json: .*" + re.escape(message)):
        bench.check_result(_result(point, **changes), point, where="r.json")
    with pytest.raises(LabError, match="no 'p90_itl_ms'"):
        bench.check_result({k: v for k, v in _result(point).items() if k != "p90_itl_ms"}, point, where="r.json")


def test_rates_follow_the_measured_capacity_and_prompts_the_span():
    plan = load.LoadPlan(arm=FA3, workload=WORKLOAD, fractions=[0.25, 1.0, 1.2], span_s=30, min_prompts=60,
                         max_prompts=500)
    points = plan.rate_points(capacity=23.4)
    assert [p.rate for p in points] == [5.8, 23.0, 28.0]
    assert [p.num_prompts for p in points] == [174, 500, 500]
    assert plan.rate_points(None) == []
    assert [p.rate for p in load.LoadPlan(arm=FA3, workload=WORKLOAD, rates=[4, 1]).rate_points(None)] == [1, 4]
    assert load.expected_s(bench.Point(2.0, 60), capacity=10.0) == 30.0
    assert load.expected_s(bench.Point(20.0, 60), capacity=10.0) == 6.0


@pytest.mark.parametrize("text, message", [("ttft", "is not a number"), ("itl:5", "'itl' is not ttft"),
                                           ("ttft:-1", "must be a positive number"), ("ttft:nan", "must be a positive number"),
                                           ("tpot:inf", "must be a positive number")])
def test_bad_slos_are_refused(text, message):
    assert bench.parse_slo("ttft:500, tpot:50") == {"ttft": 500.0, "tpot": 50.0}
    with pytest.raises(LabError, match=message):
        bench.parse_slo(text)


def _run(plan, model, out, mode="ok", calls=None):
    env = {**os.environ, "FAKE_BENCH_MODE": mode, "FAKE_BENCH_CALLS": str(calls or out.parent / "calls.txt")}
    factory = functools.partial(Server, launcher=SERVER, vllm_version="0.26.0")
    return load.run_arm(plan, model, out, server_factory=factory, bench=BENCH, bench_env=env)


def _plan(**kw):
    base = dict(arm=FA3, workload=WORKLOAD, fractions=[0.5, 1.0], span_s=0.05, min_prompts=3, max_prompts=6,
                capacity_prompts=4)
    return load.LoadPlan(**{**base, **kw})


def test_one_server_runs_every_point_and_a_rerun_skips_them(tmp_path, model, monkeypatch):
    monkeypatch.setenv("FAKE_VLLM_MODE", "ok")
    out = tmp_path / "arm"
    calls = tmp_path / "calls.txt"
    assert _run(_plan(agreement_prompts=2), model, out, calls=calls) == 0
    names = sorted(p.name for p in out.glob("rate-*.json"))
    assert {"rate-inf-c1.json", "rate-inf.json"} <= set(names) and len(names) == 4
    assert not list(out.glob("*.raw.json"))
    capacity = json.loads((out / "rate-inf.json").read_text())
    assert "generated_texts" not in capacity and len(capacity["itls"]) == 4
    cmd = (out / "rate-inf.cmd").read_text()
    assert "--tokenizer" in cmd and "--save-detailed" in cmd
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["kind"] == "vllm-load" and prov["arm"] == "FLASH_ATTN/FA3" and prov["not_measured"] == []
    assert "--skip-tokenizer-init" not in prov["server"]["command"] and "--tokenizer" in prov["server"]["command"]
    assert len((out / "probe.jsonl").read_text().splitlines()) == 3   # a warm-up and two requests
    first = calls.read_text().split()
    # two client processes: the serial and capacity points in one, the Poisson points (after the capacity) in another
    assert len({c.split("@")[1] for c in first[:2]}) == 1 and len({c.split("@")[1] for c in first[2:]}) == 1
    assert first[0].split("@")[1] != first[2].split("@")[1]
    assert _run(_plan(agreement_prompts=2), model, out, calls=calls) == 0   # resume: no client call at all
    assert calls.read_text().split() == first and (out / "server.1.log").exists()   # the first session's log kept


def test_the_jit_log_asks_the_server_for_every_jit_event(tmp_path, model, monkeypatch):
    """--jit-log passes vLLM 0.26's --jit-monitor-verbose (vllm/engine/arg_utils.py) to the server, and only then."""
    monkeypatch.setenv("FAKE_VLLM_MODE", "ok")
    for jit_log in (False, True):
        out = tmp_path / f"arm-{jit_log}"
        assert _run(_plan(jit_log=jit_log), model, out, calls=tmp_path / "calls.txt") == 0
        command = json.loads((out / "provenance.json").read_text())["server"]["command"]
        assert ("--jit-monitor-verbose" in command) == jit_log
    parser = argparse.ArgumentParser()
    load.add_arguments(parser)
    assert load.plan_from_args(parser.parse_args(["--arm", "OURS", "--jit-log"])).jit_log


@pytest.mark.parametrize("mode, reason", [("crash", "exited with status 1: ValueError: Initial test run failed"),
                                          ("missing_key", "no 'p99_ttft_ms'"),
                                          ("text_number", "'request_throughput' is '12.5'"),
                                          ("wrong_rate", "request_rate is 999.0"),
                                          ("refused", "1 of 3 requests failed (1 x 'Bad Request')")])
def test_a_failed_point_is_recorded_with_its_reason_and_measured_again(tmp_path, model, mode, reason, monkeypatch):
    monkeypatch.setenv("FAKE_VLLM_MODE", "ok")
    out = tmp_path / "arm"
    assert _run(_plan(rates=[50.0]), model, out, mode=mode) == 1
    attempts = [json.loads(line) for line in (out / "points.jsonl").read_text().splitlines()]
    assert [a["status"] for a in attempts] == ["failed"] and reason in attempts[0]["reason"]
    assert not (out / "rate-50.json").exists() and (out / "rate-50.log").exists()
    assert reason in json.loads((out / "provenance.json").read_text())["not_measured"][0]
    assert _run(_plan(rates=[50.0]), model, out) == 0 and (out / "rate-50.json").exists()


def test_a_failed_capacity_point_is_counted_as_no_point_measured(tmp_path, model, monkeypatch, capsys):
    # two failure lines (the point, and no rates without it) but one point asked for: "0 of 1", never "-1 of 1"
    monkeypatch.setenv("FAKE_VLLM_MODE", "ok")
    assert _run(_plan(), model, tmp_path / "arm", mode="crash") == 1
    assert "FLASH_ATTN/FA3: 0 of 1 points ->" in capsys.readouterr().err


def test_a_point_past_its_budget_is_stopped_and_the_points_after_it_are_not_run(tmp_path, monkeypatch):
    from lab.measure.vllm.bench import Point, run_points

    monkeypatch.setenv("FAKE_BENCH_MODE", "hang")
    (tmp_path / "tokenizer.json").write_text("{}")
    points = [Point(1.0, 3), Point(2.0, 3)]
    jobs = [(p, ["vllm", "bench", "serve", "--base-url", "http://127.0.0.1:9", "--model", "m", "--tokenizer",
                 str(tmp_path), "--request-rate", str(p.rate)], 0.5) for p in points]
    ended = []
    runs = run_points(jobs, folder=tmp_path, deadline_s=600, bench=BENCH, on_end=ended.append)
    assert [r.status for r in runs] == ["failed", "failed"]
    assert "did not finish within" in runs[0].reason
    assert "not run" in runs[1].reason and [r.point for r in ended] == points   # both recorded
    assert (tmp_path / "rate-1.cmd").read_text().startswith("vllm bench serve --base-url")
    assert not (tmp_path / "batch.jobs.json").exists()


def test_a_point_whose_time_would_pass_the_deadline_is_not_started(tmp_path):
    from lab.measure.vllm.bench import Point, run_points

    jobs = [(Point(1.0, 3), ["vllm", "bench", "serve", "--request-rate", "1"], 120.0)]
    runs = run_points(jobs, folder=tmp_path, deadline_s=60, bench=BENCH)
    assert runs[0].status == "failed" and "deadline" in runs[0].reason


def test_the_deadline_skips_points_and_says_so(tmp_path, model, monkeypatch):
    monkeypatch.setenv("FAKE_VLLM_MODE", "ok")
    out = tmp_path / "arm"
    assert _run(_plan(rates=[50.0, 60.0], deadline_s=0.0), model, out) == 1
    prov = json.loads((out / "provenance.json").read_text())
    assert len(prov["not_measured"]) == 2 and "before the deadline" in prov["not_measured"][0]


def test_a_folder_of_another_arm_is_refused_before_the_server_starts(tmp_path, model, monkeypatch):
    monkeypatch.setenv("FAKE_VLLM_MODE", "ok")
    out = tmp_path / "arm"
    assert _run(_plan(rates=[50.0]), model, out) == 0
    with pytest.raises(LabError, match="differs in arm"):
        _run(_plan(rates=[50.0], arm=FLEX), model, out)
    assert not (out / "server.1.log").exists()


def test_without_the_synthetic_tokenizer_the_runner_says_what_to_run(tmp_path, model):
    shutil.rmtree(Path(model) / "tokenizer")
    with pytest.raises(LabError, match="vllm-tokenizer --model"):
        _run(_plan(), model, tmp_path / "arm")


def test_the_mix_is_long_tailed_reproducible_and_in_the_synthetic_vocabulary(tmp_path):
    path = load.write_mix(tmp_path / "mix.jsonl", 400, median_input=256, median_output=32, max_input=4096, seed=1)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    lengths = sorted(len(r["prompt"].split()) for r in rows)
    assert len(rows) == 400 and all(w.isdigit() for w in rows[0]["prompt"].split())
    assert 200 <= lengths[200] <= 320 and lengths[-4] > 4 * lengths[200]    # median near 256, a long tail
    assert load.write_mix(tmp_path / "again.jsonl", 400, median_input=256, median_output=32, max_input=4096,
                          seed=1).read_text() == path.read_text()
    assert load.max_model_len(bench.Workload("m", dataset_path=str(path)), 152_064) >= lengths[-1]


@pytest.mark.parametrize("input_len, output_len", [(1024, 128), (8, 3), (4000, 1)])
def test_the_server_accepts_the_longest_text_prompt_of_the_largest_ids(input_len, output_len):
    """vLLM 0.26 refuses, before tokenizing, a text prompt of more characters than (max_model_len - max_tokens)
    x its vocabulary's longest entry (renderers/params.py, _text_len_check)."""
    vocab = 152_064
    text = text_of(list(range(vocab - input_len, vocab)))
    limit = load.max_model_len(bench.Workload("m", input_len=input_len, output_len=output_len), vocab)
    assert len(text) <= (limit - output_len) * len(str(vocab - 1))


def test_a_limit_of_prompt_plus_output_alone_would_refuse_the_largest_ids():
    """Why the budget: at --max-model-len 1280 (1,024 + 128 rounded up) a load point lost 76 of its 200
    prompts to that check (HTTP 400), the ones drawn among the 6-digit ids."""
    text = text_of(list(range(152_064 - 1024, 152_064)))
    assert len(text) > (1280 - 128) * 6
    assert load.max_model_len(bench.Workload("m", input_len=1024, output_len=128), 152_064) == 1536


def test_cli_help_and_dry_run_need_no_gpu(capsys):
    from lab.__main__ import main
    with pytest.raises(SystemExit):
        main(["vllm-load", "--help"])
    assert "--load-fractions" in capsys.readouterr().out
    assert main(["vllm-load", "--arm", "flex_attention", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "FLEX_ATTENTION" in out and "bench serve" in out and "--request-rate inf" in out


@pytest.mark.parametrize("argv, message", [(["--arm", "NOPE"], "unknown attention backend"),
                                           (["--arm", "FLASH_ATTN/FA3", "--slo", "itl:3"], "is not ttft"),
                                           (["--arm", "FLASH_ATTN/FA3", "--load-fractions", "0,1"], "positive")])
def test_cli_rejects_bad_input_with_status_2(argv, message, capsys):
    from lab.__main__ import main
    try:
        code = main(["vllm-load", *argv, "--dry-run"])
    except SystemExit as exc:      # refused while the command line is read
        code = exc.code
    assert code == 2 and message in capsys.readouterr().err


# --- a long prompt among decoders: the interference client against the fake server -----------------

def test_interference_trial_times_every_decoder_around_the_long_prompts_arrival():
    from fake_vllm import FakeVLLM

    from lab.measure.vllm import interference
    # after_s: the decoders stream for half a second past the long prompt's first token, time enough for each
    # to be read once after the arrival however slowly this machine runs its threads
    trial = interference.Trial(decoders=3, long_len=400, context_min=8, context_max=40, decoder_tokens=400,
                               warm_steps=4, after_s=0.5, timeout_s=30)
    assert trial.contexts() == [8, 24, 40]
    servers = []

    def after_the_arrival(sent):
        # past token 200 a decoder waits until the long prompt has arrived: on a busy machine its decoding still
        # spans the arrival (events order the test, not the fake's sleeps)
        deadline = time.monotonic() + 30
        while sent >= 200 and not any(len(r["prompt"]) == 400 for r in servers[0].requests) \
                and time.monotonic() < deadline:
            time.sleep(0.01)

    with FakeVLLM(decode_s=0.002, prefill_s_per_token=1e-4, before_token=after_the_arrival) as fake:
        servers.append(fake)
        record = interference.run_trial(fake, trial)
    assert record["status"] == "ok", record["error"]
    assert record["long_ttft_s"] >= 400 * 1e-4 and len(record["decoder_chunks"]) == 3
    for chunks in record["decoder_chunks"]:
        times = [t for t, _ in chunks]
        assert times == sorted(times) and times[0] < 0 < times[-1]   # decoding before and after the arrival
        assert sum(k for t, k in chunks if t < 0) >= 4                 # the warm-up steps came first
    assert fake.requests[-1]["prompt"].__len__() == 400 and fake.requests[-1]["max_tokens"] == 8


def test_interference_trials_resume_and_refuse_another_run(tmp_path):
    from fake_vllm import FakeVLLM

    from lab.measure.vllm import interference
    trials = [interference.Trial(2, n, 8, 16, decoder_tokens=200, warm_steps=2, after_s=0.01, timeout_s=30)
              for n in (32, 64)]
    path = tmp_path / "trials.jsonl"
    with FakeVLLM(decode_s=0.001) as fake:
        records = interference.run_trials(fake, trials, path, {"arm": "a"}, load.Progress(None))
        assert [r["status"] for r in records] == ["ok", "ok"]
        sent = len(fake.requests)
        interference.run_trials(fake, trials, path, {"arm": "a"}, load.Progress(None))
        assert len(fake.requests) == sent      # both trials kept: nothing sent again
        with pytest.raises(LabError, match="differs in arm"):
            interference.run_trials(fake, trials, path, {"arm": "b"}, load.Progress(None))


def test_interference_trial_with_a_long_prompt_the_server_refuses_is_an_error_with_the_reason():
    from fake_vllm import FakeVLLM

    from lab.measure.vllm import interference
    trial = interference.Trial(2, 99, 8, 16, decoder_tokens=200, warm_steps=2, after_s=0.01, timeout_s=30)
    with FakeVLLM(decode_s=0.001, fail_lengths=(99,)) as fake:
        record = interference.run_trial(fake, trial)
    assert record["status"] == "error" and "HTTP 400" in record["error"] and record["long_ttft_s"] is None


def test_interference_trials_run_on_the_load_studys_server_after_its_points(tmp_path, model, monkeypatch):
    from lab.measure.vllm import interference

    monkeypatch.setenv("FAKE_VLLM_MODE", "ok")
    out, trials_out = tmp_path / "load" / "arm", tmp_path / "interference" / "arm" / "chunk-8192"
    trials = [interference.Trial(2, 300, 8, 16, decoder_tokens=200, warm_steps=2, after_s=0.01, timeout_s=30)]
    assert _run(_plan(rates=[50.0], interference=trials, interference_out=trials_out), model, out) == 0
    records = [json.loads(line) for line in (trials_out / "trials.jsonl").read_text().splitlines()]
    assert [r["status"] for r in records] == ["ok"] and records[0]["run_key"]["max_num_batched_tokens"] == 8192
    prov = json.loads((trials_out / "provenance.json").read_text())
    load_prov = json.loads((out / "provenance.json").read_text())
    assert prov["kind"] == "vllm-load" and prov["server"]["command"] == load_prov["server"]["command"]
    assert "--max-model-len 512" in prov["server"]["command"]     # the longest trial (300 + 64 tokens), not 256


def test_interference_on_the_load_server_needs_its_folder(capsys):
    from lab.__main__ import main

    assert main(["vllm-load", "--arm", "FLASH_ATTN/FA3", "--interference-decoders", "8", "--dry-run"]) == 2
    assert "--interference-out" in capsys.readouterr().err
