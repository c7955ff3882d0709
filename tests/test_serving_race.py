"""`python -m lab serving-race` on the CPU: its choice of our fastest setting, what it prints, what it keeps when a
step fails, and its refusals (the race itself needs a GPU and vLLM's FlashAttention 3)."""

import argparse
import dataclasses
import json

import pandas as pd
import pytest
import torch

from lab import LabError, env, store
from lab.measure import serving_race
from tests.refusals import refused

LAST = "prefill 8192 over 24576"


def _table(rows):
    return pd.DataFrame(rows, columns=[*serving_race.COLUMNS, "error"])


def _row(step, candidate, ms, config=None):
    return {"step": step, "candidate": candidate, "ms": ms, "vs_fa3": None, "max_abs_diff": 0.0,
            "config": json.dumps(config) if config else ""}


def _pretend_a_gpu(monkeypatch):
    here = env.detect()
    monkeypatch.setattr(env, "detect", lambda: dataclasses.replace(here, gpu="a GPU the test pretends"))


def test_the_fastest_of_ours_is_timed_ours_and_at_its_step():
    fast, slow = {"BLOCK_M": 128, "BLOCK_N": 64}, {"BLOCK_M": 64, "BLOCK_N": 64}
    table = _table([_row(LAST, "fa3", 0.5), _row(LAST, "ours 64x64", 2.0, slow), _row(LAST, "ours 128x64", 1.5, fast),
                    _row(LAST, "ours 128x128", None, {"BLOCK_M": 128}),          # errored: never timed
                    _row("prefill 8192 over 0", "ours 64x64", 0.1, slow)])       # faster, but another step
    assert serving_race.fastest_of_ours(table, LAST).candidate == "ours 128x64"
    assert serving_race.best_prefill_config(table) == fast
    with pytest.raises(LabError, match="timed no candidate of ours at 'decode 1 x 32768'"):
        serving_race.fastest_of_ours(table, "decode 1 x 32768")


def test_a_candidate_no_round_timed_prints_a_line_not_a_traceback():
    timed = {**_row(LAST, "ours 128x64", 1.25), "vs_fa3": 0.625}
    assert "1.250 ms  0.625x FA3" in serving_race.progress_line(timed)
    assert serving_race.progress_line({**_row(LAST, "ours 128x128", None), "max_abs_diff": None,
                                       "error": "OutOfResources: shared memory"}).endswith("OutOfResources: shared memory")
    assert "not timed" in serving_race.progress_line(_row(LAST, "ours 64x64", None))


def test_the_steps_already_raced_are_on_disk_when_a_later_one_crashes(tmp_path, monkeypatch):
    def race(rounds, rep_ms, split_bound, progress, save, kinds):
        rows = [{**_row("prefill 8192 over 0", "fa3", 1.0), "vs_fa3": 1.0}]
        save(rows)
        raise RuntimeError("CUDA error: out of memory")

    monkeypatch.setattr(serving_race, "race", race)
    _pretend_a_gpu(monkeypatch)
    args = argparse.Namespace(out=tmp_path / "race", rounds=1, rep_ms=1, split_bound=1024,
                              steps=serving_race.STEP_KINDS)
    with pytest.raises(RuntimeError):
        serving_race.main(args)
    kept = pd.read_csv(tmp_path / "race" / "race.csv")
    assert list(kept.candidate) == ["fa3"] and not (tmp_path / "race" / "best_prefill.json").exists()


def test_a_finished_race_writes_its_table_its_best_setting_and_provenance(tmp_path, monkeypatch):
    best = {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 2}

    def race(rounds, rep_ms, split_bound, progress, save, kinds):
        rows = [{**_row(LAST, "fa3", 1.0), "vs_fa3": 1.0}, {**_row(LAST, "ours 128x64", 1.6, best), "vs_fa3": 0.625}]
        save(rows)
        return rows

    monkeypatch.setattr(serving_race, "race", race)
    _pretend_a_gpu(monkeypatch)
    out = tmp_path / "race"
    args = argparse.Namespace(out=out, rounds=1, rep_ms=1, split_bound=1024, steps=serving_race.STEP_KINDS)
    assert serving_race.main(args) == 0
    assert store.read_json(out / "best_prefill.json") == best
    provenance = store.read_json(out / "provenance.json")
    assert provenance["flags"]["split_bound"] == 1024
    assert ["mixed 128 decodes + 7 x 1024", 135, 128 + 7 * 1024, 1089] in provenance["flags"]["steps"]
    assert len(pd.read_csv(out / "race.csv")) == 2


def test_a_race_of_mixed_steps_alone_picks_no_prefill_setting(tmp_path, monkeypatch):
    # the mixed step is raced by itself (--steps mixed): there is no 32k chunk to pick the server's setting from
    def race(rounds, rep_ms, split_bound, progress, save, kinds):
        assert kinds == ("mixed",)
        rows = [{**_row("mixed 128 decodes + 7 x 1024", "fa3", 1.0), "vs_fa3": 1.0}]
        save(rows)
        return rows

    monkeypatch.setattr(serving_race, "race", race)
    _pretend_a_gpu(monkeypatch)
    args = argparse.Namespace(out=tmp_path / "race", rounds=1, rep_ms=1, split_bound=1024,
                              steps=serving_race.step_kinds("mixed"))
    assert serving_race.main(args) == 0 and not (tmp_path / "race" / "best_prefill.json").exists()
    assert list(store.read_json(tmp_path / "race" / "provenance.json")["files"]) == ["race.csv"]
    assert [s[0] for s in store.read_json(tmp_path / "race" / "provenance.json")["flags"]["steps"]] == [
        "mixed 128 decodes + 7 x 1024"]


def test_the_mixed_step_races_each_setting_with_its_decodes_both_ways():
    step = next(s for s in serving_race.STEPS if s[0].startswith("mixed"))
    inputs = (torch.zeros(1, 28, 128),) + (None,) * 5   # never called: only the candidates' names are read
    labels = [label for label, _, _ in serving_race.step_candidates(step, inputs, 1024)]
    assert labels[0] == "fa3" and len(labels) == 1 + 2 * len(serving_race.MIXED_SPACE)
    assert "ours gluon 128-key tiles s3, decodes to the decode kernel" in labels
    assert "ours 64x64 w4 s3, decodes with the chunks" in labels


@pytest.mark.parametrize("argv, message", [
    (["serving-race", "--rounds", "0"], "argument --rounds: expected a positive integer"),
    (["serving-race", "--split-bound", "x"], "argument --split-bound"),
    (["serving-race", "--steps", "mixed,chunk"], "no step kind chunk: pick among prefill, decode, mixed"),
    (["serving-race"], "serving-race times kernels on a GPU; this machine has none"),
])
def test_bad_options_and_a_machine_without_a_gpu_are_refused_and_write_nothing(tmp_path, argv, message):
    if torch.cuda.is_available() and "GPU" in message:
        pytest.skip("this machine has a GPU")
    assert message in refused([*argv, "--out", tmp_path / "out"], tmp_path)
    assert not (tmp_path / "out").exists()


def test_a_setting_is_named_with_its_register_cap_and_the_space_races_capped_settings():
    plain = {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 2}
    assert serving_race.setting_label(plain) == "ours 128x64 w8 s2"
    assert serving_race.setting_label({**plain, "maxnreg": 128}) == "ours 128x64 w8 s2 r128"
    assert serving_race.setting_label({"kernel": "gluon", "BLOCK_N": 128, "STAGES": 2}) == "ours gluon 128-key tiles s2"
    labels = [serving_race.setting_label(c) for c in serving_race.PREFILL_SPACE]
    assert len(set(labels)) == len(labels) and any(label.endswith(" r128") for label in labels)


def test_without_fa3_the_first_candidate_that_runs_is_the_reference(monkeypatch):
    # no vLLM: FA3's row is an error, ours are compared with the first of ours, and no speed over FA3 is made up
    from lab.measure.attention import paged_prefill

    def candidates(step, inputs, split_bound):
        def fa3():
            raise ModuleNotFoundError("No module named 'vllm'")
        return [("fa3", fa3, None), ("ours a", lambda: torch.ones(2), {"k": 1}),
                ("ours b", lambda: torch.ones(2) * 1.5, {"k": 2})]

    monkeypatch.setattr(paged_prefill, "paged_batch", lambda *a, **k: None)
    monkeypatch.setattr(serving_race, "step_candidates", candidates)
    monkeypatch.setattr(serving_race, "replay_ms", lambda calls, rep_ms: 1.0)
    rows = serving_race.race(1, 1, 1024, progress=lambda line: None, kinds=("mixed",))
    by = {row["candidate"]: row for row in rows}
    assert by["fa3"]["error"].startswith("ModuleNotFoundError") and "ms" not in by["fa3"]
    assert by["ours a"]["max_abs_diff"] == 0.0 and by["ours b"]["max_abs_diff"] == 0.5
    assert by["ours b"]["ms"] == 1.0 and by["ours b"]["vs_fa3"] is None


def test_the_profiled_calls_are_the_candidates_they_name(monkeypatch):
    """kernel-counters profiles chunk_call and mixed_call by candidate name: each name must reach its own call of
    the step (FA3 first, then ours in the server's prefill setting), built on the step the name describes."""
    built = []
    monkeypatch.setattr("lab.measure.attention.paged_prefill.paged_batch",
                        lambda q_lens, prefixes, *args, **kwargs: built.append((q_lens, prefixes)) or "inputs")
    monkeypatch.setattr(serving_race, "step_candidates", lambda step, inputs, bound, prefill_space, mixed_space: [
        (label, f"{label} of {step[0]}", None) for label in
        (("fa3", "chunks", "split") if step[0].startswith("mixed") else ("fa3", "prefill"))])
    monkeypatch.delenv("LAB_OURS_PREFILL_CONFIG", raising=False)
    assert serving_race.chunk_call("ours", 1, 32768) == "prefill of prefill 8192 over 24576"
    assert serving_race.chunk_call("fa3", 1, 32768) == "fa3 of prefill 8192 over 24576"
    step = serving_race.mixed_step(128, 1089)[0]
    assert [serving_race.mixed_call(name, 128, 1089) for name in serving_race.MIXED_CANDIDATES] == \
        [f"fa3 of {step}", f"chunks of {step}", f"split of {step}"]
    assert built[0] == ([8192], [24576])
    with pytest.raises(LabError, match="no mixed candidate"):
        serving_race.mixed_call("ours", 128, 1089)
