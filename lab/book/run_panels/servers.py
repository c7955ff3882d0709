"""The vLLM servers of the run panels: one per arm, kept while the notebook is open, stopped at kernel exit.

A server takes one to five minutes to start (weights, torch.compile, CUDA graphs), so a second run of the
same arm reuses it. Panels ask for a small share of the GPU's memory each (``MEMORY_SHARE``), enough for
the weights and a KV cache far larger than one 32k-token prompt needs, so the arms of a run can stay up
side by side; timing at batch 1 does not depend on the KV cache's size. Every server is stopped when
the kernel exits (``atexit``), and each runs in its own process group with a parent-death signal
(``lab.measure.vllm.server``), so none outlives the notebook.
"""

from __future__ import annotations

import atexit
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from lab import env
from lab.measure.vllm.arms import ARMS, Arm
from lab.measure.vllm.server import Server
from lab.measure.vllm.serverlog import read_text, start_phases_seen
from lab.store import LOCAL_DIR
from lab.measure.vllm.sweep import resolve_model
from lab.measure.vllm.tokenizer import SUBFOLDER
from lab.book.run_panels.base import Stopped
from lab.book.run_panels.base import Stopped

#: Fraction of GPU memory each panel server asks for: three arms fit beside each other on one GPU.
MEMORY_SHARE = 0.28
#: Longest prompt a panel offers plus the most output tokens: every panel server takes this length, so a
#: server started for one choice of lengths serves any other.
MAX_MODEL_LEN = 32768 + 256
PANEL_MODEL = "data/models/qwen2.5-7b-128k"
LOG_DIR = LOCAL_DIR / "panel-servers"


def available_arms(caps=None) -> dict[str, str]:
    """label -> why it is not offered ("" when it is), for every arm of :data:`lab.measure.vllm.arms.ARMS`:
    FlashAttention 3 needs Hopper (compute capability 9), FlashAttention 2 Ampere or newer."""
    caps = caps or env.detect()
    major = None
    if caps.has_gpu:
        import torch
        if torch.cuda.is_available():
            major = torch.cuda.get_device_capability(0)[0]
    notes = {}
    for label, arm in ARMS.items():
        if arm.fa_version == 3 and major is not None and major != 9:
            notes[label] = "FlashAttention 3 runs on Hopper GPUs only"
        elif arm.fa_version == 2 and major is not None and major < 8:
            notes[label] = "FlashAttention 2 needs an Ampere or newer GPU"
        else:
            notes[label] = ""
    return notes


@dataclass(frozen=True)
class ArmKey:
    """What makes two servers different: the arm, chunk size, profiler on or off, and whether it takes text
    (``tokenizer``: the synthetic tokenizer of :mod:`lab.measure.vllm.tokenizer`, which ``vllm bench serve``
    needs; the other panels send token ids to a server that loads no tokenizer)."""

    arm: Arm
    chunk: int | None = None
    profiler: bool = False
    tokenizer: bool = False

    @property
    def slug(self) -> str:
        """``flash_attn-fa3``, ``flash_attn-fa3-chunk2048``, ``flex_attention-profiler``: the arm's slug and the rest."""
        parts = [self.arm.slug]
        parts += [f"chunk{self.chunk}"] if self.chunk else []
        parts += ["profiler"] if self.profiler else []
        parts += ["text"] if self.tokenizer else []
        return "-".join(parts)


class ServerPool:
    """Servers by :class:`ArmKey`. ``make`` builds a :class:`Server` (tests pass one with a fake launcher)."""

    def __init__(self, make=Server, model: str = PANEL_MODEL, log_dir: Path = LOG_DIR,
                 memory_share: float = MEMORY_SHARE, ready_timeout: float | None = None):
        self.make, self.model, self.log_dir = make, model, Path(log_dir)
        self.memory_share, self.ready_timeout = memory_share, ready_timeout
        self.servers: dict[ArmKey, Server] = {}
        self.starting: dict[ArmKey, Server] = {}
        self._lock = threading.Lock()
        atexit.register(self.stop_all)

    def get(self, key: ArmKey, say=print, cancelled=lambda: False, profiler_dir: Path | None = None,
            profiler_options: dict | None = None) -> Server:
        """The running server for ``key``, started (with its start phases passed to ``say``) if needed; with a
        ``profiler_dir``, vLLM's torch profiler writes there, configured by ``profiler_options``."""
        with self._lock:
            server = self.servers.get(key)
        if server is not None and server.alive():
            say(f"{key.slug}: reusing the running server ({server.base_url})")
            return server
        self.stop(key)  # a dead one: clear it away
        kwargs = dict(max_model_len=MAX_MODEL_LEN, max_num_batched_tokens=key.chunk,
                      gpu_memory_utilization=self.memory_share, log_path=self.log_dir / f"{key.slug}.log")
        if key.tokenizer:
            kwargs.update(skip_tokenizer_init=False, extra_args=("--tokenizer", str(self.tokenizer_dir())))
        if profiler_dir is not None:
            kwargs.update(profiler_dir=profiler_dir, profiler_options=profiler_options or {})
        if self.ready_timeout is not None:
            kwargs["ready_timeout"] = self.ready_timeout
        server = self.make(self.model_dir(), key.arm, **kwargs)
        with self._lock:
            self.starting[key] = server
        watcher = _PhaseWatcher(server.log_path, key.slug, say)
        watcher.start()
        try:
            server.start()
        except BaseException:
            if cancelled():
                raise Stopped() from None
            raise
        finally:
            watcher.stop()
            with self._lock:
                self.starting.pop(key, None)
        say(f"{key.slug}: ready in {server.ready_s:.0f} s (backend {server.facts.backend}, FlashAttention "
            f"{server.facts.fa_version or '-'}, chunk {server.facts.max_num_batched_tokens})")
        with self._lock:
            self.servers[key] = server
        if cancelled():  # Stop pressed just as it became ready
            self.stop(key)
            raise Stopped()
        return server

    def model_dir(self) -> str:
        return resolve_model(self.model)

    def tokenizer_dir(self) -> Path:
        """The synthetic tokenizer's folder inside the model folder (:mod:`lab.measure.vllm.tokenizer`)."""
        return Path(self.model_dir()) / SUBFOLDER

    def stop(self, key: ArmKey) -> None:
        with self._lock:
            servers = [s for s in (self.servers.pop(key, None), self.starting.pop(key, None)) if s is not None]
        for server in servers:
            server.stop()

    def stop_all(self) -> None:
        """Stop every server, running or starting (kernel exit, or a panel's Stop)."""
        with self._lock:
            keys = set(self.servers) | set(self.starting)
        for key in keys:
            self.stop(key)

    def running(self) -> list[ArmKey]:
        with self._lock:
            return [key for key, server in self.servers.items() if server.alive()]


class _PhaseWatcher:
    """Reads the server log while it starts and says each new phase (loading, compile, CUDA graphs, ready)."""

    def __init__(self, log_path: Path, label: str, say, interval_s: float = 0.5):
        self.log_path, self.label, self.say, self.interval_s = Path(log_path), label, say, interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name=f"phases-{label}")

    def start(self) -> None:
        self.say(f"{self.label}: starting a vLLM server (about 1-2 minutes; FA2 on Hopper up to 5)")
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        said: list[str] = []
        started = last_note = time.monotonic()
        while not self._stop.wait(self.interval_s):
            seen = start_phases_seen(read_text(self.log_path))
            now = time.monotonic()
            for label in seen:
                if label not in said:
                    said.append(label)
                    last_note = now
                    self.say(f"{self.label}: {label} ({now - started:.0f} s)")
            if now - last_note >= 30:
                last_note = now
                self.say(f"{self.label}: still {said[-1] if said else 'launching'} ({now - started:.0f} s)")


#: The kernel's one pool (panels of every chapter in this kernel share it).
POOL: ServerPool | None = None


def pool() -> ServerPool:
    global POOL
    if POOL is None:
        POOL = ServerPool()
    return POOL

