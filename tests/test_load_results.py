"""lab.results.load on the fixture folders (written by the runner against the fakes: layout, not data)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab import LabError
from lab.results import load

FIXTURE = Path(__file__).parent / "fixtures" / "load-study"


def _study():
    return load.load_study("random-8-4", root=FIXTURE)


def test_the_study_reads_every_arm_and_point_lowest_rate_first():
    study = _study()
    assert study.measured and set(study.points) == {"FLASH_ATTN/FA3", "FLEX_ATTENTION"}
    fa3 = study.points["FLASH_ATTN/FA3"]
    assert [r["rate"] for r in load.poisson_points(fa3)] == [20.0, 40.0, 80.0]
    assert fa3[0]["max_concurrency"] == 1 and load.capacity(fa3) is None
    assert all(r["p99_ttft_ms"] >= r["p50_ttft_ms"] for r in fa3)


def test_a_missing_study_is_not_measured_rather_than_empty_numbers(tmp_path):
    study = load.load_study("random-8-4", root=tmp_path)
    assert not study.measured and study.points == {}
    assert load.agreement(tmp_path) == {"measured": False}


def test_goodput_follows_vllms_rule_by_hand():
    result = {"duration": 2.0, "ttfts": [0.1, 0.3, 0.2, 9.0], "itls": [[0.01, 0.01], [0.04, 0.04], [0.2, 0.2], []],
              "output_lens": [3, 3, 3, 0], "errors": ["", "", "", "timeout"]}
    # TPOTs: 10 ms, 40 ms, 200 ms; the failed request never counts
    assert load.goodput(result) == 1.5
    assert load.goodput(result, ttft_ms=250) == 1.0
    assert load.goodput(result, ttft_ms=250, tpot_ms=20) == 0.5
    assert load.goodput(result, tpot_ms=50) == 1.0


def test_goodput_recomputed_at_the_runs_own_slo_matches_what_the_bench_saved():
    path = FIXTURE / "vllm0.26-qwen2.5-7b-load" / "random-8-4" / "flash_attn-fa3" / "rate-40.json"
    result = json.loads(path.read_text())
    assert load.goodput(result, ttft_ms=500, tpot_ms=50) == pytest.approx(result["request_goodput"])


def test_highest_rate_within_an_slo():
    rows = [{"rate": r, "max_concurrency": None, "p99_ttft_ms": ms} for r, ms in ((1, 50), (2, 90), (4, 900))]
    assert load.highest_rate_within(rows, "ttft", 100) == 2
    assert load.highest_rate_within(rows, "ttft", 10) is None


def test_probe_and_bench_agreement_reads_both_sides_of_one_server():
    folder = FIXTURE / "vllm0.26-qwen2.5-7b-load" / "random-8-4" / "flash_attn-fa3"
    found = load.agreement(folder)
    assert found["measured"] and found["requests"] == 2
    assert found["ttft_ratio"] == pytest.approx(found["bench_ttft_ms"] / found["probe_ttft_ms"])
    assert found["within"] == (abs(found["ttft_ratio"] - 1) <= 0.05 and abs(found["itl_ratio"] - 1) <= 0.05)


def test_a_corrupted_point_is_refused_where_it_enters(tmp_path):
    import shutil
    arm = tmp_path / "s" / "w" / "flash_attn-fa3"
    shutil.copytree(FIXTURE / "vllm0.26-qwen2.5-7b-load" / "random-8-4" / "flash_attn-fa3", arm)
    result = json.loads((arm / "rate-20.json").read_text())
    result["p99_itl_ms"] = "fast"
    (arm / "rate-20.json").write_text(json.dumps(result))
    with pytest.raises(LabError, match="rate-20.json: 'p99_itl_ms' is 'fast'"):
        load.load_study("w", root=tmp_path, study="s")


def test_kv_bytes_and_admitted_requests():
    # Qwen2.5-7B: 28 layers, 4 KV heads of 128: 56 KiB a token in bf16, half in FP8
    assert load.kv_bytes_per_token(28, 4, 128, 2) == 57344 and load.kv_bytes_per_token(28, 4, 128, 1) == 28672
    assert load.requests_admitted(1_931_552, 32768 + 128) == 58 and load.requests_admitted(None, 10) is None


def test_the_highest_rate_meeting_two_targets_meets_both_at_once():
    rows = [{"rate": r, "max_concurrency": None, "p99_ttft_ms": t, "p99_tpot_ms": p}
            for r, t, p in ((1, 50, 20), (2, 90, 80), (4, 900, 30))]
    # TTFT within 100 ms at 1 and 2 req/s, TPOT within 50 ms at 1 and 4: only 1 req/s meets both
    assert load.highest_rate_meeting(rows, {"ttft": 100, "tpot": 50}) == 1
    assert load.highest_rate_within(rows, "ttft", 100) == 2 and load.highest_rate_within(rows, "tpot", 50) == 4
    assert load.highest_rate_meeting(rows, {"ttft": 10, "tpot": 50}) is None


def test_arm_runs_and_the_goodput_of_a_point_at_several_slos():
    runs = load.arm_runs(FIXTURE / "vllm0.26-qwen2.5-7b-load" / "random-8-4")
    assert [(r.folder.name, r.label) for r in runs] == [("flash_attn-fa3", "FLASH_ATTN/FA3"),
                                                        ("flex_attention", "FLEX_ATTENTION")]
    assert runs[0].provenance["kind"] == "vllm-load" and runs[0].rows == _study().points["FLASH_ATTN/FA3"]
    row = load.poisson_points(runs[0].rows)[1]
    result = json.loads(Path(row["source"]).read_text())
    found = load.point_goodputs(row, [(500.0, 50.0), (1.0, None)])
    assert found == {(500.0, 50.0): load.goodput(result, 500.0, 50.0), (1.0, None): load.goodput(result, 1.0)}
    assert load.arm_runs(FIXTURE / "nowhere") == []


def test_agreement_compares_means_computed_from_every_request(tmp_path):
    import shutil
    arm = tmp_path / "arm"
    shutil.copytree(FIXTURE / "vllm0.26-qwen2.5-7b-load" / "random-8-4" / "flash_attn-fa3", arm)
    records = [json.loads(line) for line in (arm / "probe.jsonl").read_text().splitlines()]
    kept = [r for r in records if r["status"] == "ok" and r.get("rep") != "warm"]
    found = load.agreement(arm)
    assert found["probe_ttft_ms"] == pytest.approx(1000 * sum(r["ttft_s"] for r in kept) / len(kept))
    serial = json.loads((arm / "rate-inf-c1.json").read_text())
    assert found["bench_ttft_ms"] == serial["mean_ttft_ms"] and found["bench_itl_ms"] == serial["mean_itl_ms"]


H200_FA3 = Path(__file__).parents[1] / "data" / "h200" / "vllm0.26-qwen2.5-7b-load" / "random-1024-128" / "flash_attn-fa3"


@pytest.mark.skipif(not H200_FA3.exists(), reason="the H200 load study is not in this checkout")
def test_on_the_h200_the_probe_and_vllm_bench_serve_agree_within_five_percent():
    """Issue 25's check on the run of record: 20 requests of 1,024 tokens, one at a time, on one FA3 server."""
    found = load.agreement(H200_FA3)
    assert found["measured"] and found["requests"] == 20 and found["bench_requests"] == 20
    assert found["within"], found
    assert abs(found["itl_ratio"] - 1) < 0.01      # the per-token gaps agree far closer than the first token


def test_first_tokens_of_the_burst_and_of_the_poisson_points_skip_failed_requests(tmp_path):
    def point(name, rate, ttfts, errors):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"ttfts": ttfts, "errors": errors}))
        return {"rate": rate, "max_concurrency": None, "source": str(path)}

    rows = [point("rate-2", 2.0, [0.05, 0.9, 9.0], ["", "", "timeout"]), point("rate-4", 4.0, [0.2, 0.1], ["", ""]),
            point("rate-inf", None, [4.8, 0.0, 9.1, 6.0], ["", "refused", "", ""])]
    assert load.first_tokens(rows) == (4.8, 9.1)          # the failed request's 0.0 is no first token
    assert load.longest_first_token(rows) == 0.9           # Poisson points only, the failed 9.0 left out
    assert load.first_tokens(rows[:2]) is None and load.longest_first_token(rows[2:]) == 0.0


def test_a_servers_jit_events_and_warm_up_are_read_from_its_log(tmp_path):
    """Counted from server.log: every JIT event vLLM's monitor logged during inference, and the lab backend's warm-up
    line (an error without one, as in an FA3 server)."""
    tail = ". This causes a latency spike; consider extending warmup to cover this shape/config.\n"
    (tmp_path / "server.log").write_text(
        "(EngineCore pid=7) INFO 12-07 05:43:53 [backend.py:120] lab attention backend: kernels warmed up in 3.5 s "
        "(LAB_OURS_WARMUP=0 skips this)\n"
        + "".join(f"(EngineCore pid=7) WARNING 12-07 05:45:0{i} [jit_monitor.py:132] Triton kernel JIT compilation "
                  f"during inference: k{i} (constexprs={{}}; signature={{}}; extra_compile_info={{}}; key='x')" + tail
                  for i in range(3)))
    arm = load.ArmRun(folder=tmp_path, label="OURS", rows=[], provenance={})
    assert load.server_jit_events(arm) == 3 and load.server_warm_up(arm) == 3.5
    (tmp_path / "server.log").write_text("(EngineCore pid=7) INFO 12-07 05:47:41 [jit_monitor.py:79] Kernel JIT "
                                         "monitor activated; monitored JIT compilations during inference will use "
                                         "mode=warn.\n")
    assert load.server_jit_events(arm) == 0
    with pytest.raises(LabError, match="no warm-up line"):
        load.server_warm_up(arm)
