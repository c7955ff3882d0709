"""The in-server agreement check of the OURS backend (lab.measure.vllm.agreement): how calls are sorted into kinds
of step, and a verdict that passes only with every kind seen, every output finite and every difference in
tolerance (the GPU run itself is in data/h200/vllm-agreement)."""

import pytest

from lab.measure.vllm.agreement import step_kind, verdict


def _call(q=1, seqs=4, err=1e-4, out=1e-2, finite=True, keys=500):
    return {"max_query_len": q, "sequences": seqs, "max_abs_error": err, "max_abs_output": out, "finite": finite,
            "max_seq_len": keys}


def test_calls_sort_into_prefill_mixed_and_decode():
    assert step_kind(_call(q=1)) == "decode"
    assert step_kind(_call(q=1024, seqs=1)) == "prefill"
    assert step_kind(_call(q=1024, seqs=3)) == "mixed"


def test_all_kinds_within_tolerance_pass():
    result = verdict([_call(q=1), _call(q=900, seqs=1, keys=3000), _call(q=300, seqs=2)], tolerance=2e-2)
    assert result["passed"] and result["kinds"]["prefill"]["longest_keys"] == 3000
    assert result["kinds"]["decode"]["worst_relative_error"] == pytest.approx(1e-2)


@pytest.mark.parametrize("bad, kind", [
    (_call(q=1, err=5e-3, out=1e-2), "decode"),             # half the output off: a wrong kernel
    (_call(q=900, seqs=1, finite=False), "prefill"),        # NaN (a row that saw no key)
    (_call(q=300, seqs=2, err=1e-6, out=0.0), "mixed"),      # a difference where the reference is all zeros
])
def test_one_bad_call_fails_its_kind(bad, kind):
    good = [_call(q=1), _call(q=900, seqs=1), _call(q=300, seqs=2)]
    result = verdict(good + [bad], tolerance=2e-2)
    assert not result["passed"] and result["failed_kinds"] == [kind]


def test_a_workload_that_missed_a_kind_does_not_pass():
    result = verdict([_call(q=1), _call(q=900, seqs=1)], tolerance=2e-2)
    assert not result["passed"] and result["missing_kinds"] == ["mixed"]
