"""Chapter 6, vLLM sweeps: every fact the chapter and its self-check state, its figures, tables and explorers.

    glue_all(ch06.facts())          # the one hidden cell (facts of ``sweeps`` and ``flex``, quantities in ``quantities``)
    ch06.rig_table(), ch06.prefill_figure(), ch06.fit_table(), ch06.decode_figure(), ch06.decomposition_tables(),
    ch06.counter_table(), ch06.fa2_table(), ch06.floor_table(), ch06.tensor_parallel_figure(),
    ch06.concurrency_explorer(), ch06.sweep_explorer()

The runs it reads, each once: the published A10G study (data/reference/a10g-vllm0.11-qwen2.5-7b), our H200 sweeps
and their profiler windows (data/h200/vllm0.26-qwen2.5-7b), the chunk-size sweep (-chunk2048), the two-GPU sweep
(data/h200x2/vllm0.26-qwen2.5-7b-tp2), the concurrency sweep (-concurrency), the Flex decomposition
(data/h200/flex-decomposition) and its counters (lab.results.flex_counters), the value study
(data/h200/value-dependence), the mask study (data/h200/flex-masks) and the prefill race of record
(lab.results.kernel_runs.RACE) for Flex against cuDNN on plain causal attention.

Glue names other pages take from here (the interview page, the course kit): the ``a10g_*`` and ``h200_*`` fit and
decode facts (``h200_flex_kv_rate``: vLLM's FLEX arm's KV read rate, the sweep's ITL slope; ``h200_fa_kv_rate``),
``flex_vs_cudnn_causal`` (Flex's speed over cuDNN's with is_causal=True, race of record) with
``flex_causal_ms`` / ``cudnn_causal_ms``, the ``flexdec_*``, ``flexctr_*`` and ``flexgap_*`` facts of the Flex
section, ``chunk_*``, ``fa2_*``, ``batch_*``, ``tp_*`` and ``itlres_*`` (how finely an ITL median resolves), and
what only those pages state of these runs (:mod:`lab.book.pages.ch06.later`: the sweeps' ends compared, FA3's
concurrency points with their floors, where decode turns KV-bound).
"""

from __future__ import annotations

import functools

from lab.book.facts import Fact
from lab.book.pages.ch06 import later
from lab.book.pages.ch06.flex import counter_facts, flex_arm_facts, flex_vs_cudnn_facts, window_mask_facts
from lab.book.pages.ch06.quantities import CAUSAL_N
from lab.book.pages.ch06.sweeps import (
    a10g_prefill_facts,
    batch_facts,
    chunk_facts,
    decode_facts,
    fa2_facts,
    floor_facts,
    h200_prefill_facts,
    itl_resolution_facts,
    setup_facts,
    tensor_parallel_facts,
    values_facts,
)
from lab.book.pages.ch06.tables import (
    concurrency_explorer,
    counter_table,
    decode_figure,
    decomposition_tables,
    fa2_table,
    fit_table,
    floor_table,
    prefill_figure,
    rig_table,
    sweep_explorer,
    tensor_parallel_figure,
)

__all__ = ["CAUSAL_N", "concurrency_explorer", "counter_facts", "counter_table", "decode_figure", "decomposition_tables",
           "fa2_table", "facts", "fit_table", "flex_arm_facts", "floor_table", "prefill_figure", "rig_table",
           "sweep_explorer", "tensor_parallel_figure", "values_facts"]


@functools.cache
def facts() -> dict[str, Fact]:
    """Every fact chapter 6 and its self-check state, by glue name."""
    return (setup_facts() | a10g_prefill_facts() | h200_prefill_facts() | decode_facts() | itl_resolution_facts()
            | flex_arm_facts() | flex_vs_cudnn_facts() | window_mask_facts() | values_facts() | chunk_facts() | fa2_facts() | floor_facts()
            | batch_facts() | tensor_parallel_facts() | counter_facts() | later.facts())
