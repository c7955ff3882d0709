"""Chapter 4b's reader (lab.results.backward), its run panel and its memory and IO arithmetic."""

import pytest

from lab import LabError
from lab.__main__ import COMMANDS
from lab.book.run_panels.backward import BackwardPanel
from lab.env import Capabilities
from lab.results import backward, iomodel
from lab.results.modelshape import qwen25_7b


def test_the_race_gives_each_row_its_speed_against_both_peers():
    table = backward.race()
    for _, r in table.iterrows():
        for peer in backward.PEERS:
            assert r[f"vs_{peer}"] == pytest.approx(backward.row(table, peer, r.n).bwd_ms / r.bwd_ms)
    assert set(table.status) == {"ok"} and "fa4" not in set(table.candidate)
    assert "not installed" in backward.unavailable()["fa4"]


def test_a_missing_row_is_one_clear_line():
    with pytest.raises(LabError, match="no timed row of fa4 at 16384"):
        backward.row(backward.race(), "fa4", 16384)


def test_the_counters_split_each_job_into_its_kernels_with_one_main():
    table = backward.kernels()
    assert set(table.candidate) == {"ours", "sdpa-flash", "sdpa-cudnn"}
    assert (table.groupby("candidate").main.sum() == 1).all()
    ours = table[table.candidate == "ours"].sort_values("index")
    assert list(ours.kernel) == ["delta_kernel", "dkdv_kernel", "dq_kernel"]
    totals = backward.job_totals(table).set_index("candidate")
    assert totals.loc["ours", "ms"] == pytest.approx(ours.ms.sum())


def test_storing_p_moves_it_twice_and_recomputing_costs_one_product():
    n, io = 4096, backward.stored_p(4096)
    counts = iomodel.backward_hbm_bytes(n, n, 28, 4, 128, True)
    assert io["p_traffic"] == 2 * counts["p_bytes"] == 2 * io["p_bytes"]
    assert io["stored"] - io["recompute"] == io["p_bytes"]
    assert io["recompute_flops"] == 2 * 128 * iomodel.kept_pairs(n, n, True) * 28
    assert backward.recompute_intensity(128) == 64 and backward.recompute_intensity(64) == 32


def test_p_grows_with_the_square_of_the_length_and_the_lse_linearly():
    shape = qwen25_7b()
    short, long = backward.training_memory(8192, shape), backward.training_memory(16384, shape)
    assert long["per_head_layer"]["p_bf16"] == pytest.approx(4 * short["per_head_layer"]["p_bf16"], rel=1e-3)
    assert long["per_head_layer"]["lse"] == 2 * short["per_head_layer"]["lse"]
    causal_half = 16384 * 16385 // 2
    assert long["model"]["p_fp32"] == 2 * long["model"]["p_bf16"] == 4 * causal_half * shape.layers * shape.q_heads


def test_the_memory_table_keeps_the_same_p_as_the_io_argument():
    """One P across the chapter: a layer's share of the model's P is the P the IO argument stores (causal half)."""
    shape = qwen25_7b()
    per_layer = backward.training_memory(16384, shape)["model"]["p_bf16"] / shape.layers
    assert per_layer == backward.stored_p(16384, q_heads=shape.q_heads)["p_bytes"]


def test_the_panel_runs_an_existing_command_and_refuses_a_bad_choice(monkeypatch):
    monkeypatch.delenv("LAB_STATIC", raising=False)
    caps = Capabilities(gpu=None, driver=None, cuda=None, torch="2", triton="3", vllm=None, triton_mode="interpreter",
                        python="3.12", machine="x86_64")
    panel = BackwardPanel(caps=caps)
    plan = panel.plan(panel.defaults)
    assert plan.command.split()[:4] == ["python", "-m", "lab", "backward-race"] and "backward-race" in COMMANDS
    assert "no CUDA GPU" in panel.static_html() and "<button" not in panel.static_html()
    with pytest.raises(LabError, match="unknown candidate 'fa5'"):
        panel.plan({**panel.defaults, "candidates": ["fa5"]})
    with pytest.raises(LabError, match="at least one length"):
        panel.plan({**panel.defaults, "lengths": []})
