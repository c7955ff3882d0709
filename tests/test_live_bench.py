"""lab.book.live_bench: the chapters' live cells (a spot check of the kernels, progress printed as it runs)."""

from __future__ import annotations

import pytest

from lab import LabError
from lab.book import live_bench
from lab.env import Capabilities


def _caps(gpu=None, triton_mode="interpreter"):
    return Capabilities(gpu=gpu, driver=None, cuda=None, torch="2", triton="3", vllm=None, triton_mode=triton_mode,
                        python="3.11", machine="x86_64")


def test_without_a_gpu_the_cell_says_what_it_would_run_and_why_not():
    lines = []
    live = live_bench.run_live("prefill", 4096, ["sdpa-cudnn", "ours-tuned"], caps=_caps(), out=lines.append)
    assert not live.ran and lines == []
    assert live.reason == "this machine (x86_64) has no GPU"
    assert live.plan.startswith("causal prefill, 4,096 tokens; 28 query / 4 KV heads, d=128; sdpa-cudnn, ours-tuned")
    with pytest.raises(LabError, match="nothing was measured"):
        live.table()
    interpreted = live_bench.run_live("decode", 32768, ["ours-tuned"], caps=_caps("NVIDIA H200", "interpreter"))
    assert interpreted.reason == "Triton runs in interpreter mode on this machine's NVIDIA H200" and "batch 1 (graph replay)" in interpreted.plan


def test_bad_arguments_are_named():
    with pytest.raises(LabError, match="unknown candidate"):
        live_bench.run_live("prefill", 1024, ["ours-fastest"], caps=_caps())
    with pytest.raises(LabError, match="phase must be"):
        live_bench.run_live("training", 1024, ["ours-tuned"], caps=_caps())


def test_progress_lines_carry_the_elapsed_time_and_explain_the_first_call():
    ticks = iter([0.0, 1.5, 9.25, 9.5])
    lines = []
    progress = live_bench.PrintedProgress(1, out=lines.append, clock=lambda: next(ticks))
    progress.set_postfix_str("prefill b=1 n=4096 ours-tuned: check")
    progress.set_postfix_str("prefill b=1 n=4096 ours-tuned: check")   # repeated: printed once
    progress.set_postfix_str("prefill b=1 n=4096 ours-tuned: round 1/3")
    progress.update(1)
    assert lines == ["[  1.5 s] prefill b=1 n=4096 ours-tuned: check (first call: compile, autotune, check against "
                     "the fp32 reference)",
                     "[  9.2 s] prefill b=1 n=4096 ours-tuned: round 1/3",
                     "[  9.5 s] done: 1 of 1 candidates"]


def test_a_live_run_checks_and_times_through_the_bench():
    import torch
    from kernel_device import ON_GPU as on_gpu  # the interpreter on CPU tensors; on a GPU box the compiled kernels

    made_up = iter([2.0, 1.0])
    lines = []
    live = live_bench.run_live("prefill", 40, ["ours-teaching", "ours-tuned"], q_heads=4, kv_heads=2, head_dim=64,
                               rounds=1, out=lines.append, device="cuda" if on_gpu else "cpu", dtype=torch.float16,
                               timer=lambda fn, **kw: (fn(), next(made_up))[1])
    assert live.ran
    table = live.table()
    assert list(table.columns) == list(live_bench.SHOWN["prefill"])
    assert list(table.status) == ["ok", "ok"] and list(table.ms) == [2.0, 1.0]
    assert lines[0].startswith("timing causal prefill, 40 tokens; 4 query / 2 KV heads, d=64")
    assert any("ours-tuned: check (first call" in line for line in lines) and lines[-1].endswith("done: 2 of 2 candidates")
