"""lab.env reports what this machine can do, and the CLI prints it."""

import json
import os
import subprocess
import sys

from lab import REPO_ROOT, env


def test_detect_is_consistent():
    caps = env.detect()
    assert caps.python.count(".") == 2
    assert caps.has_gpu == (caps.gpu is not None)
    assert caps.can_serve_vllm == (caps.has_gpu and caps.vllm is not None)
    assert ("No GPU" in caps.summary()) == (not caps.has_gpu)
    if caps.triton is not None:
        assert caps.triton_mode in {"gpu", "interpreter"}


def test_cli_json():
    out = subprocess.run([sys.executable, "-m", "lab", "env", "--json"], capture_output=True, text=True, cwd=REPO_ROOT, check=True)
    assert set(json.loads(out.stdout)) >= {"gpu", "torch", "triton", "vllm", "triton_mode"}


def test_every_command_has_help():
    from lab.__main__ import build_parser

    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # noqa: SLF001
    assert {"reference", "datasets", "env"} <= set(commands)
    for name in commands:
        proc = subprocess.run([sys.executable, "-m", "lab", name, "--help"], capture_output=True, text=True, cwd=REPO_ROOT)
        assert proc.returncode == 0 and "usage:" in proc.stdout, name


def _env_with_flash_attn(tmp_path, cute_init: str) -> subprocess.CompletedProcess:
    (tmp_path / "flash_attn" / "cute").mkdir(parents=True)   # a namespace package, as flash-attn-4 ships it
    (tmp_path / "flash_attn" / "cute" / "__init__.py").write_text(cute_init, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO_ROOT)])}
    return subprocess.run([sys.executable, "-m", "lab", "env"], capture_output=True, text=True, cwd=REPO_ROOT,
                          env=env, check=True)


def test_env_says_fa4_imports(tmp_path):
    out = _env_with_flash_attn(tmp_path, '__version__ = "4.0.0b36"\n').stdout
    assert "fa4          4.0.0b36 (flash_attn.cute imports)" in out.splitlines()


def test_env_says_why_fa4_does_not_import(tmp_path):
    out = _env_with_flash_attn(tmp_path, "import cutlass_not_here\n").stdout
    assert ("fa4          - (flash_attn.cute does not import: ModuleNotFoundError: "
            "No module named 'cutlass_not_here')") in out.splitlines()


def test_env_runs_without_the_other_commands_dependencies(tmp_path):
    """`python -m lab env` imports only lab.env: it must work where numpy is not installed yet."""
    blocker = tmp_path / "numpy"
    blocker.mkdir()
    (blocker / "__init__.py").write_text('raise ModuleNotFoundError("no numpy here", name="numpy")\n', encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO_ROOT)])}
    proc = subprocess.run([sys.executable, "-m", "lab", "env"], capture_output=True, text=True, cwd=REPO_ROOT, env=env)
    assert proc.returncode == 0 and "python " in proc.stdout, proc.stderr[-2000:]


def test_the_interpreter_follows_an_explicit_choice_and_otherwise_the_gpu(monkeypatch):
    for choice, expected in (("0", False), ("1", True)):
        monkeypatch.setenv("TRITON_INTERPRET", choice)
        assert env.use_triton_interpreter_without_gpu() is expected
        assert os.environ["TRITON_INTERPRET"] == choice      # an explicit choice is left as it is
    monkeypatch.delenv("TRITON_INTERPRET")
    assert env.use_triton_interpreter_without_gpu() is (env.detect().gpu is None)


def test_lab_core_loads_no_third_party_package():
    """`python -m lab env` must run on a bare interpreter (issue 33: lab's own imports sit at the top of modules, and
    core's must stay on the standard library): its import trace holds no numpy, pandas, torch or triton."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "lab", "env", "--get", "vllm"], cwd=REPO_ROOT,
                          capture_output=True, text=True)
    loaded = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in done.stderr.splitlines() if "|" in line}
    assert "lab" in loaded and not loaded & {"numpy", "pandas", "torch", "triton", "vllm"}, sorted(loaded)


def test_env_get_prints_one_value_and_exits_1_when_there_is_none():
    done = subprocess.run([sys.executable, "-m", "lab", "env", "--get", "gpus"], cwd=REPO_ROOT, capture_output=True,
                          text=True, check=True)
    assert done.stdout.strip().isdigit()
    versions = subprocess.run([sys.executable, "-m", "lab", "env", "--get", "versions"], cwd=REPO_ROOT,
                              capture_output=True, text=True, check=True).stdout.split()
    assert versions[0::2] == ["torch", "triton", "vllm"]
