"""Kernel-family census of a profiler trace: where did the GPU time go (attention / matmul / other)?

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
    python -m lab census --bench-synthetic 500
"""

from __future__ import annotations

import gzip
import json
import os
import re
import sys
import time
import zlib
from array import array
from dataclasses import dataclass
from pathlib import Path

from lab import LabError

FAMILIES = ("attention", "matmul", "other")


# --- rules -----------------------------------------------------------------------------------------

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
    Rule("nccl", r"^nccl|ncclDevKernel|cross_device_reduce|all_reduce", "other", True, "collective communication"),
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
    Rule("vllm-gemm-op", r"^_C::(cutlass_scaled_mm|gptq|awq|marlin|machete)|^vllm::.*(gemm|_mm|matmul)",
         "matmul", True, "vLLM quantized / custom GEMM op"),
)

#: Runtime calls that launch work on the GPU. cudaGraphLaunch replays a whole graph: its kernels keep
#: their names, but the CPU ops that recorded them are gone, so the launcher is unknown.
_LAUNCH_RUNTIME = re.compile(r"LaunchKernel|cuLaunch|GraphLaunch|Memcpy|Memset|LaunchCooperative")
_GRAPH_LAUNCH = "cudaGraphLaunch"
#: vLLM step annotation: execute_context_<reqs>(<tokens>)_generation_<reqs>(<tokens>)
STEP_RE = re.compile(r"execute_context_(\d+)\((\d+)\)_generation_(\d+)\((\d+)\)")
_CPU_CATS = frozenset({"cpu_op", "user_annotation", "cpu_instant_event", "Trace"})
_RUNTIME_CATS = frozenset({"cuda_runtime", "cuda_driver", "hip_runtime"})


def read_by_census(ev: dict) -> bool:
    """Whether ``Trace.read`` uses this event: what a trimmed trace must keep for the same census."""
    cat, name = ev.get("cat"), ev.get("name")
    if cat in ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "ac2g"):
        return True
    if cat in _RUNTIME_CATS:
        return isinstance(name, str) and _LAUNCH_RUNTIME.search(name) is not None
    if cat in _CPU_CATS:
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


# --- streaming reader ------------------------------------------------------------------------------

def _open(path: Path):
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        raise LabError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise LabError(f"{path}: is a folder; pass the trace file inside it") from None
    magic = fh.read(2)
    fh.seek(0)
    if magic == b"\x1f\x8b":
        fh.close()
        return gzip.open(path, "rb")  # owns its file, so closing it closes the file too
    return fh


def _backend():
    import ijson

    try:
        return ijson.get_backend("yajl2_c")   # C parser: ~2x faster than the Python one
    except Exception:  # noqa: BLE001 - any failure to load the C backend means "use the default"
        return ijson


def _first_char(path: Path) -> bytes:
    with _open(path) as fh:
        try:
            head = fh.read(4096)
        except (OSError, EOFError, zlib.error) as exc:
            raise LabError(f"{path}: not a readable gzip file ({exc})") from None
    stripped = head.lstrip()
    if not stripped:
        raise LabError(f"{path}: the file is empty")
    return stripped[:1]


def iter_events(path: Path):
    """Yield trace events one at a time (object format ``{"traceEvents": [...]}`` or a bare array)."""
    path = Path(path)
    first = _first_char(path)
    if first not in (b"{", b"["):
        raise LabError(f"{path}: not JSON (starts with {first!r}); expected a Chrome trace (.json or .json.gz)")
    prefix = "traceEvents.item" if first == b"{" else "item"
    backend = _backend()
    import ijson

    with _open(path) as fh:
        try:
            for event in backend.items(fh, prefix, use_float=True):
                if isinstance(event, dict):
                    yield event
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            raise LabError(f"{path}: truncated or corrupt gzip ({exc or 'unexpected end of file'})") from None
        except ijson.common.JSONError as exc:       # incomplete or malformed JSON
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else "unexpected end of data"
            raise LabError(f"{path}: not valid JSON or truncated ({msg[:120]})") from None
        except OSError as exc:
            raise LabError(f"{path}: cannot read ({exc})") from None


def _top_level_keys(path: Path, limit: int = 8) -> list[str]:
    """The first few top-level keys of a JSON object (to describe a file from another tool)."""
    keys = []
    with _open(path) as fh:
        try:
            for prefix, event, value in _backend().parse(fh):
                if event == "map_key" and prefix == "":
                    keys.append(value)
                    if len(keys) >= limit:
                        break
        except Exception:  # noqa: BLE001 - only used to word an error message
            pass
    return keys


# --- trace model -----------------------------------------------------------------------------------

class _Names:
    """Intern strings as small ints so millions of events cost arrays, not objects."""

    def __init__(self):
        self.ids: dict[str, int] = {}
        self.names: list[str] = []

    def __call__(self, name: str) -> int:
        i = self.ids.get(name)
        if i is None:
            i = self.ids[name] = len(self.names)
            self.names.append(name)
        return i


@dataclass
class Step:
    start_us: float
    end_us: float
    context_reqs: int
    context_tokens: int
    generation_reqs: int
    generation_tokens: int

    @property
    def phase(self) -> str:
        if self.context_reqs and self.generation_reqs:
            return "mixed"
        if self.context_reqs:
            return "prefill"
        if self.generation_reqs and self.generation_tokens == self.generation_reqs:
            return "decode"
        return "generation" if self.generation_reqs else "empty"


class Trace:
    """The parts of one trace the census needs, held in compact arrays (not one object per event)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.names = _Names()
        self.threads: dict = {}
        # kernels: start, duration, name id, correlation id (-1 when absent)
        self.k_ts, self.k_dur, self.k_name, self.k_corr = array("d"), array("d"), array("q"), array("q")
        # runtime launches: correlation id, thread, start, runtime-call name id
        self.l_corr, self.l_tid, self.l_ts, self.l_name = array("q"), array("q"), array("d"), array("q")
        # CPU ops that carry a launcher verdict: thread, start, end, name id
        self.o_tid, self.o_ts, self.o_end, self.o_name = array("q"), array("d"), array("d"), array("q")
        # flow events (ac2g): start side (id, thread, ts) and finish side (id, ts of the kernel)
        self.fs_id, self.fs_tid, self.fs_ts = array("q"), array("q"), array("d")
        self.fe_id, self.fe_ts = array("q"), array("d")
        self.steps: list[Step] = []
        self.gpu_steps: list[Step] = []
        self.memcpy_us = 0.0
        self.n_events = 0
        self._launcher_cache: dict[str, Rule | None] = {}

    def _tid(self, ev) -> int:
        key = (ev.get("pid"), ev.get("tid"))
        tid = self.threads.get(key)
        if tid is None:
            tid = self.threads[key] = len(self.threads)
        return tid

    def _verdict(self, name: str) -> Rule | None:
        cache = self._launcher_cache
        if name not in cache:
            cache[name] = classify_launcher(name)
        return cache[name]

    def read(self, progress: bool = False) -> Trace:
        names, verdict = self.names, self._verdict
        kts, kdur, kname, kcorr = self.k_ts, self.k_dur, self.k_name, self.k_corr
        n = 0
        for ev in iter_events(self.path):
            n += 1
            cat = ev.get("cat")
            if cat == "python_function":   # the most common event when with_stack is on; never needed
                continue
            if cat == "kernel":
                if ev.get("ph") != "X":
                    continue
                args = ev.get("args") or {}
                corr = args.get("correlation", args.get("External id"))
                kts.append(float(ev.get("ts", 0.0)))
                kdur.append(float(ev.get("dur", 0.0)))
                kname.append(names(str(ev.get("name", "?"))))
                kcorr.append(int(corr) if isinstance(corr, (int, float)) else -1)
            elif cat in _CPU_CATS:
                name = ev.get("name")
                if not isinstance(name, str) or ev.get("ph") != "X":
                    continue
                if name.startswith("execute_context_"):
                    m = STEP_RE.match(name)
                    if m:
                        ts = float(ev.get("ts", 0.0))
                        self.steps.append(Step(ts, ts + float(ev.get("dur", 0.0)), *map(int, m.groups())))
                elif verdict(name) is not None:
                    ts = float(ev.get("ts", 0.0))
                    self.o_tid.append(self._tid(ev))
                    self.o_ts.append(ts)
                    self.o_end.append(ts + float(ev.get("dur", 0.0)))
                    self.o_name.append(names(name))
            elif cat in _RUNTIME_CATS:
                name = ev.get("name", "")
                corr = (ev.get("args") or {}).get("correlation")
                if isinstance(corr, (int, float)) and _LAUNCH_RUNTIME.search(name):
                    self.l_corr.append(int(corr))
                    self.l_tid.append(self._tid(ev))
                    self.l_ts.append(float(ev.get("ts", 0.0)))
                    self.l_name.append(names(name))
            elif cat == "ac2g":
                ph, fid = ev.get("ph"), ev.get("id")
                if isinstance(fid, (int, float)):
                    if ph == "s":
                        self.fs_id.append(int(fid))
                        self.fs_tid.append(self._tid(ev))
                        self.fs_ts.append(float(ev.get("ts", 0.0)))
                    elif ph == "f":
                        self.fe_id.append(int(fid))
                        self.fe_ts.append(float(ev.get("ts", 0.0)))
            elif cat == "gpu_user_annotation":
                name = ev.get("name")
                m = STEP_RE.match(name) if isinstance(name, str) else None
                if m:
                    ts = float(ev.get("ts", 0.0))
                    self.gpu_steps.append(Step(ts, ts + float(ev.get("dur", 0.0)), *map(int, m.groups())))
            elif cat in ("gpu_memcpy", "gpu_memset"):
                self.memcpy_us += float(ev.get("dur", 0.0))
            if progress and n % 500_000 == 0:
                print(f"\r{self.path.name}: {n:,} events, {len(kts):,} kernels", end="", file=sys.stderr)
        if progress and n >= 500_000:
            print(file=sys.stderr)
        self.n_events = n
        if not len(kts):
            if n == 0:
                keys = _top_level_keys(self.path) if _first_char(self.path) == b"{" else []
                if "traceEvents" not in keys:
                    shown = ", ".join(map(str, keys)) or "none"
                    raise LabError(f"{self.path}: not a Chrome trace from torch.profiler (no 'traceEvents' array; "
                                   f"top-level keys: {shown})")
                raise LabError(f"{self.path}: the trace has no events")
            raise LabError(f"{self.path}: {n:,} events but no GPU kernel events (cat 'kernel', ph 'X'); "
                           "a CPU-only trace (e.g. vLLM's front-end process)? Use the engine/worker trace")
        self.steps.sort(key=lambda s: s.start_us)
        self.gpu_steps.sort(key=lambda s: s.start_us)
        return self

    def launches(self):
        """Per kernel: (thread, launch ts, runtime name id), -1 / nan where the trace has no link.

        Joins kernel correlation ids to runtime launches; falls back to flow events (a kernel with no
        correlation arg is matched to the flow that finishes at its start time).
        """
        import numpy as np

        n = len(self.k_ts)
        tid = np.full(n, -1, dtype=np.int64)
        ts = np.full(n, np.nan)
        rt = np.full(n, -1, dtype=np.int64)
        kcorr = np.frombuffer(self.k_corr, dtype=np.int64).copy()
        if len(self.fe_id) and (kcorr < 0).any():
            fe_ts = np.frombuffer(self.fe_ts, dtype=np.float64)
            fe_id = np.frombuffer(self.fe_id, dtype=np.int64)
            order = np.argsort(fe_ts, kind="stable")
            k_ts = np.frombuffer(self.k_ts, dtype=np.float64)
            missing = np.nonzero(kcorr < 0)[0]
            pos = np.searchsorted(fe_ts[order], k_ts[missing])
            ok = pos < len(order)
            ok[ok] &= fe_ts[order][pos[ok]] == k_ts[missing][ok]
            kcorr[missing[ok]] = fe_id[order][pos[ok]]

        def join(keys, key_tid, key_ts, key_name):
            keys = np.frombuffer(keys, dtype=np.int64)
            if not len(keys):
                return
            order = np.argsort(keys, kind="stable")
            sorted_keys = keys[order]
            todo = np.nonzero((tid < 0) & (kcorr >= 0))[0]
            pos = np.searchsorted(sorted_keys, kcorr[todo])
            ok = pos < len(sorted_keys)
            ok[ok] &= sorted_keys[pos[ok]] == kcorr[todo][ok]
            src = order[pos[ok]]
            hit = todo[ok]
            tid[hit] = np.frombuffer(key_tid, dtype=np.int64)[src]
            ts[hit] = np.frombuffer(key_ts, dtype=np.float64)[src]
            if key_name is not None:
                rt[hit] = np.frombuffer(key_name, dtype=np.int64)[src]

        join(self.l_corr, self.l_tid, self.l_ts, self.l_name)
        join(self.fs_id, self.fs_tid, self.fs_ts, None)
        return tid, ts, rt

    def launchers(self, tid, ts):
        """Per kernel: name id of the innermost CPU op with a verdict open at its launch, else -1."""
        import numpy as np

        out = np.full(len(tid), -1, dtype=np.int64)
        o_tid = np.frombuffer(self.o_tid, dtype=np.int64)
        o_ts = np.frombuffer(self.o_ts, dtype=np.float64)
        o_end = np.frombuffer(self.o_end, dtype=np.float64)
        o_name = np.frombuffer(self.o_name, dtype=np.int64)
        for thread in np.unique(tid[tid >= 0]):
            sel = np.nonzero(o_tid == thread)[0]
            if not len(sel):
                continue
            order = sel[np.lexsort((-o_end[sel], o_ts[sel]))]   # by start; outer (longer) first on ties
            starts, ends, op_names = o_ts[order].tolist(), o_end[order].tolist(), o_name[order].tolist()
            ks = np.nonzero(tid == thread)[0]
            ks = ks[np.argsort(ts[ks], kind="stable")]
            stack: list[tuple[float, int]] = []
            j, m = 0, len(starts)
            for k, t in zip(ks.tolist(), ts[ks].tolist(), strict=False):
                while j < m and starts[j] <= t:
                    while stack and stack[-1][0] < starts[j]:
                        stack.pop()
                    stack.append((ends[j], op_names[j]))
                    j += 1
                while stack and stack[-1][0] < t:
                    stack.pop()
                if stack:
                    out[k] = stack[-1][1]
        return out


# --- census ----------------------------------------------------------------------------------------

def _short(name: str, width: int = 90) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def _signature(attn: dict[str, dict]) -> dict:
    """Describe how attention ran: split-KV with a combine kernel, or one kernel per layer."""
    names = list(attn)

    def has(pattern: str) -> bool:
        return any(re.search(pattern, n) for n in names)

    if has(r"flash_fwd_splitkv_kernel"):
        label = "FlashAttention-2 split-KV: flash_fwd_splitkv_kernel" + (
            " + flash_fwd_splitkv_combine_kernel" if has("splitkv_combine") else " (no combine launched)")
    elif has(r"FlashAttnFwdSm90|FlashAttnFwdSm100|flash::enable_sm90"):
        label = ("FlashAttention-3 with split-KV (main kernel + FlashAttnFwdCombine)" if has("Combine|combine")
                 else "FlashAttention-3, one kernel per layer (no split combine launched)")
    elif has(r"flex_decoding"):
        label = "FlexAttention decoding template (split-KV inside the compiled kernel)"
    elif has(r"flex_attention|^triton_tem_fused"):
        label = "one compiled Triton kernel per layer (FlexAttention), no split-KV combine"
    elif has(r"flash_fwd_kernel|flash_fwd_"):
        label = "FlashAttention-2, one kernel per layer"
    elif has(r"unified_attention"):
        label = "vLLM Triton unified attention" + (" with split-KV reduce" if has("reduce_segments") else "")
    elif names:
        label = "other attention kernels"
    else:
        label = "no attention kernels in the window"
    main = sorted(((v["ms"], k) for k, v in attn.items() if not re.search("reshape_and_cache", k)), reverse=True)
    return {"label": label, "kernels": [k for _, k in main]}


def _assign_steps(steps: list[Step], times):
    """Index of the step whose [start, end] holds each time, or -1."""
    import numpy as np

    idx = np.full(len(times), -1, dtype=np.int64)
    if not steps:
        return idx
    starts = np.array([s.start_us for s in steps])
    ends = np.array([s.end_us for s in steps])
    valid = ~np.isnan(times)
    pos = np.searchsorted(starts, times[valid], side="right") - 1
    inside = (pos >= 0) & (times[valid] <= ends[np.maximum(pos, 0)])
    idx[np.nonzero(valid)[0][inside]] = pos[inside]
    return idx


def census(path, phase: str = "all", top: int = 10, progress: bool = False) -> dict:
    """Read one trace and return its census (a JSON-ready dict)."""
    import numpy as np

    t0 = time.perf_counter()
    path = Path(path)
    trace = Trace(path).read(progress=progress)
    names = trace.names.names
    tid, launch_ts, rt = trace.launches()
    op = trace.launchers(tid, launch_ts)
    k_ts = np.frombuffer(trace.k_ts, dtype=np.float64)
    k_dur = np.frombuffer(trace.k_dur, dtype=np.float64)
    k_name = np.frombuffer(trace.k_name, dtype=np.int64)

    # Steps: CPU annotations hold the launches of a step; GPU annotations hold its kernels.
    steps = trace.steps or trace.gpu_steps
    step_idx = (_assign_steps(trace.steps, launch_ts) if trace.steps
                else _assign_steps(trace.gpu_steps, k_ts) if trace.gpu_steps else np.full(len(k_ts), -1))
    counts = {p: 0 for p in ("prefill", "decode", "mixed", "generation", "empty")}
    for s in steps:
        counts[s.phase] += 1
    # GPU time per step phase over the whole window: how much of a "decode" window is prefill.
    phase_names = [s.phase for s in steps] + ["outside steps"]
    phase_ms: dict[str, float] = {}
    if steps:
        per_step = np.bincount(np.where(step_idx < 0, len(steps), step_idx), weights=k_dur,
                               minlength=len(steps) + 1) / 1000.0
        for p, m in zip(phase_names, per_step.tolist(), strict=True):
            phase_ms[p] = phase_ms.get(p, 0.0) + m
    keep = np.ones(len(k_ts), dtype=bool)
    kept_steps = len(steps)
    if phase != "all":
        if not steps:
            raise LabError(f"{path}: --phase {phase} needs vLLM step annotations (execute_context_..."
                           "_generation_...), and this trace has none")
        phase_ok = np.array([s.phase == phase for s in steps] + [False])
        keep = phase_ok[step_idx]          # -1 (outside every step) picks the trailing False
        kept_steps = int(sum(s.phase == phase for s in steps))
        if not keep.any():
            raise LabError(f"{path}: no kernels in {phase} steps ({len(steps)} steps: "
                           + ", ".join(f"{v} {k}" for k, v in counts.items() if v) + ")")

    # Classify each distinct (kernel name, launcher op, graph replay) once, then aggregate with numpy.
    graph_ids = np.array([i for i, nm in enumerate(names) if _GRAPH_LAUNCH in nm] or [-2])
    graph = np.isin(rt, graph_ids)
    combo = np.stack([k_name, op, graph.astype(np.int64)], axis=1)[keep]
    dur = k_dur[keep] / 1000.0
    uniq, inverse = np.unique(combo, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    ms = np.bincount(inverse, weights=dur, minlength=len(uniq))
    cnt = np.bincount(inverse, minlength=len(uniq))
    families = {f: {"ms": 0.0, "count": 0} for f in FAMILIES}
    kernels: dict[str, dict] = {}
    unconfident: dict[tuple, dict] = {}
    for (nid, op_id, g), m, c in zip(uniq.tolist(), ms.tolist(), cnt.tolist(), strict=False):
        name = names[nid]
        op_name = names[op_id] if op_id >= 0 else None
        family, confident, why = decide(classify_name(name), classify_launcher(op_name) if op_name else None,
                                        bool(g))
        families[family]["ms"] += m
        families[family]["count"] += c
        k = kernels.setdefault(name, {"family": family, "ms": 0.0, "count": 0, "rule": why})
        if k["family"] != family:
            k["family"] = "mixed"
            k["rule"] += f"; also {family}: {why}"
        k["ms"] += m
        k["count"] += c
        if not confident:
            u = unconfident.setdefault((name, why), {"name": name, "family": family, "ms": 0.0, "count": 0,
                                                      "why": why, "launcher": op_name})
            u["ms"] += m
            u["count"] += c
    total = float(dur.sum())
    for f in families.values():
        f["share"] = f["ms"] / total if total else 0.0
    top_rows = sorted(kernels.items(), key=lambda kv: -kv[1]["ms"])[:top]
    attn = {k: v for k, v in kernels.items() if v["family"] == "attention"}
    kept_ts, kept_dur = k_ts[keep], k_dur[keep]
    return {
        "trace": str(path),
        "phase": phase,
        "kernel_ms": total,
        "span_ms": float((kept_ts + kept_dur).max() - kept_ts.min()) / 1000.0,
        "memcpy_ms": trace.memcpy_us / 1000.0,
        "families": families,
        "top": [{"name": k, **v} for k, v in top_rows],
        "attention_signature": _signature(attn),
        "attention_kernels": [{"name": k, **v} for k, v in sorted(attn.items(), key=lambda kv: -kv[1]["ms"])],
        "unconfident": sorted(unconfident.values(), key=lambda u: -u["ms"]),
        "steps": {"source": "cpu annotations" if trace.steps else "gpu annotations" if trace.gpu_steps else "none",
                  "count": len(steps), **counts, "kept": kept_steps, "kernel_ms_by_phase": phase_ms,
                  "kernels_outside_steps": int((step_idx < 0).sum()) if steps else None},
        "stats": {"events": trace.n_events, "kernels": len(k_ts), "bytes": path.stat().st_size,
                  "seconds": time.perf_counter() - t0, "linked_to_launch": int((tid >= 0).sum()),
                  "linked_to_op": int((op >= 0).sum()), "graph_replayed": int(graph.sum())},
    }


# --- output ----------------------------------------------------------------------------------------

def format_census(c: dict) -> str:
    lines = [f"== {c['trace']}  (phase: {c['phase']})"]
    st = c["steps"]
    if st["source"] == "none":
        lines.append("steps: no vLLM step annotations in this trace; prefill and decode cannot be told apart")
    else:
        parts = ", ".join(f"{st[k]} {k}" for k in ("prefill", "decode", "mixed", "generation", "empty") if st[k])
        lines.append(f"steps ({st['source']}): {st['count']} = {parts}; kept {st['kept']}")
        by_phase = ", ".join(f"{p} {ms:.3f} ms" for p, ms in st["kernel_ms_by_phase"].items() if ms)
        lines.append(f"GPU time of the whole window by step phase: {by_phase}")
    lines.append(f"GPU kernel time {c['kernel_ms']:.3f} ms over a {c['span_ms']:.3f} ms span "
                 f"({c['stats']['kernels']:,} kernels, {c['stats']['linked_to_launch']:,} linked to a launch)")
    lines.append(f"{'family':10s} {'ms':>12s} {'share':>7s} {'count':>8s}")
    for name, f in c["families"].items():
        lines.append(f"{name:10s} {f['ms']:12.3f} {f['share']*100:6.1f}% {f['count']:8d}")
    lines.append(f"attention: {c['attention_signature']['label']}")
    lines.append("top kernels:")
    for k in c["top"]:
        lines.append(f"  {k['ms']:10.3f} ms {k['count']:7d}x  {k['family']:9s} {_short(k['name'])}")
    if c["unconfident"]:
        lines.append(f"unconfident ({len(c['unconfident'])} kernel names; counted in the family shown):")
        for k in c["unconfident"]:
            lines.append(f"  {k['ms']:10.3f} ms {k['count']:7d}x  {k['family']:9s} {_short(k['name'], 60)}  <- {k['why']}")
    else:
        lines.append("unconfident: none")
    return "\n".join(lines)


def format_compare(a: dict, b: dict) -> str:
    la, lb = Path(a["trace"]).name, Path(b["trace"]).name
    w = max(12, len(la[:28]), len(lb[:28]))
    lines = [f"A = {a['trace']}", f"B = {b['trace']}",
             f"{'family':10s} {'A ms':>{w}s} {'A share':>8s} {'B ms':>{w}s} {'B share':>8s} {'B-A ms':>12s} {'B/A':>7s}"]
    for fam in list(FAMILIES) + ["total"]:
        ma = a["kernel_ms"] if fam == "total" else a["families"][fam]["ms"]
        mb = b["kernel_ms"] if fam == "total" else b["families"][fam]["ms"]
        sa = 1.0 if fam == "total" else a["families"][fam]["share"]
        sb = 1.0 if fam == "total" else b["families"][fam]["share"]
        ratio = f"{mb/ma:7.2f}" if ma else "    n/a"
        lines.append(f"{fam:10s} {ma:{w}.3f} {sa*100:7.1f}% {mb:{w}.3f} {sb*100:7.1f}% {mb-ma:12.3f} {ratio}")
    lines.append(f"attention kernels A: {a['attention_signature']['label']}")
    lines.append(f"attention kernels B: {b['attention_signature']['label']}")
    return "\n".join(lines)


# --- synthetic traces and the benchmark -------------------------------------------------------------

_SYNTH_STEP = [
    # (cpu op, kernel name, dur us)
    ("aten::mm", "nvjet_sm90_tst_128x256_64x4_1x2_h_bz_coopA_NNT", 40.0),
    ("triton_poi_fused_add_mul_rms_norm_0", "triton_poi_fused_add_mul_rms_norm_0", 5.0),
    ("vllm::unified_attention_with_output",
     "void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<"
     "flash::CollectiveMainloopFwdSm90<2, cute::tuple<_1,_1,_1>, cute::tuple<_128,_128,_128>>>>>(...)", 60.0),
    ("aten::mm", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1", 35.0),
    ("triton_red_fused__to_copy_add_mean_mm_pow_rsqrt_1", "triton_red_fused__to_copy_add_mean_mm_pow_rsqrt_1", 6.0),
]


def write_synthetic(path: Path, megabytes: float, *, first_step: tuple = (1, 2048, 0, 0)) -> dict:
    """Write a torch.profiler-shaped trace of about ``megabytes`` MB (uncompressed) to ``path``.

    Each step has CPU ops, Python-stack events, runtime launches, flows and kernels linked by
    correlation ids, indented as torch.profiler writes them. Returns counts for checking.
    """
    path = Path(path)
    target = int(megabytes * 1e6)
    opener = gzip.open if path.suffix == ".gz" else open
    corr = 0
    ts = 1_000_000.0
    written = 0
    n_kernels = 0
    with opener(path, "wt", encoding="utf-8") as fh:
        head = '{\n  "schemaVersion": 1,\n  "deviceProperties": [{"id": 0, "name": "NVIDIA H200"}],\n  "traceEvents": [\n'
        fh.write(head)
        written += len(head)
        first = True
        step_no = 0
        while written < target:
            # The first step prefills, the rest decode one token each (as in a real decode window).
            ctx_reqs, ctx_tok, gen_reqs, gen_tok = first_step if step_no == 0 else (0, 0, 1, 1)
            step_no += 1
            step_ts = ts
            chunk = []
            for op, kernel, dur in _SYNTH_STEP:
                corr += 1
                n_kernels += 1
                ev_op = {"ph": "X", "cat": "cpu_op", "name": op, "pid": 100, "tid": 100, "ts": ts, "dur": 12.0,
                         "args": {"External id": corr, "Record function id": 0, "Sequence number": corr,
                                  "Fwd thread id": 0, "Ev Idx": corr}}
                ev_py = {"ph": "X", "cat": "python_function", "name": "vllm/model_executor/layers/linear.py(100): forward",
                         "pid": 100, "tid": 100, "ts": ts, "dur": 12.5,
                         "args": {"Python parent id": corr, "Python id": corr + 1, "Ev Idx": corr}}
                ev_rt = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 100,
                         "ts": ts + 2.0, "dur": 4.0, "args": {"External id": corr, "cbid": 211, "correlation": corr}}
                ev_s = {"ph": "s", "id": corr, "pid": 100, "tid": 100, "ts": ts + 2.0, "cat": "ac2g", "name": "ac2g"}
                ev_k = {"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": ts + 20.0, "dur": dur,
                        "args": {"External id": corr, "queued": 0, "device": 0, "context": 1, "stream": 7,
                                 "correlation": corr, "registers per thread": 168, "shared memory": 213000,
                                 "blocks per SM": 1.2, "warps per SM": 4.8, "grid": [132, 1, 1],
                                 "block": [384, 1, 1], "est. achieved occupancy %": 0}}
                ev_f = {"ph": "f", "id": corr, "pid": 0, "tid": 7, "ts": ts + 20.0, "cat": "ac2g", "name": "ac2g",
                        "bp": "e"}
                chunk += [ev_op, ev_py, ev_rt, ev_s, ev_k, ev_f]
                ts += dur + 5.0
            name = f"execute_context_{ctx_reqs}({ctx_tok})_generation_{gen_reqs}({gen_tok})"
            chunk.append({"ph": "X", "cat": "user_annotation", "name": name, "pid": 100, "tid": 100,
                          "ts": step_ts - 1.0, "dur": ts - step_ts + 1.0, "args": {"External id": 0}})
            ts += 10.0
            text = ",\n".join("  " + json.dumps(e, indent=2).replace("\n", "\n  ") for e in chunk)
            if not first:
                text = ",\n" + text
            first = False
            fh.write(text)
            written += len(text)
        tail = '\n  ],\n  "traceName": "synthetic"\n}\n'
        fh.write(tail)
    return {"kernels": n_kernels, "steps": step_no, "bytes": os.path.getsize(path)}


def _items_only(path: Path) -> int:
    """The floor: stream every event through the same parser and do nothing with it."""
    n = 0
    for _ in iter_events(path):
        n += 1
    return n


def _compare_backends(megabytes: float = 10.0) -> dict[str, float]:
    """Parse-only MB per CPU second of each available ijson backend on a small synthetic trace."""
    import tempfile

    import ijson

    results = {}
    with tempfile.TemporaryDirectory(prefix="census-backends-") as tmp:
        path = Path(tmp) / "synthetic.json"
        size = write_synthetic(path, megabytes)["bytes"] / 1e6
        for name in ("yajl2_c", "python"):
            try:
                backend = ijson.get_backend(name)
            except Exception:  # noqa: BLE001 - a backend that does not load is simply not compared
                continue
            cpu = time.process_time()
            with open(path, "rb") as fh:
                for _ in backend.items(fh, "traceEvents.item", use_float=True):
                    pass
            results[name] = size / (time.process_time() - cpu)
    return results


def bench(megabytes: float, keep: Path | None = None) -> dict:
    """Census throughput (MB/s of uncompressed JSON, per CPU second and per wall second) and peak RSS.

    Also times the bare parse (every event through the same streaming parser, nothing kept) as
    the fastest peer, so the figure comes with a ratio that does not depend on the machine.
    """
    import resource
    import tempfile

    import ijson

    folder = Path(tempfile.mkdtemp(prefix="census-bench-"))
    path = keep or folder / "synthetic.json"
    try:
        info = write_synthetic(path, megabytes)
        mb = info["bytes"] / 1e6
        wall, cpu = time.perf_counter(), time.process_time()
        result = census(path, progress=sys.stderr.isatty())
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB
        floor_cpu = time.process_time()
        _items_only(path)
        floor_cpu = time.process_time() - floor_cpu
    finally:
        if keep is None:
            path.unlink(missing_ok=True)
            folder.rmdir()
    backends = _compare_backends()
    return {"mb": mb, "kernels": info["kernels"], "cpu_seconds": cpu, "wall_seconds": wall,
            "parse_only_mb_per_cpu_s_by_backend": backends,
            "mb_per_cpu_s": mb / cpu, "mb_per_wall_s": mb / wall, "parse_only_mb_per_cpu_s": mb / floor_cpu,
            "ratio_to_parse_only": floor_cpu / cpu, "peak_rss_mib": rss,
            "backend": _backend().__name__.rsplit(".", 1)[-1], "ijson": ijson.__version__,
            "families_ms": {k: v["ms"] for k, v in result["families"].items()}}


def verify_folder(folder: Path) -> list[tuple[str, str]]:
    """Recompute the census of every stored ``*.trace.json.gz`` and compare it with its ``*.census.json``.

    Returns (window, verdict) pairs; a verdict starting with "ok" means the stored figures reproduce.
    """
    folder = Path(folder)
    stored = sorted(folder.glob("*.census.json"))
    if not stored:
        raise LabError(f"{folder}: no *.census.json files to verify")
    verdicts = []
    for path in stored:
        window = path.name[: -len(".census.json")]
        with open(path, encoding="utf-8") as fh:
            saved = json.load(fh)
        trace = folder / f"{window}.trace.json.gz"
        if not trace.exists():
            verdicts.append((window, "census only: the trace was over the size limit and not kept"))
            continue
        again = census(trace, phase=saved.get("phase", "all"))
        problems = []
        for fam in FAMILIES:
            a, b = saved["families"][fam], again["families"][fam]
            if a["count"] != b["count"] or abs(a["ms"] - b["ms"]) > 1e-6 * max(1.0, abs(a["ms"])):
                problems.append(f"{fam} {a['ms']:.3f} ms x{a['count']} stored, {b['ms']:.3f} ms x{b['count']} now")
        verdicts.append((window, "MISMATCH: " + "; ".join(problems) if problems else
                         f"ok ({again['kernel_ms']:.1f} ms, {again['stats']['kernels']:,} kernels)"))
    return verdicts


# --- CLI -------------------------------------------------------------------------------------------

def add_arguments(parser) -> None:
    parser.add_argument("traces", nargs="*", metavar="TRACE", help="Chrome trace files (.json or .json.gz)")
    parser.add_argument("--json", metavar="OUT", help="write the census as JSON (one trace: an object; "
                        "several: a list)")
    parser.add_argument("--phase", choices=("all", "prefill", "decode", "mixed"), default="all",
                        help="keep only kernels of engine steps of this phase (needs vLLM step annotations)")
    parser.add_argument("--compare", nargs=2, metavar=("A", "B"), help="two windows side by side, B minus A per family")
    parser.add_argument("--top", type=int, default=10, help="how many kernels to list (default 10)")
    parser.add_argument("--rules", action="store_true", help="print the name and launcher rules and exit")
    parser.add_argument("--verify", metavar="FOLDER", help="recompute every stored trace's census in FOLDER and "
                        "compare it with the stored *.census.json (exit status 1 on a mismatch)")
    parser.add_argument("--bench-synthetic", type=float, metavar="MB",
                        help="benchmark: write a synthetic trace of MB megabytes, report MB/s and peak memory")


def print_rules() -> None:
    print("name rules (first match wins; weak rules defer to the launcher):")
    for r in NAME_RULES:
        print(f"  {r.key:22s} {str(r.family):9s} {'strong' if r.strong else 'weak':6s} /{r.pattern}/  {r.reason}")
    print("launcher rules (innermost CPU op open at the kernel's launch):")
    for r in LAUNCHER_RULES:
        print(f"  {r.key:22s} {str(r.family):9s} /{r.pattern}/  {r.reason}")


def main(args) -> int:
    from lab.store import write_json_atomic

    if args.rules:
        print_rules()
        return 0
    if args.verify:
        verdicts = verify_folder(Path(args.verify))
        for window, verdict in verdicts:
            print(f"{window:24s} {verdict}")
        return 1 if any(v.startswith("MISMATCH") for _, v in verdicts) else 0
    if args.bench_synthetic:
        if args.bench_synthetic <= 0:
            raise LabError(f"--bench-synthetic {args.bench_synthetic}: expected a size in MB above 0")
        r = bench(args.bench_synthetic)
        print(f"census benchmark ({r['backend']} parser, ijson {r['ijson']}): {r['mb']:.1f} MB of trace JSON, "
              f"{r['kernels']:,} kernels")
        print(f"  census      {r['mb_per_cpu_s']:7.1f} MB per CPU second ({r['mb_per_wall_s']:.1f} MB/s wall; "
              f"{r['cpu_seconds']:.2f} s CPU)")
        print(f"  parse only  {r['parse_only_mb_per_cpu_s']:7.1f} MB per CPU second (fastest peer: same parser, "
              f"nothing kept); census runs at {r['ratio_to_parse_only']:.2f}x of it")
        print(f"  peak RSS    {r['peak_rss_mib']:7.0f} MiB (whole process)")
        for name, rate in r["parse_only_mb_per_cpu_s_by_backend"].items():
            print(f"  ijson backend {name:8s} {rate:7.1f} MB per CPU second, parse only (10 MB synthetic)")
        print(f"bars: >= 50 MB/s on one core: {'met' if r['mb_per_cpu_s'] >= 50 else 'NOT met'}; "
              f"<= 300 MB peak memory: {'met' if r['peak_rss_mib'] <= 300 else 'NOT met'}")
        if args.json:
            write_json_atomic(Path(args.json), r)
        return 0
    if args.compare:
        a, b = (census(p, phase=args.phase, top=args.top) for p in args.compare)
        print(format_compare(a, b))
        if args.json:
            write_json_atomic(Path(args.json), {"a": a, "b": b})
        return 0
    if not args.traces:
        raise LabError("no trace given; usage: python -m lab census TRACE [TRACE...] (or --compare A B)")
    results = []
    for p in args.traces:
        c = census(p, phase=args.phase, top=args.top, progress=sys.stderr.isatty())
        results.append(c)
        print(format_census(c))
    if args.json:
        write_json_atomic(Path(args.json), results[0] if len(results) == 1 else results)
    return 0
