"""FlexAttention's decode gap from the hardware counters: the factor chain over the committed H200 runs, and
"not measured" when the runs are absent."""

import math

import pytest

from lab.book.pages import ch06
from lab.results import bandwidth, hardware
from lab.results import flex_counters as fc
from lab.results import kernel_counters as kc


def test_the_counter_table_has_every_decode_job_with_its_launch():
    rows = {(r["candidate"], r["batch"]): r for r in fc.table()}
    assert set(rows) == set(fc.ROWS)
    general = rows[("flex-default", 1)]
    assert general["programs"] == 28 and general["busy_sms"] == pytest.approx(28, abs=0.5)  # one program per query head
    assert rows[("flex-default", 16)]["programs"] == 448 and rows[("flex-paged", 16)]["programs"] == 28
    job = kc.jobs()["flexdecode:flex-default:1:32768"]
    rate = job.totals["dram_read"] / (job.totals["job_ms"] * 1e-3)
    assert general["read_pct_of_ceiling"] == pytest.approx(100 * rate / bandwidth.ceiling())


def test_the_general_kernel_launches_128_row_tiles():
    """8 warps and a 128 x 128 query tile plus 3 stages of 64-key K and V tiles (bf16) in shared memory."""
    job = kc.jobs()["flexdecode:flex-default:1:32768"]
    tiles = 2 * (fc.GENERAL_BLOCK_M * fc.HEAD_DIM + 3 * 2 * 64 * fc.HEAD_DIM)
    assert job.main["threads"] == 256 and 0 <= job.main["shared_bytes"] - tiles <= 2048


def test_the_split_template_works_on_one_program_per_kv_head_and_request():
    """The no-mask call hands the first split of each (request, KV head) the whole cache (flex_decode.py.jinja's
    TILE_KV from the one 2**30 block of the empty mask): 4 working programs at batch 1, 64 at batch 16."""
    jobs = fc.measured()
    assert fc.busy_sms(jobs[("flex-pad8", 1)]) == pytest.approx(fc.KV_HEADS, rel=0.1)
    assert fc.busy_sms(jobs[("flex-pad8", 16)]) == pytest.approx(16 * fc.KV_HEADS, rel=0.1)
    per_program = [fc.per_program_read(jobs[("flex-pad8", b)]) for b in (1, 16)]
    assert per_program[0] == pytest.approx(per_program[1], rel=0.1)  # the same chain per program at either batch


@pytest.mark.parametrize("batch", [1, 16])
def test_the_factors_multiply_to_the_measured_total_up_to_the_stated_remainder(batch):
    gap, jobs = fc.gap(batch), kc.jobs()
    job = lambda c: jobs[f"{'flexdecode' if c.startswith('flex') else 'decode'}:{c}:{batch}:32768"]  # noqa: E731
    general, paged, fa3 = job("flex-default"), job("flex-paged"), job("fa3")
    floor = kc.compulsory_bytes(general) / bandwidth.ceiling() * 1e3
    useful = 4 * 32768 * 128 * 28 * batch / hardware.device("H200-SXM").bf16_flops * 1e3
    sms = general.main["sm_cycles_sum"] / general.main["sm_cycles_max"]
    predicted = useful / floor * 128 * (132 / sms) * (100 / general.main["tensor_pct"])
    assert gap.general_predicted == pytest.approx(predicted)
    assert gap.total_measured == pytest.approx(paged.totals["job_ms"] / fa3.totals["job_ms"])
    assert gap.product * gap.remainder == pytest.approx(gap.total_measured)
    assert abs(gap.remainder - 1) < 0.05  # 128-row tiles explain the general kernel's time; 64 would leave 2x
    split = math.prod(f.value for f in gap.recipe_split[:4])
    assert split == pytest.approx(gap.factor("main kernel time"), rel=0.02)


def test_without_the_runs_nothing_is_measured(tmp_path):
    assert fc.measured(tmp_path) == {} and fc.table(tmp_path) == [] and fc.gap(1, tmp_path) is None
    facts = ch06.counter_facts(tmp_path)
    assert not facts["flexgap_b1_total"].measured and not facts["flexctr_default_b1_ms"].measured
    assert not facts["flexctr_pad8_b16_per_program_gbs"].measured
    assert not facts["flexctr_ceiling_tbs"].measured  # no read stream in this tree: not measured, not the datasheet


def test_the_facts_read_the_committed_runs():
    facts = ch06.counter_facts()
    assert facts["flexctr_default_b1_programs"].value == "28" and facts["flexctr_pad8_b1_busy"].value == "4"
    assert facts["flexgap_b1_rows"].value == "128×"
    assert facts["flexgap_b1_total"].value == f"{fc.gap(1).total_measured:.1f}×"
