"""Several one-GPU vLLM servers of one arm, one per GPU, behind the spreader: one endpoint for the load study.

"Two GPUs: one server split over both (tensor parallel), or two copies of the model?" The copies
are this: N :class:`~lab.measure.vllm.server.Server` objects with the same arm and flags, replica i
seeing only GPU ``gpus[i]`` (``CUDA_VISIBLE_DEVICES``, counted in PCI bus order so that CUDA's
GPU i is nvidia-smi's), started at the same time, and a :class:`~lab.measure.vllm.spreader.Spreader`
in front of them, in this process. :class:`Replicas` answers like one Server (``base_url``,
``model_name``, ``alive()``, ``died_message()``, ``facts``, ``ready_s``, ``record()``,
``command_line()``, a context manager), so :class:`lab.measure.vllm.load.Study` and the probe run
against it unchanged::

    with Replicas("data/models/qwen2.5-7b-128k", FA3, count=2, policy="least-loaded",
                  log_path=out / "server.log", max_model_len=1280) as replicas:
        Study(plan, out, replicas, tokenizer).run()

Replica i logs to ``server.gpu<i>.log`` beside ``log_path`` (its process group id in
``server.gpu<i>.pgid``, for a wrapper script to kill). ``facts.kv_cache_tokens`` is the sum over
the replicas: the tokens the copies hold together, as a tensor-parallel server's log gives the
tokens its GPUs hold together (``record()`` keeps each replica's own). The measurement is of N
replicas, so one that dies ends ``alive()`` although the spreader would go on with the others.
"""

from __future__ import annotations

import os
import signal
import threading
from dataclasses import replace
from pathlib import Path

from lab import LabError, positive_int
from lab.measure.vllm.server import Server, free_port
from lab.measure.vllm.serverlog import LogFacts
from lab.measure.vllm.spreader import Spreader


def replica_log(log_path: Path, gpu: str) -> Path:
    """``server.log`` -> ``server.gpu1.log``: one log per replica, beside the one a single server would write."""
    log_path = Path(log_path)
    return log_path.with_name(f"{log_path.stem}.gpu{gpu}{log_path.suffix}")


def check_gpu_count(needed: int, what: str) -> None:
    """Refuse a run on a machine whose torch sees fewer GPUs than ``needed`` (``what`` names the option)."""
    import torch

    found = torch.cuda.device_count()
    if found < needed:
        raise LabError(f"{what} needs {needed} GPUs; torch sees {found} on this machine")


class Replicas:
    """N one-GPU servers of one arm and a spreader in front (see the module docstring).

    ``server_factory`` makes each server (``Server``, or a test's ``functools.partial`` of it); the other
    keyword arguments are passed to it as they are, with ``log_path`` and ``env`` set per replica.
    """

    def __init__(self, model, arm, *, log_path, count: int = 2, policy: str = "least-loaded", gpus=None,
                 server_factory=Server, env: dict[str, str] | None = None, spreader_port: int | None = None,
                 **server_options):
        positive_int("count", count)
        self.gpus = [str(g) for g in (range(count) if gpus is None else gpus)]
        if len(self.gpus) != count or len(set(self.gpus)) != count:
            raise LabError(f"replicas: {count} replicas need {count} different GPUs, got {self.gpus}")
        if server_options.get("tensor_parallel_size", 1) != 1:
            raise LabError("replicas are one GPU each: tensor parallel size 1 (or one server with "
                           "--tensor-parallel-size instead)")
        base = dict(os.environ if env is None else env)
        self.servers = [server_factory(model, arm, log_path=replica_log(log_path, gpu), **server_options,
                                       env={**base, "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": gpu})
                        for gpu in self.gpus]
        self.spreader = Spreader([s.base_url for s in self.servers], policy, port=spreader_port or free_port())
        self.policy = policy
        self.base_url = f"http://{self.spreader.host}:{self.spreader.port}"
        self.spec = self.servers[0].spec
        self.model_name = self.servers[0].model_name
        self.facts = LogFacts()
        self.warnings: list[str] = []
        self.ready_s: float | None = None
        self._released = threading.Event()   # lets the threads that started the servers end (see _start_servers)
        self._holders: list[threading.Thread] = []

    # --- lifecycle -----------------------------------------------------------------------------------
    def __enter__(self) -> Replicas:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> Replicas:
        """Start every replica at once, then the spreader; LabError (and everything stopped) if one cannot start."""
        try:
            failures = self._start_servers()
            if failures:
                raise LabError("; ".join(failures))
            names = sorted({s.model_name for s in self.servers})
            if len(names) > 1:
                raise LabError(f"the replicas serve different models ({', '.join(names)}); expected one")
            self.model_name = names[0]
            self.spreader.start()
        except BaseException:
            self.stop()
            raise
        self.base_url = self.spreader.base_url
        self.ready_s = max(s.ready_s for s in self.servers)
        tokens = [s.facts.kv_cache_tokens for s in self.servers]
        self.facts = replace(self.servers[0].facts, kv_cache_tokens=None if None in tokens else sum(tokens))
        self.warnings = [f"GPU {gpu}: {w}" for gpu, s in zip(self.gpus, self.servers, strict=True) for w in s.warnings]
        return self

    def _start_servers(self) -> list[str]:
        """Start the servers from threads of their own (each waits ~80 s for vLLM); one line per replica that failed.

        Each thread then stays until :meth:`stop`: a server's process is killed when the thread that started
        it ends (``PR_SET_PDEATHSIG`` is per thread on Linux; :mod:`lab.measure.vllm.server` sets it)."""
        failures: dict[int, BaseException] = {}
        tried = [threading.Event() for _ in self.servers]

        def start_and_hold(index: int) -> None:
            try:
                self.servers[index].start()
            except BaseException as exc:  # noqa: B036 - reported by the main thread
                failures[index] = exc
            finally:
                tried[index].set()
            self._released.wait()

        self._holders = [threading.Thread(target=start_and_hold, args=(i,), daemon=True, name=f"replica-gpu{gpu}")
                         for i, gpu in enumerate(self.gpus)]
        for thread in self._holders:
            thread.start()
        try:
            for event in tried:
                while not event.wait(0.5):   # in steps, so that Ctrl-C and SIGTERM reach this thread
                    pass
        except BaseException:
            self._abort(tried)
            raise
        return [f"replica on GPU {self.gpus[i]}: {exc}" for i, exc in sorted(failures.items())]

    def _abort(self, tried: list[threading.Event]) -> None:
        """Interrupted while the replicas start: end their process groups until every start has given up."""
        while not all(event.is_set() for event in tried):
            for server in self.servers:
                if server.pid is not None:
                    try:
                        os.killpg(server.pid, signal.SIGTERM)
                    except (ProcessLookupError, PermissionError):
                        pass
            for event in tried:
                event.wait(0.5)

    def stop(self) -> None:
        """The spreader first (no new request reaches a replica), then every replica, then the threads that held them."""
        self.spreader.stop()
        for server in self.servers:
            server.stop()
        self._released.set()
        for thread in self._holders:
            thread.join()
        self._holders = []

    # --- what Server answers -----------------------------------------------------------------------------
    def alive(self) -> bool:
        return self.spreader.base_url is not None and all(s.alive() for s in self.servers)

    def died_message(self, when: str) -> str:
        dead = [(gpu, s) for gpu, s in zip(self.gpus, self.servers, strict=True) if not s.alive()]
        if not dead:
            return f"the spreader in front of the replicas stopped {when}"
        return "; ".join(f"replica on GPU {gpu} of {len(self.servers)}: {s.died_message(when)}" for gpu, s in dead)

    @property
    def arm(self):
        return self.servers[0].arm

    def arm_label(self) -> str:
        return self.servers[0].arm_label()

    def command_line(self) -> str:
        """Every replica's command with its GPU, then the spreader, as one line."""
        servers = [f"CUDA_VISIBLE_DEVICES={gpu} {s.command_line()}" for gpu, s in zip(self.gpus, self.servers, strict=True)]
        return " & ".join(servers) + f" & spreader ({self.policy}) at {self.base_url}"

    def spread_counts(self) -> dict[str, int]:
        """Requests sent to each replica so far, by GPU."""
        return {gpu: b["requests"] for gpu, b in zip(self.gpus, self.spreader.stats()["backends"], strict=True)}

    def record(self) -> dict:
        """Provenance: the first replica's fields (one arm, one set of flags), the combined facts, every
        replica's own record with its GPU, and the spreader's counts of what went where."""
        replicas = [{"gpu": gpu, "base_url": s.base_url, **s.record()} for gpu, s in zip(self.gpus, self.servers,
                                                                                          strict=True)]
        return {**replicas[0], "command": self.command_line(), "gpu": None, "base_url": self.base_url,
                "replica_count": len(self.servers), "policy": self.policy,
                "ready_s": None if self.ready_s is None else round(self.ready_s, 1), "log": self.facts.as_dict(),
                "warnings": list(self.warnings), "replicas": replicas, "spreader": self.spreader.stats()}
