"""Fault classes 8 and 9 (issue 26): a broken dataset is listed as broken, skipped by the readers with a
visible note, and hides nothing; ``datasets`` reports every folder it cannot use and refuses a missing --root."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from refusals import lab_process, one_line_refusal

from lab import REPO_ROOT, store
from lab.results import data

REFERENCE = REPO_ROOT / "data" / "reference" / "a10g-vllm0.11-qwen2.5-7b"


def _tree(root):
    """A data tree: the published reference study plus a reader's folders under local/."""
    shutil.copytree(REFERENCE, root / "reference" / REFERENCE.name)
    (root / "local").mkdir()
    return root


def _reader_run(root, name="x", drop="itl_ms", provenance=None):
    """data/local/NAME: a copy of the reference study's sweep.csv without the column ``drop``."""
    import pandas as pd

    folder = root / "local" / name
    folder.mkdir(parents=True)
    record = provenance or json.loads((REFERENCE / "provenance.json").read_text())
    (folder / "provenance.json").write_text(json.dumps(record))
    table = pd.read_csv(REFERENCE / "sweep.csv")
    table.drop(columns=[drop] if drop else []).to_csv(folder / "sweep.csv", index=False)
    return folder


def test_a_sweep_csv_without_a_column_is_listed_as_broken_and_the_rest_listed(tmp_path):
    root = _tree(tmp_path)
    _reader_run(root)
    proc = lab_process(["datasets", "--root", root])
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "reference/a10g-vllm0.11-qwen2.5-7b" in proc.stdout
    broken = [line for line in proc.stdout.splitlines() if line.startswith("BROKEN")]
    assert broken == [f"BROKEN {root / 'local' / 'x'}: {root / 'local' / 'x' / 'sweep.csv'}: column 'itl_ms' is "
                      "missing; expected columns arm, backend, target_len, actual_len, ttft_s, prefill_ms_per_token, "
                      "itl_ms"]
    assert proc.stderr.strip().count("\n") == 0 and "1 folder(s)" in proc.stderr


def test_text_where_numbers_belong_is_broken_too(tmp_path):
    root = _tree(tmp_path)
    folder = _reader_run(root, drop=None)
    text = (folder / "sweep.csv").read_text().splitlines()
    head = text[0].split(",")
    row = text[1].split(",")
    row[head.index("ttft_s")] = "fast"
    (folder / "sweep.csv").write_text("\n".join([text[0], ",".join(row), *text[2:]]) + "\n")
    assert [reason for _, reason in data.scan(root=root)[1]] == [
        f"{folder / 'sweep.csv'}: column 'ttft_s' holds text where numbers belong"]


def test_the_readers_skip_a_broken_dataset_and_the_explorer_names_it(tmp_path):
    from lab.book.sweep_explorer import sweep_explorer
    root = _tree(tmp_path)
    _reader_run(root)
    table = data.load_sweeps(root)
    assert len(table) and not any("local" in name for name in table["dataset"])
    page = sweep_explorer(root).static_html()
    assert 'class="lab-note lab-skipped"' in page and "local/x" in page and "column &#x27;itl_ms&#x27;" in page
    assert data.skipped_note(root, "census.csv") == ""          # only the explorers that read that table say so


def test_an_explorer_over_healthy_data_says_nothing_of_skipping(tmp_path):
    from lab.book.sweep_explorer import sweep_explorer
    assert "lab-skipped" not in sweep_explorer(_tree(tmp_path)).static_html()


@pytest.mark.parametrize("make, reason", [
    (lambda f: (f / "sweep.csv").write_text("arm,target_len\nX,8\n"), "no provenance.json"),
    (lambda f: (f / "provenance.json").symlink_to("provenance.json"),
     "Too many levels of symbolic links (a symbolic link that leads back to itself"),
    (lambda f: (f / "provenance.json").write_text(json.dumps({**store.new_provenance("kernels"), "schema_version": 99})),
     "field 'schema_version' is 99; this lab reads version 1"),
    (lambda f: (f / "provenance.json").mkdir(), "is a folder, expected a file"),
])
def test_datasets_names_every_folder_it_cannot_use(tmp_path, make, reason):
    root = _tree(tmp_path)
    folder = root / "local" / "odd"
    folder.mkdir()
    make(folder)
    proc = lab_process(["datasets", "--root", root])
    broken = [line for line in proc.stdout.splitlines() if line.startswith("BROKEN")]
    assert proc.returncode == 1 and len(broken) == 1 and broken[0].startswith(f"BROKEN {folder}") \
        and reason in broken[0], proc.stdout
    assert "reference/a10g-vllm0.11-qwen2.5-7b" in proc.stdout and "Traceback" not in proc.stderr


def test_an_unreadable_folder_is_named(public_tmp):
    root = _tree(public_tmp)
    locked = _reader_run(root, "locked", drop=None)
    locked.chmod(0)
    proc = lab_process(["datasets", "--root", root], reader=True)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert f"BROKEN {locked}: cannot be read: Permission denied (check its permissions)" in proc.stdout
    assert "reference/a10g-vllm0.11-qwen2.5-7b" in proc.stdout


def test_an_unreadable_table_is_named(public_tmp):
    root = _tree(public_tmp)
    folder = _reader_run(root, drop=None)
    (folder / "sweep.csv").chmod(0)
    proc = lab_process(["datasets", "--root", root], reader=True)
    assert f"BROKEN {folder}: {folder / 'sweep.csv'}: cannot read: Permission denied" in proc.stdout, proc.stdout


def test_model_folders_are_no_datasets_and_need_no_provenance():
    assert not [folder for folder, _ in data.scan(root=REPO_ROOT / "data")[1] if "models" in folder.parts]


@pytest.mark.parametrize("root, what", [("nope", "no such folder"), ("file", "is a file")])
def test_a_missing_root_is_refused(tmp_path, root, what):
    (tmp_path / "file").write_text("x")
    line = one_line_refusal(lab_process(["datasets", "--root", tmp_path / root]))
    assert line == f"error: --root {tmp_path / root}: {what}; expected the data folder (default data/)"


def test_a_closed_pipe_ends_quietly():
    """``python -m lab datasets | head -1``: the reader goes away; no traceback, no complaint (as SIGPIPE would)."""
    read, write = os.pipe()
    os.close(read)                           # the reader is gone before the first line is written
    proc = subprocess.run([sys.executable, "-m", "lab", "datasets"], cwd=REPO_ROOT, stdout=write,
                          stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
                          timeout=300)
    os.close(write)
    assert proc.returncode == 141 and proc.stderr == ""


def test_head_of_datasets_through_a_shell_pipe_is_quiet(tmp_path):
    root = _tree(tmp_path)
    for n in range(300):                     # more lines than fit one write: some are written after head has gone
        (root / "local" / f"run{n:03d}").mkdir()
        shutil.copy(REFERENCE / "provenance.json", root / "local" / f"run{n:03d}")
    proc = subprocess.run(f"{sys.executable} -m lab datasets --root {root} | head -1", shell=True, cwd=REPO_ROOT,
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, timeout=300)
    assert proc.returncode == 0 and len(proc.stdout.splitlines()) == 1 and proc.stderr == ""


@pytest.mark.parametrize("argv", [["--help"], ["datasets", "--help"], ["census", "--rules"]])
def test_help_and_listings_into_a_closed_pipe_end_quietly(argv):
    read, write = os.pipe()
    os.close(read)
    proc = subprocess.run([sys.executable, "-m", "lab", *argv], cwd=REPO_ROOT, stdout=write, stderr=subprocess.PIPE,
                          text=True, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, timeout=300)
    os.close(write)
    assert proc.returncode in (0, 141) and proc.stderr == ""
