"""Fault classes 11 and 12 (issue 36): no traceback, and one clear line naming the file.

Every JSON file the lab reads comes through ``lab.store.read_json`` (nesting too deep is a LabError naming the
file); every file it writes goes through ``lab.store`` (a full disk names the file being written); a reply a
server sent is folded into one line before it enters a message, and ``run_command`` prints any refusal as one.
"""

from __future__ import annotations

import io
import shutil
from contextlib import redirect_stderr
from pathlib import Path

import pytest
from refusals import one_line_refusal, refused

from lab import REPO_ROOT, LabError
from lab.cli import run_command

SWEEP = REPO_ROOT / "data" / "h200" / "vllm0.26-qwen2.5-7b" / "flash_attn-fa3"
MODEL = REPO_ROOT / "data" / "models" / "qwen2.5-7b-128k"
DEEP = "[" * 100_000 + "]" * 100_000      # far deeper than Python's recursion limit


@pytest.fixture
def deep(tmp_path) -> Path:
    """A sweep dataset whose provenance.json is a valid but deeply nested JSON array."""
    folder = tmp_path / "ds"
    shutil.copytree(SWEEP, folder)
    (folder / "provenance.json").write_text(DEEP)
    return folder


def test_deeply_nested_json_in_a_provenance_is_one_line_naming_it(deep):
    err = refused(["fit", deep], deep)
    assert f"{deep}/provenance.json: JSON nested too deeply to read" in err
    listed = _lab(["datasets", "--root", deep.parent])
    assert listed.returncode == 1 and "Traceback" not in listed.stdout + listed.stderr
    assert f"BROKEN {deep}: {deep}/provenance.json: JSON nested too deeply to read" in listed.stdout


def test_deeply_nested_json_in_a_records_file_is_one_line_naming_its_line(tmp_path):
    from lab.measure.vllm.probe import check_resume
    path = tmp_path / "measurements.jsonl"
    path.write_text(DEEP + "\n" + '{"target_len": 8, "rep": 0}\n')
    with pytest.raises(LabError, match="measurements.jsonl: line 1 is not valid JSON \\(or nested too deeply\\)"):
        check_resume(path, {})


def test_a_full_disk_in_vllm_tokenizer_is_one_line_naming_the_file(full_disk):
    model = full_disk / "model"
    model.mkdir()
    shutil.copy(MODEL / "config.json", model)
    line = one_line_refusal(_lab(["vllm-tokenizer", "--model", model]))
    assert line == (f"error: {model}/tokenizer/tokenizer.json: cannot write: No space left on device "
                    "(the disk is full: free some space and rerun (results already written are kept))")
    assert sorted(p.name for p in model.iterdir()) == ["config.json"]      # no half tokenizer, no empty folder


def test_a_full_disk_while_appending_a_record_names_the_file(full_disk):
    from lab.store import append_jsonl
    path = full_disk / "measurements.jsonl"
    with pytest.raises(LabError, match=f"{path}: cannot append: No space left on device"):
        for n in range(10_000):
            append_jsonl(path, {"n": n, "padding": "x" * 1000})


def _lab(argv):
    from refusals import lab_process
    return lab_process(argv)


def test_a_server_reply_of_several_lines_enters_an_error_as_one():
    from lab.measure import capture
    from lab.measure.vllm.replies import error_message

    page = "<html>\n<head><title>500 Internal Server Error</title></head>\n<body>\nTraceback ...\n</body></html>\n"
    assert error_message(page) == ("<html> <head><title>500 Internal Server Error</title></head> <body> Traceback ... "
                                   "</body></html>")
    assert error_message(page.encode()) == error_message(page)

    class Server:
        base_url = "http://127.0.0.1:1"

        def post(self, path):
            return 500, page
    with pytest.raises(LabError) as refusal:
        capture._profile_call(Server(), "/start_profile")
    assert "\n" not in str(refusal.value) and "answered 500: <html> <head>" in str(refusal.value)


def test_run_command_prints_any_refusal_as_one_line():
    def refuses(_):
        raise LabError("the reply was:\n  line one\n\n  line two")
    err = io.StringIO()
    with redirect_stderr(err):
        assert run_command(refuses, None) == 2
    assert err.getvalue() == "error: the reply was: / line one / line two\n"
