"""python -m lab tuning-race on the CPU: variants checked in Triton's interpreter, a failing peer is a row."""

import argparse
import os
import subprocess
import sys
import time

import pandas as pd

from lab import REPO_ROOT
from lab.measure import tuning_race as race_tuned
from lab.measure.attention import switches as switches_module
from lab.measure.timing import ABLATION_STEPS, FA3_STEPS


def _timer(fn, warmup, rep, return_mode):
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1e3


def test_race_checks_times_and_writes_every_variant(tmp_path, monkeypatch):
    monkeypatch.setattr(race_tuned, "LAUNCHES", {name: (32, 16, 4, 1, 0) for name in race_tuned.LAUNCHES})
    monkeypatch.setattr(race_tuned, "PEERS", ("fa3",))   # (torch.compile'd Flex would take minutes on this CPU)
    args = argparse.Namespace(out=tmp_path / "race", lengths="40", rounds=2, rep_ms=1, deadline_s=600, only="")
    race = race_tuned.Race(args, device="cpu", timer=_timer, head_dim=16)
    chosen = [v for v in race_tuned.variants() if v[0] in ("current, TMA", "kv-major + persistent + lazy + poly, TMA")]
    race.length(40, chosen)
    race.write(complete=True)
    table = pd.read_csv(args.out / "race.csv")
    assert set(table.variant) == {*race_tuned.PEERS, *(v[0] for v in chosen)}
    ours = table[table.variant.isin([v[0] for v in chosen])]
    assert (ours.status == "ok").all() and (ours.max_abs_err <= 4e-3).all() and (ours.ms > 0).all()
    assert (table[table.variant == "fa3"].status == "error").all()   # no vLLM here: a row saying why
    assert (args.out / "provenance.json").exists()


def test_race_stops_starting_variants_at_the_deadline(tmp_path):
    args = argparse.Namespace(out=tmp_path / "race", lengths="40", rounds=1, rep_ms=1, deadline_s=0, only="")
    race = race_tuned.Race(args, device="cpu", timer=_timer, head_dim=16)
    race.length(40, race_tuned.variants()[:1])
    assert {row["status"] for row in race.rows} == {"skipped"}


def test_ablation_keeps_the_first_steps_and_adds_each_fa3_step_once():
    assert [label for label, _ in ABLATION_STEPS[:2]] == ["teaching kernel", "exp2, log2(e) folded into the scale"]
    added = ABLATION_STEPS[6:]
    assert len(added) == len(FA3_STEPS)
    default = switches_module.DEFAULT_SWITCHES
    for (label, options), (_, change) in zip(added, FA3_STEPS, strict=True):
        kept = all(getattr(default, key) == value for key, value in change.items())
        assert label.endswith("(tried, not kept)") != kept
        assert all(options["switches"][key] == value for key, value in change.items())


def test_the_command_refuses_a_bad_length_and_a_cpu_in_one_line():
    for argv, said in ((["--lengths", "16k,x"], "--lengths"), (["--only", "no such variant"], "--only"),
                       ([], "no CUDA GPU")):
        done = subprocess.run([sys.executable, "-m", "lab", "tuning-race", *argv, "--out", "/nonexistent/race"],
                              cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
                              env={**os.environ, "TRITON_INTERPRET": "1"})
        assert done.returncode == 2 and said in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
