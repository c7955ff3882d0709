"""Fault class 2 (issue 26): a bad server reply is a failed point with its reason, never a poisoned dataset.

A fault-injecting fake server (tests/fake_vllm.py, ``fault=``) answers 500, drops the stream, goes silent,
sends malformed SSE or wrong types; the probe, the concurrency sweep and the whole sweep command record
the failure, write sweep.csv and provenance.json, and a resume measures the point again.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

import pytest
from fake_vllm import FAULTS, FakeVLLM

from lab import REPO_ROOT
from lab.measure.vllm import concurrency as conc
from lab.measure.vllm import probe
from lab.measure.vllm.server import Server

LAUNCHER = (sys.executable, str(Path(__file__).with_name("fake_vllm.py")))
MODEL_128K = str(REPO_ROOT / "data" / "models" / "qwen2.5-7b-128k")
#: What the failure record must say, per fault (the field or the symptom, so a reader knows what went wrong).
REASONS = {
    "http500": "HTTP 500: Internal Server Error: injected second line",
    "http500_text": "HTTP 500: Internal Server Error <html>injected</html>",
    "drop": "after 2 chunks",
    "silent": "stalled",
    "malformed_sse": "unreadable stream event",
    "event_not_object": "unexpected stream event",
    "garbled_chunk": "after 2 chunks",
    "prompt_tokens_zero": "'usage.prompt_tokens' is 0",
    "prompt_tokens_text": "'usage.prompt_tokens' is \"many\"",
    "completion_tokens_negative": "'usage.completion_tokens' is -1",
    "usage_not_object": "'usage' is [1, 2]",
    "choices_not_list": "'choices' is \"abc\"",
    "choice_not_object": "a choice is 1",
    "token_ids_text": "'token_ids' is \"abc\"",
    "finish_reason_number": "'finish_reason' is 5",
    "no_tokens": "without any generated token",
}


def test_every_fault_has_a_reason():
    assert set(REASONS) == set(FAULTS)


def _plan(**kw):
    base = dict(lengths=[8, 16, 24], reps=2, max_tokens=8, warmup_tokens=4, run_key={"backend": "FAKE"}, timeout_s=30.0)
    return probe.ProbePlan(**{**base, **kw})


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_bad_reply_is_a_failed_length_with_its_reason_and_a_resume_measures_it(tmp_path, fault):
    jsonl = tmp_path / "measurements.jsonl"
    # a silent server is noticed by the request timeout: the stream never sends a byte, so no race
    plan = _plan(timeout_s=1.0 if fault == "silent" else 30.0)
    with FakeVLLM(fault=fault, fault_lengths={16}) as fake:
        records = probe.run_probe(fake, plan, jsonl, progress=False)
    failed = [r for r in records if r["status"] != "ok"]
    assert [(r["target_len"], r["rep"]) for r in failed] == [(16, "warm")]   # a failed warm-up skips the length
    assert REASONS[fault] in failed[0]["error"], failed[0]["error"]
    rows = {r["target_len"]: r for r in probe.summarize(records, "FAKE", "FAKE")}
    assert (rows[8]["status"], rows[16]["status"], rows[24]["status"]) == ("ok", "error", "ok")
    assert REASONS[fault] in rows[16]["error"] and rows[16]["ttft_s"] is None
    with FakeVLLM() as fake:                     # the server is fixed: a resume measures length 16 only
        records = probe.run_probe(fake, plan, jsonl, progress=False)
        assert {len(r["prompt"]) for r in fake.requests} == {16}
    assert [r["status"] for r in probe.summarize(records, "FAKE", "FAKE")] == ["ok", "ok", "ok"]


@pytest.mark.parametrize("field, value, reason", [
    ("actual_len", 0, "actual_len is 0"), ("actual_len", "many", "actual_len is \"many\""),
    ("ttft_s", None, "ttft_s is null"), ("chunks", "abc", "chunks is not a list"),
])
def test_a_poisoned_record_from_an_older_lab_is_a_failure_not_a_crash_and_is_measured_again(tmp_path, field, value,
                                                                                             reason):
    jsonl = tmp_path / "measurements.jsonl"
    with FakeVLLM() as fake:
        probe.run_probe(fake, _plan(lengths=[8]), jsonl, progress=False)
        lines = [json.loads(line) for line in jsonl.read_text().splitlines()]
        lines[1][field] = value                  # rep 0 of length 8, stored as ok
        jsonl.write_text("".join(json.dumps(r) + "\n" for r in lines))
        rows = probe.summarize(probe.read_records(jsonl), "FAKE", "FAKE", reps_for=lambda n: 2)
        assert rows[0]["status"] == "partial" and reason in rows[0]["error"] and rows[0]["reps"] == 1
        records = probe.run_probe(fake, _plan(lengths=[8]), jsonl, progress=False)
        assert len(fake.requests) == 3 + 2       # the resume: a warm-up and the poisoned repetition again
    assert probe.summarize(records, "FAKE", "FAKE", reps_for=lambda n: 2)[0]["status"] == "ok"


def test_a_length_cut_short_is_partial_not_ok(tmp_path):
    jsonl = tmp_path / "measurements.jsonl"
    with FakeVLLM() as fake:
        records = probe.run_probe(fake, _plan(lengths=[8], reps=1), jsonl, progress=False)
    row = probe.summarize(records, "FAKE", "FAKE", reps_for=lambda n: 3)[0]
    assert (row["status"], row["reps"], row["error"]) == ("partial", 1, "1 of 3 repetitions measured")


@pytest.mark.parametrize("fault", ["http500", "drop", "malformed_sse", "choices_not_list", "token_ids_text",
                                   "usage_not_object", "prompt_tokens_text", "silent"])
def test_a_bad_reply_is_a_failed_concurrency_point_and_a_resume_measures_it(tmp_path, fault):
    jsonl = tmp_path / "measurements.jsonl"
    template = conc.PointPlan(context=0, concurrency=0, max_tokens=200, steps=16, stall_s=5.0,
                              timeout_s=1.0 if fault == "silent" else 60.0, run_key={"backend": "FAKE"})
    with FakeVLLM(decode_s=0.001, fault=fault, fault_lengths={16}) as fake:
        records = conc.run_points(fake, [(8, 2), (16, 2)], template, jsonl, say=lambda _: None)
    by_point = {(r["context"], r["concurrency"]): r for r in records}
    assert by_point[8, 2]["status"] == "ok" and by_point[16, 2]["status"] == "error"
    assert by_point[16, 2]["error"], by_point[16, 2]
    rows = conc.summarize(records, "FAKE")
    assert [r["status"] for r in rows] == ["ok", "error"]
    with FakeVLLM(decode_s=0.001) as fake:
        records = conc.run_points(fake, [(8, 2), (16, 2)], template, jsonl, say=lambda _: None)
        assert {len(r["prompt"]) for r in fake.requests} == {16}
    assert [r["status"] for r in conc.summarize(records, "FAKE")] == ["ok", "ok"]


def _sweep_args(tmp_path):
    import argparse

    from lab.measure.vllm import sweep
    parser = argparse.ArgumentParser()
    sweep.add_arguments(parser)
    return parser.parse_args(["--backend", "FLASH_ATTN", "--fa-version", "3", "--lengths", "8,16", "--reps", "2",
                              "--max-tokens", "6", "--warmup-tokens", "4", "--out", str(tmp_path / "arm"),
                              "--model", MODEL_128K, "--quiet", "--max-num-batched-tokens", "8192"])


@pytest.mark.parametrize("fault", ["prompt_tokens_zero", "prompt_tokens_text", "choices_not_list"])
def test_a_sweep_with_a_bad_reply_writes_its_dataset_and_resumes(tmp_path, monkeypatch, fault):
    """The issue's case: the summary used to crash, so sweep.csv and provenance.json were never written."""
    from lab.measure.vllm import sweep
    from lab.results import data
    monkeypatch.setattr(sweep, "Server", functools.partial(Server, launcher=LAUNCHER))
    monkeypatch.setenv("FAKE_VLLM_FAULT", fault)
    monkeypatch.setenv("FAKE_VLLM_FAULT_LENGTHS", "16")
    out = tmp_path / "arm"
    assert sweep.run_arm(_sweep_args(tmp_path), MODEL_128K, [8, 16], 256, out, "0.26.0") == 0
    table = data.load(out).csv("sweep.csv")
    assert table["status"].tolist() == ["ok", "error"] and REASONS[fault] in table["error"].iloc[1]
    monkeypatch.delenv("FAKE_VLLM_FAULT")
    assert sweep.run_arm(_sweep_args(tmp_path), MODEL_128K, [8, 16], 256, out, "0.26.0") == 0
    assert data.load(out).csv("sweep.csv")["status"].tolist() == ["ok", "ok"]
    assert (out / "server.log").exists() and (out / "server.1.log").exists()   # both sessions' logs


def test_a_sweep_in_which_every_length_failed_exits_non_zero_with_one_line(tmp_path, monkeypatch, capsys):
    from lab.measure.vllm import sweep
    from lab.results import data
    monkeypatch.setattr(sweep, "Server", functools.partial(Server, launcher=LAUNCHER))
    monkeypatch.setenv("FAKE_VLLM_FAULT", "http500")
    out = tmp_path / "arm"
    assert sweep.run_arm(_sweep_args(tmp_path), MODEL_128K, [8, 16], 256, out, "0.26.0") == 1
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(err) == 1 and "every length failed" in err[0] and "HTTP 500" in err[0]
    assert data.load(out).csv("sweep.csv")["status"].tolist() == ["error", "error"]


@pytest.mark.parametrize("text", ["vllm:num_requests_running{} many\n", "vllm:num_requests_waiting\n"])
def test_a_garbled_metrics_reply_is_no_answer_not_a_crash(monkeypatch, text):
    monkeypatch.setattr(conc, "request", lambda *a, **k: (200, text))
    assert conc.wait_idle("http://127.0.0.1:9") is None
