"""A synthetic tokenizer for a model served with random weights: every token id is its own word.

``vllm bench serve`` needs a tokenizer on the client (its random dataset draws token ids, decodes
them to text and counts tokens again), and the server must turn that text back into the same ids.
With ``--load-format dummy`` there is no real vocabulary to honour, so this module writes one of the
model's vocabulary size (``vocab_size`` in its ``config.json``) in which token ``i`` is the word
``str(i)``: the text ``"17 4023 99"`` is the ids ``[17, 4023, 99]`` and back, exactly, for any id.
It is a ``tokenizers`` WordLevel model with a whitespace pre-tokenizer and no special tokens, saved
as ``tokenizer.json`` + ``tokenizer_config.json`` in a folder ``tokenizer/`` beside the model's
``config.json``, which transformers' ``AutoTokenizer`` (and so vLLM, client and server, given
``--tokenizer <model>/tokenizer``) loads offline::

    python -m lab vllm-tokenizer --model data/models/qwen2.5-7b-128k

What it changes against a real tokenizer: the server now tokenizes prompts and detokenizes every
generated token (a server started with ``--skip-tokenizer-init`` does neither); splitting on
whitespace and a dictionary look-up are cheaper than byte-level BPE, so that CPU time is a floor.

Why a folder of its own: transformers 5 picks a tokenizer class from the ``model_type`` of a
``config.json`` in the same folder, and for ``qwen2`` it forces its own BPE class
(``MODELS_WITH_INCORRECT_HUB_TOKENIZER_CLASS`` in ``tokenization_auto.py``), which would rebuild this
vocabulary with another pre-tokenizer and decoder; without a config beside it, ``tokenizer_class``
is honoured.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from lab import LabError
from lab.cli import path_arg, text_arg
from lab.folders import dataset_lock
from lab.measure.vllm.sweep import resolve_model
from lab.store import read_json, write_atomic, write_json_atomic

#: Stands for any word that is not an id (only text this vocabulary did not write has one).
UNKNOWN_ID = 0
FILES = ("tokenizer.json", "tokenizer_config.json")
#: Where the tokenizer goes, inside the model folder.
SUBFOLDER = "tokenizer"


def model_vocab_size(model_dir: Path) -> int:
    """``vocab_size`` from a model folder's config.json (LabError naming the file otherwise)."""

    config = read_json(Path(model_dir) / "config.json")
    size = config.get("vocab_size") if isinstance(config, dict) else None
    if not isinstance(size, int) or size < 2:
        raise LabError(f"{model_dir}/config.json: no positive integer 'vocab_size'; is this a model folder?")
    return size


def build(vocab_size: int):
    """The ``tokenizers.Tokenizer`` in which id ``i`` is the word ``str(i)``."""
    try:
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    except ModuleNotFoundError:
        raise LabError("the `tokenizers` package is not installed: `pip install tokenizers` "
                       "(it comes with transformers and vLLM)") from None
    vocab = {str(i): i for i in range(vocab_size)}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token=str(UNKNOWN_ID)))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    # WordPiece's decoder joins words with single spaces (no word here starts with its "##" prefix)
    tokenizer.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    return tokenizer


def tokenizer_config(max_length: int) -> dict:
    """tokenizer_config.json: the fast-tokenizer class (never the model type's own BPE class) and no specials."""
    return {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": max_length,
            "clean_up_tokenization_spaces": False, "add_bos_token": False, "add_eos_token": False,
            "bos_token": None, "eos_token": None, "unk_token": None, "pad_token": None}


def write(model_dir: Path, out_dir: Path | None = None) -> list[Path]:
    """Write the two files into ``out_dir`` (default: ``<model>/tokenizer``); return their paths.

    Refuses to overwrite a tokenizer that is not this synthetic one (a real model's files stay).
    """

    model_dir = Path(model_dir)
    out_dir = Path(out_dir or model_dir / SUBFOLDER)
    if (out_dir / "config.json").exists():
        raise LabError(f"{out_dir}: holds a config.json, which would make transformers ignore this tokenizer; "
                       "choose a folder without one")
    vocab_size = model_vocab_size(model_dir)
    existing = out_dir / FILES[0]
    if existing.exists() and not is_synthetic(existing):
        raise LabError(f"{existing}: a tokenizer that is not the synthetic one is already there; "
                       "choose another --out folder")
    config = read_json(model_dir / "config.json")
    max_length = int(config.get("max_position_embeddings") or 1 << 20)
    tokenizer = build(vocab_size)
    # written by Python, not tokenizers' Rust side, so a full disk is an OSError the store names (one line)
    paths = [write_atomic(out_dir / FILES[0], lambda tmp: tmp.write_text(tokenizer.to_str(pretty=True), encoding="utf-8")),
             write_json_atomic(out_dir / FILES[1], tokenizer_config(max_length))]
    return paths


def is_synthetic(path: Path) -> bool:
    """Whether a tokenizer.json is this module's: a WordLevel model whose word for id 1 is "1"."""
    try:
        model = json.loads(Path(path).read_text(encoding="utf-8")).get("model", {})
    except (OSError, ValueError, RecursionError, AttributeError):
        return False
    return model.get("type") == "WordLevel" and model.get("vocab", {}).get("1") == 1


def prompt_budget(tokens: int, vocab_size: int) -> int:
    """The input tokens a server must allow for a text prompt of ``tokens`` words of this vocabulary.

    Before it tokenizes a text prompt, vLLM 0.26 refuses one of more characters than its input tokens
    (``--max-model-len`` less the tokens asked for) times its vocabulary's longest entry
    (``_text_len_check`` in vllm/renderers/params.py). A word here is an id's digits and a space: one
    character more than the longest entry counts for, so a prompt of the largest ids needs a budget
    1/digits larger than its length (1,024 words of a 152,064-word vocabulary: 1,195)."""
    digits = len(str(vocab_size - 1))
    return math.ceil(tokens * (digits + 1) / digits)


def text_of(ids: list[int]) -> str:
    """The text of a list of ids in this vocabulary (what the tokenizer decodes them to)."""
    return " ".join(str(int(i)) for i in ids)


def add_arguments(parser) -> None:
    parser.add_argument("--model", type=text_arg, default="data/models/qwen2.5-7b-128k",
                        help="model folder with config.json (default data/models/qwen2.5-7b-128k)")
    parser.add_argument("--out", type=path_arg, help="folder to write into (default: <model>/tokenizer)")


def main(args) -> int:
    model = Path(resolve_model(args.model))
    if not model.is_dir():
        raise LabError(f"--model {args.model}: a local model folder is needed, not a hub id")
    # no dataset's folder is a tokenizer's: one holding a provenance.json is refused before anything is written
    with dataset_lock(args.out or model / SUBFOLDER, kinds=("synthetic-tokenizer",)):
        paths = write(model, args.out)
    print(f"synthetic tokenizer of {model_vocab_size(model):,} words -> {', '.join(str(p) for p in paths)}")
    return 0
