"""Short device probes a GPU study runs before or beside its measurements: what imports, what works, what is warm.

    python -m lab probe imports     # vLLM, its FlashAttention 2/3 (vllm_flash_attn) and FlashAttention 4 import?
    python -m lab probe fa2-warm    # JIT-compile FA2's Hopper kernels once (the driver caches them) before a race
    python -m lab probe sdpa-fa4    # does torch's activate_flash_attention_impl("FA4") run with this flash-attn-4?

Each prints one line per thing it tried. ``sdpa-fa4`` prints ``FA4 ok <max abs error vs fp32>`` or
``FA4 FAILED <exception>`` (and the same for FA3), the lines :func:`lab.results.kernel_runs.sdpa_hook_probe`
reads back from the console (data/h200/device-logs/bandwidth-paged-race.txt). A probe that fails is a line
that says so, not a failed command: the study that ran it carries on.
"""

from __future__ import annotations

import importlib
import traceback

from lab import LabError, env
from lab.measure.candidates import candidate_fn
from lab.measure.flex_decomposition import random_inputs

#: what ``imports`` tries, in order: vLLM, the FlashAttention 2/3 it bundles, FlashAttention 4 (CuTeDSL)
IMPORTS = ("vllm", "vllm.vllm_flash_attn", "flash_attn.cute")


def imports(prefix: str = "[payload] ") -> int:
    """Import each of :data:`IMPORTS`; one line each, ok or FAILED with the reason."""
    for name in IMPORTS:
        try:
            importlib.import_module(name)
            print(f"{prefix}import {name}: ok", flush=True)
        except Exception as exc:   # a package that does not import here is the answer
            print(f"{prefix}import {name}: FAILED {type(exc).__name__}: {str(exc)[:200]}", flush=True)
    return 0


def fa2_warm() -> int:
    """Call FA2 once at a prefill and a decode shape, so the race after it times kernels, not the JIT."""
    import torch

    fn = candidate_fn("fa2", "prefill")
    for n_q, n in ((4096, 4096), (1, 4096)):
        q, k, v = random_inputs(1, 28, 4, n_q, n, 128, seed=1)
        fn(q, k, v, n_q > 1)
        torch.cuda.synchronize()
        print("fa2 warm", n_q, n, flush=True)
    return 0


def sdpa_fa4() -> int:
    """SDPA with each FlashAttention implementation torch can be handed, against fp32 SDPA."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import activate_flash_attention_impl

    q, k, v = (torch.randn(1, 8, 1024, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    reference = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True)
    for impl in ("FA4", "FA3"):
        try:
            activate_flash_attention_impl(impl)
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            print(impl, "ok", float((out - reference).abs().max()), flush=True)
        except Exception as exc:   # an implementation that does not run here is the answer
            print(impl, "FAILED", type(exc).__name__, str(exc)[:300], flush=True)
            traceback.print_exc(limit=3)
    return 0


PROBES = {"imports": imports, "fa2-warm": fa2_warm, "sdpa-fa4": sdpa_fa4}
NEEDS_GPU = ("fa2-warm", "sdpa-fa4")


def add_arguments(parser) -> None:
    parser.add_argument("probe", choices=PROBES, help="which probe: " + ", ".join(PROBES))


def main(args) -> int:
    if args.probe in NEEDS_GPU and not env.detect().has_gpu:
        raise LabError(f"no CUDA GPU here: `python -m lab probe {args.probe}` runs kernels; run it on a GPU machine")
    return PROBES[args.probe]()
