"""Dataset loading: provenance is validated, and bad files fail with one line naming file and field."""

import json

import pytest

from lab import LabError, store
from lab.results import data


def _write(folder, record):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "provenance.json").write_text(json.dumps(record))
    return folder


def _good():
    return store.new_provenance("kernels", model=None, dtype="bfloat16", flags={"x": 1}, command="python -m lab bench")


def test_reference_dataset_loads_with_its_source():
    ds = data.load("reference/a10g-vllm0.11-qwen2.5-7b")
    assert ds.gpu == "NVIDIA A10G" and ds.kind == "reference" and ds.provenance["vllm"] == "0.11.0"
    assert ds.provenance["source"]["title"]
    assert ds.provenance["flags"]["max_num_batched_tokens"] == 2048


def test_new_provenance_round_trips(tmp_path):
    folder = tmp_path / "run"
    store.write_provenance(folder, _good())
    assert data.load(folder).provenance["command"] == "python -m lab bench"


@pytest.mark.parametrize("field, value, expected", [
    ("gpu", None, "field 'gpu' is null; expected a string"),
    ("flags", "--x", "field 'flags' is \"--x\"; expected an object"),
    ("date", "yesterday", "field 'date' is 'yesterday'; expected an ISO 8601 date"),
    ("kind", "misc", "field 'kind' is 'misc'; expected one of"),
])
def test_bad_field_names_file_field_and_expectation(tmp_path, field, value, expected):
    record = _good()
    record[field] = value
    folder = _write(tmp_path / "bad", record)
    with pytest.raises(LabError) as info:
        data.load(folder)
    message = str(info.value)
    assert str(folder / "provenance.json") in message and expected in message and "\n" not in message


def test_missing_field_and_invalid_json(tmp_path):
    record = _good()
    del record["command"]
    with pytest.raises(LabError, match="field 'command' is missing; expected a string"):
        data.load(_write(tmp_path / "a", record))
    folder = tmp_path / "b"
    folder.mkdir()
    (folder / "provenance.json").write_text('{"kind": "kernels",')
    with pytest.raises(LabError, match=r"provenance.json: not valid JSON \(line 1"):
        data.load(folder)


def test_reference_kind_needs_a_source(tmp_path):
    record = _good()
    record["kind"] = "reference"
    with pytest.raises(LabError, match="field 'source' must name the publication"):
        data.load(_write(tmp_path / "r", record))


def test_jsonl_skips_only_a_truncated_last_line(tmp_path):
    folder = _write(tmp_path / "j", _good())
    (folder / "m.jsonl").write_text('{"a": 1}\n{"a": 2}\n{"a": ')
    assert data.load(folder).jsonl("m.jsonl") == [{"a": 1}, {"a": 2}]
    (folder / "m.jsonl").write_text('{"a": 1}\nnot json\n{"a": 3}\n')
    with pytest.raises(LabError, match="m.jsonl: line 2 is not valid JSON"):
        data.load(folder).jsonl("m.jsonl")


def test_csv_missing_column_is_named(tmp_path):
    folder = _write(tmp_path / "c", _good())
    (folder / "sweep.csv").write_text("arm,ttft_s\nX,1.0\n")
    with pytest.raises(LabError, match="sweep.csv: column 'backend' is missing"):
        data.load(folder).csv("sweep.csv", data.SWEEP_COLUMNS)


def test_append_jsonl_keeps_every_record(tmp_path):
    path = tmp_path / "x" / "m.jsonl"
    for i in range(3):
        store.append_jsonl(path, {"i": i})
    assert [json.loads(line)["i"] for line in path.read_text().splitlines()] == [0, 1, 2]


def test_load_sweeps_merges_every_sweep_with_gpu_column():
    sweeps = data.load_sweeps()
    a10g = sweeps[sweeps.gpu == "NVIDIA A10G"]
    assert len(a10g) == 16 and set(a10g.dataset) == {"reference/a10g-vllm0.11-qwen2.5-7b"}


# --- faults: one broken provenance.json must not hide the other datasets (issue 18) -----------------

@pytest.mark.parametrize("breakage, reason", [
    (lambda p: p.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff"), "not UTF-8 text"),
    (lambda p: p.mkdir(), "is a folder"),
    (lambda p: p.write_text('{"kind": "kernels",'), "not valid JSON"),
])
def test_a_broken_provenance_is_listed_and_the_rest_carry_on(tmp_path, capsys, breakage, reason):
    from lab.__main__ import main

    store.write_provenance(tmp_path / "local" / "good", _good())
    (tmp_path / "local" / "bad").mkdir(parents=True)
    breakage(tmp_path / "local" / "bad" / "provenance.json")
    found, broken = data.scan(root=tmp_path)
    assert [ds.path.name for ds in found] == ["good"] and [f.name for f, _ in broken] == ["bad"]
    assert reason in broken[0][1]
    assert [ds.path.name for ds in data.datasets(root=tmp_path)] == ["good"]    # what every explorer reads
    assert main(["datasets", "--root", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert "good" in captured.out and f"BROKEN {tmp_path / 'local' / 'bad'}" in captured.out and reason in captured.out
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err


def test_load_sweeps_skips_a_broken_dataset(tmp_path):
    folder = _write(tmp_path / "sweep", {**_good(), "kind": "vllm-sweep"})
    (folder / "sweep.csv").write_text("arm,backend,target_len,actual_len,ttft_s,prefill_ms_per_token,itl_ms\n"
                                      "A,A,8,8,0.1,12.5,30\n")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "provenance.json").write_bytes(b"\xff\xfe")
    assert list(data.load_sweeps(tmp_path)["dataset"]) == [str(folder)]
