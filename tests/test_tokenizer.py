"""The synthetic tokenizer: every id is its own word, so text and ids round-trip exactly (CPU, offline)."""

from __future__ import annotations

import json
import shutil

import pytest

from lab import REPO_ROOT, LabError
from lab.measure.vllm import tokenizer as synthetic

pytest.importorskip("tokenizers")  # in requirements.txt; vLLM brings it on a GPU box
CONFIG = REPO_ROOT / "data" / "models" / "qwen2.5-7b-128k" / "config.json"


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    model = tmp_path_factory.mktemp("model")
    shutil.copy(CONFIG, model)
    synthetic.write(model)
    return model


def test_the_vocabulary_has_the_models_size_and_round_trips_every_id(written):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(written / "tokenizer" / "tokenizer.json"))
    assert tok.get_vocab_size() == json.loads(CONFIG.read_text())["vocab_size"] == 152064
    ids = list(range(0, 152064, 997)) + [152063, 0, 5, 5]
    text = tok.decode(ids)
    assert text == synthetic.text_of(ids) and tok.encode(text).ids == ids
    assert tok.encode("12 x 7").ids == [12, synthetic.UNKNOWN_ID, 7]   # a word that is no id


def test_streamed_decoding_gives_the_same_text(written):
    from tokenizers import Tokenizer
    from tokenizers.decoders import DecodeStream

    tok = Tokenizer.from_file(str(written / "tokenizer" / "tokenizer.json"))
    stream = DecodeStream(skip_special_tokens=True)
    ids = [3, 151999, 40, 0]
    assert "".join(stream.step(tok, i) or "" for i in ids) == synthetic.text_of(ids)


def test_transformers_autotokenizer_loads_it_offline(written, monkeypatch):
    import transformers  # installed by requirements.txt (vllm-tokenizer's files are what vLLM loads through it)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tok = transformers.AutoTokenizer.from_pretrained(str(written / "tokenizer"))
    ids = [0, 17, 4023, 152063]
    assert tok.vocab_size == 152064 and tok.num_special_tokens_to_add() == 0 and tok.all_special_ids == []
    assert tok.decode(ids) == "0 17 4023 152063" and tok(tok.decode(ids)).input_ids == ids


def test_it_refuses_to_overwrite_a_real_tokenizer_or_to_sit_beside_a_config(tmp_path):
    shutil.copy(CONFIG, tmp_path)
    (tmp_path / "tokenizer").mkdir()
    (tmp_path / "tokenizer" / "tokenizer.json").write_text('{"model": {"type": "BPE"}}')
    with pytest.raises(LabError, match="not the synthetic one"):
        synthetic.write(tmp_path)
    assert json.loads((tmp_path / "tokenizer" / "tokenizer.json").read_text())["model"]["type"] == "BPE"
    with pytest.raises(LabError, match="holds a config.json"):
        synthetic.write(tmp_path, tmp_path)
    (tmp_path / "config.json").write_text('{"vocab_size": "many"}')
    with pytest.raises(LabError, match="no positive integer 'vocab_size'"):
        synthetic.write(tmp_path, tmp_path / "elsewhere")
