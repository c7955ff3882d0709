"""`python -m lab backward-race` on the CPU: the race's plumbing with tiny shapes in Triton's interpreter.

Ours runs with the torch forward (the tuned forward's log-sum-exp may not be here); a candidate that cannot run
here is a row that says why; times come from a stand-in timer (no timing assertions)."""

import argparse
import json
import math

import pandas as pd
import pytest
import torch

from lab import LabError, store
from lab.measure import backward_race, timing
from lab.measure.attention import backward
from tests.refusals import refused


def _args(tmp_path, **kw):
    defaults = dict(out=tmp_path / "race", lengths=(40,), rounds=2, rep_ms=1, deadline_s=600,
                    candidates=list(backward_race.CANDIDATES))
    return argparse.Namespace(**{**defaults, **kw})


def _timer(fn, warmup, rep, return_mode):
    """Runs the call once and says how many calls it has seen: a distinct, positive 'time' per call."""
    fn()
    _timer.calls += 1
    return float(_timer.calls)


_timer.calls = 0


def _race(args):
    return backward_race.Race(args, device="cpu", timer=_timer, head_dim=16, q_heads=4, kv_heads=2,
                              dtype=torch.float16, forward=backward.reference_forward_with_lse)


def test_race_checks_times_and_writes_every_candidate(tmp_path):
    args = _args(tmp_path)
    race = _race(args)
    race.length(40)
    race.write(complete=True)
    table = pd.read_csv(args.out / "race.csv")
    assert list(table.columns) == list(backward_race.COLUMNS)
    assert list(table.candidate) == list(backward_race.CANDIDATES)
    ours = table[table.candidate == "ours"].iloc[0]
    assert ours.status == "ok" and ours.worst_share_of_largest <= backward.GRAD_TOLERANCE[torch.float16]
    assert max(ours.max_abs_err_dq, ours.max_abs_err_dk, ours.max_abs_err_dv) > 0   # measured, not left empty
    assert len(ours.fwd_ms_rounds.split()) == len(ours.fwdbwd_ms_rounds.split()) == 2
    assert ours.bwd_ms == pytest.approx(ours.fwdbwd_ms - ours.fwd_ms)
    assert ours.bwd_over_fwd == pytest.approx(ours.bwd_ms / ours.fwd_ms)
    assert ours.tflops_bwd == pytest.approx(backward.backward_flops(1, 4, 40, 40, 16, True) / (ours.bwd_ms * 1e-3) / 1e12)
    assert ours.config.startswith("dkdv BLOCK_M=16")
    fa4 = table[table.candidate == "fa4"].iloc[0]
    assert fa4.status == "unavailable" and fa4.note.startswith("not available: ")    # no wheel on this machine
    assert set(table.status) <= {"ok", "error", "unavailable"}                       # SDPA's backends, as they run here
    provenance = store.validate_provenance(json.loads((args.out / "provenance.json").read_text()), "provenance.json")
    assert provenance["complete"] is True and "2.5" in provenance["flops"] and provenance["dtype"] == "float16"
    assert not list(args.out.glob(".*.tmp"))   # written through lab.store's atomic writes


def test_rounds_start_at_another_candidate_each_time(tmp_path, monkeypatch):
    order = []
    monkeypatch.setattr(timing, "round_order", lambda items, turn, rounds:   # items: (index, (row, forward, step))
                        order.append([item[0]["candidate"] for _, item in items[turn:] + items[:turn]])
                        or items[turn:] + items[:turn])
    race = _race(_args(tmp_path, rounds=2))
    race.length(40)
    ready = order[0]
    assert order[1] == ready[1:] + ready[:1] and "ours" in ready


def test_a_wrong_candidate_is_a_row_and_is_not_timed(tmp_path, monkeypatch):
    real = backward_race.trainee

    def wrong(name, forward=None):
        found = real(name, forward)
        if name != "ours":
            return found
        return backward_race.Trainee(lambda q, k, v, causal: 2 * found.forward(q, k, v, causal))
    monkeypatch.setattr(backward_race, "trainee", wrong)
    race = _race(_args(tmp_path, candidates=["ours"]))
    race.length(40)
    row = race.rows[0]
    assert row["status"] == "wrong" and "largest error" in row["note"] and math.isnan(row["bwd_ms"])


def test_the_race_stops_starting_checks_at_the_deadline(tmp_path):
    race = _race(_args(tmp_path, deadline_s=0))
    race.length(40)
    assert {row["status"] for row in race.rows} == {"skipped"}


def test_speeds_against_the_fastest_peer_flash_and_cudnn():
    rows = [{"candidate": "ours", "n": 16, "status": "ok", "bwd_ms": 10.0},
            {"candidate": "sdpa-flash", "n": 16, "status": "ok", "bwd_ms": 15.0},
            {"candidate": "sdpa-cudnn", "n": 16, "status": "ok", "bwd_ms": 9.0},
            {"candidate": "fa4", "n": 16, "status": "unavailable", "bwd_ms": math.nan},
            {"candidate": "ours", "n": 32, "status": "ok", "bwd_ms": 1.0}]
    got = backward_race.speeds(rows, 16)
    assert got["ours"] == {"fastest peer": 0.9, "sdpa-flash": 1.5, "sdpa-cudnn": 0.9}
    assert got["sdpa-cudnn"]["fastest peer"] == 1.0 and "fa4" not in got
    assert math.isnan(backward_race.speeds(rows, 32)["ours"]["sdpa-flash"])


def test_a_call_of_the_backward_alone_repeats(tmp_path):
    q, k, v, do = _race(_args(tmp_path)).inputs(24)
    call = backward_race.Trainee(lambda q, k, v, causal: backward.attention(
        q, k, v, causal, forward=backward.reference_forward_with_lse)).backward_call(q, k, v, do, True)
    first, second = call(), call()
    assert all(torch.equal(a, b) for a, b in zip(first, second, strict=True))


def test_an_unknown_candidate_is_refused():
    with pytest.raises(LabError, match="no backward candidate"):
        backward_race.trainee("fa9")


@pytest.mark.parametrize("argv, message", [
    (["backward-race", "--candidates", "ours,fa9"], "--candidates: unknown candidate 'fa9'"),
    (["backward-race", "--lengths", "0"], "--lengths '0': expected positive sizes"),
    (["backward-race", "--rounds", "0"], "argument --rounds: expected a positive integer"),
    (["backward-race", "--rep-ms", "-1"], "argument --rep-ms: expected a positive integer"),
    (["backward-race", "--deadline-s", "0"], "argument --deadline-s: expected a positive number"),
    (["backward-race"], "no CUDA GPU here"),
])
def test_bad_options_and_a_machine_without_a_gpu_are_refused_in_one_line(tmp_path, argv, message):
    if torch.cuda.is_available() and message.startswith("no CUDA"):
        pytest.skip("this machine has a GPU")
    assert message in refused([*argv, "--out", tmp_path / "out"], tmp_path)
    assert not (tmp_path / "out").exists()
