"""Kernel-family census of a profiler trace: where did the GPU time go (attention / matmul / communication / other)?

Reads Chrome-trace JSON (``.json`` or ``.json.gz``, as written by torch.profiler and vLLM's
``/start_profile``) by streaming, so a trace larger than memory is fine. Each GPU kernel is put
in a family by two independent witnesses:

1. its **name**, through the ordered table :data:`NAME_RULES` (each rule has a reason), and
2. its **launcher**: the CPU-side op that launched it, found through the trace's correlation ids
   (kernel ``args.correlation`` = runtime ``cudaLaunchKernel`` ``args.correlation``; flow events
   ``ph: s/f, cat: ac2g`` when a kernel lacks the arg) and the CPU ops (``aten::mm``,
   ``vllm::unified_attention_with_output``, ...) open on the launching thread at that moment,
   matched against :data:`LAUNCHER_RULES`.

When they disagree, or neither is sure, the kernel is listed as *unconfident* so a reader can
audit the rules. Windows are split into engine steps (vLLM's ``execute_context_N(T)_generation_M(U)``
annotations) so a decode census can keep only single-token steps: ``--phase decode``.

    python -m lab census TRACE [TRACE...] [--json OUT] [--phase decode]
    python -m lab census --compare A B

The package: ``rules`` (families, name and launcher rules), ``reader`` (streaming trace reader),
``summary`` (the census and its printout), ``cli`` (this command). A synthetic trace writer and the
speed benchmark live in ``synthetic`` (``python -m lab census-synthetic``).
"""

from __future__ import annotations

from lab.measure.census.cli import add_arguments, main, print_rules
from lab.measure.census.reader import Step, Trace, iter_events
from lab.measure.census.rules import (
    FAMILIES,
    LAUNCHER_RULES,
    NAME_RULES,
    REFERENCE_WORDS,
    STEP_RE,
    Rule,
    classify_launcher,
    classify_name,
    decide,
    read_by_census,
    reference_family,
)
from lab.measure.census.summary import census, format_census, format_compare, verify_folder

__all__ = ["FAMILIES", "LAUNCHER_RULES", "NAME_RULES", "REFERENCE_WORDS", "STEP_RE", "Rule", "Step", "Trace",
           "add_arguments", "census", "classify_launcher", "classify_name", "decide", "format_census",
           "format_compare", "iter_events", "main", "print_rules", "read_by_census", "reference_family",
           "verify_folder"]
