"""scripts/carry_pack.sh and carry_unpack.sh: files packed into trips of at most --trip-mb MiB and joined again."""

import hashlib
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lab import REPO_ROOT

MIB = 1024 * 1024
MANIFEST_ROOM = 256 * 1024   # what carry.py keeps free in each trip for its manifest


def _run(script: str, *args, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["bash", str(REPO_ROOT / "scripts" / script), *map(str, args)], capture_output=True,
                          text=True, env={**os.environ, "PYTHON": sys.executable}, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"{script} {args} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture
def inputs(tmp_path) -> dict[str, Path]:
    """A vLLM bundle (3 parts + SHA256SUMS as build.sh writes it), FA4 wheels (one bigger than a trip), wheels."""
    bundle, fa4, wheels = tmp_path / "carry", tmp_path / "fa4", tmp_path / "wheels"
    for folder in (bundle, fa4, wheels):
        folder.mkdir()
    blob = os.urandom(900 * 1024)
    sums = []
    for index in range(3):
        part = blob[index * 300 * 1024:(index + 1) * 300 * 1024]
        (bundle / f"part{index:02d}").write_bytes(part)
        sums.append(f"{hashlib.sha256(part).hexdigest()}  part{index:02d}")
    sums.append(f"{hashlib.sha256(blob).hexdigest()}  bundle.tar.xz")
    (bundle / "SHA256SUMS").write_text("\n".join(sums) + "\n", encoding="utf-8")
    (fa4 / "nvidia_cutlass_dsl_libs_cu13-4.8.1-cp312-cp312-manylinux_2_28_x86_64.whl").write_bytes(os.urandom(int(1.7 * MIB)))
    (fa4 / "flash_attn_4-4.0.0b36-py3-none-any.whl").write_bytes(os.urandom(5000))
    (wheels / "jupytext-1.19.6-py3-none-any.whl").write_bytes(os.urandom(70000))
    (wheels / "empty-0-py3-none-any.whl").write_bytes(b"")
    return {"vllm": bundle, "fa4": fa4, "wheels": wheels, "root": tmp_path}


def _pack(inputs, out: Path, *extra, check=True) -> subprocess.CompletedProcess:
    return _run("carry_pack.sh", "--vllm", inputs["vllm"], "--fa4", inputs["fa4"], "--wheels", inputs["wheels"],
                "--out", out, "--trip-mb", "1", *extra, check=check)


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_trips_stay_under_the_limit_are_as_few_as_possible_and_join_back_byte_for_byte(inputs):
    out = inputs["root"] / "trips"
    _pack(inputs, out)
    trips = sorted(out.iterdir())
    total = sum(p.stat().st_size for kind in ("vllm", "fa4", "wheels") for p in inputs[kind].iterdir())
    assert [t.name for t in trips] == [f"t{i}" for i in range(math.ceil(total / (MIB - MANIFEST_ROOM)))]
    for trip in trips:
        assert sum(p.stat().st_size for p in trip.rglob("*") if p.is_file()) <= MIB
        assert (trip / "MANIFEST.tsv").read_bytes() == (trips[0] / "MANIFEST.tsv").read_bytes()
    chunks = sorted(p.name for p in out.rglob("*.chunk*"))
    assert "nvidia_cutlass_dsl_libs_cu13-4.8.1-cp312-cp312-manylinux_2_28_x86_64.whl.chunk00" in chunks
    assert "nvidia_cutlass_dsl_libs_cu13-4.8.1-cp312-cp312-manylinux_2_28_x86_64.whl.chunk01" in chunks

    box = inputs["root"] / "box"           # as on the GPU box: each trip copied to /tmp/carry/tN
    shutil.copytree(out, box)
    dest = inputs["root"] / "offline"
    done = _run("carry_unpack.sh", box, dest)
    assert _files(dest / "vllm-bundle") == _files(inputs["vllm"])
    assert _files(dest / "fa4") == _files(inputs["fa4"])
    assert _files(dest / "wheels") == _files(inputs["wheels"])
    assert f"--offline {dest}/vllm-bundle {dest}/wheels --fa4-wheels {dest}/fa4" in done.stdout
    stamps = {p: p.stat().st_mtime_ns for p in dest.rglob("*") if p.is_file()}
    again = _run("carry_unpack.sh", box, dest)
    assert "0 files joined, 8 already there" in again.stdout
    assert {p: p.stat().st_mtime_ns for p in dest.rglob("*") if p.is_file()} == stamps


def test_missing_trips_are_named_and_nothing_is_written(inputs):
    out = inputs["root"] / "trips"
    _pack(inputs, out)
    n = len(list(out.iterdir()))
    assert n >= 4
    shutil.rmtree(out / "t1")
    shutil.rmtree(out / f"t{n - 1}")
    dest = inputs["root"] / "offline"
    proc = _run("carry_unpack.sh", out, dest, check=False)
    assert proc.returncode == 2 and f"missing trips t1, t{n - 1} (of t0..t{n - 1})" in proc.stderr
    assert not dest.exists()


def test_a_corrupt_piece_and_trips_of_two_packs_are_refused(inputs):
    out, other = inputs["root"] / "trips", inputs["root"] / "other"
    _pack(inputs, out)
    piece = next((out / "t1").rglob("*.chunk*"))
    piece.write_bytes(piece.read_bytes()[:-1] + b"?")
    dest = inputs["root"] / "offline"
    proc = _run("carry_unpack.sh", out, dest, check=False)
    assert proc.returncode == 2 and f"t1/{piece.parent.name}/{piece.name} (corrupt)" in proc.stderr
    assert not dest.exists()
    (inputs["wheels"] / "extra-1-py3-none-any.whl").write_bytes(b"x")
    _pack(inputs, other)
    shutil.rmtree(out / "t0")
    shutil.copytree(other / "t0", out / "t0")
    proc = _run("carry_unpack.sh", out, dest, check=False)
    assert proc.returncode == 2 and "trips of two different packs" in proc.stderr


def test_pack_refuses_bad_input_and_never_replaces_an_input(inputs):
    out = inputs["root"] / "trips"
    proc = _pack(inputs, inputs["fa4"], check=False)
    assert proc.returncode == 2 and "would replace the input folder" in proc.stderr
    proc = _run("carry_pack.sh", "--vllm", inputs["vllm"], "--fa4", inputs["fa4"], "--wheels",
                inputs["root"] / "nowhere", "--out", out, check=False)
    assert proc.returncode == 2 and "no such folder" in proc.stderr and "none" in proc.stderr
    for bad in ("0.1", "nan", "many"):
        assert _pack(inputs, out, "--trip-mb", bad, check=False).returncode == 2
    (inputs["vllm"] / "part01").write_bytes(b"changed")
    proc = _pack(inputs, out, check=False)
    assert proc.returncode == 2 and "part01: does not match" in proc.stderr
    assert not out.exists() and not out.with_name("trips.partial").exists()


def test_folders_can_be_left_out_and_a_new_pack_replaces_the_old_trips(inputs):
    out = inputs["root"] / "trips"
    _pack(inputs, out)
    (out / "t99").mkdir()                 # a stale trip from an older pack
    _pack(inputs, out, "--fa4", "none", "--wheels", "none")
    names = {p.split("/")[0] for t in out.iterdir() for p in _files(t)}
    assert names == {"MANIFEST.tsv", "vllm-bundle"} and not (out / "t99").exists()
    dest = inputs["root"] / "offline"
    done = _run("carry_unpack.sh", out, dest)
    assert "--fa4-wheels" not in done.stdout and sorted(p.name for p in dest.iterdir()) == ["vllm-bundle"]


def test_dest_inside_a_trip_is_refused(inputs):
    out = inputs["root"] / "trips"
    _pack(inputs, out)
    proc = _run("carry_unpack.sh", out, out / "t0" / "here", check=False)
    assert proc.returncode == 2 and "inside the trip folder" in proc.stderr


def test_both_have_help():
    assert "--trip-mb" in _run("carry_pack.sh", "--help").stdout
    assert "TRIPS_DIR" in _run("carry_unpack.sh", "--help").stdout


# --- faults (issue 36): nothing replaced, nothing inside an input, one line for every fault ----------------

def _one_line(proc: subprocess.CompletedProcess) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def test_pack_never_replaces_a_file_or_a_folder_of_other_files_nor_writes_inside_an_input(inputs):
    root = inputs["root"]
    (root / "notes.txt").write_text("mine")
    (root / "docs").mkdir()
    (root / "docs" / "a.txt").write_text("mine too")
    before = _files(root)
    assert "--out " + str(root / "notes.txt") + ": is a file" in _one_line(_pack(inputs, root / "notes.txt", check=False))
    assert "holds files that are not an earlier pack's trips" in _one_line(_pack(inputs, root / "docs", check=False))
    line = _one_line(_pack(inputs, inputs["wheels"] / "trips", check=False))
    assert f"--out {inputs['wheels'] / 'trips'}: lies inside the input folder {inputs['wheels']}" in line
    assert _files(root) == before and sorted(p.name for p in root.iterdir()) == \
        ["carry", "docs", "fa4", "notes.txt", "wheels"]


def test_a_binary_checksum_list_link_loops_and_empty_paths_are_one_line(inputs):
    root = inputs["root"]
    (inputs["vllm"] / "SHA256SUMS").write_bytes(b"\x89PNG\r\n\x1a\n\xc7\xff")
    assert "SHA256SUMS: not a checksum list (binary at byte 0)" in _one_line(_pack(inputs, root / "trips", check=False))
    (root / "loop").symlink_to(root / "loop")
    assert "TRIPS_DIR " + str(root / "loop") + ": a symbolic link that leads back to itself" in \
        _one_line(_run("carry_unpack.sh", root / "loop", root / "dest", check=False))
    assert "--out " + str(root / "loop") + ": a symbolic link" in _one_line(_pack(inputs, root / "loop", check=False))
    assert "argument DEST: expected a path, got an empty string" in \
        _one_line(_run("carry_unpack.sh", root, "", check=False))
    assert "argument --out: expected a path" in _one_line(_pack(inputs, "", check=False))
    assert sorted(p.name for p in root.iterdir()) == ["carry", "fa4", "loop", "wheels"]


def test_a_full_disk_is_one_line_naming_the_file(inputs, full_disk):
    assert f"{full_disk}/trips.partial/t0/" in _one_line(_pack(inputs, full_disk / "trips", check=False))
    assert "No space left on device" in _pack(inputs, full_disk / "trips", check=False).stderr
    assert list(full_disk.iterdir()) == []                   # the partial trips are gone
    trips = inputs["root"] / "trips"
    _pack(inputs, trips)
    line = _one_line(_run("carry_unpack.sh", trips, full_disk / "dest", check=False))
    assert line.startswith(f"error: {full_disk}/dest/") and line.endswith("cannot write: No space left on device")
