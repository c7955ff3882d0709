"""lab.results.fit: the quadratic prefill fit, its intervals, the quadratic share and decode growth."""

import math
import subprocess
import sys

import numpy as np
import pytest

from lab import REPO_ROOT, LabError
from lab.results import data
from lab.results.fit import decode_growth, fit_arms, fit_quadratic

REFERENCE = "reference/a10g-vllm0.11-qwen2.5-7b"


def test_an_exact_quadratic_is_recovered():
    n = np.array([256, 1024, 4096, 16384, 65536, 131072])
    t = 0.05 + 200e-6 * n + 4000e-12 * n**2
    fit = fit_quadratic(n, t)
    assert fit.a == pytest.approx(0.05, rel=1e-9)
    assert fit.b_us_per_token == pytest.approx(200, rel=1e-9)
    assert fit.c_ps_per_token2 == pytest.approx(4000, rel=1e-9)
    assert fit.rms_residual_s < 1e-12 and fit.b_ci[1] - fit.b_ci[0] < 1e-9


def test_intervals_are_student_t_intervals_by_hand():
    # four points, one degree of freedom: residual variance and t quantile checked against a hand computation
    n = np.array([1000.0, 2000.0, 3000.0, 4000.0])
    t = np.array([1.0, 2.1, 2.9, 4.2])
    fit = fit_quadratic(n, t)
    x = n / 1000
    design = np.column_stack([np.ones(4), x, x * x])
    coef = np.linalg.solve(design.T @ design, design.T @ t)
    resid = t - design @ coef
    cov = (resid @ resid / 1) * np.linalg.inv(design.T @ design)
    half_b = 12.706204736174698 * math.sqrt(cov[1, 1]) / 1000  # t(0.975, 1 dof)
    assert fit.b == pytest.approx(coef[1] / 1000)
    assert fit.b_ci[1] - fit.b == pytest.approx(half_b, rel=1e-9)


def test_noisy_points_keep_the_truth_inside_the_interval():
    rng = np.random.default_rng(7)
    n = np.repeat([256, 1024, 2048, 4096, 8192, 16384, 32768], 3)
    t = 0.03 + 30e-6 * n + 800e-12 * n**2 + rng.normal(0, 0.002, n.size)
    fit = fit_quadratic(n, t)
    assert fit.b_ci[0] < 30e-6 < fit.b_ci[1] and fit.c_ci[0] < 800e-12 < fit.c_ci[1]


def test_quad_share_by_hand():
    fit = fit_quadratic([1, 2, 3, 4], [1 + 2 * x + 2 * x * x for x in (1, 2, 3, 4)])
    assert fit.quad_share(1.0) == pytest.approx(0.5)  # c n^2 = b n at n = b / c = 1
    assert fit.quad_share(3.0) == pytest.approx(18 / 24)
    assert isinstance(fit.quad_share(3.0), float)
    assert fit.quad_share(np.array([1.0, 3.0])) == pytest.approx([0.5, 0.75])


def test_missing_points_are_dropped_and_too_few_points_fail():
    fit = fit_quadratic([1, 2, 3, 4, 5], [1, 4, 9, float("nan"), 25])
    assert fit.points == 4 and fit.c == pytest.approx(1.0)
    with pytest.raises(LabError, match="at least 3 distinct prompt lengths, got 2"):
        fit_quadratic([1, 1, 2], [1, 1, 4])
    exact = fit_quadratic([1, 2, 3], [1, 4, 9])
    assert math.isnan(exact.c_ci[0])  # no degree of freedom left


def test_decode_growth_from_shortest_to_longest():
    growth = decode_growth([30720, 257, 2050], [37.33, 33.76, float("nan")])
    assert (growth.short_len, growth.long_len) == (257, 30720)
    assert growth.growth_pct == pytest.approx((37.33 / 33.76 - 1) * 100)
    with pytest.raises(LabError, match="two or more lengths"):
        decode_growth([257], [33.76])


@pytest.fixture(scope="module")
def reference():
    return data.load(REFERENCE)


def test_reproduces_the_published_a10g_fits(reference):
    table = reference.csv("sweep.csv", data.SWEEP_COLUMNS)
    published = reference.csv("fits.csv", ("arm", "a_s", "b_us_per_token", "c_ps_per_token2")).set_index("arm")
    fits = fit_arms(table)
    assert set(fits) == {"FLASH_ATTN", "FLEX_ATTENTION"}
    for arm, (fit, _) in fits.items():
        # within 0.1%: 216.8 us and 3688.6 ps (flash), 223.5 us and 10099.6 ps (flex)
        assert fit.b_us_per_token == pytest.approx(published.loc[arm, "b_us_per_token"], rel=1e-3)
        assert fit.c_ps_per_token2 == pytest.approx(published.loc[arm, "c_ps_per_token2"], rel=1e-3)
        # the intercept is printed to 4 decimals from inputs rounded to milliseconds: within 1 ms
        assert fit.a == pytest.approx(published.loc[arm, "a_s"], abs=1e-3)


def test_reproduces_the_published_quad_shares_and_decode_growth(reference):
    fits = fit_arms(reference.csv("sweep.csv", data.SWEEP_COLUMNS))
    for row in reference.csv("quad_share.csv", ("arm", "n", "share_pct")).itertuples():
        assert fits[row.arm][0].quad_share(row.n) * 100 == pytest.approx(row.share_pct, abs=0.051)
    for row in reference.csv("decode_summary.csv", ("arm", "short_len", "long_len", "growth_pct")).itertuples():
        growth = fits[row.arm][1]
        assert (growth.short_len, growth.long_len) == (row.short_len, row.long_len)
        assert round(growth.growth_pct) == row.growth_pct


def test_fit_cli_prints_every_arm():
    proc = subprocess.run([sys.executable, "-m", "lab", "fit", REFERENCE], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "216.8 us*n" in proc.stdout and "FLEX_ATTENTION" in proc.stdout and "(+159%)" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "lab", "fit", REFERENCE, "--arm", "NOPE"], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.startswith("error: ") and "no arm 'NOPE'" in proc.stderr


# --- faults: bad cells, bad levels, empty tables (issue 18) ----------------------------------------

def _sweep_dataset(tmp_path, body: str):
    from lab import store

    folder = tmp_path / "ds"
    store.write_provenance(folder, store.new_provenance("vllm-sweep", flags={}, command="test"))
    (folder / "sweep.csv").write_text("arm,backend,target_len,actual_len,ttft_s,prefill_ms_per_token,itl_ms\n" + body)
    return folder


GOOD_ROWS = "".join(f"A,A,{n},{n},{0.05 + 2e-4 * n + 4e-9 * n * n:.6f},0.2,30\n" for n in (256, 1024, 4096, 16384, 30000))


@pytest.mark.parametrize("body, argv, message", [
    (GOOD_ROWS.replace("0.2,30\n", "0.2,thirty\n", 1), [], "column 'itl_ms', row 1: 'thirty' is not a number"),
    (GOOD_ROWS, ["--confidence", "nan"], "--confidence nan: expected a level between 0 and 1"),
    (GOOD_ROWS, ["--confidence", "2"], "--confidence 2.0: expected a level between 0 and 1"),
    ("", [], "no arm has 3 measured lengths that every arm measured"),
    (GOOD_ROWS, ["--at", "-2048"], "--at '-2048': expected positive token counts"),
    (GOOD_ROWS, ["--at", "0"], "--at '0': expected positive token counts"),
])
def test_fit_refuses_bad_input_in_one_line(tmp_path, body, argv, message):
    from refusals import refused

    folder = _sweep_dataset(tmp_path, body)
    assert message in refused(["fit", folder, *argv], folder)


def test_fit_library_refuses_a_level_outside_0_1():
    with pytest.raises(LabError, match="confidence must be between 0 and 1"):
        fit_quadratic([1, 2, 3, 4], [1, 2, 3, 5], confidence=2)


def test_fit_of_a_good_table_still_prints(tmp_path, capsys):
    from lab.__main__ import main

    assert main(["fit", str(_sweep_dataset(tmp_path, GOOD_ROWS)), "--at", "2048"]) == 0
    assert "quad share:" in capsys.readouterr().out


def test_arms_are_fitted_over_the_lengths_they_all_ran():
    """One arm ran further than the other: both are fitted over the shared lengths only, so their c compare like for
    like (the long points follow a smaller c, and a fit over them would move the long arm's c)."""
    import pandas as pd

    from lab.results.fit import shared_lengths
    from lab.results.sweeps import prefill_fit

    short = [256, 1024, 4096, 16384, 32768]
    rows = [{"arm": "A", "target_len": n, "actual_len": n, "ttft_s": 0.01 + 20e-6 * n + 400e-12 * n**2} for n in short]
    rows += [{"arm": "B", "target_len": n, "actual_len": n, "ttft_s": 0.02 + 20e-6 * n + 800e-12 * n**2} for n in short]
    rows += [{"arm": "A", "target_len": n, "actual_len": n, "ttft_s": 0.01 + 20e-6 * n + 300e-12 * n**2}
             for n in (65536, 131072)]
    table = pd.DataFrame(rows).assign(study="s", itl_ms=float("nan"))
    assert shared_lengths(table) == set(short)
    fits = fit_arms(table)
    assert fits["A"][0].c_ps_per_token2 == pytest.approx(400, rel=1e-6) and fits["A"][0].points == len(short)
    assert fits["B"][0].c_ps_per_token2 / fits["A"][0].c_ps_per_token2 == pytest.approx(2, rel=1e-6)
    assert prefill_fit(table, "s", "A").c_ps_per_token2 == pytest.approx(400, rel=1e-6)
    own = prefill_fit(table, "s", "A", lengths=set(short) | {65536, 131072})
    assert own.points == 7 and own.c_ps_per_token2 < 400
