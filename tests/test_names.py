"""lab.names, the one table of what the book calls each kernel and backend: every id the measuring code writes has
a label and a colour, no two kernels share a label, the races' variants are the names the race writes, and the
server log reader and the A10G study's parser map older backend words through the same aliases."""

import pytest

from lab import LabError, names
from lab.book.plots import COLORS
from lab.measure import decode_rows, tuning_race
from lab.measure.candidates import ALL_CANDIDATES, HOPPER_ONLY
from lab.measure.vllm import serverlog


def test_every_candidate_the_benchmarks_write_has_one_label_and_a_colour():
    written = {*ALL_CANDIDATES, *HOPPER_ONLY, *decode_rows.CANDIDATES, *tuning_race.PEERS}
    assert written <= set(names.CANDIDATES)
    assert all(names.colour(c) == COLORS[c] for c in written)
    wordings = [c.label for c in names.CANDIDATES.values()]
    assert len(wordings) == len(set(wordings)), "two kernels with one label"


def test_the_gluon_race_runs_every_variant_the_page_names_under_the_name_the_page_reads():
    raced = {name for name, *_ in tuning_race.variants()}
    assert {names.in_data(v) for v in names.VARIANTS} <= raced
    assert set(tuning_race.GLUON) == {v for v in names.VARIANTS if v.startswith("gluon-")}


def test_an_unknown_id_is_an_error_naming_the_known_ones():
    with pytest.raises(LabError, match="sdpa-cudnn"):
        names.label("cudnn")
    with pytest.raises(LabError, match="tables only"):
        names.colour("gluon-default")


@pytest.mark.parametrize("line, backend", [
    ("INFO 09-30 19:34:10 [cuda.py:325] Using Flash Attention backend on V1 engine.", "FLASH_ATTN"),
    ("INFO 09-30 19:34:10 [cuda.py:325] Using FlexAttention backend on V1 engine.", "FLEX_ATTENTION"),
    ("INFO 09-30 19:34:10 [cuda.py:325] Using Flex Attention backend on V1 engine.", "FLEX_ATTENTION"),
    ("INFO 11-30 05:02:11 [cuda.py:1] Using AttentionBackendEnum.TRITON_ATTN backend.", "TRITON_ATTN"),
])
def test_the_server_log_reader_names_backends_by_the_registry(line, backend):
    assert serverlog.read_facts(line).backend == backend
    assert names.registry_name(backend) == backend


def test_every_alias_names_a_backend_and_no_word_names_two():
    aliases = [a for group in names.BACKENDS.values() for a in group]
    assert len(aliases) == len(set(aliases))
    assert set(names.BACKEND_ALIASES.values()) <= set(names.BACKENDS)


def test_every_glue_key_names_one_thing():
    """One short word per candidate and Flex step in glue names (``race_tuned_vs_fa3_16k``), one per vLLM arm."""
    kernels = [names.key(i) for i in (*names.CANDIDATES, *names.FLEX_STEPS)]
    assert len(kernels) == len(set(kernels)), "two kernels with one glue key"
    assert len(set(names.ARM_KEYS.values())) == len(names.ARM_KEYS), "two vLLM arms with one glue key"
    assert names.key("ours-tuned") == "tuned" and names.key("FLASH_ATTN/FA3") == "fa3"


def test_every_arm_the_studies_run_has_a_glue_key():
    from lab.measure.vllm.arms import ARMS, FLASH
    assert {*ARMS, FLASH.label} == set(names.ARM_KEYS)
