"""The book's kernels as a vLLM 0.26 attention backend (``--attention-backend CUSTOM`` once the lab's plugin ran).

What a backend gives vLLM (vllm/v1/attention/backend.py of 0.26):

* a **backend class** (:class:`LabAttentionBackend`): what it supports (checked when the server starts, so a
  head size, dtype, KV-cache dtype or sliding window the kernels lack is refused there, not mid-request), the KV
  cache's shape and memory order, and its two other classes;
* a **metadata builder** (:class:`LabMetadataBuilder`): once per step it turns vLLM's common attention metadata
  (packed query starts, keys per sequence, block table, slot mapping) into what the kernels take. It declares
  which steps may be captured into a CUDA graph: decode steps (one new token per sequence), whose split count
  comes from the longest sequence the server allows rather than from the step (each sequence spreads its keys
  over those splits). It also asks vLLM to put a step's decoding sequences first (``reorder_batch_threshold = 1``,
  as vLLM's FlashInfer backend does) and counts them, so that a mixed step's decode rows go to the decode kernel;
* an **implementation** (:class:`LabAttentionImpl`): ``do_kv_cache_update`` writes the step's new keys and values
  into the paged cache with vLLM's own cache op (``reshape_and_cache_flash``, the one its FlashAttention backend
  uses), then ``forward`` runs :func:`lab.measure.attention.serving.server_step`.

The cache has the FlashAttention backend's layout: logical (blocks, kv_heads, block_size, 2 x head_dim), stored
block, token, head, dimension; K is the first half of the last axis, V the second. Block sizes 16 to 256 (powers
of two) fit the kernels' 64-key tiles.

``LAB_OURS_PREFILL_CONFIG`` (JSON, e.g. ``{"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 2}``) picks the
prefill kernel's launch setting, as ``python -m lab serving-race`` found fastest (``{"kernel": "gluon", "BLOCK_N": 128,
"STAGES": 2}`` picks the Hopper kernel of :mod:`lab.measure.attention.hopper_paged`); the default is
:data:`lab.measure.attention.serving.PREFILL_CONFIG`. ``LAB_OURS_SHADOW=PATH`` (an eager server only): every attention call also runs vLLM's FlashAttention 3 on the same
queries, cache and metadata and appends the largest difference, relative to the largest output, to PATH (JSON
lines) — the agreement check of :mod:`lab.measure.vllm.agreement`. ``LAB_OURS_PLANTED_BUG=1`` hands the kernels
every sequence one key short, to show that check failing. The builder warms the kernels when the server starts
(:func:`lab.measure.attention.serving.warm_up`); ``LAB_OURS_WARMUP=0`` leaves them to compile at the first step.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import ClassVar

import torch
from vllm import _custom_ops as vllm_ops
from vllm.config import VllmConfig
from vllm.logger import init_logger
from vllm.v1.attention.backend import (
    AttentionBackend,
    AttentionCGSupport,
    AttentionImpl,
    AttentionMetadataBuilder,
    AttentionType,
    CommonAttentionMetadata,
)
from vllm.v1.attention.backends.utils import split_decodes_and_prefills
from vllm.v1.kv_cache_interface import AttentionSpec

from lab.measure.attention.paged_prefill import HEAD_DIMS
from lab.measure.attention.serving import prefill_config_from_env, server_step, vllm_table_width, warm_up
from lab.measure.vllm.serverlog import WARMED_UP_LINE

# a child of vLLM's own logger, so the line lands in the server log (vLLM configures handlers for "vllm" only: this
# module's own name printed nothing in the run of 2026-12-06)
logger = init_logger("vllm.lab_attention")

NAME = "CUSTOM"  # the registry slot vLLM keeps for a third-party backend (AttentionBackendEnum.CUSTOM)
BLOCK_SIZES = (16, 32, 64, 128, 256)
INSTEAD = "use --attention-backend FLASH_ATTN instead"


@dataclass
class LabAttentionMetadata:
    num_actual_tokens: int
    max_query_len: int
    split_keys: int              # bound on the longest sequence's keys: sizes the decode kernel's splits
    query_start_loc: torch.Tensor
    seq_lens: torch.Tensor
    block_table: torch.Tensor
    max_seq_len: int
    num_decodes: int = 0         # the step's first sequences with one new token each (vLLM puts them first)


class LabMetadataBuilder(AttentionMetadataBuilder[LabAttentionMetadata]):
    _cudagraph_support: ClassVar[AttentionCGSupport] = AttentionCGSupport.UNIFORM_SINGLE_TOKEN_DECODE
    reorder_batch_threshold: ClassVar[int] = 1   # vLLM moves sequences with one new token to the front of a step

    def __init__(self, kv_cache_spec: AttentionSpec, layer_names: list[str], vllm_config: VllmConfig,
                 device: torch.device):
        super().__init__(kv_cache_spec, layer_names, vllm_config, device)
        self.max_model_len = vllm_config.model_config.max_model_len
        if os.environ.get("LAB_OURS_WARMUP", "1") != "0":
            _warm_up(kv_cache_spec, vllm_config, device)

    def build(self, common_prefix_len: int, common_attn_metadata: CommonAttentionMetadata,
              fast_build: bool = False) -> LabAttentionMetadata:
        m = common_attn_metadata
        num_decodes = split_decodes_and_prefills(m, decode_threshold=1)[0] if m.max_query_len > 1 else m.num_reqs
        # a decode step's grid is planned for the server's longest sequence, eager or captured alike: a captured
        # step replays at every length, and its warm-up (eager, just before) compiles the very same launch
        return LabAttentionMetadata(num_actual_tokens=m.num_actual_tokens, max_query_len=m.max_query_len,
                                    split_keys=self.max_model_len if m.max_query_len == 1 else m.max_seq_len,
                                    query_start_loc=m.query_start_loc, seq_lens=m.seq_lens,
                                    block_table=m.block_table_tensor, max_seq_len=m.max_seq_len,
                                    num_decodes=num_decodes)


def _warm_up(spec: AttentionSpec, vllm_config: VllmConfig, device: torch.device) -> None:
    """Compile the kernels' variants when the server starts (:func:`lab.measure.attention.serving.warm_up`), once per
    process and shape; a failure is logged and the kernels then compile at the first step instead."""
    model = vllm_config.model_config
    q_heads = model.get_num_attention_heads(vllm_config.parallel_config)
    width = vllm_table_width(model.max_model_len, spec.block_size)
    shape = (q_heads, spec.num_kv_heads, spec.head_size, spec.block_size, spec.dtype)
    key = (*shape, str(device), width)
    if key in _WARMED:
        return
    _WARMED.add(key)
    started = time.perf_counter()
    try:
        warm_up(*shape, device, table_width=width, prefill_config=prefill_config_from_env())
        torch.cuda.synchronize(device)
    except Exception as exc:  # a warm-up is worth a line in the log, never a server that does not start
        logger.warning("lab attention backend: warm-up failed (%s: %s); the kernels compile at the first step",
                       type(exc).__name__, exc)
        return
    logger.info(WARMED_UP_LINE, time.perf_counter() - started)

_WARMED: set[tuple] = set()   # the shapes this process has warmed up


class LabAttentionBackend(AttentionBackend):
    supported_dtypes: ClassVar[list[torch.dtype]] = [torch.float16, torch.bfloat16]
    supported_kv_cache_dtypes: ClassVar[list[str]] = ["auto", "float16", "bfloat16"]
    forward_includes_kv_cache_update: bool = False

    @staticmethod
    def get_name() -> str:
        return NAME

    @staticmethod
    def get_impl_cls() -> type[LabAttentionImpl]:
        return LabAttentionImpl

    @staticmethod
    def get_builder_cls() -> type[LabMetadataBuilder]:
        return LabMetadataBuilder

    @staticmethod
    def get_supported_kernel_block_sizes() -> list[int]:
        return list(BLOCK_SIZES)

    @classmethod
    def supports_block_size(cls, block_size: int | None) -> bool:
        return block_size is None or block_size in BLOCK_SIZES

    @classmethod
    def get_supported_head_sizes(cls) -> list[int]:
        return list(HEAD_DIMS)

    @classmethod
    def supports_attn_type(cls, attn_type: str) -> bool:
        return attn_type == AttentionType.DECODER

    @staticmethod
    def get_kv_cache_shape(num_blocks: int, block_size: int, num_kv_heads: int, head_size: int,
                           cache_dtype_str: str = "auto") -> tuple[int, ...]:
        return (num_blocks, num_kv_heads, block_size, 2 * head_size)

    @staticmethod
    def get_kv_cache_stride_order(include_num_layers_dimension: bool = False) -> tuple[int, ...]:
        # stored (blocks, block_size, kv_heads, 2 x head_dim): the layout the kernels read, one token's heads together
        return (1, 0, 3, 2, 4) if include_num_layers_dimension else (0, 2, 1, 3)

    @classmethod
    def validate_configuration(cls, head_size: int, dtype: torch.dtype, kv_cache_dtype, block_size, *args,
                               **kwargs) -> list[str]:
        # vLLM's reasons name the feature; each of ours also says what the kernels take and what to use instead
        reasons = super().validate_configuration(head_size, dtype, kv_cache_dtype, block_size, *args, **kwargs)
        detail = {"head_size not supported": f"head size {head_size} (the lab's kernels take "
                                             f"{', '.join(map(str, HEAD_DIMS))})",
                  "dtype not supported": f"dtype {dtype} (the lab's kernels take float16, bfloat16)",
                  "kv_cache_dtype not supported": f"KV-cache dtype {kv_cache_dtype} (the lab's kernels read the "
                                                  "model's dtype: --kv-cache-dtype auto)",
                  "block_size not supported": f"block size {block_size} (the lab's kernels take "
                                              f"{', '.join(map(str, BLOCK_SIZES))})"}
        return [f"{detail.get(r, r)}: {INSTEAD}" for r in reasons]


def _shadow_path() -> str | None:
    return os.environ.get("LAB_OURS_SHADOW") or None


class LabAttentionImpl(AttentionImpl[LabAttentionMetadata]):
    supports_dcp = False

    def __init__(self, num_heads: int, head_size: int, scale: float, num_kv_heads: int | None = None,
                 alibi_slopes: list[float] | None = None, sliding_window: int | None = None,
                 kv_cache_dtype: str = "auto", logits_soft_cap: float | None = None,
                 attn_type: str = AttentionType.DECODER, kv_sharing_target_layer_name: str | None = None,
                 **unsupported) -> None:
        refused = [name for name, value in (("ALiBi", alibi_slopes), ("a sliding window", sliding_window),
                                            ("a logits soft cap", logits_soft_cap)) if value]
        refused += [name for name, value in unsupported.items() if value not in (None, False, -1)]
        if refused:
            raise ValueError(f"the lab's kernels do not support {', '.join(refused)}: {INSTEAD}")
        self.num_heads, self.head_size, self.scale = num_heads, head_size, float(scale)
        self.num_kv_heads = num_kv_heads or num_heads
        self.kv_cache_dtype = kv_cache_dtype
        self.attn_type = attn_type
        self.kv_sharing_target_layer_name = kv_sharing_target_layer_name
        self.planted_bug = os.environ.get("LAB_OURS_PLANTED_BUG") == "1"
        self.shadow = _shadow_path()
        self.prefill_config = prefill_config_from_env()
        prefill = "Gluon (Hopper)" if (self.prefill_config or {}).get("kernel") == "gluon" else "Triton"
        logger.info_once("lab attention backend: the book's kernels serve every attention call "
                         "(%s paged varlen prefill %s, Triton paged split-KV decode)%s%s", prefill,
                         json.dumps(self.prefill_config) if self.prefill_config else "default",
                         "; shadowed by FlashAttention 3" if self.shadow else "",
                         "; PLANTED BUG: every sequence one key short" if self.planted_bug else "")

    def do_kv_cache_update(self, layer, key, value, kv_cache, slot_mapping) -> None:
        key_cache, value_cache = kv_cache.transpose(1, 2).split(self.head_size, dim=-1)
        vllm_ops.reshape_and_cache_flash(key, value, key_cache, value_cache, slot_mapping, self.kv_cache_dtype,
                                         layer._k_scale, layer._v_scale)

    def forward(self, layer, query, key, value, kv_cache, attn_metadata: LabAttentionMetadata, output,
                output_scale=None, output_block_scale=None) -> torch.Tensor:
        if output_scale is not None or output_block_scale is not None:
            raise NotImplementedError("the lab's kernels do not write quantized outputs")
        if attn_metadata is None:  # vLLM's profiling run
            return output.fill_(0)
        m = attn_metadata
        n = m.num_actual_tokens
        key_cache, value_cache = kv_cache.transpose(1, 2).split(self.head_size, dim=-1)
        seq_lens = m.seq_lens - 1 if self.planted_bug else m.seq_lens
        server_step(query[:n], key_cache, value_cache, output[:n], m.query_start_loc, seq_lens, m.block_table,
                    max_query_len=m.max_query_len, split_keys=m.split_keys, scale=self.scale,
                    num_decodes=m.num_decodes, prefill_config=self.prefill_config)
        if self.shadow and not torch.cuda.is_current_stream_capturing():
            self._compare_with_fa3(layer, query[:n], key_cache, value_cache, output[:n], m)
        return output

    def _compare_with_fa3(self, layer, query, key_cache, value_cache, ours, m: LabAttentionMetadata) -> None:
        from vllm.v1.attention.backends.fa_utils import flash_attn_varlen_func  # only the check needs FA3

        exact = torch.empty_like(ours)
        flash_attn_varlen_func(q=query, k=key_cache, v=value_cache, out=exact, cu_seqlens_q=m.query_start_loc,
                               max_seqlen_q=m.max_query_len, seqused_k=m.seq_lens, max_seqlen_k=m.max_seq_len,
                               softmax_scale=self.scale, causal=True, block_table=m.block_table, fa_version=3)
        rows = int(m.query_start_loc[-1])  # padded tokens of a step are not anyone's output
        error = (ours[:rows].float() - exact[:rows].float()).abs().max().item() if rows else 0.0
        scale = exact[:rows].float().abs().max().item() if rows else 0.0
        record = {"layer": getattr(layer, "layer_name", "?"), "tokens": rows, "sequences": int(m.seq_lens.shape[0]),
                  "max_query_len": m.max_query_len, "max_seq_len": m.max_seq_len, "max_abs_error": error,
                  "max_abs_output": scale, "finite": bool(torch.isfinite(ours[:rows]).all())}
        with open(self.shadow, "a") as log:
            log.write(json.dumps(record) + "\n")
