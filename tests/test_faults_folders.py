"""Fault classes 3, 6 and 7 (issue 26): one writer per dataset folder, signals end a run cleanly, and every
run's evidence survives (a resume keeps the crashed run's server log).

Nothing here waits on the clock: a writer holds its lock until the test says so (a line on its stdin), a
signal is sent once the child has said it is mid-write, and a server that never gets ready holds its sweep.
"""

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
from refusals import snapshot

from lab import REPO_ROOT, LabError
from lab.folders import LOCK_NAME, check_stale_group, dataset_lock, set_aside
from lab.measure.vllm import probe
from lab.measure.vllm.server import Server

LAUNCHER = (sys.executable, str(Path(__file__).with_name("fake_vllm.py")))
MODEL_128K = str(REPO_ROOT / "data" / "models" / "qwen2.5-7b-128k")
ENV = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}


def _child(code: str, **kw) -> subprocess.Popen:
    """A Python child of this checkout with pipes; it says what it is doing on stdout, line by line."""
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**ENV, **kw})


def _holder(folder: Path) -> subprocess.Popen:
    """A child that holds ``folder``'s lock until it reads a line."""
    child = _child(f"""
        import sys
        from lab.folders import dataset_lock
        with dataset_lock({str(folder)!r}):
            print("held", flush=True)
            sys.stdin.readline()
        """)
    assert child.stdout.readline().strip() == "held", child.stderr.read()
    return child


def _release(child: subprocess.Popen) -> None:
    child.stdin.write("\n")
    child.stdin.flush()
    assert child.wait(timeout=60) == 0


# --- the lock itself ---------------------------------------------------------------------------------

def test_a_second_writer_is_refused_with_the_first_ones_pid_until_it_is_done(tmp_path):
    folder = tmp_path / "run"
    holder = _holder(folder)
    with pytest.raises(LabError) as refused, dataset_lock(folder):
        pass
    message = str(refused.value)
    assert message.startswith(f"{folder}: another run is writing this folder (pid {holder.pid}: ")
    assert message.endswith("wait for it to end or choose another --out") and "\n" not in message
    _release(holder)
    assert not (folder / LOCK_NAME).exists()       # a writer that is done leaves no lock behind
    with dataset_lock(folder):
        assert (folder / LOCK_NAME).read_text().split()[0] == str(os.getpid())


def test_the_lock_of_a_killed_writer_is_taken_over(tmp_path):
    folder = tmp_path / "run"
    holder = _holder(folder)
    holder.kill()
    holder.wait(timeout=60)
    assert (folder / LOCK_NAME).read_text().split()[0] == str(holder.pid)   # left behind by the kill
    with dataset_lock(folder):
        assert (folder / LOCK_NAME).read_text().split()[0] == str(os.getpid())


def test_a_lock_file_naming_a_live_process_is_respected_and_a_dead_one_is_not(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    sleeper = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.readline()"], stdin=subprocess.PIPE)
    (folder / LOCK_NAME).write_text(f"{sleeper.pid} - python -m lab vllm-sweep --out run\n")
    with pytest.raises(LabError, match=f"pid {sleeper.pid}: python -m lab vllm-sweep"), dataset_lock(folder):
        pass
    sleeper.communicate(b"\n", timeout=60)
    with dataset_lock(folder):                     # that pid is gone now: a stale lock
        pass
    assert list(folder.iterdir()) == []


def test_the_lock_is_re_entrant_and_an_emptied_folder_it_made_is_removed(tmp_path):
    folder = tmp_path / "a" / "b"
    with pytest.raises(LabError, match="refused inside"), dataset_lock(folder), dataset_lock(folder):
        raise LabError("refused inside")
    assert not (tmp_path / "a").exists()           # both folders it made, empty again: gone
    (tmp_path / "kept").mkdir()
    with dataset_lock(tmp_path / "kept"):
        pass
    assert (tmp_path / "kept").is_dir()            # a folder that was there stays


# --- the tools hold it ---------------------------------------------------------------------------------

def _sweep_args(out: Path, **kw):
    from lab.measure.vllm import sweep
    parser = argparse.ArgumentParser()
    sweep.add_arguments(parser)
    argv = ["--backend", "FLASH_ATTN", "--fa-version", "3", "--lengths", "8,16", "--reps", "2", "--max-tokens", "6",
            "--warmup-tokens", "4", "--out", str(out), "--model", MODEL_128K, "--quiet", "--max-num-batched-tokens",
            "8192"]
    for key, value in kw.items():
        argv += [f"--{key.replace('_', '-')}", str(value)]
    return parser.parse_args(argv)


def test_two_sweeps_into_one_folder_the_second_is_refused_and_touches_nothing(tmp_path, monkeypatch):
    """The issue's case: both exited 0, every record was stored twice and one renamed the other's server.log."""
    from lab.measure.vllm import concurrency, sweep
    out = tmp_path / "arm"
    first = _child(f"""
        import argparse, functools, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_faults_folders import LAUNCHER, MODEL_128K, _sweep_args
        from lab.cli import run_command
        from lab.measure.vllm import sweep
        from lab.measure.vllm.server import Server
        sweep.Server = functools.partial(Server, launcher=LAUNCHER)
        sys.exit(run_command(lambda a: sweep.run_arm(a, MODEL_128K, [8, 16], 256, a.out, "0.26.0"),
                             _sweep_args({str(out)!r}, ready_timeout=3600)))
        """, FAKE_VLLM_MODE="never")
    lock = out / LOCK_NAME
    log = out / "server.log"
    deadline = time.monotonic() + 600              # generous: only a hung child reaches it
    while not (lock.exists() and log.exists() and "Capturing CUDA graphs" in log.read_text()):
        assert first.poll() is None and time.monotonic() < deadline, first.stderr.read()
        time.sleep(0.05)                           # the first sweep waits for a server that never gets ready
    before = snapshot(out)
    monkeypatch.setattr(sweep, "Server", functools.partial(Server, launcher=LAUNCHER))
    with pytest.raises(LabError, match=f"{out}: another run is writing this folder \\(pid {first.pid}"):
        sweep.run_arm(_sweep_args(out), MODEL_128K, [8, 16], 256, out, "0.26.0")
    monkeypatch.setattr(concurrency, "Server", functools.partial(Server, launcher=LAUNCHER))
    with pytest.raises(LabError, match="another run is writing this folder"):
        concurrency.run_arm(argparse.Namespace(), MODEL_128K, [(8, 1)], 256, out, "0.26.0")
    assert snapshot(out) == before                # nothing renamed, nothing written
    first.send_signal(signal.SIGTERM)             # the first one ends cleanly: server stopped, lock released
    assert first.wait(timeout=120) == 143
    assert first.stderr.read().strip().splitlines()[-1] == "terminated (SIGTERM): results already written are kept"
    assert not lock.exists() and not (out / "server.pgid").exists()


@pytest.mark.parametrize("argv", [
    ["census", "{trace}", "--json", "{out}/c.json"],
    ["capture", "trim", "{trace}", "--out", "{out}/t.json.gz"],
    ["bench", "--rebuild", "{out}"],
    ["reference", "--source", "{out}/nowhere", "--out", "{out}"],
    ["hardware", "--measure", "--quick", "--out", "{out}"],
])
def test_every_writing_tool_refuses_a_folder_another_run_is_writing(tmp_path, argv):
    from refusals import refused
    out = tmp_path / "busy"
    out.mkdir()
    (out / "measurements.jsonl").write_text(json.dumps({"candidate": "naive", "n": 1024, "status": "ok", "ms": 1.0}) + "\n")
    trace = sorted((REPO_ROOT / "data/h200/vllm0.26-qwen2.5-7b/traces/flash_attn-fa3").glob("*.trace.json.gz"))[0]
    holder = _holder(out)
    try:
        err = refused([a.format(trace=trace, out=out) for a in argv], out)
    finally:
        _release(holder)
    assert f"another run is writing this folder (pid {holder.pid}" in err


# --- signals ---------------------------------------------------------------------------------------------

def test_sigterm_mid_write_is_one_line_and_leaves_no_temporary_file(tmp_path):
    """``capture trim`` killed with SIGTERM while it writes: one line, status 143, the earlier output kept, no
    hidden ``.t.json.gz.<pid>.*.tmp`` beside it."""
    trace = sorted((REPO_ROOT / "data/h200/vllm0.26-qwen2.5-7b/traces/flash_attn-fa3").glob("*.trace.json.gz"))[0]
    out = tmp_path / "t.json.gz"
    out.write_bytes(b"an earlier trimmed trace")
    child = _child(f"""
        import signal, sys
        signal.signal(signal.SIGTERM, signal.SIG_DFL)   # as a shell starts it (a test runner may pass SIGTERM ignored)
        import lab.measure.census as census
        events = census.iter_events

        def slow(*args, **kwargs):          # stop after 100 events, mid-write, until the test has signalled
            for number, event in enumerate(events(*args, **kwargs)):
                if number == 100:
                    print("writing", flush=True)
                    sys.stdin.readline()
                yield event
        census.iter_events = slow
        from lab.__main__ import main
        sys.exit(main(["capture", "trim", {str(trace)!r}, "--out", {str(out)!r}]))
        """)
    assert child.stdout.readline().strip() == "writing", child.stderr.read()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]    # the temporary file is there
    child.send_signal(signal.SIGTERM)
    assert child.wait(timeout=60) == 143
    assert child.stderr.read().strip() == "terminated (SIGTERM): results already written are kept"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json.gz"] and out.read_bytes() == b"an earlier trimmed trace"


def test_a_length_cut_by_ctrl_c_is_partial_not_ok(tmp_path, monkeypatch):
    from lab.measure.vllm import sweep
    from lab.results import data
    monkeypatch.setattr(sweep, "Server", functools.partial(Server, launcher=LAUNCHER))
    monkeypatch.setenv("FAKE_VLLM_MODE", "ok")
    calls = []
    measure = probe.measure_once

    def interrupted(endpoint, plan, length, rep):
        calls.append((length, rep))
        if (length, rep) == (16, 1):           # Ctrl-C during the second repetition of the second length
            raise KeyboardInterrupt
        return measure(endpoint, plan, length, rep)
    monkeypatch.setattr(probe, "measure_once", interrupted)
    out = tmp_path / "arm"
    with pytest.raises(KeyboardInterrupt):
        sweep.run_arm(_sweep_args(out), MODEL_128K, [8, 16], 256, out, "0.26.0")
    table = data.load(out).csv("sweep.csv")
    assert table[["target_len", "reps", "status"]].values.tolist() == [[8, 2, "ok"], [16, 1, "partial"]]
    assert table["error"].iloc[1] == "1 of 2 repetitions measured"


def _own_group() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.readline()"], stdin=subprocess.PIPE,
                            start_new_session=True)


def test_a_stale_server_pgid_is_removed_and_a_live_one_refused(tmp_path):
    pgid = tmp_path / "server.pgid"
    group = _own_group()
    pgid.write_text(str(group.pid))
    with pytest.raises(LabError, match=f"server.pgid: a server of an earlier run \\(process group {group.pid}\\) "
                                       f"still runs; stop it with `kill -- -{group.pid}` and rerun"):
        check_stale_group(pgid)
    assert pgid.read_text() == str(group.pid)
    group.communicate(b"\n", timeout=60)
    check_stale_group(pgid)                       # that group is gone: the file goes too
    assert not pgid.exists()
    pgid.write_text("not a number")
    check_stale_group(pgid)
    assert not pgid.exists()


def test_a_server_is_not_started_beside_a_live_earlier_server(tmp_path):
    group = _own_group()
    (tmp_path / "server.pgid").write_text(str(group.pid))
    (tmp_path / "server.log").write_text("the earlier run's log\n")
    server = Server(MODEL_128K, "FLASH_ATTN", log_path=tmp_path / "server.log", launcher=LAUNCHER, vllm_version="0.26.0")
    try:
        with pytest.raises(LabError, match="still runs"):
            server.start()
        assert sorted(p.name for p in tmp_path.iterdir()) == ["server.log", "server.pgid"]
        assert (tmp_path / "server.log").read_text() == "the earlier run's log\n"
    finally:
        group.communicate(b"\n", timeout=60)


# --- evidence --------------------------------------------------------------------------------------------

def test_a_resume_keeps_the_crashed_runs_server_log(tmp_path, monkeypatch):
    from lab.measure.vllm import sweep
    monkeypatch.setattr(sweep, "Server", functools.partial(Server, launcher=LAUNCHER))
    out = tmp_path / "arm"
    monkeypatch.setenv("FAKE_VLLM_MODE", "die_midstream")
    with pytest.raises(LabError, match="exited with status 1"):
        sweep.run_arm(_sweep_args(out), MODEL_128K, [8, 16], 256, out, "0.26.0")
    crashed = (out / "server.log").read_text()
    monkeypatch.setenv("FAKE_VLLM_MODE", "ok")
    for _ in range(2):                             # two resumes: the crash's log and the first resume's both stay
        assert sweep.run_arm(_sweep_args(out), MODEL_128K, [8, 16], 256, out, "0.26.0") == 0
    assert (out / "server.1.log").read_text() == crashed
    logs = sorted(p.name for p in out.glob("server*.log"))
    assert logs == ["server.1.log", "server.2.log", "server.log"]
    assert len({(out / name).read_text().splitlines()[0] for name in logs}) == 3   # three sessions, three ports


def test_set_aside_never_replaces_an_earlier_file(tmp_path):
    log = tmp_path / "server.log"
    assert set_aside(log) is None
    for text in ("one", "two"):
        log.write_text(text)
        set_aside(log)
    assert (tmp_path / "server.1.log").read_text() == "one" and (tmp_path / "server.2.log").read_text() == "two"
    assert not log.exists()
    (tmp_path / "folder.log").mkdir()
    with pytest.raises(LabError, match="folder.log: is a folder; expected a file"):
        set_aside(tmp_path / "folder.log")


def test_a_sigterm_to_a_fake_server_sweep_with_faults_still_writes_its_dataset(tmp_path):
    """A bad reply, then SIGTERM mid-sweep: sweep.csv and provenance.json are written on the way out."""
    from lab.results import data
    out = tmp_path / "arm"
    with FakeVLLM(fault="silent", fault_lengths={16}) as fake:
        child = _child(f"""
            import sys
            from lab.cli import run_command
            from lab.measure.vllm import probe
            from lab.measure.vllm.probe import ProbePlan, RemoteEndpoint
            plan = ProbePlan(lengths=[8, 16], reps=1, max_tokens=6, warmup_tokens=4, run_key={{"backend": "FAKE"}})
            ok = probe.measure_once
            def told(*args):
                print(f"{{args[2]}} {{args[3]}}", flush=True)    # a request starts: the ones before are stored
                return ok(*args)
            probe.measure_once = told
            def run(_):
                try:
                    probe.run_probe(RemoteEndpoint({fake.base_url!r}, "fake-model"), plan, {str(out / 'measurements.jsonl')!r},
                                    progress=False)
                finally:
                    import pandas as pd
                    from lab import store
                    rows = probe.summarize(probe.read_records({str(out / 'measurements.jsonl')!r}), "FAKE", "FAKE",
                                           reps_for=plan.reps_for)
                    store.write_csv({str(out)!r}, "sweep.csv", pd.DataFrame(rows))
            sys.exit(run_command(run, None))
            """)
        assert [child.stdout.readline().strip() for _ in range(3)] == ["8 warm", "8 0", "16 warm"]
        child.send_signal(signal.SIGTERM)       # while the silent length-16 warm-up waits
        assert child.wait(timeout=120) == 143
    table = data.Dataset(out, {}).csv("sweep.csv")
    assert table["status"].tolist() == ["ok"] and [r["target_len"] for r in probe.read_records(out / "measurements.jsonl")] \
        == [8, 8]
