"""Fault class 10 (issue 36): a refused run writes nothing. A tool decides whether it may write into a folder
(a resume of the same run, or a folder no other kind of dataset holds) before it writes a file, rotates a
server log or starts a server.

Each test plants a committed dataset folder (a copy of one under data/h200/), runs the command that must be
refused there against the fake vLLM server, and checks that every file is byte-identical and no file appeared.
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import sys
from pathlib import Path

import pytest
from refusals import refused, snapshot

from lab import REPO_ROOT, LabError
from lab.measure.vllm.server import Server

H200 = REPO_ROOT / "data" / "h200"
SWEEP = H200 / "vllm0.26-qwen2.5-7b" / "flash_attn-fa3"
CONCURRENCY = H200 / "vllm0.26-qwen2.5-7b-concurrency" / "flash_attn-fa3"
TRIALS = H200 / "vllm0.26-qwen2.5-7b-interference" / "flash_attn-fa3" / "chunk-2048"
LOAD = H200 / "vllm0.26-qwen2.5-7b-load" / "random-1024-128" / "flash_attn-fa3"
BANDWIDTH = H200 / "bandwidth"
LAUNCHER = (sys.executable, str(Path(__file__).with_name("fake_vllm.py")))
BENCH = str(Path(__file__).with_name("fake_vllm_bench.py"))
MODEL_128K = str(REPO_ROOT / "data" / "models" / "qwen2.5-7b-128k")


class Untouched:
    """A planted copy of a committed folder; ``check()`` asserts nothing in it changed and nothing appeared."""

    def __init__(self, source: Path, where: Path):
        self.folder = where
        shutil.copytree(source, where)
        self.before = snapshot(where)
        self.names = sorted(str(p.relative_to(where)) for p in where.rglob("*"))

    def check(self) -> None:
        assert sorted(str(p.relative_to(self.folder)) for p in self.folder.rglob("*")) == self.names, "a file appeared"
        assert snapshot(self.folder) == self.before, "a file changed"


@pytest.fixture
def fake_server(monkeypatch):
    """Every Server a tool builds runs the fake vLLM (which would write server.log if it were started)."""
    monkeypatch.setenv("FAKE_VLLM_MODE", "ok")
    return functools.partial(Server, launcher=LAUNCHER, vllm_version="0.26.0")


def _parse(module, argv: list[str]):
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    return parser.parse_args(argv)


def test_a_sweep_of_another_run_is_refused_before_the_server_log_or_provenance_is_touched(tmp_path, monkeypatch,
                                                                                           fake_server):
    from lab.measure.vllm import sweep
    monkeypatch.setattr(sweep, "Server", fake_server)
    planted = Untouched(SWEEP, tmp_path / "flash_attn-fa3")
    args = _parse(sweep, ["--backend", "FLASH_ATTN", "--fa-version", "3", "--lengths", "8,16", "--reps", "1",
                          "--max-tokens", "6", "--warmup-tokens", "4", "--model", MODEL_128K, "--quiet",
                          "--max-num-batched-tokens", "8192", "--out", str(planted.folder)])
    with pytest.raises(LabError, match="holds measurements of a different run \\(differs in max_model_len, max_tokens\\)"):
        sweep.run_arm(args, MODEL_128K, [8, 16], 256, planted.folder, "0.26.0")
    planted.check()


def test_a_concurrency_sweep_of_another_run_is_refused_before_anything_is_written(tmp_path, monkeypatch, fake_server):
    from lab.measure.vllm import concurrency
    monkeypatch.setattr(concurrency, "Server", fake_server)
    planted = Untouched(CONCURRENCY, tmp_path / "flash_attn-fa3")
    args = _parse(concurrency, ["--backend", "FLASH_ATTN", "--fa-version", "3", "--contexts", "8", "--concurrency", "1",
                                "--max-tokens", "4000", "--steps", "8", "--model", MODEL_128K,
                                "--out", str(planted.folder)])
    with pytest.raises(LabError, match="holds points of a different run"):
        concurrency.run_arm(args, MODEL_128K, [(8, 1)], 4096, planted.folder, "0.26.0")
    planted.check()


def test_interference_trials_of_another_run_are_refused_before_the_server_starts(tmp_path, fake_server):
    from lab.measure.vllm import interference
    from lab.measure.vllm.arms import FA3
    from lab.measure.vllm.progress import Progress
    planted = Untouched(TRIALS, tmp_path / "chunk-2048")
    trials = [interference.Trial(2, 64, 8, 16, decoder_tokens=200, warm_steps=2, after_s=0.01, timeout_s=30)]
    with pytest.raises(LabError, match="holds trials of a different run \\(differs in decoder_context\\)"):
        interference.run_chunk(FA3, 2048, trials, MODEL_128K, planted.folder, Progress(None), 60,
                               server_factory=fake_server)
    planted.check()


def test_interference_command_checks_every_chunk_folder_before_the_first_server(tmp_path, monkeypatch, fake_server):
    """chunk-2048 is another run's: the command is refused before chunk 0's server (the first in the list) starts."""
    from lab import env
    from lab.measure.vllm import interference
    monkeypatch.setattr(interference, "Server", fake_server)
    monkeypatch.setattr(env, "detect", lambda: argparse.Namespace(has_gpu=True))
    arm = tmp_path / "flash_attn-fa3"
    planted = Untouched(TRIALS, arm / "chunk-2048")
    with pytest.raises(LabError, match="chunk-2048/trials.jsonl holds trials of a different run"):
        interference_main(["--arm", "FLASH_ATTN/FA3", "--chunks", "0,2048", "--decoder-context", "8:16",
                           "--long", "64", "--decoders", "2", "--model", MODEL_128K, "--out", str(arm)])
    planted.check()
    assert sorted(p.name for p in arm.iterdir()) == ["chunk-2048"]      # no chunk-default folder either


def interference_main(argv: list[str]) -> int:
    from lab.measure.vllm import interference
    return interference.main(_parse(interference, argv))


def test_a_load_study_of_another_run_is_refused_before_the_server_starts(tmp_path, model, fake_server):
    from lab.measure.vllm import bench, load
    from lab.measure.vllm.arms import FA3
    planted = Untouched(LOAD, tmp_path / "flash_attn-fa3")
    plan = load.LoadPlan(arm=FA3, workload=bench.Workload("random-8-4", input_len=8, output_len=4), rates=[50.0],
                         min_prompts=3, max_prompts=6, capacity_prompts=4, mix_prompts=20)
    env = {**os.environ, "FAKE_BENCH_MODE": "ok", "FAKE_BENCH_CALLS": str(tmp_path / "calls.txt")}
    with pytest.raises(LabError, match="points.jsonl holds points of a different run"):
        load.run_arm(plan, model, planted.folder, server_factory=fake_server, bench=BENCH, bench_env=env)
    planted.check()                                          # no mix file, no server.1.log, no provenance
    assert not (tmp_path / "calls.txt").exists()


def test_a_load_study_refuses_another_runs_interference_trials_before_its_points(tmp_path, model, fake_server):
    from lab.measure.vllm import bench, interference, load
    from lab.measure.vllm.arms import FA3
    planted = Untouched(TRIALS, tmp_path / "interference" / "chunk-2048")
    out = tmp_path / "load" / "arm"
    plan = load.LoadPlan(arm=FA3, workload=bench.Workload("random-8-4", input_len=8, output_len=4), rates=[50.0],
                         min_prompts=3, max_prompts=6, capacity_prompts=4, max_num_batched_tokens=2048,
                         interference=[interference.Trial(2, 64, 8, 16, decoder_tokens=200, warm_steps=2)],
                         interference_out=planted.folder)
    env = {**os.environ, "FAKE_BENCH_MODE": "ok", "FAKE_BENCH_CALLS": str(tmp_path / "calls.txt")}
    with pytest.raises(LabError, match="holds trials of a different run"):
        load.run_arm(plan, model, out, server_factory=fake_server, bench=BENCH, bench_env=env)
    planted.check()
    assert not out.exists()                                  # the points' folder was not even made


def test_the_load_panel_refuses_another_studys_folder_before_it_starts_a_server(tmp_path, monkeypatch):
    from test_run_panels import _caps

    from lab.book.run_panels.load_point import LoadPanel, folder_of, plan_of
    from lab.book.run_panels.servers import ServerPool
    monkeypatch.delenv("LAB_PANEL_AUTORUN", raising=False)
    started = []
    pool = ServerPool(make=lambda *a, **k: started.append(a) or pytest.fail("a server was built"),
                      model=MODEL_128K, log_dir=tmp_path / "servers")
    values = {"arm": "FLASH_ATTN/FA3", "rate": 40.0, "num_prompts": 12, "input_len": 16, "output_len": 8}
    panel = LoadPanel(caps=_caps(), pool_=pool, out_root=tmp_path / "vllm-load", bench=BENCH, **values)
    planted = Untouched(LOAD, folder_of(tmp_path / "vllm-load", plan_of(values), 12))
    with pytest.raises(LabError, match="holds points of a different run"):
        panel.run(values)
    planted.check()
    assert started == [] and not (tmp_path / "servers").exists()


# --- a folder of another kind of dataset -----------------------------------------------------------------

def test_a_sweep_into_a_folder_of_another_kind_of_dataset_is_refused(tmp_path, monkeypatch, fake_server):
    from lab.measure.vllm import sweep
    monkeypatch.setattr(sweep, "Server", fake_server)
    planted = Untouched(BANDWIDTH, tmp_path / "bandwidth")
    args = _parse(sweep, ["--backend", "FLASH_ATTN", "--lengths", "8", "--max-tokens", "6", "--model", MODEL_128K,
                          "--quiet", "--out", str(planted.folder)])
    with pytest.raises(LabError, match="bandwidth: holds a hardware dataset .*not a vllm-sweep one; choose another --out"):
        sweep.run_arm(args, MODEL_128K, [8], 256, planted.folder, "0.26.0")
    planted.check()


@pytest.mark.parametrize("argv", [
    ["hardware", "--measure", "--quick", "--out", "{out}"],
    ["reference", "--out", "{out}"],
    ["live-check", "--chapters", "glossary", "--out", "{out}"],
    ["vllm-tokenizer", "--out", "{out}"],
])
def test_a_tool_refuses_a_folder_holding_another_kind_of_dataset(tmp_path, argv):
    planted = Untouched(SWEEP, tmp_path / "sweep")
    err = refused([a.format(out=planted.folder) for a in argv], planted.folder)
    assert f"--out {planted.folder}: holds a vllm-sweep dataset" in err
    planted.check()
