"""A census of one trace: GPU time per kernel family, the attention signature, the unconfident kernels.

:func:`census` returns a JSON-ready dict; :func:`format_census` and :func:`format_compare` print it;
:func:`verify_folder` recomputes stored censuses from their traces.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from lab import REPO_ROOT, LabError
from lab.measure.census.reader import Step, Trace
from lab.measure.census.rules import FAMILIES, GRAPH_LAUNCH, classify_launcher, classify_name, decide
from lab.store import read_json


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


def _steps(trace: Trace, launch_ts, k_ts, k_dur) -> dict:
    """Engine steps of the window and the step of each kernel (CPU annotations hold a step's launches,
    GPU annotations its kernels), with the GPU time of the whole window per step phase."""
    import numpy as np

    steps = trace.steps or trace.gpu_steps
    index = (_assign_steps(trace.steps, launch_ts) if trace.steps
             else _assign_steps(trace.gpu_steps, k_ts) if trace.gpu_steps else np.full(len(k_ts), -1))
    counts = {p: 0 for p in ("prefill", "decode", "mixed", "generation", "empty")}
    for s in steps:
        counts[s.phase] += 1
    phase_ms: dict[str, float] = {}
    if steps:   # how much of a "decode" window is prefill
        per_step = np.bincount(np.where(index < 0, len(steps), index), weights=k_dur,
                               minlength=len(steps) + 1) / 1000.0
        for p, m in zip([s.phase for s in steps] + ["outside steps"], per_step.tolist(), strict=True):
            phase_ms[p] = phase_ms.get(p, 0.0) + m
    return {"steps": steps, "index": index, "counts": counts, "phase_ms": phase_ms}


def _keep(st: dict, phase: str, path: Path, n_kernels: int):
    """Which kernels a ``phase`` census counts (all, or those of steps of that phase), and how many steps."""
    import numpy as np

    steps = st["steps"]
    if phase == "all":
        return np.ones(n_kernels, dtype=bool), len(steps)
    if not steps:
        raise LabError(f"{path}: --phase {phase} needs vLLM step annotations (execute_context_..."
                       "_generation_...), and this trace has none")
    phase_ok = np.array([s.phase == phase for s in steps] + [False])
    keep = phase_ok[st["index"]]          # -1 (outside every step) picks the trailing False
    if not keep.any():
        raise LabError(f"{path}: no kernels in {phase} steps ({len(steps)} steps: "
                       + ", ".join(f"{v} {k}" for k, v in st["counts"].items() if v) + ")")
    return keep, int(sum(s.phase == phase for s in steps))


def _add(into: dict, key, fresh: dict, ms: float, count: int) -> dict:
    row = into.setdefault(key, fresh)
    row["ms"] += ms
    row["count"] += count
    return row


def _classify(names: list[str], combos, ms, counts) -> tuple[dict, dict, dict]:
    """Families, per-kernel rows and unconfident rows from each distinct (name, launcher, graph replay)."""
    families = {f: {"ms": 0.0, "count": 0} for f in FAMILIES}
    kernels: dict[str, dict] = {}
    unconfident: dict[tuple, dict] = {}
    for (nid, op_id, g), m, c in zip(combos.tolist(), ms.tolist(), counts.tolist(), strict=False):
        name = names[nid]
        op_name = names[op_id] if op_id >= 0 else None
        family, confident, why = decide(classify_name(name), classify_launcher(op_name) if op_name else None, bool(g))
        families[family]["ms"] += m
        families[family]["count"] += c
        k = kernels.get(name)
        if k is not None and k["family"] != family:
            k["family"] = "mixed"
            k["rule"] += f"; also {family}: {why}"
        _add(kernels, name, {"family": family, "ms": 0.0, "count": 0, "rule": why}, m, c)
        if not confident:
            _add(unconfident, (name, why), {"name": name, "family": family, "ms": 0.0, "count": 0, "why": why,
                                            "launcher": op_name}, m, c)
    return families, kernels, unconfident


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
    st = _steps(trace, launch_ts, k_ts, k_dur)
    keep, kept_steps = _keep(st, phase, path, len(k_ts))

    # Classify each distinct (kernel name, launcher op, graph replay) once, then aggregate with numpy.
    graph = np.isin(rt, np.array([i for i, nm in enumerate(names) if GRAPH_LAUNCH in nm] or [-2]))
    combo = np.stack([k_name, op, graph.astype(np.int64)], axis=1)[keep]
    dur = k_dur[keep] / 1000.0
    uniq, inverse = np.unique(combo, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    families, kernels, unconfident = _classify(names, uniq, np.bincount(inverse, weights=dur, minlength=len(uniq)),
                                               np.bincount(inverse, minlength=len(uniq)))
    total = float(dur.sum())
    for f in families.values():
        f["share"] = f["ms"] / total if total else 0.0
    attn = {k: v for k, v in kernels.items() if v["family"] == "attention"}
    kept_ts, kept_dur = k_ts[keep], k_dur[keep]
    steps = st["steps"]
    return {
        "trace": str(path),
        "phase": phase,
        "kernel_ms": total,
        "span_ms": float((kept_ts + kept_dur).max() - kept_ts.min()) / 1000.0,
        "memcpy_ms": trace.memcpy_us / 1000.0,
        "families": families,
        "top": [{"name": k, **v} for k, v in sorted(kernels.items(), key=lambda kv: -kv[1]["ms"])[:top]],
        "attention_signature": _signature(attn),
        "attention_kernels": [{"name": k, **v} for k, v in sorted(attn.items(), key=lambda kv: -kv[1]["ms"])],
        "unconfident": sorted(unconfident.values(), key=lambda u: -u["ms"]),
        "steps": {"source": "cpu annotations" if trace.steps else "gpu annotations" if trace.gpu_steps else "none",
                  "count": len(steps), **st["counts"], "kept": kept_steps, "kernel_ms_by_phase": st["phase_ms"],
                  "kernels_outside_steps": int((st["index"] < 0).sum()) if steps else None},
        "stats": {"events": trace.n_events, "kernels": len(k_ts), "kernels_kept": int(keep.sum()),
                  "bytes": path.stat().st_size, "json_bytes": trace.json_bytes,
                  "seconds": time.perf_counter() - t0, "linked_to_launch": int((tid >= 0).sum()),
                  "linked_to_op": int((op >= 0).sum()), "graph_replayed": int(graph.sum())},
    }


# --- output ----------------------------------------------------------------------------------------

def _size(stats: dict) -> str:
    """The trace's size: JSON read, and the file on disk when that is smaller (gzipped)."""
    json_mb, disk_mb = stats.get("json_bytes", 0) / 1e6, stats.get("bytes", 0) / 1e6
    if not json_mb:
        return f"{disk_mb:.1f} MB file"
    return f"{json_mb:.1f} MB of JSON" + (f", {disk_mb:.1f} MB gzipped" if disk_mb < json_mb else "")


def _shown(trace: str) -> str:
    """A trace's path as a reader of this repository types it: relative to the repository when inside it."""
    path = Path(trace)
    return path.relative_to(REPO_ROOT).as_posix() if path.is_absolute() and path.is_relative_to(REPO_ROOT) else trace


def format_census(c: dict) -> str:
    lines = [f"== {_shown(c['trace'])}  (phase: {c['phase']})"]
    st = c["steps"]
    if st["source"] == "none":
        lines.append("steps: no vLLM step annotations in this trace; prefill and decode cannot be told apart")
    else:
        parts = ", ".join(f"{st[k]} {k}" for k in ("prefill", "decode", "mixed", "generation", "empty") if st[k])
        lines.append(f"steps ({st['source']}): {st['count']} = {parts}; kept {st['kept']}")
        by_phase = ", ".join(f"{p} {ms:.3f} ms" for p, ms in st["kernel_ms_by_phase"].items() if ms)
        lines.append(f"GPU time of the whole window by step phase: {by_phase}")
    stats = c["stats"]
    kept = stats.get("kernels_kept", stats["kernels"])
    counted = f"{kept:,} kernels" + (f" of {stats['kernels']:,} in the trace" if kept != stats["kernels"] else "")
    lines.append(f"GPU kernel time {c['kernel_ms']:.3f} ms over a {c['span_ms']:.3f} ms span "
                 f"({counted}, {stats['linked_to_launch']:,} linked to a launch; {_size(stats)})")
    lines.append(f"{'family':13s} {'ms':>12s} {'share':>7s} {'count':>8s}")
    for name, f in c["families"].items():
        lines.append(f"{name:13s} {f['ms']:12.3f} {f['share']*100:6.1f}% {f['count']:8d}")
    lines.append(f"attention: {c['attention_signature']['label']}")
    lines.append("top kernels:")
    for k in c["top"]:
        lines.append(f"  {k['ms']:10.3f} ms {k['count']:7d}x  {k['family']:13s} {_short(k['name'])}")
    if c["unconfident"]:
        lines.append(f"unconfident ({len(c['unconfident'])} kernel names; counted in the family shown):")
        for k in c["unconfident"]:
            lines.append(f"  {k['ms']:10.3f} ms {k['count']:7d}x  {k['family']:13s} {_short(k['name'], 60)}  <- {k['why']}")
    else:
        lines.append("unconfident: none")
    return "\n".join(lines)


def _family(c: dict, fam: str) -> dict:
    """A family's figures; a census stored before the family existed counted none of it."""
    return c["families"].get(fam, {"ms": 0.0, "share": 0.0, "count": 0})


def format_compare(a: dict, b: dict) -> str:
    la, lb = Path(a["trace"]).name, Path(b["trace"]).name
    w = max(12, len(la[:28]), len(lb[:28]))
    lines = [f"A = {a['trace']}", f"B = {b['trace']}",
             f"{'family':13s} {'A ms':>{w}s} {'A share':>8s} {'B ms':>{w}s} {'B share':>8s} {'B-A ms':>12s} {'B/A':>7s}"]
    for fam in list(FAMILIES) + ["total"]:
        ma = a["kernel_ms"] if fam == "total" else _family(a, fam)["ms"]
        mb = b["kernel_ms"] if fam == "total" else _family(b, fam)["ms"]
        sa = 1.0 if fam == "total" else _family(a, fam)["share"]
        sb = 1.0 if fam == "total" else _family(b, fam)["share"]
        ratio = f"{mb/ma:7.2f}" if ma else "    n/a"
        lines.append(f"{fam:13s} {ma:{w}.3f} {sa*100:7.1f}% {mb:{w}.3f} {sb*100:7.1f}% {mb-ma:12.3f} {ratio}")
    lines.append(f"attention kernels A: {a['attention_signature']['label']}")
    lines.append(f"attention kernels B: {b['attention_signature']['label']}")
    return "\n".join(lines)


# --- stored censuses -------------------------------------------------------------------------------

def _stored(path: Path) -> dict:
    """A stored ``*.census.json``; a file that is not one is a LabError naming it."""

    saved = read_json(path)
    families = saved.get("families") if isinstance(saved, dict) else None
    ok = isinstance(families, dict) and all(
        isinstance(f, dict) and isinstance(f.get("ms"), (int, float)) and isinstance(f.get("count"), int)
        for f in families.values())
    if not ok or not isinstance(saved.get("phase", "all"), str):
        raise LabError(f"{path}: not a census written by `python -m lab census --json` or capture "
                       "(no 'families' with ms and count)")
    return saved


def verify_folder(folder: Path) -> list[tuple[str, str]]:
    """Recompute the census of every stored ``*.trace.json.gz`` and compare it with its ``*.census.json``.

    Returns (window, verdict) pairs; a verdict starting with "ok" means the stored figures reproduce.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise LabError(f"--verify {folder}: {'is a file' if folder.exists() else 'no such folder'}; "
                       "expected a capture folder holding *.census.json")
    stored = sorted(p for p in folder.iterdir() if p.name.endswith(".census.json"))  # an unreadable folder says so
    if not stored:
        raise LabError(f"{folder}: no *.census.json files to verify")
    verdicts = []
    for path in stored:
        window = path.name[: -len(".census.json")]
        saved = _stored(path)
        trace = folder / f"{window}.trace.json.gz"
        if not trace.exists():
            verdicts.append((window, "census only: the trace was over the size limit and not kept"))
            continue
        again = census(trace, phase=saved.get("phase", "all"))
        problems = []
        for fam in FAMILIES:
            a, b = _family(saved, fam), _family(again, fam)
            if a["count"] != b["count"] or abs(a["ms"] - b["ms"]) > 1e-6 * max(1.0, abs(a["ms"])):
                problems.append(f"{fam} {a['ms']:.3f} ms x{a['count']} stored, {b['ms']:.3f} ms x{b['count']} now")
        verdicts.append((window, "MISMATCH: " + "; ".join(problems) if problems else
                         f"ok ({again['kernel_ms']:.1f} ms, {again['stats']['kernels']:,} kernels)"))
    return verdicts
