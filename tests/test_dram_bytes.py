"""lab.measure.dram_bytes: parsing ncu's CSV, splitting calls at markers, and the parent against a stand-in ncu."""

from __future__ import annotations

import math
import stat
from pathlib import Path

import pytest

from lab import LabError, store
from lab.measure import dram_bytes as db

HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
          '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')


def record(kid: int, name: str, metric: str, unit: str, value: str, grid: str = "(1, 1, 1)") -> str:
    return (f'"{kid}","4242","python3.12","127.0.0.1","{name}","1","7","(128, 1, 1)","{grid}","0","9.0",'
            f'"Command line profiler metrics","{metric}","{unit}","{value}"')


def kernel(kid: int, name: str, read=("byte", "0"), write=("byte", "0"), hit="50", sectors="100",
           duration=("nsecond", "1000")) -> list[str]:
    return [record(kid, name, "dram__bytes_read.sum", *read), record(kid, name, "dram__bytes_write.sum", *write),
            record(kid, name, "gpu__time_duration.sum", *duration), record(kid, name, "lts__t_sector_hit_rate.pct", "%", hit),
            record(kid, name, "lts__t_sectors.sum", "sector", sectors)]


#: Two profiled calls (n=4096: one kernel; n=16384: two kernels), each after a marker, with ncu's own
#: messages interleaved as it prints them, scaled units and thousands separators.
SAMPLE = "\n".join([
    "==PROF== Connected to process 4242 (/usr/bin/python3.12)",
    '==PROF== Profiling "dram_bytes_marker" - 0: 0%....50%....100% - 1 pass',
    "==PROF== Disconnected from process 4242",
    HEADER,
    *kernel(0, "dram_bytes_marker", read=("byte", "64")),
    *kernel(1, "_tuned_kernel", read=("Mbyte", "150.99"), write=("Mbyte", "29.36"), hit="80", sectors="1,000",
            duration=("usecond", "310.5")),
    *kernel(2, "dram_bytes_marker"),
    *kernel(3, "flash_fwd_kernel", read=("Gbyte", "1.2"), write=("Kbyte", "512"), hit="90", sectors="3,000",
            duration=("msecond", "2.5")),
    *kernel(4, "combine_kernel", read=("byte", "1,048,576"), write=("byte", "2,048"), hit="10", sectors="1,000",
            duration=("nsecond", "5000")),
])


def test_metric_values_come_back_in_base_units():
    assert db.metric_value("150.99", "Mbyte") == pytest.approx(150.99e6)
    assert db.metric_value("1,048,576", "byte") == 1048576
    assert db.metric_value("2.5", "msecond") == pytest.approx(2.5e-3)
    assert db.metric_value("3", "KiB") == 3072
    assert math.isnan(db.metric_value("n/a", "byte"))
    with pytest.raises(LabError, match="furlong"):
        db.metric_value("1", "furlong")


def test_kernels_are_parsed_in_launch_order_with_every_metric():
    kernels = db.parse_ncu_csv(SAMPLE)
    assert [k["name"] for k in kernels] == ["dram_bytes_marker", "_tuned_kernel", "dram_bytes_marker",
                                            "flash_fwd_kernel", "combine_kernel"]
    assert kernels[1]["dram__bytes_read.sum"] == pytest.approx(150.99e6)
    assert kernels[3]["gpu__time_duration.sum"] == pytest.approx(2.5e-3)
    assert db.parse_ncu_csv("==PROF== no kernels were profiled\n") == []


def test_each_marker_starts_a_call_and_a_call_sums_its_kernels():
    calls = db.after_markers(db.parse_ncu_csv(SAMPLE), db.MARKER)
    assert [[k["name"] for k in c] for c in calls] == [["_tuned_kernel"], ["flash_fwd_kernel", "combine_kernel"]]
    first, second = (db.summarise_call(c) for c in calls)
    assert first == pytest.approx({"dram_read_bytes": 150.99e6, "dram_write_bytes": 29.36e6, "l2_hit_pct": 80.0,
                                   "kernel_ms": 0.3105, "kernels": 1})
    assert second["dram_read_bytes"] == pytest.approx(1.2e9 + 1048576)
    assert second["dram_write_bytes"] == pytest.approx(512e3 + 2048)
    assert second["l2_hit_pct"] == pytest.approx((90 * 3000 + 10 * 1000) / 4000)  # weighted by sectors
    assert second["kernel_ms"] == pytest.approx(2.505)
    assert second["kernels"] == 2


def test_a_missing_ncu_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("NCU", "/nonexistent/ncu")
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(db.glob, "glob", lambda pattern: [])
    monkeypatch.setattr(db.os, "access", lambda path, mode: False)
    with pytest.raises(LabError, match="ncu .*not found"):
        db.find_ncu()


FAKE_NCU = """#!/usr/bin/env bash
# stand-in ncu: --version, or the captured sample for a child whose lengths it echoes as MEASURED lines
[ "$1" = "--version" ] && {{ echo "NVIDIA (R) Nsight Compute Command Line Profiler"; echo "Version 2025.3.1.0"; exit 0; }}
case "$*" in *"--clock-control none"*"--nvtx-include dram/"*) ;; *) echo "bad flags: $*" >&2; exit 9;; esac
cat {sample}
echo "MEASURED n=4096" >&2
echo "MEASURED n=16384" >&2
"""


def test_the_parent_writes_the_dataset_from_ncu_output(tmp_path: Path, monkeypatch, capsys):
    sample = tmp_path / "sample.csv"
    sample.write_text(SAMPLE)
    fake = tmp_path / "ncu"
    fake.write_text(FAKE_NCU.format(sample=sample))
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("NCU", str(fake))
    out = tmp_path / "dram-bytes"
    assert db.cli(["--out", str(out), "--candidates", "ours-tuned", "--lengths", "4096,16384"]) == 0
    import pandas as pd

    table = pd.read_csv(out / "dram_bytes.csv")
    assert tuple(table.columns) == db.COLUMNS
    assert table.n.tolist() == [4096, 16384] and table.kernels.tolist() == [1, 2]
    assert table.dram_read_bytes.iloc[0] == pytest.approx(150.99e6)
    provenance = store.read_json(out / "provenance.json")
    assert provenance["flags"]["experiment"] == "dram-bytes" and provenance["complete"] is True
    assert provenance["flags"]["ncu_version"] == "Version 2025.3.1.0"
    assert (out / "ncu-ours-tuned.csv").exists() and len(pd.read_csv(out / "kernels.csv")) == 3
    assert "_tuned_kernel" not in capsys.readouterr().out  # the table shows rows per call, not kernel names


def test_a_call_count_that_does_not_match_is_reported_not_guessed(tmp_path: Path, monkeypatch):
    sample = tmp_path / "sample.csv"
    sample.write_text(SAMPLE)
    fake = tmp_path / "ncu"
    fake.write_text(FAKE_NCU.format(sample=sample).replace('echo "MEASURED n=16384" >&2\n', ""))
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("NCU", str(fake))
    assert db.cli(["--out", str(tmp_path / "o"), "--candidates", "sdpa-flash", "--lengths", "4096,16384"]) == 2
    provenance = store.read_json(tmp_path / "o" / "provenance.json")
    assert "2 profiled calls for 1 measured" in provenance["flags"]["failures"]["sdpa-flash"]


def test_bad_arguments_are_one_line_errors(capsys):
    assert db.cli(["--candidates", "fa9"]) == 2
    assert "unknown candidate 'fa9'" in capsys.readouterr().err
    assert db.cli(["--lengths", "4x"]) == 2
    assert "comma-separated integers" in capsys.readouterr().err
