"""Kernel families and the rules that put a GPU kernel in one: by its name, and by the CPU op that launched it.

Each rule carries its reason (``python -m lab census --rules`` prints them). :func:`decide` combines the two
witnesses; :func:`read_by_census` says which trace events the census reads at all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Kernel families of a census, in the order tables list them. ``communication``: collectives between GPUs
# (NCCL, vLLM's custom all-reduce); zero on one GPU. One table, shared with the readers of stored censuses.
from lab.measure.families import FAMILIES  # noqa: F401  (re-exported as lab.measure.census.FAMILIES)


@dataclass(frozen=True)
class Rule:
    """One classification rule: a regular expression over a name, the family it implies, and why."""

    key: str
    pattern: str
    family: str | None      # None: the rule knows what the kernel is but not its family (ask the launcher)
    strong: bool            # strong: the name alone settles it; weak: the launcher may overrule
    reason: str

    def __post_init__(self):
        object.__setattr__(self, "regex", re.compile(self.pattern))


#: Kernel-name rules, first match wins. Order matters: FA3 is a ``cutlass::device_kernel<flash::...>``,
#: so the attention rules come before the generic CUTLASS GEMM rule.
NAME_RULES: tuple[Rule, ...] = (
    Rule("fa2-splitkv-combine", r"flash_fwd_splitkv_combine_kernel", "attention", True,
         "FlashAttention-2 split-KV decode: the combine step that merges per-split partial softmax results"),
    Rule("fa2-splitkv", r"flash_fwd_splitkv_kernel", "attention", True,
         "FlashAttention-2 split-KV (FlashDecoding) kernel: KV length split across thread blocks"),
    Rule("fa3-combine", r"FlashAttnFwdCombine|flash_fwd_combine", "attention", True,
         "FlashAttention-3 combine kernel (runs only when FA3 chose to split the KV length)"),
    Rule("fa3", r"FlashAttnFwdSm90|FlashAttnFwdSm100|flash::enable_sm90", "attention", True,
         "FlashAttention-3 Hopper kernel; split-KV is a launch parameter, not a separate name"),
    Rule("lab-kernels", r"^(paged_prefill_kernel|hopper_paged_kernel|paged_split_kernel|combine_kernel)$", "attention",
         True, "the book's own kernels (lab.measure.attention) serving as vLLM's CUSTOM backend: paged varlen prefill "
         "(Triton's, or the Gluon kernel for Hopper), paged split-KV decode and its combine step"),
    Rule("fa2", r"flash_fwd_kernel|flash_fwd_|flash::flash_", "attention", True,
         "FlashAttention-2 forward kernel"),
    Rule("flash-helper", r"flash::|flash_attn", "attention", True,
         "FlashAttention helper kernel (e.g. FA3's prepare_varlen_num_blocks scheduler metadata)"),
    Rule("flex", r"flex_attention|flex_decoding", "attention", True,
         "FlexAttention kernel compiled by Inductor from the flex_attention template"),
    Rule("fmha", r"fmha|cutlassF|efficient_attention|mem_eff", "attention", True,
         "fused multi-head attention (xFormers / PyTorch memory-efficient SDPA)"),
    Rule("cudnn-sdpa", r"cudnn.*sdpa|sdpa.*cudnn|fprop_sdpa", "attention", True,
         "cuDNN scaled-dot-product attention"),
    Rule("paged-attention", r"paged_attention|single_query_cached_kv|unified_attention|kernel_unified_attention",
         "attention", True, "vLLM paged / unified (Triton) attention kernels"),
    Rule("triton-attn-reduce", r"reduce_segments", "attention", True,
         "vLLM TRITON_ATTN split-KV reduction (3-D unified attention)"),
    Rule("kv-cache-write", r"reshape_and_cache", "attention", True,
         "vLLM writes the new K/V into the paged cache inside the attention layer"),
    Rule("nccl", r"(?i)nccl", "communication", True,
         "NCCL collective between GPUs (e.g. ncclDevKernel_AllReduce_Sum_bf16_RING_LL under tensor parallelism)"),
    Rule("custom-all-reduce", r"cross_device_reduce_\d+stage|custom_all_reduce|all_reduce|allreduce", "communication",
         True, "vLLM's custom all-reduce over NVLink (cross_device_reduce_1stage / 2stage) or another all-reduce"),
    Rule("cublas-nvjet", r"^nvjet_", "matmul", True,
         "cuBLAS GEMM on Hopper/Blackwell (JIT-generated 'nvjet' kernels carry no 'gemm' in the name)"),
    Rule("cublas-xmma", r"xmma_gemm|xmma_.*gemm", "matmul", True, "cuBLAS GEMM (xmma)"),
    Rule("tensorop-gemm", r"s\d+gemm|gemm_|_gemm|Gemm|GEMM|gemmk|gemmSN", "matmul", True,
         "cuBLAS / CUTLASS tensor-core GEMM (e.g. ampere_bf16_s16816gemm, cutlass_80_tensorop_..._gemm)"),
    Rule("gemv", r"gemv|gemvx|gemvNSP|gemv2", "matmul", True, "cuBLAS matrix-vector product (batch-1 decode)"),
    Rule("splitk-reduce", r"splitKreduce", "matmul", True, "cuBLAS split-K reduction that finishes a GEMM"),
    Rule("cublas-helper", r"cublasLt::|cublas::|dot_kernel|reduce_1Block_kernel", "matmul", True,
         "cuBLAS / cuBLASLt helper kernels (epilogues, dot products) that belong to a matmul call"),
    Rule("cutlass-scaled-mm", r"cutlass_scaled_mm|scaled_mm|cutlass.*(mm|matmul)", "matmul", True,
         "CUTLASS (scaled) matmul"),
    Rule("inductor-mm-template", r"^triton_tem_fused_.*(mm|addmm|bmm)", "matmul", True,
         "Inductor Triton matmul template (mm/addmm/bmm in the template name)"),
    Rule("inductor-template", r"^triton_tem_fused_", None, False,
         "Inductor Triton template with no op in its name (e.g. triton_tem_fused_0): matmul or attention, "
         "only the launcher can tell"),
    Rule("inductor-fused-with-mm", r"^triton_(poi|red|per)_fused_.*(?:^|_)(mm|bmm|addmm|matmul)(?:_|\d|$)",
         "other", False,
         "Inductor pointwise/reduction kernel whose fused-op list names a matmul (a tiny decomposed mm or "
         "its epilogue): substring rules call it matmul; it is glue unless the launcher says otherwise"),
    Rule("inductor-fused", r"^triton_(poi|red|per)_fused", "other", True,
         "Inductor pointwise / reduction / persistent-reduction kernel (norms, activations, rotary, casts)"),
    Rule("vllm-layer-kernels", r"rms_norm|fused_add_rms_norm|rotary_embedding|act_and_mul|silu_and_mul|"
         r"topk|argmax|sampler|softmax_kernel|log_softmax", "other", True,
         "vLLM/PyTorch per-layer and sampling kernels (norm, rotary, activation, sampling)"),
    Rule("torch-elementwise", r"elementwise_kernel|vectorized_|unrolled_elementwise|reduce_kernel|"
         r"index_elementwise|CatArrayBatchedCopy|fill_kernel|copy_kernel|scatter|gather|indexSelect",
         "other", True, "PyTorch elementwise / reduction / copy kernels"),
    Rule("sampling", r"cub::|RadixSort|DeviceSelect|DeviceScan|multinomial|top_k|top_p|penalt|exponential_",
         "other", True, "sampling: sorting, scans and random draws over the vocabulary"),
    Rule("memory", r"^Memcpy|^Memset|memcpy|memset", "other", True, "memory copy / set"),
)

#: Launcher rules over the names of CPU ops open on the launching thread (innermost first).
LAUNCHER_RULES: tuple[Rule, ...] = (
    Rule("sdpa-op", r"^aten::_scaled_dot_product|^aten::scaled_dot_product|^aten::_flash_attention|"
         r"^aten::_efficient_attention|^aten::_cudnn_attention", "attention", True,
         "PyTorch scaled-dot-product attention op"),
    Rule("vllm-attention-op", r"^vllm::unified_attention|^vllm::unified_mla_attention|unified_attention_with_output",
         "attention", True, "vLLM's attention custom op (all backends run inside it)"),
    Rule("flash-attn-op", r"flash_attn|_vllm_fa[23]_C|vllm_flash_attn|flash_attn_varlen|_flash_attn_forward",
         "attention", True, "FlashAttention library entry point"),
    Rule("flex-op", r"flex_attention|FlexAttention", "attention", True, "FlexAttention higher-order op"),
    Rule("matmul-op", r"^aten::(mm|addmm|bmm|baddbmm|matmul|linear|_scaled_mm|addmv|mv|dot)$", "matmul", True,
         "PyTorch matmul op (also what Inductor's extern_kernels.mm calls)"),
    Rule("collective-op", r"^nccl:|^c10d::|^vllm::all_reduce|^_C_custom_ar::|all_reduce|all_gather|reduce_scatter",
         "communication", True, "collective op (torch.distributed / NCCL / vLLM's custom all-reduce)"),
    Rule("vllm-gemm-op", r"^_C::(cutlass_scaled_mm|gptq|awq|marlin|machete)|^vllm::.*(gemm|_mm|matmul)",
         "matmul", True, "vLLM quantized / custom GEMM op"),
)

#: Runtime calls that launch work on the GPU. cudaGraphLaunch replays a whole graph: its kernels keep
#: their names, but the CPU ops that recorded them are gone, so the launcher is unknown.
LAUNCH_RUNTIME = re.compile(r"LaunchKernel|cuLaunch|GraphLaunch|Memcpy|Memset|LaunchCooperative")
GRAPH_LAUNCH = "cudaGraphLaunch"
#: vLLM step annotation: execute_context_<reqs>(<tokens>)_generation_<reqs>(<tokens>)
STEP_RE = re.compile(r"execute_context_(\d+)\((\d+)\)_generation_(\d+)\((\d+)\)")
CPU_CATS = frozenset({"cpu_op", "user_annotation", "cpu_instant_event", "Trace"})
RUNTIME_CATS = frozenset({"cuda_runtime", "cuda_driver", "hip_runtime"})


def read_by_census(ev: dict) -> bool:
    """Whether ``Trace.read`` uses this event: what a trimmed trace must keep for the same census."""
    cat, name = ev.get("cat"), ev.get("name")
    if cat in ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "ac2g"):
        return True
    if cat in RUNTIME_CATS:
        return isinstance(name, str) and LAUNCH_RUNTIME.search(name) is not None
    if cat in CPU_CATS:
        return isinstance(name, str) and (name.startswith("execute_context_") or classify_launcher(name) is not None)
    return False


#: The reference study's substring rules (attention words first, then matmul words, else other), kept
#: only to show where they go wrong; the census itself never uses them.
REFERENCE_WORDS = {
    "attention": ("flash", "splitkv", "flex_attention", "fmha", "attention", "attn", "single_query", "paged"),
    "matmul": ("gemm", "cutlass", "matmul", "_mm", "wgmma", "s16816", "linear", "moe", "grouped"),
}


def reference_family(name: str) -> str:
    """The family the reference study's substring rules give a kernel name."""
    lowered = name.lower()
    for family, words in REFERENCE_WORDS.items():
        if any(w in lowered for w in words):
            return family
    return "other"


def classify_name(name: str) -> Rule | None:
    for rule in NAME_RULES:
        if rule.regex.search(name):
            return rule
    return None


def classify_launcher(op_name: str) -> Rule | None:
    for rule in LAUNCHER_RULES:
        if rule.regex.search(op_name):
            return rule
    return None


def decide(name_rule: Rule | None, launcher_rule: Rule | None, graph_replay: bool = False) -> tuple[str, bool, str]:
    """Combine the two witnesses into (family, confident, why). The decision table is the chapter's too."""
    if name_rule is not None and name_rule.family is not None and name_rule.strong:
        if launcher_rule is None or launcher_rule.family == name_rule.family:
            how = "name+launcher" if launcher_rule else "name"
            return name_rule.family, True, f"{how}: {name_rule.key}"
        return name_rule.family, False, (f"name says {name_rule.family} ({name_rule.key}), "
                                         f"launcher says {launcher_rule.family} ({launcher_rule.key})")
    if launcher_rule is not None:
        how = f"launcher: {launcher_rule.key}"
        return launcher_rule.family, True, how + (f" (name rule {name_rule.key} is weak)" if name_rule else "")
    where = "replayed from a CUDA graph, launcher unknown" if graph_replay else "no launching op in the trace"
    if name_rule is not None:
        family = name_rule.family or "other"
        return family, False, f"weak name rule {name_rule.key} and {where}"
    return "other", False, f"no name rule matches and {where}"

