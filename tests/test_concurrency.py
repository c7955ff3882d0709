"""The concurrency sweep (lab.measure.vllm.concurrency) against the fake vLLM server, and its pure parts by hand.

Every test waits on events (a token, a stream's end, a request that cannot be admitted until another
leaves), never on a sleep that races the clock.
"""

from __future__ import annotations

import argparse
import functools
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from fake_vllm import FakeVLLM

from lab import REPO_ROOT, LabError
from lab.measure.vllm import concurrency as conc
from lab.measure.vllm.server import MULTICAST_OFF, Server, ServeSpec, build_command

FAKE = str(Path(__file__).with_name("fake_vllm.py"))
LAUNCHER = (sys.executable, FAKE)
MODEL_128K = str(REPO_ROOT / "data" / "models" / "qwen2.5-7b-128k")


# --- the steady window, by hand ---------------------------------------------------------------------

def test_window_runs_from_the_last_first_token_to_the_stop():
    chunks = [[[0.1, 1], [0.2, 1], [0.3, 1], [0.4, 1], [0.5, 1]],
              [[0.25, 1], [0.35, 1], [0.45, 1]],
              []]                                   # never got a token: not admitted
    w = conc.steady_window(chunks, [False, False, False], stop_at=0.5)
    assert w["admitted"] == 2 and w["ttft_first_s"] == 0.1 and w["ttft_last_s"] == 0.25
    assert w["window_s"] == pytest.approx(0.25)
    assert w["itl_ms"] == pytest.approx(100.0)      # gaps 0.3->0.4, 0.4->0.5, 0.25->0.35, 0.35->0.45
    assert w["decode_tok_s"] == pytest.approx(5 / 0.25)   # 3 + 2 tokens after 0.25, up to 0.5
    assert w["steps"] == 2                          # median of 3 and 2, rounded down


def test_window_ends_at_the_first_finish_and_counts_multi_token_chunks():
    chunks = [[[0.0, 1], [0.1, 1], [0.2, 1], [0.3, 1]], [[0.0, 1], [0.2, 2]]]
    w = conc.steady_window(chunks, [False, True], stop_at=9.0)
    assert w["window_s"] == pytest.approx(0.2)      # request 1 finished at 0.2
    assert w["itl_ms"] == pytest.approx(100.0)      # a 2-token chunk after 0.2 s: two gaps of 0.1 s
    assert w["decode_tok_s"] == pytest.approx(4 / 0.2)


def test_no_token_at_all_gives_an_empty_window():
    w = conc.steady_window([[], []], [False, False], stop_at=1.0)
    assert (w["admitted"], w["itl_ms"], w["decode_tok_s"], w["steps"]) == (0, None, None, 0)


def _stream(times, finished=False, alive=True):
    return SimpleNamespace(chunks=[(t, 1) for t in times], finished=finished, is_alive=lambda: alive)


@pytest.mark.parametrize("streams, now, reason", [
    ([_stream([1, 2, 3]), _stream([2, 3])], 3, None),                                   # too few steps yet
    ([_stream([1, 2, 3, 4]), _stream([2, 3, 4])], 4, "steady"),                           # 2 steps each after 2
    ([_stream([1, 2, 3, 4]), _stream([])], 4, None),                                    # one still waiting
    ([_stream([1, 2, 3, 4, 5, 6]), _stream([])], 6.5, "kv-limited"),                    # ... for longer than the stall
    ([_stream([1, 2], finished=True), _stream([])], 2, "finished"),
    ([_stream([], alive=False), _stream([], alive=False)], 1, "ended"),
    ([_stream([]), _stream([])], 100, "timeout"),
])
def test_stop_reason(streams, now, reason):
    plan = conc.PointPlan(context=8, concurrency=2, steps=2, stall_s=5, timeout_s=100)
    assert conc.stop_reason(streams, plan, now, started_at=0) == reason


def test_points_follow_the_limits():
    limits = conc.parse_limits("32768:4")
    points = conc.plan_points([32768, 2048], [64, 1, 4, 16], limits)
    assert points == [(2048, 1), (2048, 4), (2048, 16), (2048, 64), (32768, 1), (32768, 4)]
    with pytest.raises(LabError, match="CONTEXT:MAX_CONCURRENCY"):
        conc.parse_limits("32768")


# --- points against the fake server -----------------------------------------------------------------

def _plan(**kw):
    # a long stall: a point whose requests are all admitted ends when the last first token arrives, however
    # late a busy machine makes it; only the KV-limited test shortens it (its waiting requests never start)
    base = dict(context=16, concurrency=4, max_tokens=100_000, steps=8, stall_s=60, timeout_s=120)
    return conc.PointPlan(**{**base, **kw})


def test_all_requests_decode_together_and_are_closed_after_the_window():
    with FakeVLLM(decode_s=0.001) as fake:
        record = conc.run_point(fake, _plan())
        assert conc.wait_idle(fake.base_url, timeout_s=30) is True   # closed streams free the server
    assert (record["stop"], record["status"], record["ok"], record["admitted"]) == ("steady", "ok", True, 4)
    assert record["steps"] >= 8 and record["itl_ms"] > 0 and record["decode_tok_s"] > 0
    prompts = [tuple(r["prompt"]) for r in fake.requests]
    assert len(prompts) == 4 and len(set(prompts)) == 4 and all(len(p) == 16 for p in prompts)
    assert all(r["ignore_eos"] and r["stream"] for r in fake.requests)
    assert all(not r["finished"] and r["error"] is None for r in record["requests"])


def test_requests_the_server_cannot_admit_are_counted_not_waited_for():
    with FakeVLLM(decode_s=0.001, max_running=2) as fake:
        record = conc.run_point(fake, _plan(stall_s=0.3))
        assert conc.wait_idle(fake.base_url, timeout_s=30) is True
    assert (record["stop"], record["admitted"], record["ok"]) == ("kv-limited", 2, True)
    assert sum(1 for r in record["requests"] if not r["chunks"]) == 2


def test_the_first_finish_closes_the_window():
    with FakeVLLM(decode_s=0.001) as fake:
        record = conc.run_point(fake, _plan(concurrency=2, max_tokens=30, steps=1000))
    assert record["stop"] == "finished" and any(r["finished"] for r in record["requests"])
    assert record["status"] == "ok" and record["steps"] >= conc.MIN_WINDOW_STEPS


def test_points_are_appended_and_skipped_on_rerun(tmp_path):
    jsonl = tmp_path / "measurements.jsonl"
    template = _plan(run_key={"backend": "FLASH_ATTN"})
    with FakeVLLM(decode_s=0.001) as fake:
        conc.run_points(fake, [(8, 1), (8, 2)], template, jsonl, say=lambda _: None)
        sent = len(fake.requests)
        records = conc.run_points(fake, [(8, 1), (8, 2), (16, 2)], template, jsonl, say=lambda _: None)
        assert len(fake.requests) == sent + 2       # only the new point ran
    rows = conc.summarize(records, "FLASH_ATTN/FA3")
    assert [(r["context"], r["concurrency"], r["ok"]) for r in rows] == [(8, 1, True), (8, 2, True), (16, 2, True)]
    assert list(rows[0]) == conc.COLUMNS
    with pytest.raises(LabError, match="different run"):
        conc.run_points(fake, [(8, 1)], _plan(run_key={"backend": "FLEX_ATTENTION"}), jsonl)


def test_a_server_that_dies_mid_point_stops_the_sweep_and_keeps_the_point(tmp_path):
    jsonl = tmp_path / "measurements.jsonl"
    with FakeVLLM(decode_s=0.001, die_after_tokens=3) as fake, pytest.raises(LabError, match="during 2 requests of 8"):
        conc.run_points(fake, [(8, 2), (8, 4)], _plan(), jsonl, say=lambda _: None)
    records = conc.read_records(jsonl, required=conc.RECORD_FIELDS)
    assert [r["status"] for r in records] == ["server_died"]


# --- the server: tensor parallelism and the multicast-off environment -------------------------------

def test_tensor_parallel_size_reaches_the_command_only_when_asked():
    spec = dict(model="/m", backend="FLASH_ATTN", port=8123)
    argv, _ = build_command(ServeSpec(**spec, tensor_parallel_size=2), "0.26.0")
    assert argv[argv.index("--tensor-parallel-size") + 1] == "2"
    assert "--tensor-parallel-size" not in build_command(ServeSpec(**spec), "0.26.0")[0]
    with pytest.raises(LabError, match="tensor parallel size 0"):
        build_command(ServeSpec(**spec, tensor_parallel_size=0), "0.26.0")


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads the server's environment from /proc")
def test_the_server_always_runs_with_nvlink_multicast_off(tmp_path):
    env = {**os.environ, "NCCL_NVLS_ENABLE": "1", "FAKE_VLLM_MODE": "ok"}   # the caller's value loses
    with Server(MODEL_128K, "FLASH_ATTN", log_path=tmp_path / "server.log", launcher=LAUNCHER,
                vllm_version="0.26.0", env=env, tensor_parallel_size=2) as server:
        seen = dict(item.split("=", 1) for item in
                    Path(f"/proc/{server.pid}/environ").read_text().split("\0") if "=" in item)
        record = server.record()
    assert {k: seen[k] for k in MULTICAST_OFF} == MULTICAST_OFF
    assert record["tensor_parallel_size"] == 2 and "NCCL_NVLS_ENABLE=0" in record["command"]


# --- the command end to end --------------------------------------------------------------------------

def _args(tmp_path, *extra):
    parser = argparse.ArgumentParser()
    conc.add_arguments(parser)
    return parser.parse_args(["--backend", "FLASH_ATTN", "--fa-version", "3", "--contexts", "8,16", "--concurrency",
                              "1,3", "--max-tokens", "4000", "--steps", "8", "--out", str(tmp_path / "arm"),
                              "--model", MODEL_128K, "--max-num-batched-tokens", "8192", *extra])


def test_command_writes_a_dataset_with_provenance(tmp_path, monkeypatch):
    import pandas as pd

    from lab.results import data
    monkeypatch.setenv("FAKE_VLLM_MODE", "ok")
    monkeypatch.setattr(conc, "Server", functools.partial(Server, launcher=LAUNCHER))
    args, out = _args(tmp_path), tmp_path / "arm"
    points = conc.plan_points([8, 16], [1, 3], {16: 1})
    assert conc.run_arm(args, MODEL_128K, points, 4096, out, "0.26.0") == 0
    ds = data.load(out)
    flags = ds.provenance["flags"]
    assert ds.kind == "vllm-sweep" and flags["experiment"] == "concurrency" and ds.provenance["arm"] == "FLASH_ATTN/FA3"
    assert (flags["max_num_batched_tokens"], flags["max_model_len"], flags["gpu_memory_utilization"]) == (8192, 4096, 0.85)
    table = pd.read_csv(out / "concurrency.csv")
    assert list(table.columns) == conc.COLUMNS
    assert table[["context", "concurrency"]].values.tolist() == [[8, 1], [8, 3], [16, 1]] and table["ok"].all()
    assert (table["admitted"] == table["concurrency"]).all()
    assert data.load_sweeps(root=REPO_ROOT / "data") is not None   # a concurrency folder is no prompt-length sweep


@pytest.mark.parametrize("extra, message", [
    (["--limit", "32768"], "CONTEXT:MAX_CONCURRENCY"),
    (["--steps", "5000"], "--steps must be at least 8 and below --max-tokens"),
    (["--contexts", "135000"], "exceeds the model's max_position_embeddings"),
])
def test_bad_input_is_one_line_before_anything_starts(extra, message, capsys):
    proc = subprocess.run([sys.executable, "-m", "lab", "vllm-concurrency", "--backend", "FLASH_ATTN", *extra],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert proc.returncode == 2 and message in proc.stderr and proc.stderr.strip().count("\n") == 0


def test_help_and_dry_run():
    run = functools.partial(subprocess.run, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    help_ = run([sys.executable, "-m", "lab", "vllm-concurrency", "--help"])
    assert help_.returncode == 0 and "--point-timeout" in help_.stdout and "steady state" in help_.stdout
    dry = run([sys.executable, "-m", "lab", "vllm-concurrency", "--backend", "FLEX_ATTENTION", "--limit", "32768:4",
               "--dry-run", "--vllm-version", "0.26.0"])
    assert dry.returncode == 0 and "--max-model-len 34816" in dry.stdout
    assert "64 requests x  32768" not in dry.stdout and "4 requests x  32768" in dry.stdout


# --- lab.results.concurrency: the floor and the KV-bound batch ----------------------------------------

# Qwen2.5-7B by hand: per layer Q and O (3584 x 3584 each), K and V (3584 x 512 each), MLP 3 x 3584 x 18944;
# LM head 3584 x 152064; bf16. KV per token: K and V, 28 layers, 4 heads x 128, 2 bytes.
WEIGHTS = 2 * (28 * (2 * 3584 * 3584 + 2 * 3584 * 512 + 3 * 3584 * 18944) + 3584 * 152064)
KV_PER_TOKEN = 2 * 28 * 512 * 2


def _points():
    import pandas as pd

    rows = [("FLASH_ATTN/FA3", 2048, 1, 1, 5.0, 200.0), ("FLASH_ATTN/FA3", 2048, 64, 64, 10.0, 6400.0),
            ("FLASH_ATTN/FA3", 32768, 1, 1, 5.2, 190.0), ("FLASH_ATTN/FA3", 32768, 64, 58, 40.0, 1450.0)]
    table = pd.DataFrame(rows, columns=["arm", "context", "concurrency", "admitted", "itl_ms", "decode_tok_s"])
    return table.assign(window_s=1.0, steps=64, ok=True)


def test_floor_is_weights_once_plus_every_sequences_kv():
    from lab.results import concurrency as rc
    assert rc.weight_bytes_per_step() == WEIGHTS and 14e9 < WEIGHTS < 14.3e9
    assert rc.kv_bytes_per_step(16, 32768) == 16 * 32768 * KV_PER_TOKEN
    assert rc.floor_step_s(4, 2048, 4e12) == pytest.approx((WEIGHTS + 4 * 2048 * KV_PER_TOKEN) / 4e12)
    assert rc.kv_bound_batch(32768) == pytest.approx(WEIGHTS / (32768 * KV_PER_TOKEN))   # ~7.5
    assert rc.kv_bound_from(32768, [1, 4, 16, 64]) == 16 and rc.kv_bound_from(2048, [1, 4, 16, 64]) is None
    with pytest.raises(LabError, match="bandwidth must be positive"):
        rc.floor_step_s(1, 1, 0)


def test_points_beside_their_floor_use_the_admitted_batch():
    from lab.results import concurrency as rc
    table = rc.with_floor(_points(), bandwidth=4e12)
    last = table.iloc[-1]                     # 64 sent at 32k, 58 admitted
    floor_ms = (WEIGHTS + 58 * 32768 * KV_PER_TOKEN) / 4e12 * 1e3
    assert last["floor_ms"] == pytest.approx(floor_ms) and last["itl_x_floor"] == pytest.approx(40.0 / floor_ms)
    assert last["floor_tok_s"] == pytest.approx(58 / (floor_ms / 1e3)) and bool(last["kv_bound"])
    assert not table.iloc[1]["kv_bound"]      # 64 x 2k reads less KV than weights
    growth = rc.itl_growth(table)
    assert growth.iloc[3]["itl_x_single"] == pytest.approx(40.0 / 5.2)
    facts = rc.summary(_points(), bandwidth=4e12)
    assert facts["contexts"][32768]["kv_bound_from"] == 64 and facts["contexts"][32768]["admitted_max"] == 58
    assert facts["contexts"][2048]["arms"]["FLASH_ATTN/FA3"]["decode_tok_s"] == 6400.0
    assert rc.summary(_points().iloc[:0], bandwidth=None)["contexts"] == {}


def test_load_points_reads_the_command_output_and_is_empty_without_it(tmp_path):
    from lab import store
    from lab.results import concurrency as rc
    assert rc.load_points("nowhere", root=tmp_path).empty
    folder = tmp_path / "h200" / "study" / "flash_attn-fa3"
    folder.mkdir(parents=True)
    _points().to_csv(folder / "concurrency.csv", index=False)
    store.write_provenance(folder, store.new_provenance("vllm-sweep", flags={"experiment": "concurrency"}, command="x"))
    assert len(rc.load_points("h200/study", root=tmp_path)) == 4
    bandwidth, source = rc.floor_bandwidth("H200-SXM", REPO_ROOT / "tests" / "fixtures" / "bandwidth")
    assert bandwidth == pytest.approx(4.5e12) and source == "data/h200/bandwidth/read_stream.csv"
    with pytest.raises(LabError, match="not measured"):  # no floor without the GPU's bandwidth ceiling
        rc.floor_bandwidth("H200-SXM", tmp_path)


def test_sweep_takes_a_tensor_parallel_size_and_checks_the_gpus():
    from lab.measure.vllm import sweep
    dry = subprocess.run([sys.executable, "-m", "lab", "vllm-sweep", "--backend", "FLASH_ATTN", "--fa-version", "3",
                          "--tensor-parallel-size", "2", "--lengths", "256", "--dry-run", "--vllm-version", "0.26.0"],
                         cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert dry.returncode == 0 and "--tensor-parallel-size 2" in dry.stdout
    sweep.check_gpu_count(1)                  # one GPU (or none: the GPU check comes earlier) asks nothing
    import torch
    if torch.cuda.device_count() < 2:
        with pytest.raises(LabError, match="--tensor-parallel-size 2 needs 2 GPUs"):
            sweep.check_gpu_count(2)
