"""The tuned kernels' chosen launches, kept per GPU so a cold start does not autotune again.

Autotuning compiles every candidate launch of a shape (the tuned forward kernel: 6 configs, twice over
for the TMA choice; the tuned decode kernel: 8 settings) and most of a cold chapter's time is those
compiles. So the pick for a shape is remembered in ``data/local/launch-cache/<gpu>.json`` the first time
it is made, and looked up before autotuning the next time. On the GPU the book's kernel benchmark ran on,
the picks recorded in that run (``config`` column of ``data/h200/kernels/prefill.csv``/``decode.csv``)
seed the cache, so even a first run on such a GPU compiles one launch per shape.

Keys name the shape and options: ``fwd n_q n_k d causal precision tma`` and ``dec batch q_heads kv_heads n_k
d dtype``. A value is the launch as the kernels take it (``BLOCK_M``..., ``tma`` for the forward).
``LAB_LAUNCH_CACHE=0`` turns the cache (and its seeds) off, to autotune from scratch.
"""

from __future__ import annotations

import csv
import json
import os
import re
import threading
from pathlib import Path

from lab import REPO_ROOT
from lab.store import write_json_atomic

CACHE_DIR = REPO_ROOT / "data" / "local" / "launch-cache"
#: The committed benchmark whose picks seed the cache on the same GPU model.
SEED_RUN = REPO_ROOT / "data" / "h200" / "kernels"
_lock = threading.Lock()
_loaded: dict[str, dict] = {}


def enabled() -> bool:
    return os.environ.get("LAB_LAUNCH_CACHE", "1") not in ("0", "")


def gpu_slug(gpu: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", gpu.lower()).strip("-") or "gpu"


def forward_key(n_q: int, n_k: int, d: int, causal: bool, precision: str) -> str:
    return f"fwd {n_q} {n_k} {d} {bool(causal)} {precision}"


def decode_key(batch: int, q_heads: int, kv_heads: int, n_k: int, d: int, dtype: str) -> str:
    return f"dec {batch} {q_heads} {kv_heads} {n_k} {d} {dtype}"


def parse_config(text: str) -> dict:
    """'BLOCK_M=128 BLOCK_N=64 num_warps=8 tma=True' -> {'BLOCK_M': 128, ..., 'tma': True}."""
    config = {}
    for part in text.split():
        key, _, value = part.partition("=")
        if value in ("True", "False"):
            config[key] = value == "True"
        elif value.lstrip("-").isdigit():
            config[key] = int(value)
        elif value:
            config[key] = value
    return config


def seeds(gpu: str, run: Path = SEED_RUN) -> dict[str, dict]:
    """The committed run's picks when it ran on this GPU model, else nothing."""
    try:
        if json.loads((run / "provenance.json").read_text())["gpu"] != gpu:
            return {}
    except (OSError, ValueError, RecursionError, KeyError, TypeError):
        return {}
    picks: dict[str, dict] = {}
    for name, phase in (("prefill.csv", "fwd"), ("decode.csv", "dec")):
        try:
            with open(run / name, newline="") as fh:
                rows = [r for r in csv.DictReader(fh) if r.get("candidate") == "ours-tuned" and r.get("config")]
        except OSError:
            continue
        for r in rows:
            dtype = f"torch.{r['dtype']}"
            if phase == "fwd" and r.get("batch") == "1":
                key = forward_key(int(r["n"]), int(r["n"]), int(r["head_dim"]), r["causal"] == "True",
                                  "ieee" if r["dtype"] == "float32" else "tf32")
            elif phase == "dec":
                key = decode_key(int(r["batch"]), int(r["q_heads"]), int(r["kv_heads"]), int(r["n"]),
                                 int(r["head_dim"]), dtype)
            else:
                continue
            picks[key] = parse_config(r["config"])
    return picks


def _path(gpu: str) -> Path:
    return CACHE_DIR / f"{gpu_slug(gpu)}.json"


def _table(gpu: str) -> dict:
    if gpu not in _loaded:
        table = dict(seeds(gpu))
        try:
            table.update(json.loads(_path(gpu).read_text()).get("launches", {}))
        except (OSError, ValueError, RecursionError, AttributeError):
            pass  # no cache yet, or an unreadable one: it is rewritten on the next pick
        _loaded[gpu] = table
    return _loaded[gpu]


def lookup(gpu: str | None, key: str) -> dict | None:
    """The remembered launch for ``key`` on ``gpu`` (None: not known, or the cache is off)."""
    if gpu is None or not enabled():
        return None
    with _lock:
        found = _table(gpu).get(key)
    return dict(found) if found else None


def remember(gpu: str | None, key: str, launch: dict) -> None:
    """Keep a pick (written at once, atomically: a crash never leaves half a file)."""
    if gpu is None or not enabled():
        return

    with _lock:
        table = _table(gpu)
        if table.get(key) == launch:
            return
        table[key] = dict(launch)
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        write_json_atomic(_path(gpu), {"gpu": gpu, "launches": table})
