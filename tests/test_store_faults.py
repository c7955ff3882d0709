"""lab.store under faults: writers killed mid-write (SIGKILL), concurrent writers, torn JSONL lines.

Each test runs real writer processes and kills them at random moments, a bounded number of times.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from lab import REPO_ROOT, LabError, store

_ENV = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
#: Big records make a kill land inside a write often (one in five kills tears the last line).
_PAD = 4_000_000

_APPENDER = textwrap.dedent("""
    import sys
    from lab import store
    path, first, pad = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    print("ready", flush=True)
    i = first
    while True:
        store.append_jsonl(path, {"i": i, "pad": "x" * pad})
        i += 1
""")

_REPLACER = textwrap.dedent("""
    import sys
    from lab import store
    path, times, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    print("ready", flush=True)
    for i in range(times):
        store.write_atomic(path, lambda tmp: tmp.write_text(str(i % 2) * size))
""")


def _start(script: str, *args) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", script, *map(str, args)], env=_ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=REPO_ROOT)
    assert proc.stdout.readline() == b"ready\n", proc.stderr.read().decode()
    return proc


def _kill_at_random(proc: subprocess.Popen, rng: random.Random, most_s: float) -> None:
    time.sleep(rng.uniform(0.0, most_s))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    proc.stderr.close()


def test_resume_after_a_writer_killed_mid_line_keeps_every_record_and_appends(tmp_path):
    rng = random.Random(18)
    torn_seen, kills = 0, 0
    while kills < 40 and (torn_seen < 2 or kills < 6):   # bounded; stops once two tears were exercised
        kills += 1
        path = tmp_path / f"run{kills}" / "measurements.jsonl"
        path.parent.mkdir()
        _kill_at_random(_start(_APPENDER, path, 0, _PAD), rng, 0.4)
        if not path.exists():
            continue
        before = path.read_bytes()
        whole = before[: before.rfind(b"\n") + 1]
        torn = not before.endswith(b"\n") and before
        torn_seen += bool(torn)
        store.append_jsonl(path, {"i": "resumed"})     # what a resumed sweep does first
        rows = store.read_jsonl(path)
        complete = whole.count(b"\n")
        assert [r["i"] for r in rows] == [*range(complete), "resumed"]
        assert path.read_bytes().startswith(whole)
        sidecar = path.with_name(path.name + ".torn")
        if torn:
            fragment = before[len(whole):]
            assert sidecar.read_bytes() == fragment + b"\n" or (
                fragment.endswith(b"}") and not sidecar.exists())   # a record whose newline was lost: kept
        else:
            assert not sidecar.exists()
    assert torn_seen >= 1, f"no kill tore a line in {kills} tries"


def test_a_torn_line_is_set_aside_not_appended_to(tmp_path, capsys):
    path = tmp_path / "m.jsonl"
    for i in range(3):
        store.append_jsonl(path, {"i": i})
    with open(path, "ab") as fh:
        fh.write(b'{"i": 3, "pad": "xx')
    store.append_jsonl(path, {"i": 4})
    assert [r["i"] for r in store.read_jsonl(path)] == [0, 1, 2, 4]
    assert (tmp_path / "m.jsonl.torn").read_bytes() == b'{"i": 3, "pad": "xx\n'
    assert "moved it to m.jsonl.torn" in capsys.readouterr().err
    with open(path, "ab") as fh:          # a whole record that lost only its newline stays
        fh.write(b'{"i": 5}')
    store.append_jsonl(path, {"i": 6})
    assert [r["i"] for r in store.read_jsonl(path)] == [0, 1, 2, 4, 5, 6]


def test_write_atomic_killed_at_random_never_leaves_half_a_file_or_a_temp(tmp_path):
    rng = random.Random(6)
    path = tmp_path / "table.csv"
    size = 3_000_000
    killed = set()
    for _ in range(15):
        proc = _start(_REPLACER, path, 1000, size)
        _kill_at_random(proc, rng, 0.3)
        killed.add(str(proc.pid))
        if path.exists():
            assert path.read_bytes() in (b"0" * size, b"1" * size)
        # a killed writer cannot clean up; what it leaves is named after it, so the next writer can
        left = [p.name for p in tmp_path.iterdir() if p != path]
        assert all(name.startswith(".table.csv.") and name.split(".")[3] in killed and name.endswith(".tmp")
                   for name in left), left
    store.write_atomic(path, lambda tmp: tmp.write_text("done"))   # the next writer cleans up
    assert path.read_text() == "done"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table.csv"]


def test_two_concurrent_writers_of_one_path_never_fail(tmp_path):
    path = tmp_path / "provenance.json"
    procs = [subprocess.Popen([sys.executable, "-c", _REPLACER, str(path), "200", "1000"], env=_ENV,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO_ROOT) for _ in range(2)]
    errors = [p.communicate(timeout=120)[1].decode() for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errors
    assert path.read_text() in ("0" * 1000, "1" * 1000)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["provenance.json"]


def test_write_atomic_removes_its_temp_when_the_writer_fails_and_keeps_the_old_file(tmp_path):
    path = tmp_path / "bars.csv"
    path.write_text("old")

    def fail(tmp):
        tmp.write_text("half")
        raise RuntimeError("disk on fire")
    with pytest.raises(RuntimeError):
        store.write_atomic(path, fail)
    assert path.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["bars.csv"]


def test_write_atomic_to_a_folder_is_one_line_and_leaves_nothing(tmp_path):
    folder = tmp_path / "adir"
    folder.mkdir()
    with pytest.raises(LabError, match="adir: is a folder"):
        store.write_json_atomic(folder, {"a": 1})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir"] and not any(folder.iterdir())


def test_written_files_are_readable_by_others_and_durable(tmp_path):
    path = store.write_json_atomic(tmp_path / "x.json", {"a": 1})
    assert path.stat().st_mode & 0o777 == 0o666 & ~store._umask()
    assert store.read_json(path) == {"a": 1}


@pytest.mark.parametrize("content, message", [
    (b"42\n", "line 1 is 42, not a JSON object"),
    (b'{"i": 1}\n[1, 2]\n', r"line 2 is \[1, 2\], not a JSON object"),
    (b"\xff\xfe binary", "not UTF-8 text"),
])
def test_jsonl_lines_that_are_not_objects_are_one_line_errors(tmp_path, content, message):
    path = tmp_path / "m.jsonl"
    path.write_bytes(content)
    with pytest.raises(LabError, match=message):
        store.read_jsonl(path)


def test_jsonl_required_fields_name_the_line(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text('{"target_len": 8}\n{}\n')
    with pytest.raises(LabError, match="line 2 has no field 'target_len'"):
        store.read_jsonl(path, required=("target_len",))


@pytest.mark.parametrize("make", [lambda p: p.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00"), lambda p: p.mkdir()])
def test_read_json_of_a_binary_file_or_a_folder_is_one_line(tmp_path, make):
    path = tmp_path / "provenance.json"
    make(path)
    with pytest.raises(LabError, match="provenance.json: (not UTF-8|is a folder)"):
        store.read_json(path)


def test_json_is_still_readable_after_writing(tmp_path):
    path = store.write_json_atomic(tmp_path / "a" / "b.json", [1, 2])
    assert json.loads(Path(path).read_text()) == [1, 2]
