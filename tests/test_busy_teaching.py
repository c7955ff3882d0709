"""The busy server's teaching material (chapter 6b's page module, whose facts interview Q24-Q26 and the course kit's
Exercise 12 quote; the quiz of chapter 06b; the method appendix's section): its facts read by value against the files (json and csv read here, not through
lab), "not measured yet" without data, and the claims the pages make on them holding on the committed run."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest

from lab import REPO_ROOT, LabError
from lab.book.pages import ch06b
from lab.book.pages.busy_method import method_facts, serial_ttft_table
from lab.results import load as rl

DATA = REPO_ROOT / "data"
LOAD = DATA / "h200" / "vllm0.26-qwen2.5-7b-load" / "random-1024-128"
INTER = DATA / "h200" / "vllm0.26-qwen2.5-7b-interference"
ARM_DIRS = {"fa3": "flash_attn-fa3", "flex": "flex_attention", "triton": "triton_attn"}
#: Facts that hold without any measurement: the SLO, model shapes, lab's constants, a format's range.
ALWAYS = {"slo_ttft_ms", "slo_tpot_ms", "fp8_context", "kv_token_bf16", "kv_token_fp8",
          "fp8_e4m3_max", "bm_steady_gaps"}  # the rules and constants, not measurements

CURVE_POINTS = 6  # the load study's Poisson rates per backend

pytestmark = pytest.mark.skipif(not LOAD.exists(), reason="the H200 busy-server study is not in this checkout")


@pytest.fixture(scope="module")
def f():
    return {name: fact.value for name, fact in ch06b.facts().items()}


def _points(arm: str) -> list[dict]:
    """An arm's Poisson points as saved (json module), lowest rate first."""
    found = [json.loads(p.read_text()) for p in (LOAD / ARM_DIRS[arm]).glob("rate-*.json")]
    return sorted((r for r in found if r["request_rate"] != "inf" and not r.get("max_concurrency")),
                  key=lambda r: r["request_rate"])


@pytest.mark.parametrize("arm", sorted(ARM_DIRS))
def test_the_slo_break_is_the_next_measured_rate_and_names_what_broke(f, arm):
    points = _points(arm)
    ok = [r for r in points if r["p99_ttft_ms"] <= 500 and r["p99_tpot_ms"] <= 50]
    within, broke = ok[-1], points[points.index(ok[-1]) + 1]
    assert f[f"{arm}_slo_rate"] == within["request_rate"] and f[f"{arm}_break_rate"] == broke["request_rate"]
    assert f[f"{arm}_break_p99_tpot"] == broke["p99_tpot_ms"] and f[f"{arm}_slo_p99_ttft"] == within["p99_ttft_ms"]
    over = [m for m, limit in (("TTFT", 500), ("TPOT", 50)) if broke[f"p99_{m.lower()}_ms"] > limit]
    assert f[f"{arm}_break_metric"] == " and ".join(over)
    assert f[f"{arm}_break_in_flight"] == pytest.approx(broke["request_rate"] * broke["mean_e2el_ms"] / 1000)
    capacity = json.loads((LOAD / ARM_DIRS[arm] / "rate-inf.json").read_text())["request_throughput"]
    assert f[f"{arm}_break_rho"] == pytest.approx(broke["request_rate"] / capacity)


def test_the_load_claims_of_q24_and_exercise_12_hold(f):
    # the burst is a low estimate: past it FA3 and TRITON completed more than it (not FLEX: the pages say so of FA3)
    assert f["fa3_break_throughput"] > f["fa3_capacity"] and f["triton_break_throughput"] > f["triton_capacity"]
    assert f["fa3_slo_rho"] >= 1  # "within the target where M/M/1 has no steady state at all"
    assert f["flex_break_metric"] == "TPOT" and f["flex_break_rho"] < 1 and f["flex_slo_rate"] < f["fa3_slo_rate"]
    assert f["flex_low_p50_tpot"] > 2 * f["fa3_low_p50_tpot"]
    ttft = [f[f"curve_{i}_p99_ttft"] for i in range(1, CURVE_POINTS + 1)]
    rate = [f[f"curve_{i}_rate"] for i in range(1, CURVE_POINTS + 1)]
    assert ttft == sorted(ttft) and (ttft[5] - ttft[4]) / (rate[5] - rate[4]) > 3 * (ttft[2] - ttft[0]) / (rate[2] - rate[0])
    assert f["curve_2_mm1"] == pytest.approx(1 / (1 - f["curve_2_rho"])) and f["curve_6_mm1"] == "no steady state"
    assert f["fa3_high_goodput"] < 0.5 * f["fa3_high_throughput"]  # "past the knee they part"


def test_the_long_prompt_claims_of_q25_and_exercise_12_hold(f):
    trials = [json.loads(line) for line in (INTER / "flash_attn-fa3" / "chunk-8192" / "trials.jsonl").open()]
    longest = max(t["long_len"] for t in trials)
    assert f["inter_long_len"] == longest and f["inter_32l_decoders"] == 32 and f["inter_8l_decoders"] == 8
    assert f["inter_fa3_8192_32l_ttft"] == pytest.approx(next(t["long_ttft_s"] for t in trials if t["decoders"] == 32
                                                              and t["long_len"] == longest))
    assert f["inter_fa3_8192_32l_during_tok_s"] < f["inter_fa3_8192_32l_steady_tok_s"] / 10  # "crawl"
    # the chunk's trade: a shorter worst stall, by less than the chunks' ratio, for a later first token
    assert 1 < f["inter_8l_stall_cut"] < f["inter_chunk_big"] / f["inter_chunk_small"]
    assert f["inter_fa3_2048_8l_ttft"] > f["inter_fa3_8192_8l_ttft"]
    assert f["inter_fa3_max"] < f["inter_triton_max"] < f["inter_flex_max"]  # the backend sets the chunk's step
    assert f["inter_fa3_8192_8l_max"] > f["inter_fa3_max"]  # a longer prefix, a longer last step
    assert "inter_fa3_2048_32l_max" not in f  # not run, and no page states it


def test_the_fp8_claims_of_q26_and_exercise_12_hold(f):
    import torch

    assert f["fp8_cache_x"] == pytest.approx(2, rel=0.01) and f["kv_token_bf16"] == 2 * f["kv_token_fp8"]
    assert f["fp8_fp8_top_admitted"] > f["fp8_bf16_top_admitted"]
    rows = {(r["arm"], int(r["concurrency"])): r for folder in ("flash_attn-fa3", "flash_attn-fa3-fp8")
            for r in _csv(DATA / "h200" / "vllm0.26-qwen2.5-7b-concurrency" / folder / "concurrency.csv")
            if int(r["context"]) == 32768}
    n = f["fp8_same_n"]
    for arm in ("FLASH_ATTN/FA3", "FLASH_ATTN/FA3-FP8"):
        assert int(rows[(arm, n)]["admitted"]) == n
    assert f["fp8_fp8_same_itl"] == float(rows[("FLASH_ATTN/FA3-FP8", n)]["itl_ms"])
    # "sat further above its floor" and "fell by less than its floor"
    assert f["fp8_fp8_same_x_floor"] > f["fp8_bf16_same_x_floor"]
    assert 0 < f["fp8_same_itl_cut_pct"] < f["fp8_same_floor_cut_pct"] < 50
    assert abs(f["fp8_fp8_one_itl"] / f["fp8_bf16_one_itl"] - 1) < 0.02  # "with one request it buys nothing"
    assert f["fp8_e4m3_max"] == torch.finfo(torch.float8_e4m3fn).max


def _csv(path: Path) -> list[dict]:
    import csv

    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_the_method_appendix_reads_what_the_study_recorded():
    m = {name: fact.value for name, fact in method_facts().items()}
    for arm in ARM_DIRS.values():
        prov = json.loads((LOAD / arm / "provenance.json").read_text())
        assert prov["server"]["prefix_caching"] is False and prov["server"]["load_format"] == "dummy"
        assert prov["server"]["gpu_memory_utilization"] == m["bm_gpu_memory"]
        assert prov["flags"]["max_num_batched_tokens"] == m["bm_chunk"]
        for cmd in (LOAD / arm).glob("rate-*.cmd"):
            argv = shlex.split(cmd.read_text())
            assert "--ignore-eos" in argv and argv[argv.index("--burstiness") + 1] == m["bm_burstiness"] == "1"
            assert argv[argv.index("--temperature") + 1] == m["bm_temperature"] == "0"
    assert m["bm_command"] == (LOAD / "flash_attn-fa3" / f"rate-{m['bm_command_rate']:g}.cmd").read_text().strip()
    skipped = {json.loads(p.read_text())["flags"]["max_num_batched_tokens"]: json.loads(p.read_text())["server"][
        "skip_tokenizer_init"] for p in (INTER / "flash_attn-fa3").glob("chunk-*/provenance.json")}
    assert skipped == {2048: True, 8192: False}  # the appendix's sentence on which trials had the tokenizer
    assert (m["bm_inter_token_id_chunks"], m["bm_inter_text_chunks"]) == ("2,048 tokens", "8,192 tokens")
    # "per arm, <FA3's count> Poisson points at <the fractions> times that capacity"
    fa3_rates = len(_points("fa3"))
    for arm, folder in ARM_DIRS.items():
        prov = json.loads((LOAD / folder / "provenance.json").read_text())
        assert len(_points(arm)) == fa3_rates and ", ".join(f"{x:g}" for x in sorted(prov["flags"]["fractions"])) == \
            m["bm_fractions"]


def test_the_appendix_explains_the_medians_with_the_data():
    """The serial TTFTs: a few slow requests far above the rest on both sides, and medians further apart than
    the means (the appendix's reason for testing the means)."""
    table = serial_ttft_table()
    bench, probe = table["vllm bench serve (serial point)"], table["the probe"]
    assert bench["requests"] == probe["requests"] == 20
    assert bench["max"] > 1.5 * bench["median"] and probe["max"] > 1.5 * probe["median"]
    assert abs(bench["median"] - probe["median"]) > abs(bench["mean"] - probe["mean"])
    found = rl.serial_ttfts(LOAD / "flash_attn-fa3")
    assert found["bench"] == sorted(found["bench"]) and len(found["probe"]) == 20


def test_without_data_every_busy_fact_is_not_measured(tmp_path):
    facts = ch06b.facts(tmp_path)
    assert {name for name, fact in facts.items() if fact.measured} == ALWAYS
    method = method_facts(root=tmp_path)
    assert {name for name, fact in method.items() if fact.measured} == {"bm_steady_gaps", "bm_vocab_size",
                                                                       "bm_agreement_tolerance"}


def test_a_broken_serial_result_is_an_error_not_a_number(tmp_path):
    folder = tmp_path / "arm"
    shutil.copytree(LOAD / "flash_attn-fa3", folder, ignore=shutil.ignore_patterns("*.log", "server.log"))
    result = json.loads((folder / "rate-inf-c1.json").read_text())
    (folder / "rate-inf-c1.json").write_text(json.dumps({**result, "ttfts": result["ttfts"][:3]}))
    with pytest.raises(LabError, match="one value per prompt"):
        rl.serial_ttfts(folder)


@pytest.mark.parametrize("chapter", ["08-interview-prep", "09-course-kit"])
def test_busy_facts_that_may_be_missing_carry_their_own_units(chapter):
    """A fact that reads "not measured yet" without its data must not be followed by a unit or a format spec."""
    text = (REPO_ROOT / "book" / f"{chapter}.md").read_text(encoding="utf-8")
    absent = [name for name, fact in ch06b.facts(REPO_ROOT / "nowhere").items() if not fact.measured]
    for name in absent:
        for m in re.finditer(r"\{glue(?::\w+)?\}`" + re.escape(name) + r"(:[^`]*)?`(.{0,8})", text):
            assert not m.group(1), f"{chapter}: {name} has a format spec in the markdown"
            assert not re.match(r"\s?(×|%|ms\b|s\b|tokens\b|FLOP|GB|TFLOP)", m.group(2)), \
                f"{chapter}: a unit follows {name}: {m.group(0)!r}"
