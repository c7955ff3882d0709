"""lab.measure.value_dependence on the CPU: input sets, the checks, interleaved rounds and clock columns."""

from __future__ import annotations

import itertools

import pytest

torch = pytest.importorskip("torch")

from lab import LabError  # noqa: E402
from lab.measure import value_dependence as vd  # noqa: E402


def test_input_sets_have_the_intended_magnitudes():
    random = vd.scaled_normal((256, 256), 1.0, seed=1, device="cpu").float()
    small = vd.scaled_normal((256, 256), 1e-3, seed=1, device="cpu").float()
    zeros = vd.scaled_normal((256, 256), 0.0, seed=1, device="cpu")
    assert 0.9 < random.std().item() < 1.1 and 0.9e-3 < small.std().item() < 1.1e-3
    assert zeros.dtype == torch.bfloat16 and not zeros.any()


def test_the_matmul_call_matches_its_reference_on_every_input_set():
    for scale in vd.INPUTS.values():
        call, reference = vd.op_call("matmul-8192", scale, seed=3, device="cpu", size=64)
        assert vd.relative_error(call(), reference()) < 1e-2


def test_relative_error_catches_a_wrong_result_and_nonzero_output_on_zeros():
    ref = torch.ones(4, 4)
    assert vd.relative_error(ref * 1.5, ref) == pytest.approx(0.5)
    assert vd.relative_error(torch.full((2,), 3.0), torch.zeros(2)) == 3.0


class FakeClocks:
    """Stands in for gpuclocks.ClockSampler: a power draw that depends on which set ran."""

    def __init__(self):
        self.samples, self.calls = [], 0

    def start(self):
        self.calls += 1

    def stop(self):
        watts = 300.0 + self.calls
        self.samples = [{"timestamp": "t", "sm_mhz": 1980.0, "mem_mhz": 3200.0, "power_w": watts, "temp_c": 40.0,
                         "reasons": 0x4}]
        return {}


def test_rounds_are_interleaved_and_each_row_gets_its_clock_columns():
    order = []
    ticks = itertools.count(1)

    def timer(fn, warmup, rep, return_mode):
        assert return_mode == "median" and rep == 10
        fn()
        order.append(next(ticks))
        return float(order[-1])

    clocks = FakeClocks()
    rows = vd.measure_op("matmul-8192", rep_ms=30, rounds=3, clocks=clocks, timer=timer, device="cpu",
                         progress=lambda text: None, size=32)
    assert [r["inputs"] for r in rows] == list(vd.INPUTS)
    # round 1 starts at random, round 2 at zeros, round 3 at small
    assert rows[0]["ms_rounds"] == "1 6 8" and rows[1]["ms_rounds"] == "2 4 9" and rows[2]["ms_rounds"] == "3 5 7"
    assert rows[0]["ms"] == 6 and clocks.calls == 9
    assert all(r["clock_limit"] == "software power cap" and r["sm_mhz"] == 1980 for r in rows)
    assert set(rows[0]) == set(vd.COLUMNS)


def test_a_wrong_result_is_not_timed(monkeypatch):
    monkeypatch.setattr(vd, "op_call", lambda *a, **k: ((lambda: torch.ones(2)), (lambda: torch.zeros(2) + 2)))
    with pytest.raises(LabError, match="relative error"):
        vd.measure_op("matmul-8192", 30, 3, timer=lambda *a, **k: 1.0, device="cpu", progress=lambda t: None)


def test_arguments_are_checked_before_anything_runs(capsys):
    assert vd.cli(["--ops", "conv"]) == 2
    assert "--ops must name some of" in capsys.readouterr().err
    assert vd.cli(["--rounds", "0"]) == 2
    with pytest.raises(LabError, match="unknown op"):
        vd.op_call("conv", 1.0, 0, device="cpu")
