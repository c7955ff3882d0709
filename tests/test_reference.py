"""The published A10G study's logs, parsed: tables equal the log line by line; bad logs fail clearly."""

import filecmp
import subprocess
import sys
import textwrap

import pytest

from lab import REPO_ROOT, LabError
from lab.results import data, reference

SOURCE = reference.DEFAULT_SOURCE
DATASET = "reference/a10g-vllm0.11-qwen2.5-7b"

# Real lines from the study's s1.log (first arm, shortened to two rows; indented here, dedented below).
S1_EXCERPT = textwrap.dedent("""\
    [run_s1] START 2026-09-30T19:33:52Z
    [run_s1] 2026-09-30T19:33:52Z ARM 7b_flash model=Qwen/Qwen2.5-7B-Instruct backend=FLASH_ATTN
    (EngineCore_DP0 pid=1306673) INFO 09-30 19:34:10 [cuda.py:325] Using Flash Attention backend on V1 engine.
    # S1 arm=7b_flash  model=Qwen/Qwen2.5-7B-Instruct port=8001 gen=64
    #  target  actual    ttft_s  pref_ms/tok  decode_ms
          256     257     0.116        0.451      33.76
        30720   30720    10.181        0.331      37.33
    # prefill fit: t = 0.0497 + 216.8us*n + 3688.6ps*n^2
    #   quad share @ n= 2048: 3.4%
    # decode ITL: 33.8 ms @ 257 -> 37.3 ms @ 30720  (+11%)
    [run_s1] 7b_flash done
    [run_s1] 2026-09-30T19:45:57Z ARM hy4b_flash model=Qwen/Qwen3.5-4B backend=FLASH_ATTN
    [run_s1] hy4b_flash server died early
""")


def test_excerpt_parses_rows_fit_share_and_decode():
    flash, failed = reference.parse_probe_log(S1_EXCERPT)
    assert flash.backend == "FLASH_ATTN" and flash.gen_tokens == 64
    assert flash.backend_log_line == "Using Flash Attention backend on V1 engine."
    assert flash.rows[1] == {"target_len": 30720, "actual_len": 30720, "ttft_s": 10.181,
                             "prefill_ms_per_token": 0.331, "itl_ms": 37.33}
    assert flash.fit == {"a_s": 0.0497, "b_us_per_token": 216.8, "c_ps_per_token2": 3688.6}
    assert flash.quad_share == [{"n": 2048, "share_pct": 3.4}]
    assert flash.decode["growth_pct"] == 11.0 and flash.decode["long_itl_ms"] == 37.3
    assert failed.failure == "server died early" and failed.rows == []


def test_log_without_arms_is_rejected_in_one_line():
    with pytest.raises(LabError, match=r"notes\.txt: no '\[run_s1\] \.\.\. ARM' line"):
        reference.parse_probe_log("hello\nworld\n", "notes.txt")


def test_truncated_log_is_rejected():
    truncated = S1_EXCERPT.split("#  target")[0]
    with pytest.raises(LabError, match="arm 7b_flash has no table rows"):
        reference.parse_probe_log(truncated, "s1.log")


@pytest.mark.skipif(not SOURCE.exists(), reason="the study's logs are not beside this checkout")
def test_committed_tables_equal_the_log_line_by_line():
    # An independent reading of the log: whitespace-split rows under each arm's header.
    expected, arm = [], None
    for line in (SOURCE / "s1.log").read_text().splitlines():
        if " ARM " in line and "backend=" in line:
            arm = line.rsplit("backend=", 1)[1]
        elif arm and line.strip() and line.strip()[0].isdigit() and len(line.split()) == 5:
            target, actual, ttft, pref, itl = line.split()
            expected.append((arm, int(target), int(actual), float(ttft), float(pref), float(itl)))
    table = data.load(DATASET).csv("sweep.csv", data.SWEEP_COLUMNS)
    got = [(r.arm, r.target_len, r.actual_len, r.ttft_s, r.prefill_ms_per_token, r.itl_ms) for r in table.itertuples()]
    assert len(got) == 16 and set(table["arm"]) == {"FLASH_ATTN", "FLEX_ATTENTION"}
    assert got == expected


@pytest.mark.skipif(not SOURCE.exists(), reason="the study's logs are not beside this checkout")
def test_regenerating_the_dataset_reproduces_the_committed_files(tmp_path):
    out = reference.build_reference_dataset(SOURCE, tmp_path / "ds", command="python -m lab reference")
    committed = data.load(DATASET).path
    for csv in sorted(committed.glob("*.csv")):
        assert filecmp.cmp(csv, out / csv.name, shallow=False), f"{csv.name} differs from a fresh parse"
    census = data.load(out).csv("census.csv")
    row = census[(census.phase == "prefill") & (census.tokens == 28673) & (census.metric == "matmul_ms")]
    assert sorted(row.value) == [5755.0, 5756.0]


def test_cli_missing_source_is_one_line_exit_2(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "lab", "reference", "--source", str(tmp_path / "nope"),
                           "--out", str(tmp_path / "out")], capture_output=True, text=True, cwd=REPO_ROOT)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "s1.log: not found" in proc.stderr
    assert "Traceback" not in proc.stderr
