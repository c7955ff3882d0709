"""scripts/gpu_run.sh and the GPU studies it runs: named by what they measure, one dispatcher, no Python in shell."""

import re
import subprocess

import pytest

from lab import REPO_ROOT
from lab.commands import COMMANDS

SCRIPTS = REPO_ROOT / "scripts"
STUDIES = sorted(p.stem for p in (SCRIPTS / "gpu").glob("*.sh") if p.read_text(encoding="utf-8").startswith("#!"))
SHELL = sorted([*SCRIPTS.glob("*.sh"), *(SCRIPTS / "gpu").glob("*.sh")])


def _run(*argv, check=False):
    return subprocess.run(["bash", str(SCRIPTS / "gpu_run.sh"), *argv], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=60, check=check)


def test_the_dispatcher_lists_every_study_with_what_it_measures():
    listed = _run("--help", check=True).stdout.split("studies:", 1)[1]
    rows = dict(line.split(None, 1) for line in listed.strip().splitlines())
    assert sorted(rows) == STUDIES and "env" not in rows            # env.sh is sourced, not run
    assert all(text.startswith(("Study: ", "Set-up ")) for text in rows.values()), rows


@pytest.mark.parametrize("study", STUDIES)
def test_every_study_says_what_it_measures_and_runs_nothing_for_help(study):
    done = _run(study, "--help")
    assert done.returncode == 0 and len(done.stdout.splitlines()) > 3 and "scripts/gpu_run.sh " + study in done.stdout


@pytest.mark.parametrize("name", ["nope", "env", "../gpu_run", ""])
def test_an_unknown_study_is_one_line_and_status_2(name):
    done = _run(name) if name else _run()
    if not name:                                # no study named: the list, status 1
        assert done.returncode == 1 and "studies:" in done.stdout
        return
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "no study" in done.stderr


def test_no_python_script_is_left_in_scripts():
    assert not list(SCRIPTS.rglob("*.py")), "a Python tool in scripts/ belongs in lab as a `python -m lab` command"


@pytest.mark.parametrize("script", [p for p in SHELL if p.parent.name == "gpu"], ids=lambda p: p.name)
def test_a_study_embeds_no_python_and_runs_only_lab_commands(script):
    text = script.read_text(encoding="utf-8")
    assert not re.search(r"(python3?|\$PYTHON\"?) +(-c|-) ", text), "Python inside a shell script: make it a command"
    assert not re.search(r"<<-?\s*'?\w+'?", text.replace("cat > /tmp/lab_env.sh <<EOF", "")), "a here-document"
    for command in re.findall(r"-m lab ([a-z][a-z0-9-]*)", text) + re.findall(r'="lab ([a-z][a-z0-9-]*)"', text):
        assert command in COMMANDS, f"{script.name}: python -m lab {command} is no command"
    assert not re.search(r"-m lab\.", text), "a module path: call it by its command name"
