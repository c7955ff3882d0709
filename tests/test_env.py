"""lab.env reports what this machine can do, and the CLI prints it."""

import json
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
