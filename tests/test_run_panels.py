"""The run panels (lab.book.run_panels): what they say where they can't run, and real runs in-process
against the fake vLLM server (start phases, per-prompt progress, reuse, Stop, no orphans) and the CPU
interpreter (the kernel panel)."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

from lab import REPO_ROOT, LabError
from lab.book.run_panels import base
from lab.book.run_panels.capture import CapturePanel
from lab.book.run_panels.kernels import KernelPanel
from lab.book.run_panels.servers import ArmKey, ServerPool
from lab.book.run_panels.sweep import SweepPanel
from lab.env import Capabilities
from lab.measure.vllm.arms import FA3
from lab.measure.vllm.server import Server, group_members

FAKE = str(Path(__file__).with_name("fake_vllm.py"))
LAUNCHER = (sys.executable, FAKE)


def _caps(gpu="NVIDIA H200", triton_mode="gpu", vllm="0.26.0"):
    return Capabilities(gpu=gpu, driver=None, cuda=None, torch="2", triton="3", vllm=vllm, triton_mode=triton_mode,
                        python="3.12", machine="x86_64")


NO_GPU = _caps(gpu=None, triton_mode="interpreter", vllm=None)


@pytest.fixture
def pool(tmp_path, monkeypatch):
    monkeypatch.delenv("LAB_STATIC", raising=False)
    env = {**os.environ, "FAKE_VLLM_START_S": "1.5", "FAKE_VLLM_CHILD_PID_FILE": str(tmp_path / "child.pid")}
    make = functools.partial(Server, launcher=LAUNCHER, vllm_version="0.26.0", env=env)
    pool = ServerPool(make=make, log_dir=tmp_path / "servers", ready_timeout=60)
    yield pool
    pool.stop_all()


def _sweep(tmp_path, pool, **defaults):
    return SweepPanel(caps=_caps(), pool_=pool, out_root=tmp_path / "vllm-live", **defaults)


# --- where a panel cannot run ---------------------------------------------------------------------

@pytest.mark.parametrize("make", [
    lambda: SweepPanel(caps=NO_GPU), lambda: CapturePanel(caps=NO_GPU),
    lambda: KernelPanel("prefill", caps=NO_GPU), lambda: KernelPanel("decode", caps=NO_GPU)])
def test_without_a_gpu_a_panel_says_what_it_would_run_and_why_not_and_has_no_buttons(make):
    panel = make()
    assert panel.reason == "this machine (x86_64) has no CUDA GPU"
    page = panel.static_html()
    assert 'data-state="needs-gpu"' in page and "Would run:" in page and "Not here: this machine (x86_64) has no CUDA GPU" in page
    assert "python -m lab " in page and "<button" not in page
    with pytest.raises(LabError, match="cannot run here"):
        panel.start()


def test_the_static_build_and_a_missing_vllm_are_reasons_too(monkeypatch):
    assert "vLLM is not installed" in SweepPanel(caps=_caps(vllm=None)).reason
    assert KernelPanel("prefill", caps=_caps(vllm=None)).reason is None      # kernels need no vLLM
    assert "interpreter" in KernelPanel("prefill", caps=_caps(triton_mode="interpreter")).reason
    monkeypatch.setenv("LAB_STATIC", "1")
    assert "static book" in SweepPanel(caps=_caps()).reason


def test_a_bad_choice_is_refused_before_anything_starts(tmp_path, pool):
    panel = _sweep(tmp_path, pool)
    for bad in ({"backends": []}, {"lengths": [32768], "max_tokens": 512}, {"backends": ["FLASHINFER"]},
                {"reps": 0}):
        with pytest.raises(LabError):
            panel.start({**panel.defaults, **bad})
    assert panel.job is None and pool.running() == []


# --- the sweep panel against the fake server --------------------------------------------------------

def test_a_sweep_shows_the_start_phases_and_each_prompt_and_writes_points_as_they_land(tmp_path, pool):
    panel = _sweep(tmp_path, pool, lengths=[64, 128], reps=2, max_tokens=16)
    seen = []
    panel.progress.listeners.append(seen.append)
    panel.start()
    folders = panel.wait(timeout=60)
    text = "\n".join(seen)
    for phase in ("starting a vLLM server", "loading weights", "torch.compile",
                  "capturing CUDA graphs", "ready in"):
        assert phase in text, phase
    assert "FLASH_ATTN/FA3: 64 tokens, warm-up" in text and "128 tokens, request 2 of 2" in text
    assert "64 tokens: TTFT" in text and panel.progress.status == "done"
    table = pd.read_csv(folders[0] / "sweep.csv")
    assert list(table.target_len) == [64, 128] and set(table.status) == {"ok"} and set(table.reps) == {2}
    provenance = (folders[0] / "provenance.json").read_text()
    assert "chapter 06's run panel" in provenance and '"kind": "vllm-sweep"' in provenance


def test_a_second_run_reuses_the_server_and_stop_all_leaves_no_process(tmp_path, pool):
    panel = _sweep(tmp_path, pool, lengths=[32], reps=1, max_tokens=8)
    panel.start()
    panel.wait(timeout=60)
    server = pool.servers[ArmKey(FA3)]
    pid, child = server.pid, int((tmp_path / "child.pid").read_text())
    panel.start({**panel.defaults, "lengths": [48]})
    panel.wait(timeout=60)
    assert pool.servers[ArmKey(FA3)].pid == pid
    assert any("reusing the running server" in line for line in panel.progress.lines)
    assert not any("starting a vLLM server" in line for line in panel.progress.lines)
    assert "already running: no start" in " ".join(panel.plan(panel.defaults).lines)
    pool.stop_all()
    assert group_members(pid) == [] and not _alive(child)


def test_stop_shuts_the_server_down_and_keeps_the_finished_points(tmp_path, pool):
    panel = _sweep(tmp_path, pool, lengths=[32, 64, 96, 128, 160, 192], reps=3, max_tokens=64)
    panel.start()
    deadline = time.monotonic() + 60
    while not any("32 tokens: TTFT" in line for line in panel.progress.lines):
        assert time.monotonic() < deadline, panel.progress.lines
        time.sleep(0.05)
    pid = pool.servers[ArmKey(FA3)].pid
    panel.stop()
    assert panel.wait(timeout=60) is None
    assert panel.progress.status.startswith("stopped")
    assert group_members(pid) == [] and pool.running() == []
    table = pd.read_csv(panel.folders[0] / "sweep.csv")
    assert 32 in list(table.target_len) and set(table.status) == {"ok"}   # finished points, no torn one
    assert len(table) < 6


def test_stop_while_the_server_starts_stops_it(tmp_path, pool):
    panel = _sweep(tmp_path, pool, lengths=[32])
    panel.start()
    deadline = time.monotonic() + 30
    while ArmKey(FA3) not in pool.starting:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    time.sleep(0.3)
    pid = pool.starting[ArmKey(FA3)].pid
    panel.stop()
    assert panel.wait(timeout=60) is None and panel.progress.status.startswith("stopped")
    assert group_members(pid) == []


def test_servers_are_stopped_when_the_kernel_exits(tmp_path):
    """atexit: a notebook process that ends without stopping its panel leaves no server behind."""
    child_file = tmp_path / "child.pid"
    script = textwrap.dedent(f"""
        import functools, os, sys
        sys.path[:0] = [{str(REPO_ROOT)!r}, {str(Path(__file__).parent)!r}]
        from lab.book.run_panels.servers import ServerPool
        from lab.book.run_panels.sweep import SweepPanel
        from lab.measure.vllm.server import Server
        from test_run_panels import LAUNCHER, _caps
        env = {{**os.environ, "FAKE_VLLM_CHILD_PID_FILE": {str(child_file)!r}}}
        pool = ServerPool(make=functools.partial(Server, launcher=LAUNCHER, vllm_version="0.26.0", env=env),
                          log_dir={str(tmp_path / "servers")!r})
        panel = SweepPanel(caps=_caps(), pool_=pool, out_root={str(tmp_path / "out")!r}, lengths=[32], max_tokens=8)
        panel.start(); panel.wait(timeout=60)
        print(pool.servers[next(iter(pool.servers))].pid)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert done.returncode == 0, done.stderr
    pid = int(done.stdout.split()[-1])
    assert group_members(pid) == [] and not _alive(int(child_file.read_text()))


def _alive(pid: int) -> bool:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        stat = Path(f"/proc/{pid}/stat")
        if stat.exists() and stat.read_text().split(") ")[1].startswith("Z"):
            return False
        time.sleep(0.1)
    return True


# --- the live face ----------------------------------------------------------------------------------

def test_the_widget_runs_from_its_button_and_the_buttons_follow_the_run(tmp_path, pool):
    panel = _sweep(tmp_path, pool, lengths=[32], max_tokens=8)
    box = panel.live_widget()
    parts = box.panel_parts
    assert not parts["run"].disabled and parts["stop"].disabled
    assert "FLASH_ATTN/FA3" in parts["plan"].value
    parts["controls"]["lengths"].value = (256, 512)
    assert "256, 512 tokens" in parts["plan"].value
    parts["run"].click()
    assert parts["run"].disabled and not parts["stop"].disabled
    panel.wait(timeout=60)
    assert not parts["run"].disabled and parts["stop"].disabled
    assert "done" in parts["status"].value and "512 tokens" in parts["log"].value
    assert len(parts["results"].children) == 1       # the sweep explorer, with the new points


# --- the kernel panel on the CPU interpreter ----------------------------------------------------------

def test_the_kernel_panel_times_through_the_bench_and_writes_a_run_the_explorer_reads(tmp_path):
    import torch

    panel = KernelPanel("prefill", caps=_caps(), out=tmp_path / "kernels-live", sizes=[40],
                        candidates=["ours-teaching", "ours-tuned"], q_heads=4, kv_heads=2, head_dim=64,
                        measure_kw={"device": "cpu", "dtype": torch.float16, "timer": lambda fn, **kw: (fn(), 1.5)[1]})
    panel.start()
    rows = panel.wait(timeout=300)
    assert [r["candidate"] for r in rows] == ["ours-teaching", "ours-tuned"] and {r["status"] for r in rows} == {"ok"}
    table = pd.read_csv(tmp_path / "kernels-live" / "prefill.csv")
    assert list(table.n) == [40, 40] and list(table.ms) == [1.5, 1.5]
    assert '"kind": "kernels"' in (tmp_path / "kernels-live" / "provenance.json").read_text()
    assert any("ours-tuned: check (first call" in line for line in panel.progress.lines)
    assert panel.tables and list(panel.tables[0].candidate) == ["ours-teaching", "ours-tuned"]
    assert panel.note_of(rows).startswith("prefill at 40 tokens: ours-teaching 1.5 ms (")


def test_autorun_runs_the_default_prints_progress_and_notes_what_it_measured(tmp_path, pool, monkeypatch, capsys):
    log = tmp_path / "notes.jsonl"
    monkeypatch.setenv("LAB_LIVE_LOG", str(log))
    panel = _sweep(tmp_path, pool, lengths=[32], max_tokens=8)
    panel.autorun()
    printed = capsys.readouterr().out
    assert "Run a sweep on your GPU: FLASH_ATTN/FA3 at 1 prompt length(s)" in printed and "ready in" in printed
    assert "vLLM FLASH_ATTN/FA3 TTFT 32: " in log.read_text() and "ITL" in log.read_text()


def test_base_worker_keeps_one_thread_for_every_job():
    names = [base.WORKER.submit(lambda: __import__("threading").current_thread().name) for _ in range(3)]
    for job in names:
        job.done.wait(60)
    assert {job.result for job in names} == {"lab-run-panels"}
