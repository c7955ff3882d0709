"""The shape of a decoder-only transformer (Qwen2.5-7B by default): sizes, weight counts, FLOPs per token.

Read from a Hugging Face ``config.json`` when the repository has one (``data/models/<name>/config.json``),
otherwise from the published Qwen2.5-7B figures below. Only the shape matters here, never the weights.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from lab import REPO_ROOT, LabError
from lab.results.facts import Fact
from lab.results.quantities import Quantity
from lab.store import read_json

MODELS_DIR = REPO_ROOT / "data" / "models"
SHAPE_SOURCE = "lab.results.modelshape: Qwen2.5-7B config.json"


@dataclass(frozen=True)
class ModelShape:
    name: str
    hidden: int
    layers: int
    q_heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tie_embeddings: bool = False

    @property
    def q_dim(self) -> int:
        return self.q_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def linear_weights_per_layer(self) -> int:
        """Weights of the matmuls in one layer: Q, K, V, O projections and the gated MLP (gate, up, down)."""
        attention = self.hidden * self.q_dim + 2 * self.hidden * self.kv_dim + self.q_dim * self.hidden
        mlp = 3 * self.hidden * self.intermediate
        return attention + mlp

    @property
    def lm_head_weights(self) -> int:
        return self.hidden * self.vocab

    @property
    def parameters(self) -> int:
        """All matrix weights (embedding, layers, LM head); biases and norms are under 0.01% and left out."""
        embeddings = self.vocab * self.hidden
        head = 0 if self.tie_embeddings else self.lm_head_weights
        return embeddings + self.layers * self.linear_weights_per_layer + head

    def linear_flops_per_token(self) -> int:
        """FLOPs of every layer's matmuls for one token (2 per weight: a multiply and an add)."""
        return 2 * self.layers * self.linear_weights_per_layer

    def kv_bytes_per_token(self, bytes_per_element: int = 2) -> int:
        """KV-cache bytes one token adds across all layers."""
        return 2 * self.layers * self.kv_dim * bytes_per_element


#: Qwen2.5-7B (Qwen/Qwen2.5-7B-Instruct config.json).
QWEN25_7B = ModelShape(name="Qwen2.5-7B", hidden=3584, layers=28, q_heads=28, kv_heads=4, head_dim=128,
                       intermediate=18944, vocab=152064, tie_embeddings=False)


def from_hf_config(path: str | Path, name: str | None = None) -> ModelShape:
    """A ModelShape from a Hugging Face config.json (the fields every Llama/Qwen-style config has)."""
    path = Path(path)
    config = read_json(path)
    try:
        heads = int(config["num_attention_heads"])
        return ModelShape(
            name=name or config.get("_name_or_path") or path.parent.name,
            hidden=int(config["hidden_size"]), layers=int(config["num_hidden_layers"]), q_heads=heads,
            kv_heads=int(config.get("num_key_value_heads", heads)),
            head_dim=int(config.get("head_dim") or config["hidden_size"] // heads),
            intermediate=int(config["intermediate_size"]), vocab=int(config["vocab_size"]),
            tie_embeddings=bool(config.get("tie_word_embeddings", False)),
        )
    except KeyError as exc:
        raise LabError(f"{path}: field {exc.args[0]!r} is missing; expected a Hugging Face decoder config") from None


@functools.cache  # the shape is frozen; chapters ask for it many times
def kv_per_token() -> Fact:
    """Qwen2.5-7B's KV cache per token of context (K and V, every layer, bf16), in bytes, as every page quotes it."""
    return Fact(qwen25_7b().kv_bytes_per_token(), "lab.results.modelshape: Qwen2.5-7B config.json",
                quantity="qwen2.5-7b.kv_bytes_per_token", unit="B", method="2 × layers × KV heads × head size × 2 bytes")


#: Two byte counts of Qwen2.5-7B's bf16 weights, never to be swapped: what they occupy in memory (every matrix,
#: the embedding table included) and what one decode step streams from memory (every layer's matrices and the LM
#: head; of the embedding table a step reads only its tokens' rows). Both in decimal GB (10⁹ bytes), as the pages
#: state them and glue them under ``weights_gb`` and ``weights_streamed_gb``; the first happens to be close to the
#: second in GiB (15.2 GB = 14.2 GiB), one more reason to keep the two apart by name.
WEIGHTS_GB = Quantity("qwen2.5-7b.weights_gb", "Qwen2.5-7B's matrix weights in bf16, embedding table included "
                      "(biases and norms left out), in GB: what the weights occupy in memory", run=SHAPE_SOURCE)
STREAMED_WEIGHTS_GB = Quantity("qwen2.5-7b.streamed_weights_gb", "the bf16 weights one decode step reads from "
                               "memory, in GB: every layer's matrices and the LM head (of the embedding table only "
                               "the step's own token rows)", run=SHAPE_SOURCE)


@functools.cache
def weights_gb() -> Fact:
    """What Qwen2.5-7B's bf16 weights occupy, in GB (every matrix, embedding table included)."""
    return WEIGHTS_GB.fact(2 * qwen25_7b().parameters / 1e9)


@functools.cache
def streamed_weights_gb() -> Fact:
    """The weights one decode step streams, in GB: every layer's matrices and the LM head, bf16."""
    shape = qwen25_7b()
    return STREAMED_WEIGHTS_GB.fact(2 * (shape.layers * shape.linear_weights_per_layer + shape.lm_head_weights) / 1e9)


def qwen25_7b() -> ModelShape:
    """Qwen2.5-7B's shape: from data/models/qwen2.5-7b/config.json when present, else the built-in figures."""
    path = MODELS_DIR / "qwen2.5-7b" / "config.json"
    if path.exists():
        return from_hf_config(path, name="Qwen2.5-7B")
    return QWEN25_7B


@dataclass(frozen=True)
class LatentAttentionShape:
    """Multi-head latent attention as DeepSeek-V2 sets it (arXiv:2405.04434, section 3.1.2; DeepSeek-V3, arXiv:2412.19437,
    keeps it): ``heads`` query heads, a cached KV latent of ``latent_dim`` and a decoupled RoPE key of ``rope_dim``."""

    name: str
    heads: int
    latent_dim: int
    rope_dim: int


DEEPSEEK_V2_MLA = LatentAttentionShape("DeepSeek-V2", heads=128, latent_dim=512, rope_dim=64)
