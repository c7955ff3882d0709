"""Chapter 2's counter table and facts (lab.book.pages.ch02): every value read from the counters' data, "not measured" without it."""

import pytest

from lab.book.facts import glued_value
from lab.book.pages import ch02 as counter_facts
from lab.results import bandwidth, kernel_counters
from lab.results.facts import NOT_MEASURED
from lab.results.kernel_counters import JobCounters


def _job(candidate: str, tensor: float, dram_read: float, ms: float = 2.0, stalls=(("barrier", 2.5), ("wait", 1.0))):
    return JobCounters(f"prefill:{candidate}:1:{counter_facts.N}", "prefill", candidate, 1, counter_facts.N,
                       "kernel", 1, {"ms": ms, "tensor_pct": tensor, "xu_pct": tensor / 2, "warps_per_sm": 12.0},
                       {"dram_read": dram_read, "dram_write": 1e8, "job_ms": ms}, dict(stalls),
                       f"{counter_facts.FOLDER}/raw.csv")


@pytest.fixture
def two_jobs(monkeypatch):
    jobs = {j.job: j for j in (_job("fa3", 80.0, 1.5e8), _job("ours-tuned", 60.0, 3.0e8, ms=3.0))}
    monkeypatch.setattr(kernel_counters, "jobs", lambda root=None: jobs)
    return jobs


def test_rows_are_the_counters_of_each_job_against_the_compulsory_reads_and_the_ceiling(two_jobs):
    rows = {row["candidate"]: row for row in counter_facts.prefill_rows()}
    assert list(rows) == list(counter_facts.KERNELS)
    q_kv_once = 2 * 128 * (28 * counter_facts.N + 2 * 4 * counter_facts.N)  # Q, K and V of one layer, bf16
    fa3 = rows["fa3"]
    assert fa3["compulsory_read"] == q_kv_once
    assert fa3["read_over_compulsory"] == pytest.approx(1.5e8 / q_kv_once)
    ceiling = bandwidth.ceiling("NVIDIA H200")
    assert fa3["rate_pct"] == pytest.approx(100 * (1.5e8 + 1e8) / 2e-3 / ceiling)
    assert (fa3["tensor_pct"], fa3["top_stall"], fa3["barrier"]) == (80.0, "barrier", 2.5)
    assert rows["fa4"]["tensor_pct"] is None and rows["fa4"]["rate_pct"] is None  # not on file: not measured


def test_facts_span_the_measured_kernels_and_say_not_measured_for_the_rest(two_jobs):
    facts = {name: glued_value(fact) for name, fact in counter_facts.counter_facts(counter_facts.prefill_rows()).items()}
    assert (facts["kc_tensor_pct_min"], facts["kc_tensor_pct_max"]) == ("60%", "80%")
    assert facts["kc_fa3_tensor"] == "80.0%" and facts["kc_ours_ms"] == "3.00 ms"
    assert facts["kc_ours_stall"] == "barrier" and facts["kc_ours_barrier"] == "2.50"
    facts = counter_facts.counter_facts(counter_facts.prefill_rows())
    assert not facts["kc_fa4_tensor"].measured and not facts["kc_cudnn_ms"].measured


def test_a_missing_dataset_gives_not_measured_everywhere(tmp_path):
    rows = counter_facts.prefill_rows(tmp_path)
    assert all(row["tensor_pct"] is None and row["rate_pct"] is None for row in rows)
    facts = counter_facts.counter_facts(rows)
    assert not any(fact.measured for name, fact in facts.items() if name != "kc_n")
    html = counter_facts.prefill_table(rows).to_html()
    assert html.count(NOT_MEASURED) == len(rows) * (len(counter_facts.COLUMNS) - 1)


def test_the_committed_run_reads_as_the_counters_say():
    rows = {row["candidate"]: row for row in counter_facts.prefill_rows()}
    fa3 = kernel_counters.jobs()[f"prefill:fa3:1:{counter_facts.N}"]
    assert rows["fa3"]["tensor_pct"] == fa3.main["tensor_pct"] and rows["fa3"]["ms"] == fa3.main["ms"]
    assert rows["fa3"]["dram_read"] == fa3.totals["dram_read"]
    html = counter_facts.prefill_table(list(rows.values())).to_html()
    assert f"{fa3.main['tensor_pct']:.1f}%" in html and NOT_MEASURED not in html
