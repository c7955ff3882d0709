"""The busy-server run panel (lab.book.run_panels.load_point) against the fake vLLM server and the fake
`vllm bench serve`: what it says where it can't run, one point through the command line's own code, its
progress, a rerun that keeps the point, Stop ending the client (and only it), and the point in the explorer."""

from __future__ import annotations

import functools
import json
import os
import shutil
import time
from pathlib import Path

import pytest
from test_run_panels import LAUNCHER, NO_GPU, _alive, _caps

from lab import REPO_ROOT, LabError
from lab.book.run_panels.load_point import LoadPanel, client_pids, load_panel
from lab.book.run_panels.servers import ArmKey, ServerPool
from lab.measure.vllm.arms import FA3
from lab.measure.vllm.server import Server, group_members

BENCH = str(Path(__file__).with_name("fake_vllm_bench.py"))
SMALL = {"rate": 40.0, "num_prompts": 12, "input_len": 16, "output_len": 8}


@pytest.fixture
def model(tmp_path):
    """A model folder with the real config.json and no tokenizer yet (the panel writes the synthetic one)."""
    folder = tmp_path / "model"
    folder.mkdir()
    shutil.copy(REPO_ROOT / "data" / "models" / "qwen2.5-7b-128k" / "config.json", folder)
    return folder


@pytest.fixture
def pool(tmp_path, model, monkeypatch):
    monkeypatch.delenv("LAB_STATIC", raising=False)
    monkeypatch.delenv("LAB_PANEL_AUTORUN", raising=False)
    env = {**os.environ, "FAKE_VLLM_START_S": "1.0"}
    make = functools.partial(Server, launcher=LAUNCHER, vllm_version="0.26.0", env=env)
    pool = ServerPool(make=make, model=str(model), log_dir=tmp_path / "servers", ready_timeout=60)
    yield pool
    pool.stop_all()


def _panel(tmp_path, pool, mode="ok", **defaults):
    env = {**os.environ, "FAKE_BENCH_MODE": mode, "FAKE_BENCH_CALLS": str(tmp_path / "calls.txt")}
    return LoadPanel(caps=_caps(), pool_=pool, out_root=tmp_path / "vllm-load", bench=BENCH, bench_env=env,
                     tick_s=0.2, **{**SMALL, **defaults})


def _wait_for(condition, what, timeout=60):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_without_a_gpu_it_says_what_it_would_run_and_the_command_that_does_the_same():
    panel = load_panel(caps=NO_GPU)
    assert panel.reason == "this machine (x86_64) has no CUDA GPU"
    page = panel.static_html()
    assert 'data-state="needs-gpu"' in page and "<button" not in page
    assert "100 random prompts of 1,024 tokens, 128 generated tokens each, Poisson arrivals at 4 requests/s" in page
    assert ("python -m lab vllm-load --arm FLASH_ATTN/FA3 --input-len 1024 --output-len 128 --min-prompts 100 "
            "--max-prompts 100 --capacity-prompts 100 --max-num-batched-tokens 8192 --gpu-memory-utilization 0.28 "
            "--rates 4 --out data/local/vllm-load/random-1024-128/flash_attn-fa3-n100") in page
    with pytest.raises(LabError, match="cannot run here"):
        panel.start()


@pytest.mark.parametrize("bad, message", [({"rate": 0}, "request rate 0"), ({"num_prompts": 0}, "prompts: between"),
                                          ({"input_len": 32768, "output_len": 512}, "within 33024 tokens"),
                                          ({"input_len": 0}, "input len: a positive"),
                                          ({"arm": "FLASHINFER"}, "unknown arm")])
def test_a_bad_choice_is_refused_before_anything_starts(tmp_path, pool, bad, message):
    panel = _panel(tmp_path, pool)
    with pytest.raises(LabError, match=message):
        panel.start({**panel.defaults, **bad})
    assert panel.job is None and pool.running() == [] and not (tmp_path / "vllm-load").exists()


def test_one_point_runs_through_the_commands_code_and_lands_beside_the_study(tmp_path, pool, model):
    panel = _panel(tmp_path, pool)
    seen = []
    panel.progress.listeners.append(seen.append)
    panel.start()
    path = panel.wait(timeout=120)
    text = "\n".join(seen)
    for line in ("writing the synthetic tokenizer", "starting a vLLM server", "ready in", "rate-40: 12 prompts",
                 "rate-40: ok in"):
        assert line in text, line
    folder = tmp_path / "vllm-load" / "random-16-8" / "flash_attn-fa3-n12"
    assert path == folder / "rate-40.json" and panel.progress.status == "done"
    assert (model / "tokenizer" / "tokenizer.json").exists()
    # the server takes text through the synthetic tokenizer; the client was given the same folder
    server = pool.servers[ArmKey(FA3, 8192, tokenizer=True)]
    assert "--tokenizer" in server.command_line() and "--skip-tokenizer-init" not in server.command_line()
    assert f"--tokenizer {model / 'tokenizer'}" in (folder / "rate-40.cmd").read_text()
    provenance = json.loads((folder / "provenance.json").read_text())
    assert provenance["kind"] == "vllm-load" and provenance["arm"] == "FLASH_ATTN/FA3"
    assert provenance["flags"]["rates"] == [40.0] and provenance["flags"]["max_prompts"] == 12
    attempts = [json.loads(line) for line in (folder / "points.jsonl").read_text().splitlines()]
    assert [a["status"] for a in attempts] == ["ok"]
    assert panel.note_of(path).startswith("vllm bench serve, 12 prompts at 40 req/s: ")

    from lab.book.load_explorer import load_explorer
    from lab.results import load as rl

    explorer = load_explorer("random-16-8", root=tmp_path / "h200", local_root=tmp_path / "vllm-load")
    view = explorer.compute(arm="local/flash_attn-fa3-n12", load=1)
    row = rl.poisson_points(rl.read_arm(folder))[0]
    shown = {r.name: r for r in view.readouts}
    assert shown["rate"].value == 40.0 and shown["throughput"].value == row["request_throughput"]
    assert {c.name: c for c in explorer.controls}["arm"].labels == ["FLASH_ATTN/FA3 (your run, " +
                                                                    provenance["gpu"] + ")"]


def test_a_second_run_of_the_same_point_keeps_it_and_another_rate_joins_it(tmp_path, pool):
    panel = _panel(tmp_path, pool)
    panel.start()
    panel.wait(timeout=120)
    calls = (tmp_path / "calls.txt").read_text().split()
    assert "already running: no start" in " ".join(panel.plan(panel.defaults).lines)
    panel.start()
    panel.wait(timeout=120)
    assert (tmp_path / "calls.txt").read_text().split() == calls      # kept: the client was not run again
    assert any("kept from an earlier run" in line for line in panel.progress.lines)
    panel.start({**panel.defaults, "rate": None})                        # every prompt at once: the capacity
    panel.wait(timeout=120)
    folder = tmp_path / "vllm-load" / "random-16-8" / "flash_attn-fa3-n12"
    assert sorted(p.name for p in folder.glob("rate-*.json")) == ["rate-40.json", "rate-inf.json"]
    assert json.loads((folder / "provenance.json").read_text())["capacity_req_s"] > 0


def test_stop_ends_the_client_keeps_the_finished_point_and_the_server(tmp_path, pool):
    panel = _panel(tmp_path, pool)
    panel.start()
    panel.wait(timeout=120)                                    # rate-40 measured
    folder = tmp_path / "vllm-load" / "random-16-8" / "flash_attn-fa3-n12"
    panel.bench_env = {**panel.bench_env, "FAKE_BENCH_MODE": "hang"}
    panel.start({**panel.defaults, "rate": 20.0})
    _wait_for(lambda: client_pids(folder), "the client never started")
    (client,) = client_pids(folder)
    _wait_for(lambda: any("rate-20: 0 s" in line or "rate-20: 1 s" in line for line in panel.progress.lines),
              "no progress line while the client ran")
    panel.stop()
    assert panel.wait(timeout=60) is None and panel.progress.status.startswith("stopped")
    assert not _alive(client) and client_pids(folder) == []
    assert any(f"Stop: ended vllm bench serve (pid {client})" in line for line in panel.progress.lines)
    server = pool.servers[ArmKey(FA3, 8192, tokenizer=True)]
    assert server.alive() and pool.running() == [ArmKey(FA3, 8192, tokenizer=True)]     # kept for the next run
    assert (folder / "rate-40.json").exists() and not (folder / "rate-20.json").exists()
    attempts = [(a["point"], a["status"]) for a in map(json.loads, (folder / "points.jsonl").read_text().splitlines())]
    assert ("rate-40", "ok") in attempts and ("rate-20", "ok") not in attempts


def test_stop_while_the_server_starts_stops_it(tmp_path, pool):
    panel = _panel(tmp_path, pool)
    panel.start()
    key = ArmKey(FA3, 8192, tokenizer=True)
    _wait_for(lambda: key in pool.starting and pool.starting[key].pid, "the server never started")
    pid = pool.starting[key].pid
    panel.stop()
    assert panel.wait(timeout=60) is None and panel.progress.status.startswith("stopped")
    assert group_members(pid) == [] and pool.running() == []


def test_the_widget_runs_and_shows_the_point_in_the_explorer(tmp_path, pool):
    pytest.importorskip("ipywidgets")
    panel = _panel(tmp_path, pool)
    parts = panel.live_widget().panel_parts
    assert "12 random prompts of 16 tokens" in parts["plan"].value
    parts["controls"]["rate"].value = None
    assert "every prompt at once" in parts["plan"].value
    parts["controls"]["rate"].value = 40.0
    parts["run"].click()
    panel.wait(timeout=120)
    assert "done" in parts["status"].value and not parts["run"].disabled
    assert parts["results"].children == (panel.live.widget,)
    assert panel.live.values["arm"] == "local/flash_attn-fa3-n12" and panel.live.values["load"] == 1
    assert "40 req/s" in panel.live.readouts.value


def test_autorun_runs_the_default_point_prints_progress_and_notes_it(tmp_path, pool, monkeypatch, capsys):
    log = tmp_path / "notes.jsonl"
    monkeypatch.setenv("LAB_LIVE_LOG", str(log))
    _panel(tmp_path, pool).autorun()
    printed = capsys.readouterr().out
    assert "Run a load point on your GPU: FLASH_ATTN/FA3: 12 prompts, 40 requests/s" in printed
    assert "rate-40: ok in" in printed
    assert "vllm bench serve, 12 prompts at 40 req/s: " in log.read_text()
