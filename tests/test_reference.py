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


# --- faults: cut, altered and differently laid-out logs (issue 18) ----------------------------------

def _s1() -> str:
    return (SOURCE / "s1.log").read_text()


@pytest.mark.skipif(not SOURCE.exists(), reason="the study's logs are not beside this checkout")
def test_a_log_cut_mid_table_is_refused():
    cut = "\n".join(_s1().splitlines()[:26]) + "\n"          # head -n 26: the FLEX arm stops after 3 rows
    with pytest.raises(LabError, match=r"arm 7b_flex \(from line 20\): the table ends after 3 rows without "
                                       r"its 'prefill fit' line"):
        reference.parse_probe_log(cut)


@pytest.mark.skipif(not SOURCE.exists(), reason="the study's logs are not beside this checkout")
def test_a_table_missing_a_middle_row_does_not_match_its_fit():
    lines = [line for line in _s1().splitlines() if not line.startswith("    16384   16385     6.393")]
    with pytest.raises(LabError, match="arm 7b_flex .*7 rows give c = .* but the fit line says 10099.6"):
        reference.parse_probe_log("\n".join(lines))


@pytest.mark.skipif(not SOURCE.exists(), reason="the study's logs are not beside this checkout")
def test_a_table_missing_its_last_row_does_not_match_its_decode_line():
    lines = [line for line in _s1().splitlines() if not line.startswith("    30720   30720    10.181")]
    with pytest.raises(LabError, match="arm 7b_flash .*decode line spans 257..30720 tokens but the table 257..24577"):
        reference.parse_probe_log("\n".join(lines))


# The same arm as another probe run printed it: no run line (the arm is named in its title only),
# vLLM's backend line before the title, and the fit as key=value pairs.
TITLE_ONLY = textwrap.dedent("""\
    (EngineCore_DP0 pid=1) INFO 09-30 19:38:53 [cuda.py:319] Using FlexAttention backend on V1 engine.
    # S1 arm=7b_flex  model=Qwen/Qwen2.5-7B-Instruct port=8001 gen=64
    #  target  actual    ttft_s  pref_ms/tok  decode_ms
          256     257     0.119        0.463      35.43
        30720   30720    16.410        0.534      91.83
    # prefill fit: a=0.0469 s, b=223.5 us/token, c=10099.6 ps/token^2
    # decode ITL: 35.4 ms @ 257 -> 91.8 ms @ 30720  (+159%)
""")


@pytest.mark.parametrize("fit_line", [
    "# prefill fit: a=0.0469 s, b=223.5 us/token, c=10099.6 ps/token^2",
    "# prefill fit: t = 0.0469 s + 223.5 us*n + 10099.6 ps*n^2",
    "# prefill fit: t(n) = 0.0469 + 223.5 us·n + 10099.6 ps·n²",
])
def test_other_layouts_parse_to_the_same_arm(fit_line):
    text = TITLE_ONLY.replace("# prefill fit: a=0.0469 s, b=223.5 us/token, c=10099.6 ps/token^2", fit_line)
    (arm,) = reference.parse_probe_log(text, "s1b.log")
    assert arm.arm == "7b_flex" and arm.backend == "FLEX_ATTENTION" and arm.gen_tokens == 64
    assert arm.fit == {"a_s": 0.0469, "b_us_per_token": 223.5, "c_ps_per_token2": 10099.6}
    assert [r["actual_len"] for r in arm.rows] == [257, 30720] and arm.decode["growth_pct"] == 159.0


@pytest.mark.parametrize("bad, message", [
    ("# prefill fit: t = 0.0469 + 223.5*n + 10099.6*n^2", r"s1b.log: line 6: cannot read the fit line"),
    ("      512     513     0.200        0.390", r"s1b.log: line 6: cannot read this table row \(4 columns"),
    ("# decode ITL: about 35 ms", r"s1b.log: line 6: cannot read the decode line"),
])
def test_a_line_that_cannot_be_read_is_named(bad, message):
    lines = TITLE_ONLY.splitlines()
    lines[5] = bad
    with pytest.raises(LabError, match=message):
        reference.parse_probe_log("\n".join(lines), "s1b.log")


def _cli(*argv):
    return subprocess.run([sys.executable, "-m", "lab", "reference", *map(str, argv)], capture_output=True, text=True,
                          cwd=REPO_ROOT)


@pytest.mark.skipif(not SOURCE.exists(), reason="the study's logs are not beside this checkout")
@pytest.mark.parametrize("fault", ["cut", "binary", "file"])
def test_cli_refuses_a_bad_source_and_leaves_the_dataset_untouched(tmp_path, fault):
    source = tmp_path / "src"
    source.mkdir()
    for name in ("s1.log", "s3.log", "FACTS.md"):
        (source / name).write_bytes((SOURCE / name).read_bytes())
    out = reference.build_reference_dataset(source, tmp_path / "out")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    if fault == "cut":
        (source / "s1.log").write_text("\n".join(_s1().splitlines()[:26]) + "\n")
    elif fault == "binary":
        (source / "s1.log").write_bytes(b"\xff\xfe\x00" + (SOURCE / "s1.log").read_bytes())
    else:
        source = source / "s1.log"
    proc = _cli("--source", source, "--out", out)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
