"""lab.measure.clock_probe: phases on the host clock, samples assigned to them, the folder it writes; against a
stand-in nvidia-smi and a stand-in workload (no GPU here)."""

from __future__ import annotations

import argparse
import os
import stat
from pathlib import Path

import pytest

from lab import LabError
from lab.measure import clock_probe, gpuclocks

#: A stand-in nvidia-smi that knows the probe's extra fields: one line every 10 ms with the current time.
FAKE_SMI = """#!/usr/bin/env bash
line() { echo "$(date +'%Y/%m/%d %H:%M:%S.%3N'), 1755, 3201, 190.5, 44, 0x0000000000000004, 650.25, 700.00"; }
case "$*" in
  *--loop-ms*) while true; do line; sleep 0.01; done;;
  *) line;;
esac
"""


def _install(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "bin" / "nvidia-smi"
    path.parent.mkdir()
    path.write_text(FAKE_SMI)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{path.parent}{os.pathsep}{os.environ['PATH']}")


def test_phases_run_in_order_on_the_host_clock():
    ticks = iter(range(100))
    slept, worked = [], []
    rows = clock_probe.run_phases(lambda s: worked.append(s) or 7, (("idle", 1.0), ("burst", 0.5)),
                                  sleep=slept.append, now=lambda: float(next(ticks)))
    assert slept == [1.0] and worked == [0.5]
    assert [(r["kind"], r["start"], r["end"], r["products"]) for r in rows] == [("idle", 0.0, 1.0, 0),
                                                                              ("burst", 2.0, 3.0, 7)]


def test_samples_fall_into_the_phase_they_were_taken_in():
    phases = [{"phase": 0, "kind": "idle", "seconds": 1, "start": 0.0, "end": 1.0},
              {"phase": 1, "kind": "burst", "seconds": 1, "start": 1.0, "end": 2.0},
              {"phase": 2, "kind": "idle", "seconds": 1, "start": 2.0, "end": 3.0}]
    samples = [{"t": 0.5, "sm_mhz": 1980.0, "power_w": 120.0, "power.draw.instant": 110.0, "reasons": 0x0},
               {"t": 1.2, "sm_mhz": 1600.0, "power_w": 300.0, "power.draw.instant": 690.0, "reasons": 0x4},
               {"t": 1.8, "sm_mhz": 1500.0, "power_w": 500.0, "power.draw.instant": float("nan"), "reasons": 0x4}]
    rows = clock_probe.by_phase(samples, phases)
    assert [(r["samples"], r["power_capped"]) for r in rows] == [(1, 0), (2, 2), (0, 0)]
    assert rows[1]["sm_mhz"] == 1550.0 and rows[1]["power_instant_w"] == 690.0   # a reading of [N/A] is left out
    assert rows[2]["sm_mhz"] is None


def test_a_bad_timestamp_is_one_line():
    with pytest.raises(LabError, match="is not YYYY/MM/DD"):
        clock_probe.sample_time("yesterday")


def test_the_probe_writes_its_samples_phases_and_provenance(tmp_path, monkeypatch):
    _install(tmp_path, monkeypatch)
    sampler = gpuclocks.ClockSampler(interval_ms=10, extra=clock_probe.EXTRA)
    assert sampler.extra == clock_probe.EXTRA and sampler.fields[-2:] == clock_probe.EXTRA
    rows = clock_probe.probe(tmp_path / "out", lambda seconds: 3, sampler, phases=(("idle", 0.2), ("burst", 0.0),
                                                                                   ("idle", 0.2)))
    import pandas as pd

    samples = pd.read_csv(tmp_path / "out" / "samples.csv")
    assert len(samples) > 0 and {"t", "sm_mhz", "reasons", "power.draw.instant"} <= set(samples.columns)
    assert (samples["power.draw.instant"] == 650.25).all()
    phases = pd.read_csv(tmp_path / "out" / "phases.csv")
    assert list(phases.kind) == ["idle", "burst", "idle"] and list(phases.products) == [0, 3, 0]
    assert sum(r["samples"] for r in rows) <= len(samples)
    from lab.store import read_json

    prov = read_json(tmp_path / "out" / "provenance.json")
    assert prov["complete"] and prov["flags"]["fields"][-2:] == list(clock_probe.EXTRA)


def test_the_command_refuses_without_a_gpu(tmp_path, monkeypatch):
    from lab import env

    monkeypatch.setattr(env, "detect", lambda: argparse.Namespace(has_gpu=False))
    with pytest.raises(LabError, match="no CUDA GPU here"):
        clock_probe.main(argparse.Namespace(out=tmp_path / "out"))


def test_the_h200_probe_shows_the_flag_at_a_low_average_while_the_draw_passes_the_limit():
    """lab.results.clock_probe on data/h200/clock-probe: what chapter 7 states, checked against the raw samples."""
    import pandas as pd

    from lab.results import clock_probe as probe_run
    from lab.results.data import DATA_DIR

    r = probe_run.readings()
    samples = pd.read_csv(DATA_DIR / probe_run.RUN / "samples.csv")
    capped = samples[[clock_probe.POWER_CAP in gpuclocks.reason_names(int(m)) for m in samples.reasons]]
    # the flag at an average far under the limit, the instantaneous draw over it, the clock lowered under the cap
    assert r["flag_avg_lo_w"] < r["flag_avg_hi_w"] < r["limit_w"] / 2 < r["limit_w"] < r["burst_instant_max_w"]
    assert r["flag_avg_lo_w"] >= capped.power_w.min() and r["burst_instant_max_w"] <= samples["power.draw.instant"].max()
    assert r["burst_mhz_lo"] <= r["burst_mhz_hi"] < r["idle_mhz"] == samples.sm_mhz.max()
    # the sustained run sits at the limit; the flag outlasts the work by less than the one-second window
    assert r["sustained_w"] == pytest.approx(r["limit_w"], rel=0.05) and 0 < r["flag_hold_s"] < probe_run.AFTER_S
