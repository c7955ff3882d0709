"""python -m lab tune-backward on the CPU: every launch checked in Triton's interpreter, then timed in rounds."""

import os
import subprocess
import sys
import time

import pytest
import torch

from lab import REPO_ROOT, LabError
from lab.measure import tune_backward


def _timer(fn, warmup, rep, return_mode):
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1e3


def test_every_launch_is_checked_then_timed():
    dkdv = tune_backward.parse_launches("16x32w4s1,32x16w4s1")
    dq = tune_backward.parse_launches("32x16w4s1")
    rows = tune_backward.sweep(40, dkdv, dq, rounds=2, rep_ms=1, timer=_timer, device="cpu", head_dim=16,
                               q_heads=4, kv_heads=2, dtype=torch.float16)
    assert [(r["kernel"], r["launch"]) for r in rows] == [("dkdv", "16x32w4s1"), ("dkdv", "32x16w4s1"), ("dq", "32x16w4s1")]
    assert all(r["status"] == "ok" and r["ms"] > 0 and r["tflops_real"] > 0 for r in rows)
    assert all(r["worst_share"] <= 4e-3 for r in rows)


@pytest.mark.parametrize("text", ["32x128", "32x128w8s2,x", ""])
def test_a_malformed_launch_is_refused(text):
    with pytest.raises(LabError):
        tune_backward.parse_launches(text)


@pytest.mark.parametrize("command", ["tune-backward", "tune-forward"])
def test_the_tuning_commands_refuse_a_bad_launch_and_a_cpu_in_one_line(command):
    cases = [(["--lengths", "16k,x"], "--lengths"), ([], "no CUDA GPU"),
             (["--dkdv" if command == "tune-backward" else "--launches", "32x128"], "32x128")]
    for argv, said in cases:
        done = subprocess.run([sys.executable, "-m", "lab", command, *argv], cwd=REPO_ROOT, capture_output=True,
                              text=True, timeout=120, env={**os.environ, "TRITON_INTERPRET": "1"})
        assert done.returncode == 2 and said in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
