"""The hardware-counter reader: ncu's raw page parsed into kernels, split into calls at the markers."""

import pytest

from lab import LabError
from lab.measure import kernel_counters as kc
from lab.results import kernel_counters as kc_results

RAW = '''==PROF== Connected to process 123
some output of the program
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","dram__bytes_read.sum","sm__warps_active.avg.pct_of_peak_sustained_active","launch__registers_per_thread"
"","","","","","","","","","","","byte","%","register/thread"
"0","123","python","h","counters_marker","1","7","(1, 1, 1)","(1, 1, 1)","0","9.0","32","1.5","16"
"1","123","python","h","flash_fwd_kernel","1","7","(384, 1, 1)","(132, 1, 1)","0","9.0","1,234,567","12.25","168"
"2","123","python","h","counters_marker","1","7","(1, 1, 1)","(1, 1, 1)","0","9.0","32","1.5","16"
"3","123","python","h","prepare","1","7","(32, 1, 1)","(1, 1, 1)","0","9.0","n/a","3","32"
"4","123","python","h","triton_tem_fused_0","1","7","(128, 1, 1)","(28, 1, 1)","0","9.0","67000000","6.1","255"
==PROF== Disconnected
'''


def test_raw_page_becomes_kernels_with_units_and_thousands_separators():
    kernels = kc.parse_raw_csv(RAW)
    assert [k["name"] for k in kernels] == ["counters_marker", "flash_fwd_kernel", "counters_marker", "prepare",
                                            "triton_tem_fused_0"]
    assert kernels[1]["metrics"]["dram__bytes_read.sum"] == ("byte", 1234567.0)
    assert kernels[1]["metrics"]["launch__registers_per_thread"] == ("register/thread", 168.0)
    assert "dram__bytes_read.sum" not in kernels[3]["metrics"]  # n/a is left out, not zero


def test_markers_split_the_calls_and_long_rows_name_every_metric():
    calls = kc.after_markers(kc.parse_raw_csv(RAW))
    assert [[k["name"] for k in call] for call in calls] == [["flash_fwd_kernel"], ["prepare", "triton_tem_fused_0"]]
    rows = kc.long_rows("flexdecode:flex-default:1:32768", calls[1])
    assert {r["kernel_index"] for r in rows} == {0, 1}
    occupancy = [r for r in rows if r["metric"].startswith("sm__warps_active") and r["kernel_index"] == 1]
    assert occupancy[0]["value"] == 6.1 and occupancy[0]["batch"] == 1 and occupancy[0]["n"] == 32768


def test_a_page_without_units_row_and_text_without_a_page():
    no_units = "\n".join(line for line in RAW.splitlines() if not line.startswith('"",'))
    assert len(kc.parse_raw_csv(no_units)) == 5
    assert kc.parse_raw_csv("==PROF== nothing profiled\n") == []


@pytest.mark.parametrize("job", ["prefill:fa3:1", "warp:fa3:1:16", "prefill::1:16", "prefill:fa3:x:16",
                                 "decode:fa3:0:16"])
def test_a_malformed_job_is_one_line(job):
    with pytest.raises(LabError) as err:
        kc.parse_job(job)
    assert "\n" not in str(err.value) and job in str(err.value)


def test_measured_jobs_come_in_launch_order():
    log = "MEASURED prefill:fa3:1:16384\nFAILED prefill:fa4:1:16384: ImportError\nMEASURED decode:fa3:1:32768\n"
    assert kc.measured_jobs(log) == ["prefill:fa3:1:16384", "decode:fa3:1:32768"]


def test_peer_layouts_round_trip_and_stay_out_of_the_timed_call():
    import torch

    from lab.measure import candidates

    q, k, v = torch.randn(2, 6, 5, 8), torch.randn(2, 3, 7, 8), torch.randn(2, 3, 7, 8)
    tq, tk, tv, cu_q, cu_k, n_q, n_k = candidates._varlen_prepare(q, k, v)
    assert tq.shape == (10, 6, 8) and tk.shape == (14, 3, 8) and (n_q, n_k) == (5, 7)
    assert cu_q.tolist() == [0, 5, 10] and cu_k.tolist() == [0, 7, 14]
    assert torch.equal(tq[5 + 2, 4], q[1, 4, 2]) and torch.equal(tk[7 + 6, 1], k[1, 1, 6])
    assert torch.equal(candidates._varlen_restore(tq, q), q)    # the kernel's layout back to q's
    seen = []
    peer = candidates.Prepared(run=lambda *args: seen.append(len(args)) or args[0],
                               prepare=lambda q, k, v: (seen.append("prepare") or q, k, v),
                               restore=lambda out, q: out)
    call = candidates.timed_call(peer, q, k, v, True)
    call(), call()
    assert seen == ["prepare", 4, 4]    # prepared once, outside the calls that are timed


def test_a_stored_run_is_read_back_from_its_raw_page_and_child_log():
    log = "MEASURED prefill:fa3:1:16384\nFAILED prefill:fa4:1:16384: ImportError\nMEASURED flexdecode:flex-default:1:32768\n"
    rows = kc.read_dataset(RAW, log)
    assert {r["job"] for r in rows} == {"prefill:fa3:1:16384", "flexdecode:flex-default:1:32768"}
    with pytest.raises(LabError, match="not from one run"):
        kc.read_dataset(RAW, "MEASURED prefill:fa3:1:16384\n")


def test_a_job_keeps_its_other_kernels_beside_the_main_one():
    jobs = kc_results.jobs()
    fa3, ours = jobs["decode:fa3:1:32768"], jobs["decode:ours-tuned:1:32768"]
    assert len(fa3.others) == fa3.kernels - 1 == 2 and len(ours.others) == 1
    assert fa3.others_ms == pytest.approx(fa3.totals["job_ms"] - fa3.main["ms"])
    assert any("prepare" in name for name, _ in fa3.others)


def test_backward_jobs_parse_and_their_compulsory_bytes_are_the_backward_count():
    from lab.results import iomodel

    assert kc.parse_job("backward:ours:1:16384") == ("backward", "ours", 1, 16384)
    assert all(kc.parse_job(job)[0] == "backward" for job in kc.BACKWARD_JOBS)
    job = kc_results.JobCounters("backward:ours:1:16384", "backward", "ours", 1, 16384, "dkdv_kernel", 3)
    counts = iomodel.backward_hbm_bytes(16384, 16384, 28, 4, 128)
    assert kc_results.compulsory_bytes(job) == counts["recompute"]
    assert kc_results.compulsory_read_bytes(job) == counts["recompute_reads"]


def test_a_chunk_job_is_a_servers_last_prefill_chunk_and_counts_its_queries_only():
    assert [kc.parse_job(job)[:2] for job in kc.CHUNK_JOBS] == [("chunk", "fa3"), ("chunk", "ours")]
    job = kc_results.JobCounters("chunk:ours:1:32768", "chunk", "ours", 1, 32768, "paged_prefill_kernel", 2)
    chunk = 8192  # the last chunk's queries, over all 32,768 keys: Q and O of 8,192 rows, K and V of 32,768
    assert kc_results.compulsory_bytes(job) == 2 * 128 * (2 * 28 * chunk + 2 * 4 * 32768)
    assert kc_results.compulsory_read_bytes(job) == 2 * 128 * (28 * chunk + 2 * 4 * 32768)
    short = kc_results.JobCounters("chunk:fa3:1:4096", "chunk", "fa3", 1, 4096, "flash_fwd", 1)
    assert kc_results.compulsory_read_bytes(short) == 2 * 128 * (28 * 4096 + 2 * 4 * 4096)   # one chunk, no prefix


def test_a_chunk_job_of_an_unknown_candidate_is_refused_before_it_builds_anything():
    with pytest.raises(LabError, match="no chunk candidate 'fa9'; known: fa3, ours"):
        kc.job_call("chunk:fa9:1:32768")


def test_a_mixed_job_is_a_busy_servers_step_and_counts_every_sequence():
    assert [kc.parse_job(job)[:2] for job in kc.MIXED_JOBS] == [("mixed", "fa3"), ("mixed", "ours-chunks"),
                                                                 ("mixed", "ours-decode")]
    job = kc_results.JobCounters("mixed:ours-decode:128:1089", "mixed", "ours-decode", 128, 1089, "paged_split_kernel", 3)
    # 128 decoding sequences (one query row over 1,089 keys each) and 7 new prompts of 1,024 tokens
    decodes, prompts = 128 * (28 * 1 + 2 * 4 * 1089), 7 * (28 * 1024 + 2 * 4 * 1024)
    assert kc_results.compulsory_read_bytes(job) == 2 * 128 * (decodes + prompts)
    assert kc_results.compulsory_bytes(job) == 2 * 128 * (decodes + prompts + 128 * 28 + 7 * 28 * 1024)


def test_a_mixed_job_of_an_unknown_candidate_is_refused_before_it_builds_anything():
    with pytest.raises(LabError, match="no mixed candidate 'ours'; known: fa3, ours-chunks, ours-decode"):
        kc.job_call("mixed:ours:128:1089")
