"""Two one-GPU replicas behind the spreader (lab.measure.vllm.replicas), with the fake vLLM executable as each
server and the fake ``vllm bench serve`` as the load study's client: no GPU.

Every wait is on an event (a process that exits, a thread that ends); deadlines are fuses only.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_vllm import _dead

from lab import REPO_ROOT, LabError
from lab.measure.vllm import bench, load
from lab.measure.vllm.arms import FA3
from lab.measure.vllm.probe import stream_completion
from lab.measure.vllm.replicas import Replicas, replica_log
from lab.measure.vllm.server import Server, group_members

TESTS = Path(__file__).parent
SERVER = functools.partial(Server, launcher=(sys.executable, str(TESTS / "fake_vllm.py")), vllm_version="0.26.0")
BENCH = str(TESTS / "fake_vllm_bench.py")
KV_TOKENS = 1_451_760   # what the fake's log says per server


def _replicas(tmp_path, model, factory=SERVER, **kw):
    env = {**os.environ, "FAKE_VLLM_MODE": "ok"}
    return Replicas(model, FA3, log_path=tmp_path / "out" / "server.log", server_factory=factory, env=env,
                    max_model_len=1280, **kw)


def _gone(pgid: int) -> bool:
    deadline = time.monotonic() + 30      # a fuse: a stopped group is gone long before
    while group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not group_members(pgid)


def test_two_replicas_one_per_gpu_share_the_requests_and_stop_together(tmp_path, model):
    with _replicas(tmp_path, model, policy="round-robin") as replicas:
        pids = [s.pid for s in replicas.servers]
        assert replicas.alive() and replicas.model_name == str(Path(model).resolve())
        assert [s.base_env["CUDA_VISIBLE_DEVICES"] for s in replicas.servers] == ["0", "1"]
        assert {s.base_env["CUDA_DEVICE_ORDER"] for s in replicas.servers} == {"PCI_BUS_ID"}
        for i in range(4):
            result = stream_completion(replicas.base_url, replicas.model_name, [i + 1] * 8, 3)
            assert result.completion_tokens == 3
        assert replicas.spreader.wait_idle() and replicas.spread_counts() == {"0": 2, "1": 2}
        assert replicas.facts.kv_cache_tokens == 2 * KV_TOKENS and replicas.facts.backend == "FLASH_ATTN"
        assert replicas.arm_label() == "FLASH_ATTN/FA3"
        line = replicas.command_line()
        assert "CUDA_VISIBLE_DEVICES=0 " in line and "CUDA_VISIBLE_DEVICES=1 " in line and "spreader (round-robin)" in line
        record = json.loads(json.dumps(replicas.record()))      # provenance must be JSON
        assert [r["gpu"] for r in record["replicas"]] == ["0", "1"] and record["replica_count"] == 2
        assert [r["log"]["kv_cache_tokens"] for r in record["replicas"]] == [KV_TOKENS, KV_TOKENS]
        assert [b["requests"] for b in record["spreader"]["backends"]] == [2, 2]
    out = tmp_path / "out"
    assert (out / "server.gpu0.log").exists() and (out / "server.gpu1.log").exists()
    assert all(_gone(pid) for pid in pids) and not list(out.glob("*.pgid"))
    assert replica_log(out / "server.log", "1") == out / "server.gpu1.log"


def test_a_replica_that_dies_ends_alive_and_says_which(tmp_path, model):
    with _replicas(tmp_path, model) as replicas:
        os.killpg(replicas.servers[1].pid, signal.SIGKILL)
        assert _gone(replicas.servers[1].pid)
        # the kernel may show the group gone a moment before its leader can be reaped: wait for the state, not a time
        deadline = time.monotonic() + 30
        while replicas.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not replicas.alive() and replicas.servers[0].alive()
        message = replicas.died_message("during rate-4")
        assert message.startswith("replica on GPU 1 of 2: vLLM server (FLASH_ATTN/FA3) exited") and "during rate-4" in message


def test_a_replica_that_cannot_start_stops_the_other(tmp_path, model):
    def factory(*args, env, log_path, **kw):
        gpu = env["CUDA_VISIBLE_DEVICES"]
        env = {**env, "FAKE_VLLM_MODE": "die" if gpu == "1" else "ok",
               "FAKE_VLLM_CHILD_PID_FILE": str(tmp_path / f"child{gpu}.pid")}
        return SERVER(*args, env=env, log_path=log_path, **kw)

    with pytest.raises(LabError, match=r"replica on GPU 1: vLLM server \(FLASH_ATTN/FA3\) exited with status 1 "
                                       r"before it was ready: ValueError: Free memory"):
        _replicas(tmp_path, model, factory=factory).start()
    child = int((tmp_path / "child0.pid").read_text())      # the engine child of the replica that did start
    assert _dead(child)


@pytest.mark.parametrize("kw, message", [
    ({"count": 0}, "count must be a positive integer"),
    ({"count": 2, "gpus": [0, 0]}, "2 different GPUs"),
    ({"count": 2, "tensor_parallel_size": 2}, "one GPU each"),
    ({"count": 2, "policy": "fastest"}, "expected one of round-robin, least-loaded"),
])
def test_bad_replica_settings_are_refused_before_anything_starts(tmp_path, model, kw, message):
    with pytest.raises(LabError, match=message):
        _replicas(tmp_path, model, **kw)
    assert not (tmp_path / "out").exists()


def test_the_load_study_runs_unchanged_against_two_replicas(tmp_path, model):
    plan = load.LoadPlan(arm=FA3, workload=bench.Workload("random-8-4", input_len=8, output_len=4), rates=[50.0],
                         span_s=0.05, min_prompts=6, max_prompts=6)
    out = tmp_path / "out"
    bench_env = {**os.environ, "FAKE_BENCH_MODE": "ok"}
    with _replicas(tmp_path, model) as replicas:
        study = load.Study(plan, out, replicas, str(Path(model) / "tokenizer"), bench=BENCH, env=bench_env)
        points = study.run()
        load.write_provenance(out, plan, replicas, study, 1.0)
        counts = replicas.spread_counts()
    assert [p.slug for p in points] == ["rate-50"] and study.failed == []
    assert json.loads((out / "rate-50.json").read_text())["completed"] == 6
    assert counts["0"] >= 1 and counts["1"] >= 1 and sum(counts.values()) == 6
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["server"]["replica_count"] == 2 and prov["server"]["policy"] == "least-loaded"
    assert sum(b["requests"] for b in prov["server"]["spreader"]["backends"]) == 6


# --- scripts/gpu_run.sh vllm-busy-server-2gpu refuses a machine that is not the two-GPU one ----------

@pytest.mark.parametrize("part, gpus, status, message", [
    ("replicas", "1", 3, "STOP: torch sees 1 GPUs; tp2 and replicas need exactly 2"),
    ("tp2", "4", 3, "STOP: torch sees 4 GPUs"),
    ("replicas", "2", 2, "STOP: python -m lab vllm-load has no --replicas option yet"),
    ("replica", "2", 2, "usage: OUT=DIR scripts/gpu_run.sh vllm-busy-server-2gpu"),
])
def test_the_two_gpu_script_refuses_unless_torch_sees_exactly_two(tmp_path, part, gpus, status, message):
    stub = tmp_path / "python"   # answers the script's questions: vLLM's version, torch's GPU count; nothing else
    stub.write_text("#!/bin/sh\ncase \"$*\" in\n  *\"lab env --get vllm\"*) echo 0.26.0 ;;\n"
                    f"  *\"lab env --get gpus\"*) echo {gpus} ;;\n  *) exit 99 ;;\nesac\n")
    stub.chmod(0o755)
    env = {**os.environ, "PYTHON": str(stub), "OUT": str(tmp_path / "out"), "WORK": str(tmp_path / "work"),
           "VLLM_SITE": str(tmp_path / "no-site")}
    proc = subprocess.run(["bash", "scripts/gpu_run.sh", "vllm-busy-server-2gpu", part], cwd=REPO_ROOT, env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == status and message in proc.stdout, proc.stdout + proc.stderr
    assert not list((tmp_path / "out").glob("*.tar.gz"))
# --- `vllm-load --replicas N --policy P` (lab.measure.vllm.load wired to Replicas) --------------------

def test_vllm_load_with_replicas_runs_its_points_through_the_spreader(tmp_path, model, monkeypatch):
    monkeypatch.setenv("FAKE_VLLM_MODE", "ok")
    plan = load.LoadPlan(arm=FA3, workload=bench.Workload("random-8-4", input_len=8, output_len=4), rates=[50.0],
                         span_s=0.05, min_prompts=6, max_prompts=6, replicas=2, policy="round-robin")
    out = tmp_path / "arm"
    env = {**os.environ, "FAKE_BENCH_MODE": "ok"}
    assert load.run_arm(plan, model, out, server_factory=SERVER, bench=BENCH, bench_env=env) == 0
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["flags"]["replicas"] == 2 and prov["flags"]["policy"] == "round-robin"
    assert [b["requests"] for b in prov["server"]["spreader"]["backends"]] == [3, 3]
    assert (out / "server.gpu0.log").exists() and (out / "server.gpu1.log").exists()
    one_gpu = load.LoadPlan(arm=FA3, workload=plan.workload)
    assert "replicas" not in one_gpu.run_key and plan.layout == "replicas2"   # old folders keep resuming


@pytest.mark.parametrize("argv, message", [
    (["--replicas", "2", "--tensor-parallel-size", "2"], "one or the other"),
    (["--replicas", "2", "--policy", "random"], "invalid choice"),
])
def test_vllm_load_refuses_replicas_with_tensor_parallel_or_an_unknown_policy(argv, message, capsys):
    from lab.__main__ import main
    try:
        status = main(["vllm-load", "--arm", "FLASH_ATTN/FA3", *argv, "--dry-run"])
    except SystemExit as exc:
        status = exc.code
    assert status == 2 and message in capsys.readouterr().err


def test_vllm_load_dry_run_names_the_layout_and_its_folder(capsys):
    from lab.__main__ import main
    assert main(["vllm-load", "--arm", "FLASH_ATTN/FA3", "--replicas", "2", "--dry-run"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("FLASH_ATTN/FA3 replicas2, random-1024-128") and "vllm-load/replicas2/random-1024-128/" in first
