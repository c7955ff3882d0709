"""What a vLLM server log says about the run: backend, FlashAttention version, chunk size, errors.

A sweep is only worth its label if the server really ran what was asked for, so every run reads
these facts back from the log instead of trusting its own flags. The patterns cover the lines of
vLLM 0.11 (the A10G reference study) and of 0.13 and later (``--attention-backend``), e.g.::

    (EngineCore_DP0 pid=1306673) INFO 09-30 19:34:10 [cuda.py:325] Using Flash Attention backend on V1 engine.
    (EngineCore pid=101) INFO 11-30 05:02:11 [cuda.py:..] Using AttentionBackendEnum.FLASH_ATTN backend.
    (EngineCore pid=101) INFO 11-30 05:02:11 [flash_attn.py:..] Using FlashAttention version 3
    (APIServer pid=1) INFO 11-30 05:01:58 [scheduler.py:..] Chunked prefill is enabled with max_num_batched_tokens=8192.
    (APIServer pid=1) INFO 11-30 05:01:58 [cache.py:..] Using fp8 data type to store kv cache. It reduces ...
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from lab.names import BACKEND_ALIASES, registry_name

_BACKEND_PATTERNS = (
    # 0.13+: explicit choice ("Using AttentionBackendEnum.FLASH_ATTN backend."); a bare upper-case name
    # only if it looks like an attention backend, so that e.g. "Using NCCL backend." is not taken for one
    re.compile(r"Using (?:AttentionBackendEnum|_Backend)\.([A-Z][A-Z0-9_]*) backend\.?\s*$"),
    re.compile(r"Using ([A-Z0-9_]*(?:ATTN|ATTENTION|FLASH|MLA|SDPA)[A-Z0-9_]*) backend\.?\s*$"),
    # 0.13+: automatic choice
    re.compile(r"Using ([A-Z][A-Z0-9_]*) attention backend out of potential backends"),
    # 0.9-0.12 V1 engine: the backend in words (lab.names.BACKENDS maps them to the registry names used since)
    re.compile(r"Using (" + "|".join(map(re.escape, BACKEND_ALIASES)) + r") backend on V1 engine"),
)
_FA_VERSION = re.compile(r"Using FlashAttention version (\d+)")
_CHUNK = re.compile(r"Chunked prefill is enabled with max_num_batched_tokens=([\d,_]+)")
_KV_TOKENS = re.compile(r"GPU KV cache size: ([\d,_]+) tokens")
# vLLM (vllm/config/cache.py) says so for a quantized KV cache only; the model's dtype goes unmentioned
_KV_DTYPE = re.compile(r"Using (\S+) data type to store kv cache")
_MAX_MODEL_LEN = re.compile(r"Using max model len (\d+)")
_VERSION = (re.compile(r"vLLM API server version (\S+)"),
            re.compile(r"Initializing a V1 LLM engine \(v([^)\s]+)\)"))
_READY = "Application startup complete"
# "(EngineCore_DP0 pid=12) " and "INFO 11-30 05:02:11 [file.py:12] " prefixes
_PROCESS_PREFIX = re.compile(r"^\([^)]*\)\s*")
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception)(?::\s.*)?$")  # a traceback's last line
_GENERIC = ("Engine core initialization failed", "See root cause above", "EngineCore failed to start")


def _int(text: str) -> int:
    return int(re.sub(r"[,_]", "", text))


@dataclass
class LogFacts:
    """Facts a server log states about the run (None: the log does not say)."""

    backend: str | None = None            # registry name, e.g. FLASH_ATTN
    backend_line: str | None = None       # the line it came from, as evidence
    backends_seen: list[str] = field(default_factory=list)
    fa_version: int | None = None
    fa_version_line: str | None = None
    max_num_batched_tokens: int | None = None  # the chunked-prefill chunk size
    kv_cache_tokens: int | None = None
    kv_cache_dtype: str | None = None          # only a quantized one (fp8, ...) is logged
    max_model_len: int | None = None
    vllm_version: str | None = None
    ready: bool = False

    def as_dict(self) -> dict:
        return asdict(self)


def _strip_prefix(line: str) -> str:
    return _PROCESS_PREFIX.sub("", line.strip())


def read_facts(text: str) -> LogFacts:
    """Parse a whole server log (or its first part) into :class:`LogFacts`; first mention wins."""
    facts = LogFacts()
    for raw in text.splitlines():
        line = _strip_prefix(raw)
        for pattern in _BACKEND_PATTERNS:
            found = pattern.search(line)
            if found:
                name = registry_name(found.group(1))
                if name not in facts.backends_seen:
                    facts.backends_seen.append(name)
                if facts.backend is None:
                    facts.backend, facts.backend_line = name, line
                break
        if facts.fa_version is None and (found := _FA_VERSION.search(line)):
            facts.fa_version, facts.fa_version_line = int(found.group(1)), line
        if facts.max_num_batched_tokens is None and (found := _CHUNK.search(line)):
            facts.max_num_batched_tokens = _int(found.group(1))
        if facts.kv_cache_tokens is None and (found := _KV_TOKENS.search(line)):
            facts.kv_cache_tokens = _int(found.group(1))
        if facts.kv_cache_dtype is None and (found := _KV_DTYPE.search(line)):
            facts.kv_cache_dtype = found.group(1)
        if facts.max_model_len is None and (found := _MAX_MODEL_LEN.search(line)):
            facts.max_model_len = int(found.group(1))
        if facts.vllm_version is None:
            for pattern in _VERSION:
                if found := pattern.search(line):
                    facts.vllm_version = found.group(1)
                    break
        if _READY in line:
            facts.ready = True
    return facts


def error_summary(text: str) -> str | None:
    """The most telling error in a log, on one line: the root cause, plus the last error if different.

    vLLM prints the engine process's own exception first and a generic "Engine core initialization
    failed. See root cause above." last, so the first specific exception line is the one to show.
    """
    errors = []
    for raw in text.splitlines():
        line = _strip_prefix(raw)
        if _EXCEPTION.match(line):
            errors.append(line)
        elif re.match(r"^(ERROR|CRITICAL)\b", line):
            errors.append(re.sub(r"^(ERROR|CRITICAL)\s+\S+\s+\S+\s+\[[^\]]*\]\s*", "", line))
    if not errors:
        return None
    specific = [e for e in errors if not any(g in e for g in _GENERIC)]
    first = specific[0] if specific else errors[0]
    last = errors[-1]
    return first if first == last else f"{first} ... {last}"


# vllm/utils/jit_monitor.py of 0.26: "<backend> <event> during inference: <kernel>[ (<detail>)]. This causes ..."
_JIT = re.compile(r"(\d\d-\d\d \d\d:\d\d:\d\d) \[jit_monitor\.py:\d+\] (\S+) (?:kernel )?JIT compilation during "
                  r"inference: (\S+?)(?: \((.*)\))?\. This causes")


@dataclass(frozen=True)
class JitEvent:
    """A kernel JIT event vLLM's monitor logged after the server's warm-up (a compile, or a load from the runtime's
    own cache on disk): when (month-day and time, to the second, the server's clock), which runtime, which kernel,
    and with ``--jit-monitor-verbose`` its specialization."""

    stamp: str
    runtime: str
    kernel: str
    detail: str = ""


def jit_events(text: str) -> list[JitEvent]:
    """Every JIT event in a server log, in order (without ``--jit-monitor-verbose`` vLLM logs the first per kernel)."""
    return [JitEvent(found.group(1), found.group(2), found.group(3), found.group(4) or "")
            for line in text.splitlines() if (found := _JIT.search(line))]


#: lab.measure.vllm.backend's line (a logging format) when the OURS server has warmed its kernels; read back below
WARMED_UP_LINE = "lab attention backend: kernels warmed up in %.1f s (LAB_OURS_WARMUP=0 skips this)"
_WARMED_UP = re.compile(re.escape(WARMED_UP_LINE).replace(re.escape("%.1f"), r"([\d.]+)"))


def warm_up_seconds(text: str) -> float | None:
    """How long the lab backend's warm-up took when the server started (None: the log has no such line)."""
    found = _WARMED_UP.search(text)
    return float(found.group(1)) if found else None


_GRAPHS = re.compile(r"Graph capturing finished in (\d+(?:\.\d+)?) secs")


def graph_capture_seconds(text: str) -> float | None:
    """How long vLLM's model runner took to capture the CUDA graphs when the server started, as it logs it (None:
    the log has no such line, e.g. an eager server)."""
    found = _GRAPHS.search(text)
    return float(found.group(1)) if found else None


def tail(path: Path, lines: int = 20, max_bytes: int = 256 * 1024) -> list[str]:
    """The last ``lines`` non-empty lines of a (possibly large, possibly missing) log file."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - max_bytes))
            text = fh.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return []
    return [line for line in text.splitlines() if line.strip()][-lines:]


def read_text(path: Path, max_bytes: int = 8 * 1024 * 1024) -> str:
    """A log's text (its first ``max_bytes``: start-up facts all come early)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(max_bytes).decode("utf-8", "replace")
    except FileNotFoundError:
        return ""


#: What a starting server is doing, in the order vLLM 0.26 logs it (the last phase seen is the current one).
START_PHASES = (
    ("starting the engine", re.compile(r"Initializing a V1 LLM engine|vLLM API server version")),
    ("loading weights", re.compile(r"Loading model|Loading weights|Model loading took")),
    ("torch.compile", re.compile(r"Dynamo bytecode transform|Compiling a graph|torch\.compile took")),
    ("sizing the KV cache", re.compile(r"GPU KV cache size|Available KV cache memory")),
    ("capturing CUDA graphs", re.compile(r"Capturing CUDA graph|Graph capturing finished")),
    ("ready", re.compile(_READY)),
)


def start_phases_seen(text: str) -> list[str]:
    """The start-up phases the log text shows, in start-up order."""
    return [label for label, pattern in START_PHASES if pattern.search(text)]


def start_phase(text: str) -> tuple[int, str]:
    """(index, label) of the furthest start-up phase the log text shows; (-1, 'launching') before any."""
    found = (-1, "launching")
    for index, (label, pattern) in enumerate(START_PHASES):
        if pattern.search(text):
            found = (index, label)
    return found
