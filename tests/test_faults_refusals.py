"""Fault classes 1, 4 and 5 (issue 26), tool by tool: output onto input, file-system faults and nonsense numbers.

Every case is refused the same way: exit status 2, one line on stderr naming the file or option and what to
do, no traceback, every file that was there byte-identical afterwards, and no empty --out folder left behind.
"""

from __future__ import annotations

import shutil

import pytest
from refusals import lab_process, one_line_refusal, snapshot

from lab import REPO_ROOT
from lab.__main__ import main as lab_main

TRACE = sorted((REPO_ROOT / "data/h200/vllm0.26-qwen2.5-7b/traces/flash_attn-fa3").glob("*.trace.json.gz"))[0]
REFERENCE = REPO_ROOT / "data/reference/a10g-vllm0.11-qwen2.5-7b"
MODEL = REPO_ROOT / "data/models/qwen2.5-7b-128k"
LOOP = "a symbolic link that leads back to itself: fix or remove the link"


@pytest.fixture
def tree(tmp_path):
    """t.json.gz and u.json.gz (traces), link -> t.json.gz, loop -> loop, dir/, file, ds/ (a dataset), src/ (a
    study's logs: the reference dataset's folder stands in, it is refused before it is parsed)."""
    shutil.copy(TRACE, tmp_path / "t.json.gz")
    shutil.copy(TRACE, tmp_path / "u.json.gz")
    (tmp_path / "link").symlink_to(tmp_path / "t.json.gz")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("x")
    shutil.copytree(REFERENCE, tmp_path / "ds")
    shutil.copytree(REFERENCE, tmp_path / "src")
    return tmp_path


def _refused(argv: list[str], root) -> str:
    """Run ``python -m lab ARGV`` here ($T is ``root``); assert the refusal rules; return the one line."""
    import io
    from contextlib import redirect_stderr, redirect_stdout

    argv = [a.replace("$T", str(root)) for a in argv]
    before, entries = snapshot(root), sorted(p.name for p in root.iterdir())
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = lab_main(argv)
        except SystemExit as exc:        # argparse's refusals
            code = exc.code
    lines = [line for line in err.getvalue().splitlines() if line.strip()]
    assert code == 2, (argv, code, err.getvalue()[-1500:], out.getvalue()[-500:])
    assert len(lines) == 1 and "Traceback" not in err.getvalue() + out.getvalue(), err.getvalue()
    assert snapshot(root) == before, f"{argv} changed files it should have left alone"
    assert sorted(p.name for p in root.iterdir()) == entries, f"{argv} left something behind"
    return lines[0]


OUTPUT_ONTO_INPUT = [
    (["census", "$T/t.json.gz", "--json", "$T/t.json.gz"], "--json $T/t.json.gz is the trace $T/t.json.gz: a tool never "
     "writes onto its input; choose another --json"),
    (["census", "$T/t.json.gz", "--json", "$T/link"], "--json $T/link is the trace $T/t.json.gz"),
    (["census", "$T/t.json.gz", "$T/u.json.gz", "--json", "$T/u.json.gz"], "--json $T/u.json.gz is the trace"),
    (["census", "--compare", "$T/t.json.gz", "$T/u.json.gz", "--json", "$T/t.json.gz"], "is the trace $T/t.json.gz"),
    (["capture", "trim", "$T/t.json.gz", "--out", "$T/t.json.gz"], "--out $T/t.json.gz is the trace being trimmed"),
    (["capture", "trim", "$T/t.json.gz", "--out", "$T/link"], "--out $T/link is the trace being trimmed $T/t.json.gz"),
    (["reference", "--source", "$T/src", "--out", "$T/src"], "--out $T/src is --source $T/src"),
    (["reference", "--source", "$T/src", "--out", "$T/src/inner"], "--out $T/src/inner lies inside --source $T/src"),
    (["vllm-sweep", "--backend", "FLASH_ATTN", "--model", str(MODEL), "--out", str(MODEL), "--dry-run"],
     f"--out {MODEL} is --model {MODEL}"),
    (["vllm-concurrency", "--backend", "FLASH_ATTN", "--model", str(MODEL), "--out", str(MODEL / "runs"),
      "--dry-run"], f"--out {MODEL / 'runs'} lies inside --model {MODEL}"),
    (["vllm-load", "--arm", "FLASH_ATTN/FA3", "--model", str(MODEL), "--out", str(MODEL), "--dry-run"], f"--out {MODEL} is --model"),
    (["vllm-interference", "--arm", "FLASH_ATTN/FA3", "--model", str(MODEL), "--out", str(MODEL / "x")], "lies inside --model"),
    (["live-check", "--out", str(REPO_ROOT / "book")], "is the chapters folder"),
    (["slides", "--out", str(REPO_ROOT / "book" / "decks")], "lies inside the chapters folder"),
]

FILE_SYSTEM = [
    (["census", "$T/loop"], f"$T/loop: Too many levels of symbolic links ({LOOP})"),
    (["census", "$T/dir"], "$T/dir: is a folder; pass the trace file inside it"),
    (["census", "$T/t.json.gz", "--json", "$T/loop"], "--json $T/loop: a symbolic link that leads nowhere"),
    (["census", "$T/t.json.gz", "--json", "$T/dir"], "--json $T/dir: is a folder; expected a file name"),
    (["census", "$T/t.json.gz", "--json", "$T/file/x.json"], "--json $T/file: is a file; expected a folder"),
    (["census", "--verify", "$T/file"], "--verify $T/file: is a file; expected a capture folder"),
    (["census", "$T/file", "--json", "$T/new/sub/c.json"], "$T/file: not JSON"),   # and no empty new/sub left
    (["census", "--verify", "$T/loop"], "--verify $T/loop: no such folder"),
    (["capture", "trim", "$T/loop", "--out", "$T/o.json.gz"], f"$T/loop: Too many levels of symbolic links ({LOOP})"),
    (["capture", "trim", "$T/t.json.gz", "--out", "$T/loop"], "--out $T/loop: a symbolic link that leads nowhere"),
    (["capture", "trim", "$T/t.json.gz", "--out", "$T/dir"], "--out $T/dir: is a folder; expected a file name"),
    (["capture", "trim", "$T/nope", "--out", "$T/o.json.gz"], "$T/nope: file not found"),
    (["capture", "call", "lab.cli:positive_count", "--out", "$T/dir"], "--out $T/dir: is a folder"),
    (["fit", "$T/loop"], "$T/loop: no such dataset folder"),
    (["fit", "$T/dir"], "$T/dir/provenance.json: file not found"),
    (["reference", "--source", "$T/loop", "--out", "$T/r"], "$T/loop/s1.log: Too many levels of symbolic links"),
    (["reference", "--source", "$T/file", "--out", "$T/r"], "$T/file: is a file; --source takes the study's folder"),
    (["reference", "--source", "$T/src", "--out", "$T/loop"], f"$T/loop: {LOOP}"),
    (["reference", "--source", "$T/src", "--out", "$T/file"], "--out $T/file: is a file; expected a folder"),
    (["bench", "--rebuild", "$T/loop"], "$T/loop/measurements.jsonl: not found"),
    (["hardware", "--measure", "--quick", "--out", "$T/loop"], "--out $T/loop: a symbolic link that leads nowhere"),
    (["hardware", "--measure", "--quick", "--out", "$T/file"], "--out $T/file: is a file; expected a folder"),
    (["datasets", "--root", "$T/loop"], "--root $T/loop: no such folder"),
    (["vllm-sweep", "--backend", "FLASH_ATTN", "--out", "$T/loop", "--dry-run"], f"$T/loop: {LOOP}"),
    (["vllm-sweep", "--backend", "FLASH_ATTN", "--model", "$T/file"], "$T/file: no such model folder"),
    (["vllm-sweep", "--backend", "FLASH_ATTN", "--out", ""], "argument --out: expected a path, got an empty string"),
    (["census", "$T/t.json.gz", "--json", ""], "argument --json: expected a path, got an empty string"),
    (["capture", "trim", "$T/t.json.gz", "--out", " "], "argument --out: expected a path, got an empty string"),
    (["reference", "--out", ""], "argument --out: expected a path"),
    (["datasets", "--root", ""], "argument --root: expected a path"),
]

NONSENSE = [(["vllm-sweep", "--backend", "FLASH_ATTN", option, value], f"argument {option}: expected {what}, got '{value}'")
            for option, value, what in [
                ("--reps", "0", "a positive integer"), ("--long-reps", "-1", "a positive integer"),
                ("--warmup-tokens", "-3", "a positive integer"), ("--max-tokens", "nan", "a positive integer"),
                ("--request-timeout", "0", "a positive number"), ("--ready-timeout", "nan", "a positive number"),
                ("--max-num-batched-tokens", "0", "a positive integer"), ("--max-model-len", "-5", "a positive integer"),
                ("--gpu-memory-utilization", "2", "a number above 0 and at most 1"),
                ("--gpu-memory-utilization", "inf", "a number above 0 and at most 1"),
                ("--tensor-parallel-size", "0", "a positive integer")]] + [
    (["vllm-concurrency", "--backend", "FLASH_ATTN", option, value], f"argument {option}: expected {what}, got '{value}'")
    for option, value, what in [("--steps", "0", "a positive integer"), ("--stall", "nan", "a positive number"),
                                ("--point-timeout", "-1", "a positive number"), ("--max-tokens", "0", "a positive integer")]
] + [
    (["vllm-concurrency", "--backend", "FLASH_ATTN", "--concurrency", "0"], "--concurrency '0': expected positive counts"),
    (["vllm-concurrency", "--backend", "FLASH_ATTN", "--concurrency", "4,x"], "--concurrency '4,x': expected comma-separated"),
    (["vllm-concurrency", "--backend", "FLASH_ATTN", "--contexts", "0"], "--contexts '0': expected positive counts"),
    (["vllm-concurrency", "--backend", "FLASH_ATTN", "--limit", "0:0"], "--limit '0:0': expected CONTEXT:MAX_CONCURRENCY"),
    (["vllm-sweep", "--backend", "FLASH_ATTN", "--lengths", "256,-4"], "--lengths '256,-4': expected positive counts"),
    (["vllm-sweep", "--backend", "FLASH_ATTN", "--max-tokens", "2"], "--max-tokens must be at least 4"),
    (["capture", "vllm", "--arm", "FLEX_ATTENTION", "--out", "$T/cv", "--max-trace-mb", "0"], "argument --max-trace-mb"),
    (["capture", "vllm", "--arm", "FLEX_ATTENTION", "--out", "$T/cv", "--ready-timeout", "-1"], "argument --ready-timeout"),
    (["capture", "vllm", "--arm", "FLEX_ATTENTION", "--out", "$T/cv", "--windows", "prefill:0"], "window 'prefill:0'"),
    (["capture", "call", "lab.cli:positive_count", "--out", "$T/c.json.gz", "--repeat", "0"], "argument --repeat"),
    (["capture", "call", "lab.cli:positive_count", "--out", "$T/c.json.gz", "--warmup", "-1"], "argument --warmup"),
    (["census", "$T/t.json.gz", "--top", "0"], "argument --top: expected a positive integer, got '0'"),
    (["fit", "$T/ds", "--confidence", "nan"], "--confidence nan: expected a level between 0 and 1"),
    (["fit", "$T/ds", "--at", "0"], "--at '0': expected positive token counts"),
    (["bench", "--q-heads", "0"], "argument --q-heads: expected a positive integer"),
    (["bench", "--kv-heads", "0"], "argument --kv-heads: expected a positive integer"),
    (["bench", "--rounds", "-2"], "argument --rounds: expected a positive integer"),
    (["bench", "--rep-ms", "0"], "argument --rep-ms: expected a positive integer"),
    (["bench", "--lengths", "0"], "--lengths '0': expected positive sizes"),
    (["bench", "--batches", "x"], "--batches 'x': expected comma-separated integers"),
    (["bench", "--candidates", "nope"], "--candidates: unknown candidate 'nope'"),
    (["paged-bench", "--deadline-s", "nan"], "argument --deadline-s: expected a number of 0 or more"),
    (["paged-bench", "--shapes", "0x1k"], "--shapes '0': expected positive sizes"),
    (["paged-bench", "--q-heads", "-28"], "argument --q-heads"),
    (["dram-bytes", "--head-dim", "0"], "argument --head-dim: expected a positive integer"),
    (["dram-bytes", "--deadline-s", "0"], "argument --deadline-s: expected a positive number"),
    (["flex-decomposition", "--prefill-n", "-1"], "argument --prefill-n: expected an integer of 0 or more"),
    (["flex-decomposition", "--rep-ms", "0"], "argument --rep-ms"),
    (["value-dependence", "--rounds", "0"], "argument --rounds"),
    (["vllm-load", "--arm", "FLASH_ATTN/FA3", "--input-len", "0"], "argument --input-len: expected a positive integer"),
    (["vllm-load", "--arm", "FLASH_ATTN/FA3", "--span-s", "nan"], "argument --span-s: expected a positive number"),
    (["vllm-load", "--arm", "FLASH_ATTN/FA3", "--gpu-memory-utilization", "0"], "argument --gpu-memory-utilization"),
    (["vllm-load", "--arm", "FLASH_ATTN/FA3", "--deadline-s", "-1"], "argument --deadline-s: expected a positive number"),
    (["vllm-load", "--arm", "FLASH_ATTN/FA3", "--agreement", "-1"], "argument --agreement: expected an integer of 0 or more"),
    (["vllm-interference", "--arm", "FLASH_ATTN/FA3", "--after-s", "0"], "argument --after-s: expected a positive number"),
    (["vllm-interference", "--arm", "FLASH_ATTN/FA3", "--trial-timeout", "nan"], "argument --trial-timeout"),
    (["vllm-interference", "--arm", "FLASH_ATTN/FA3", "--decoders", "0"], "--decoders '0': expected integers of at least 1"),
    (["vllm-interference", "--arm", "FLASH_ATTN/FA3", "--long", "0"], "--long '0': expected integers of at least 1"),
    (["vllm-interference", "--arm", "FLASH_ATTN/FA3", "--chunks", "-1"], "--chunks '-1': expected integers of at least 0"),
    (["vllm-interference", "--arm", "FLASH_ATTN/FA3", "--decoder-context", "9000:100"], "expected LOW:HIGH"),
    (["kernel-counters", "--deadline-s", "0"], "argument --deadline-s: expected a positive number"),
    (["decode-rows", "--batch", "0"], "argument --batch: expected a positive integer"),
    (["decode-rows", "--rows", "0"], "--rows '0': expected positive sizes"),
    (["bandwidth", "--rounds", "0"], "argument --rounds: expected a positive integer"),
    (["bandwidth", "--sizes", "0"], "--sizes '0': expected positive sizes"),
    (["live-check", "--jobs", "0"], "argument --jobs: expected a positive integer"),
    (["live-check", "--budget-s", "-1"], "argument --budget-s: expected a positive number"),
    (["live-check", "--limit", "x=nan"], "argument --limit: 'x=nan': expected CHAPTER=SECONDS"),
    (["vllm-load", "--arm", "FLASH_ATTN/FA3", "--slo", "ttft:nan"], "argument --slo: 'ttft:nan': ttft must be a positive"),
    (["vllm-load", "--arm", "FLASH_ATTN/FA3", "--slo", "tpot:inf"], "argument --slo: 'tpot:inf': tpot must be a positive"),
]


@pytest.mark.parametrize("argv, expected", OUTPUT_ONTO_INPUT, ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_no_tool_writes_onto_one_of_its_inputs(tree, argv, expected):
    line = _refused(argv, tree)
    assert expected.replace("$T", str(tree)) in line, line


@pytest.mark.parametrize("argv, expected", FILE_SYSTEM, ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_a_file_system_fault_is_one_line_naming_the_path(tree, argv, expected):
    line = _refused(argv, tree)
    assert expected.replace("$T", str(tree)) in line, line


@pytest.mark.parametrize("argv, expected", NONSENSE, ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_a_nonsense_number_is_refused_naming_its_option(tree, argv, expected):
    line = _refused(argv, tree)
    assert expected.replace("$T", str(tree)) in line, line


@pytest.mark.parametrize("argv, expected", [
    (["census", "$T/t.json.gz"], "$T/t.json.gz: Permission denied (check its permissions)"),
    (["capture", "trim", "$T/t.json.gz", "--out", "$T/out/t.json.gz"], "$T/t.json.gz: Permission denied"),
    (["fit", "$T/ds"], "$T/ds/sweep.csv: cannot read: Permission denied"),
    (["census", "--verify", "$T/ds"], "$T/ds: Permission denied"),
])
def test_an_unreadable_file_is_one_line_naming_it(public_tmp, argv, expected):
    shutil.copy(TRACE, public_tmp / "t.json.gz")
    shutil.copytree(REFERENCE, public_tmp / "ds")
    (public_tmp / "out").mkdir()
    (public_tmp / "out").chmod(0o777)
    (public_tmp / "t.json.gz").chmod(0)
    (public_tmp / "ds" / "sweep.csv").chmod(0)
    if argv[1] == "--verify":
        (public_tmp / "ds").chmod(0)
    before = snapshot(public_tmp)
    line = one_line_refusal(lab_process([a.replace("$T", str(public_tmp)) for a in argv], reader=True))
    assert expected.replace("$T", str(public_tmp)) in line, line
    assert snapshot(public_tmp) == before and list((public_tmp / "out").iterdir()) == []


# --- refuse, don't run (issue 36): what a long run would misread is refused while the command line is read ---

#: Options that name a file, a folder, a model or a dataset (by their dest); each must refuse an empty value.
PATH_DESTS = {"out", "model", "root", "json", "verify", "trace", "traces", "dataset", "compare", "site", "source",
              "rebuild", "interference_out", "one", "notebook", "tokenizer"}
#: What each command needs besides the option under test.
REQUIRED = {"vllm-sweep": ["--backend", "FLASH_ATTN"], "vllm-concurrency": ["--backend", "FLASH_ATTN"],
            "vllm-load": ["--arm", "FLASH_ATTN/FA3"], "vllm-interference": ["--arm", "FLASH_ATTN/FA3"],
            "capture vllm": ["--arm", "FLASH_ATTN/FA3"], "capture call": ["lab.cli:positive_count"],
            "capture trim": ["$T/t.json.gz"], "fit": ["$T/ds"]}


def _path_options() -> list[tuple[list[str], str]]:
    """(argv, expected) for every option of every command whose dest is in PATH_DESTS, given an empty value."""
    import argparse

    from lab.__main__ import build_parser
    cases = []

    def walk(name: str, parser) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub, child in action.choices.items():
                    walk(f"{name} {sub}".strip(), child)
            elif action.dest in PATH_DESTS and action.nargs != 0:
                values = [""] * (action.nargs if isinstance(action.nargs, int) else 1)
                if action.option_strings:     # the command's own positional arguments stay as they are
                    argv = [*name.split(), *REQUIRED.get(name, []), action.option_strings[0], *values]
                else:                         # the empty value is the positional argument itself
                    argv = [*name.split(), *[a for a in REQUIRED.get(name, []) if a.startswith("-")], *values]
                shown = action.option_strings[0] if action.option_strings else action.metavar or action.dest
                cases.append((argv, f"argument {shown}: expected a "))
    walk("", build_parser())
    return cases


@pytest.mark.parametrize("argv, expected", _path_options(), ids=lambda v: " ".join(map(repr, v)) if isinstance(v, list) else "")
def test_an_empty_path_is_refused_by_its_option_never_read_as_the_current_folder(tree, argv, expected):
    line = _refused(argv, tree)
    assert expected in line, line


@pytest.mark.parametrize("argv, expected", [
    (["live-check", "--limit", "nope=600"], "argument --limit: no chapter 'nope'; choose from intro, "),
    (["live-check", "--limit", "06b-busy-server=0"], "argument --limit: '06b-busy-server=0': expected CHAPTER=SECONDS"),
    (["live-check", "--chapters", ""], "argument --chapters: expected comma-separated chapter names, got ''"),
    (["live-check", "--chapters", " , "], "argument --chapters: expected comma-separated chapter names"),
    (["live-check", "--chapters", "06b"], "argument --chapters: no chapter '06b'"),
    (["vllm-load", "--arm", "FLASH_ATTN/FA3", "--slo", "ttft:nan", "--dry-run"], "argument --slo: 'ttft:nan'"),
], ids=lambda v: " ".join(map(repr, v)) if isinstance(v, list) else "")
def test_what_would_start_a_long_run_anyway_is_refused_while_the_command_line_is_read(tree, argv, expected):
    line = _refused(argv, tree)
    assert line.startswith("error: python -m lab ") and expected in line, line
