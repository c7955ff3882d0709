"""One server step's attention with the book's kernels, as the vLLM backend (:mod:`lab.measure.vllm.backend`) runs it:
decode rows (one new token) to the paged split-KV kernel, prefill chunks to the paged varlen prefill kernel
(:func:`server_step`),
Triton's or, with a setting ``{"kernel": "gluon", ...}``, the Hopper one of :mod:`hopper_paged`; nothing is read back
to the host, so a decode step can be captured into a CUDA graph."""

from __future__ import annotations

import json
import os

import torch

from lab import LabError
from lab.measure.attention.hopper import hopper_refusal
from lab.measure.attention.hopper_paged import hopper_paged_prefill
from lab.measure.attention.kernel_inputs import interpreting
from lab.measure.attention.paged_prefill import paged_batch, paged_prefill
from lab.measure.attention.triton_paged_decode import paged_decode

#: Launch settings in a server, one per kernel (a server cannot time settings per step as the benchmarks do):
#: the prefill kernel's 64 x 64 tiles and the first setting of the decode kernel's search space.
PREFILL_CONFIG = {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3}
DECODE_CONFIG = {"BLOCK_N": 64, "num_warps": 4, "num_stages": 3, "programs_per_sm": 4, "split_each_sequence": True}
#: The Gluon kernel's setting that ran fastest in the serving race on an H100 (data/h100/serving-race-gluon)
GLUON_PREFILL_CONFIG = {"kernel": "gluon", "BLOCK_N": 128, "STAGES": 3}
INTERPRETER_PREFILL = {"BLOCK_M": 16, "BLOCK_N": 16}
INTERPRETER_DECODE = {"BLOCK_N": 16, "num_stages": 1, "programs_per_sm": 4, "split_each_sequence": True}


def prefill_config_from_env() -> dict | None:
    """The prefill setting a server was started with (``LAB_OURS_PREFILL_CONFIG``, JSON), or None: the default.
    Refused in one line (LabError) when it cannot run here (:func:`check_prefill_config`), so a server stops when it
    starts rather than at its first prompt."""
    text = os.environ.get("LAB_OURS_PREFILL_CONFIG") or "null"
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LabError(f"LAB_OURS_PREFILL_CONFIG is not JSON ({exc.msg}): {text[:80]!r}") from None
    check_prefill_config(config)
    return config


def check_prefill_config(config) -> None:
    """Refuse a prefill setting the kernels cannot run here: the Triton kernel's needs BLOCK_M and BLOCK_N, the Gluon
    kernel's ({"kernel": "gluon"}) BLOCK_N and STAGES and a Hopper GPU."""
    if config is None:
        return
    gluon = isinstance(config, dict) and config.get("kernel") == "gluon"
    needed = {"BLOCK_N", "STAGES"} if gluon else {"BLOCK_M", "BLOCK_N"}
    if not isinstance(config, dict) or needed - set(config):
        raise LabError(f"LAB_OURS_PREFILL_CONFIG {json.dumps(config)} needs {', '.join(sorted(needed))}: e.g. "
                       f"{json.dumps(PREFILL_CONFIG)}, or {json.dumps(GLUON_PREFILL_CONFIG)} on a Hopper GPU")
    if gluon and (why := hopper_refusal()):
        raise LabError(f"LAB_OURS_PREFILL_CONFIG picks the Gluon prefill kernel, which {why}: here use a "
                       f"Triton setting such as {json.dumps(PREFILL_CONFIG)}, or leave it unset")


def server_step(query, key_cache, value_cache, out, query_start_loc, seq_lens, block_table, *, max_query_len: int,
                split_keys: int, scale: float, num_decodes: int = 0, prefill_config: dict | None = None,
                decode_config: dict | None = None):
    """Attention of one engine step into ``out`` (the packed queries' shape, (tokens, q_heads, head_dim)).

    ``max_query_len`` is the longest sequence's new tokens (1: a decode step); ``split_keys`` bounds the longest
    sequence's keys and sizes the decode kernel's splits. In a mixed step the first ``num_decodes`` sequences have one
    new token each (vLLM puts them first for a backend that asks, :mod:`lab.measure.vllm.backend`): they go to the
    decode kernel, which packs a KV head's query heads into one tile, and only the rest to the prefill kernel, whose
    tiles hold one query head's rows. Sequences with no keys (padding rows of a captured graph) get zeros. Returns
    ``out``.
    """
    if max_query_len < 1:
        raise LabError(f"a step has at least one new token per sequence; got max_query_len {max_query_len}")
    if max_query_len == 1:
        num_decodes = seq_lens.shape[0]
    if num_decodes:
        config = decode_config or (INTERPRETER_DECODE if interpreting() else DECODE_CONFIG)
        paged_decode(query[:num_decodes].unsqueeze(2), key_cache, value_cache, block_table[:num_decodes],
                     seq_lens[:num_decodes], scale, config=config, max_seq_len=split_keys,
                     out=out[:num_decodes].unsqueeze(2))
    if max_query_len == 1:
        return out
    # the prefill chunks: their own rows, starts counted from their first token
    query, rows = query[num_decodes:], out[num_decodes:]
    seq_lens, block_table = seq_lens[num_decodes:], block_table[num_decodes:]
    if num_decodes:  # less the first chunk's start, read on the device: no row count is taken on trust
        query_start_loc = query_start_loc[num_decodes:] - query_start_loc[num_decodes]
    config = prefill_config or (INTERPRETER_PREFILL if interpreting() else PREFILL_CONFIG)
    if config.get("kernel") == "gluon":
        hopper_paged_prefill(query, key_cache, value_cache, query_start_loc, seq_lens, block_table, scale,
                             launch=(config["BLOCK_N"], config["STAGES"]), max_seqlen_q=max_query_len, out=rows)
    else:
        paged_prefill(query, key_cache, value_cache, query_start_loc, seq_lens, block_table, scale, config=config,
                      max_seqlen_q=max_query_len, out=rows)
    return out


def vllm_table_width(max_model_len: int, block_size: int) -> int:
    """The row width of vLLM 0.26's block table: blocks for the longest sequence, rounded up to a multiple of
    128 / block_size (``MultiGroupBlockTable`` in vllm/v1/worker/block_table.py)."""
    blocks = -(-max_model_len // block_size)
    per = 128 // block_size if block_size <= 128 else 1
    return -(-blocks // per) * per


#: The steps a server warms its kernels on (new tokens and cached prefix per sequence, leading decodes): a prompt's
#: first chunk beside a later one, then the same behind two decoding sequences.
WARM_UP_STEPS = (([100, 30], [0, 50], 0), ([1, 1, 100, 30], [40, 60, 0, 50], 2))


def warm_up(q_heads: int, kv_heads: int, head_dim: int, block_size: int, dtype, device, *, table_width: int,
            prefill_config: dict | None = None) -> None:
    """Run :func:`server_step` on two small steps (:data:`WARM_UP_STEPS`) so that Triton compiles, or loads from
    its cache, the kernels' variants before the server's first request rather than while a burst of prompts waits.
    vLLM warms the kernels it knows (``kernel_warmup`` in vllm/model_executor/warmup/kernel_warmup.py); a backend's
    own kernels run before traffic only in its warm-up steps and graph captures (in 0.26's V2 runner, ``warmup_kernels``:
    2-token prompts, then a decode step), whose shapes may miss a variant the server needs.
    ``table_width``: the block table's row width in the server, since Triton specializes on that stride."""
    for q_lens, prefixes, decodes in WARM_UP_STEPS:
        q, k_cache, v_cache, cu, seq_lens, table = paged_batch(q_lens, prefixes, q_heads, kv_heads, head_dim,
                                                               block_size, dtype, device)
        table = torch.nn.functional.pad(table, (0, table_width - table.shape[1]))
        server_step(q, k_cache, v_cache, torch.empty_like(q), cu, seq_lens, table, max_query_len=max(q_lens),
                    split_keys=max(p + n for p, n in zip(prefixes, q_lens, strict=True)), scale=head_dim ** -0.5,
                    num_decodes=decodes, prefill_config=prefill_config)
