"""Streaming reader of Chrome-trace JSON (torch.profiler, vLLM's /start_profile): the events a census needs.

``.json`` or ``.json.gz``, object form ``{"traceEvents": [...]}`` or a bare array, read by streaming
(ijson), so a trace larger than memory is fine. :class:`Trace` keeps kernels, launches, classifying CPU
ops, flow events and vLLM step annotations in compact arrays; a field of the wrong type is a LabError
naming the event.
"""

from __future__ import annotations

import gzip
import sys
import zlib
from array import array
from dataclasses import dataclass
from pathlib import Path

from lab import LabError
from lab.measure.census.rules import CPU_CATS, LAUNCH_RUNTIME, RUNTIME_CATS, STEP_RE, Rule, classify_launcher


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


def ijson_backend():
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


class _Counting:
    """A file wrapper that counts the bytes read through it (the uncompressed JSON of a .json.gz)."""

    def __init__(self, fh):
        self.fh, self.bytes = fh, 0

    def read(self, n=-1):
        data = self.fh.read(n)
        self.bytes += len(data)
        return data


def iter_events(path: Path, sizes: dict | None = None):
    """Yield trace events one at a time (object format ``{"traceEvents": [...]}`` or a bare array).

    ``sizes``, if given, gets ``json_bytes``: the uncompressed JSON read (a .json.gz is smaller on disk).
    """
    path = Path(path)
    first = _first_char(path)
    if first not in (b"{", b"["):
        raise LabError(f"{path}: not JSON (starts with {first!r}); expected a Chrome trace (.json or .json.gz)")
    prefix = "traceEvents.item" if first == b"{" else "item"
    backend = ijson_backend()
    import ijson

    with _open(path) as raw:
        fh = _Counting(raw)
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
        if sizes is not None:
            sizes["json_bytes"] = fh.bytes


def _top_level_keys(path: Path, limit: int = 8) -> list[str]:
    """The first few top-level keys of a JSON object (to describe a file from another tool)."""
    keys = []
    with _open(path) as fh:
        try:
            for prefix, event, value in ijson_backend().parse(fh):
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



def _number(ev: dict, key: str, n: int, path: Path) -> float:
    """A numeric field of an event (0 when absent); anything else is a LabError naming the event."""
    value = ev.get(key, 0.0)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise LabError(f"{path}: event {n:,} ({ev.get('cat')} {str(ev.get('name'))[:40]!r}) has \"{key}\": "
                       f"{str(value)[:30]!r}; expected a number")
    return float(value)


def _args(ev: dict, n: int, path: Path) -> dict:
    args = ev.get("args")
    if args is None:
        return {}
    if not isinstance(args, dict):
        raise LabError(f"{path}: event {n:,} ({ev.get('cat')} {str(ev.get('name'))[:40]!r}) has \"args\" of type "
                       f"{type(args).__name__}; expected an object")
    return args


def _id(value) -> int | None:
    """A correlation or flow id as an int, None when absent or not a number."""
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


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
        self.json_bytes = 0
        self._launcher_cache: dict[str, Rule | None] = {}
        self._n = 0
        self._handlers = {"kernel": self._kernel, "ac2g": self._flow, "gpu_user_annotation": self._gpu_step,
                          "gpu_memcpy": self._memcpy, "gpu_memset": self._memcpy,
                          **dict.fromkeys(CPU_CATS, self._cpu_op), **dict.fromkeys(RUNTIME_CATS, self._launch)}

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

    def _num(self, ev: dict, key: str) -> float:
        return _number(ev, key, self._n, self.path)

    def _kernel(self, ev: dict) -> None:
        if ev.get("ph") != "X":
            return
        name, args, dur = ev.get("name", "?"), _args(ev, self._n, self.path), self._num(ev, "dur")
        if not isinstance(name, str):
            raise LabError(f"{self.path}: event {self._n:,} (kernel) has \"name\": {str(name)[:30]!r}; expected a string")
        if dur < 0:
            raise LabError(f"{self.path}: kernel {name[:60]!r} (event {self._n:,}) has a negative duration "
                           f"({dur:g} us); the trace is corrupt")
        corr = _id(args.get("correlation", args.get("External id")))
        self.k_ts.append(self._num(ev, "ts"))
        self.k_dur.append(dur)
        self.k_name.append(self.names(name))
        self.k_corr.append(-1 if corr is None else corr)

    def _cpu_op(self, ev: dict) -> None:
        name = ev.get("name")
        if not isinstance(name, str) or ev.get("ph") != "X":
            return
        if name.startswith("execute_context_"):
            self._step(ev, name, self.steps)
        elif self._verdict(name) is not None:
            ts = self._num(ev, "ts")
            self.o_tid.append(self._tid(ev))
            self.o_ts.append(ts)
            self.o_end.append(ts + self._num(ev, "dur"))
            self.o_name.append(self.names(name))

    def _step(self, ev: dict, name: str, into: list) -> None:
        m = STEP_RE.match(name)
        if m:
            ts = self._num(ev, "ts")
            into.append(Step(ts, ts + self._num(ev, "dur"), *map(int, m.groups())))

    def _launch(self, ev: dict) -> None:
        name = ev.get("name")
        corr = _id(_args(ev, self._n, self.path).get("correlation"))
        if corr is not None and isinstance(name, str) and LAUNCH_RUNTIME.search(name):
            self.l_corr.append(corr)
            self.l_tid.append(self._tid(ev))
            self.l_ts.append(self._num(ev, "ts"))
            self.l_name.append(self.names(name))

    def _flow(self, ev: dict) -> None:
        ph, fid = ev.get("ph"), _id(ev.get("id"))
        if fid is None:
            return
        if ph == "s":
            self.fs_id.append(fid)
            self.fs_tid.append(self._tid(ev))
            self.fs_ts.append(self._num(ev, "ts"))
        elif ph == "f":
            self.fe_id.append(fid)
            self.fe_ts.append(self._num(ev, "ts"))

    def _gpu_step(self, ev: dict) -> None:
        name = ev.get("name")
        if isinstance(name, str):
            self._step(ev, name, self.gpu_steps)

    def _memcpy(self, ev: dict) -> None:
        self.memcpy_us += self._num(ev, "dur")

    def read(self, progress: bool = False) -> Trace:
        """Stream the file once, keeping what the census needs; a clear error for a file that is no GPU trace."""
        handlers, sizes = self._handlers, {}
        for ev in iter_events(self.path, sizes):
            self._n += 1
            handler = handlers.get(ev.get("cat"))    # python_function, the most common event, has none
            if handler is not None:
                handler(ev)
            if progress and self._n % 500_000 == 0:
                print(f"\r{self.path.name}: {self._n:,} events, {len(self.k_ts):,} kernels", end="", file=sys.stderr)
        if progress and self._n >= 500_000:
            print(file=sys.stderr)
        self.n_events, self.json_bytes = self._n, sizes.get("json_bytes", 0)
        if not len(self.k_ts):
            self._no_kernels()
        self.steps.sort(key=lambda s: s.start_us)
        self.gpu_steps.sort(key=lambda s: s.start_us)
        return self

    def _no_kernels(self) -> None:
        n = self.n_events
        if n == 0:
            keys = _top_level_keys(self.path) if _first_char(self.path) == b"{" else []
            if "traceEvents" not in keys:
                shown = ", ".join(map(str, keys)) or "none"
                raise LabError(f"{self.path}: not a Chrome trace from torch.profiler (no 'traceEvents' array; "
                               f"top-level keys: {shown})")
            raise LabError(f"{self.path}: the trace has no events")
        raise LabError(f"{self.path}: {n:,} events but no GPU kernel events (cat 'kernel', ph 'X'); "
                       "a CPU-only trace (e.g. vLLM's front-end process)? Use the engine/worker trace")

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

