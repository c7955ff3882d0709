"""lab.measure.gpuclocks: parsing nvidia-smi lines, and the sampler against a stand-in nvidia-smi."""

from __future__ import annotations

import math
import os
import stat
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from lab import LabError
from lab.measure import gpuclocks

FAKE_SMI = """#!/usr/bin/env bash
# stand-in nvidia-smi: one line per call, or one every 10 ms with --loop-ms; {reject} rejects that field
for a in "$@"; do case "$a" in *{reject}*) [ -n "{reject}" ] && {{ echo "not a valid field" >&2; exit 2; }};; esac; done
line="2026/11/30 07:00:00.000, 1980, 3201, 412.5, 41{reasons}"
case "$*" in
  *--loop-ms*) i=0; while true; do echo "$line"; i=$((i+1)); [ $i -eq 3 ] && echo "2026/11/30 07:00:00.100, 1755, 3201, 699.1, 44{reasons2}"; sleep 0.01; done;;
  *) echo "$line";;
esac
"""


def _install(tmp_path: Path, monkeypatch, reject: str = "") -> None:
    full = not reject
    script = FAKE_SMI.format(reject=reject, reasons=", 0x0000000000000000" if full else "",
                             reasons2=", 0x0000000000000004" if full else "")
    path = tmp_path / "nvidia-smi"
    path.write_text(script)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")


def _wait_for_lines(sampler, count: int, limit_s: float = 120.0) -> None:
    """Until the stand-in nvidia-smi has written ``count`` lines: on a busy machine that only takes longer."""
    deadline = time.monotonic() + limit_s
    while Path(sampler._file.name).read_text().count("\n") < count:
        assert time.monotonic() < deadline, f"the stand-in nvidia-smi wrote under {count} lines in {limit_s:.0f} s"
        time.sleep(0.01)


def test_parse_line_reads_numbers_and_not_available_fields():
    sample = gpuclocks.parse_line("2026/11/30 07:00:00.000, 1980, [N/A], 412.50, 41, 0x0000000000000004")
    assert sample["sm_mhz"] == 1980 and math.isnan(sample["mem_mhz"]) and sample["power_w"] == 412.5
    assert gpuclocks.reason_names(sample["reasons"]) == ["software power cap"]
    assert gpuclocks.parse_line("2026/11/30 07:00:00.000, 19") is None          # a line cut off by the stop
    assert gpuclocks.reason_names(0) == [] and gpuclocks.reason_names(0x8 | 0x40) == [
        "hardware slowdown", "hardware thermal slowdown"]


def test_summary_counts_the_active_limits():
    samples = [gpuclocks.parse_line(f"t, {mhz}, 3201, {w}, 40, {r}") for mhz, w, r in
               ((1980, 400, "0x0"), (1755, 700, "0x4"), (1800, 690, "0x4"))]
    summary = gpuclocks.summarise(samples)
    assert summary["sm_mhz"]["median"] == 1800 and summary["sm_mhz"]["min"] == 1755
    assert summary["power_w"]["max"] == 700
    assert summary["limits_active"] == {"software power cap": 2}
    assert gpuclocks.summarise([])["sm_mhz"] is None


def test_sampler_records_between_start_and_stop(tmp_path, monkeypatch):
    _install(tmp_path, monkeypatch)
    sampler = gpuclocks.ClockSampler(interval_ms=10)
    sampler.start()
    _wait_for_lines(sampler, 5)
    summary = sampler.stop()
    assert summary["samples"] >= 4
    assert summary["sm_mhz"]["min"] == 1755 and summary["sm_mhz"]["max"] == 1980
    assert summary["limits_active"] == {"software power cap": 1}
    record = sampler.record()
    assert len(record["series"]["sm_mhz"]) == summary["samples"]


def test_sampler_drops_a_field_the_driver_does_not_know(tmp_path, monkeypatch):
    _install(tmp_path, monkeypatch, reject="clocks_event_reasons")
    sampler = gpuclocks.ClockSampler(interval_ms=10)
    assert "clocks_event_reasons.active" not in sampler.fields
    sampler.start()
    _wait_for_lines(sampler, 3)
    summary = sampler.stop()
    assert summary["samples"] >= 2 and summary["limits_active"] == {}


def test_no_nvidia_smi_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert not gpuclocks.available()
    with pytest.raises(LabError, match="nvidia-smi"):
        gpuclocks.ClockSampler()
    with pytest.raises(LabError, match="before start"):
        gpuclocks.ClockSampler.stop(SimpleNamespace(_proc=None))


def test_dominant_limit_and_a_second_start_stops_the_first(tmp_path, monkeypatch):
    assert gpuclocks.dominant_limit({"samples": 4, "limits_active": {"a": 1, "b": 3}}) == ("b", 0.75)
    assert gpuclocks.dominant_limit({"samples": 0, "limits_active": {}}) == ("none", 0.0)
    _install(tmp_path, monkeypatch)
    sampler = gpuclocks.ClockSampler(interval_ms=10)
    sampler.start()
    first = sampler._proc
    sampler.start()                       # the first nvidia-smi is stopped, not orphaned
    assert first.poll() is not None and sampler.running
    sampler.stop()
    assert not sampler.running


def test_row_fields_give_a_timing_row_its_clock_columns():
    import math

    samples = [{"timestamp": "t", "sm_mhz": mhz, "mem_mhz": 3201.0, "power_w": 600.0, "temp_c": 50.0, "reasons": mask}
               for mhz, mask in ((1800.0, 0x4), (1900.0, 0x4), (1980.0, 0x0))]
    fields = gpuclocks.row_fields(gpuclocks.summarise(samples))
    assert fields == {"sm_mhz": 1900.0, "power_w": 600.0, "clock_limit": "software power cap",
                      "clock_limit_share": 2 / 3}
    empty = gpuclocks.row_fields(gpuclocks.summarise([]))
    assert math.isnan(empty["sm_mhz"]) and empty["clock_limit"] == "none"


def test_a_record_says_how_many_samples_had_a_limit_and_how_long_a_reading_lasts():
    record = {"series": {"sm_mhz": [1980, 1980, 1755, 1755, 1800, 1800, 1800], "power_w": [400, 400, 690, 690, 650, 650, 650],
                         "reasons": [0x0, 0x0, 0x4, 0x4, 0x4 | 0x8, 0x4, 0x1]}}
    assert gpuclocks.samples_with(record, "software power cap") == 4
    assert gpuclocks.samples_with(record, "idle") == 1
    # runs of one reading: 2, 2, 3; the first and last are cut off by the window, so the middle one counts
    assert gpuclocks.readings_held(record) == 2
    assert gpuclocks.readings_held({"series": {"sm_mhz": [1980], "power_w": [400]}}) == 1
    assert gpuclocks.samples_with({"samples": 3}, "software power cap") is None  # a summary without its series
    assert gpuclocks.readings_held({}) is None
