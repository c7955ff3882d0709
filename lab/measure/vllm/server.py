"""One ``vllm serve`` process for one attention-backend arm: start it, wait until it is ready, stop it.

Use it as a context manager; the server is stopped on exit, on an exception, on Ctrl-C and on
SIGTERM, with its whole process group (vLLM runs its engine in a child process)::

    from lab.measure.vllm.server import Server
    from lab.measure.vllm.arms import FA3
    with Server("data/models/qwen2.5-7b", FA3, max_model_len=33024,
                max_num_batched_tokens=8192, log_path=Path("server.log")) as server:
        print(server.facts.backend, server.facts.fa_version)   # what the log says actually runs
        stream_completion(server.base_url, server.model_name, [101] * 1024, max_tokens=8)  # lab.measure.vllm.probe

For trace capture (``lab.measure.capture``): pass ``profiler_dir=`` (an absolute folder; traces land there)
and call ``server.post("/start_profile")`` / ``server.post("/stop_profile")`` around a request.
``profiler_options`` adds fields to vLLM's profiler config (e.g. ``{"torch_profiler_with_stack": False}``).

How the backend is chosen depends on the vLLM release (:func:`build_command` asks the arm's
:meth:`~lab.measure.vllm.arms.Arm.server_args` and ``server_env`` for that release): 0.13 and later take ``--attention-backend`` and ``--attention-config.flash_attn_version``;
older releases (such as 0.11, the A10G reference study) read ``VLLM_ATTENTION_BACKEND`` and
``VLLM_FLASH_ATTN_VERSION`` from the environment.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from lab import LabError
from lab.env import detect
from lab.folders import open_server_log
from lab.measure.vllm.arms import OURS, Arm, refusal
from lab.measure.vllm.serverlog import LogFacts, error_summary, read_facts, read_text, tail
from lab.store import read_json

#: First release with --attention-backend, --attention-config and --profiler-config.
CLI_CONFIG_SINCE = (0, 13)
#: Releases before this logged every request (prompt ids included) unless told not to.
QUIET_REQUESTS_SINCE = (0, 10, 2)
#: The ``vllm`` console script may not be on PATH (a site tree on PYTHONPATH); the module always works.
DEFAULT_LAUNCHER = (sys.executable, "-m", "vllm.entrypoints.cli.main")
#: FlashAttention 2 on Hopper starts slowly (shared/offline-vllm notes a PTX JIT; our H200 run: 264 s, mostly CUDA
#: graph capture), so its readiness wait is long.
DEFAULT_READY_TIMEOUT_S = 480.0
#: Always set for the server: NVLink multicast off in NCCL, torch symmetric memory, NVSHMEM (it can wreck a shared host).
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}

# Run in the child before exec: ask Linux to SIGKILL it if this process dies without cleaning up
# (kill -9, an out-of-memory kill), so no server is left holding the GPU.
_EXEC_WITH_PARENT_DEATH_SIGNAL = (
    "import ctypes, os, signal, sys\n"
    "try:\n"
    "    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG\n"
    "except Exception:\n"
    "    pass\n"
    "os.execvp(sys.argv[1], sys.argv[1:])\n"
)


def parse_version(text: str | None) -> tuple[int, ...]:
    """``"0.26.0"`` -> (0, 26, 0); ``"0.11.1rc2.dev3"`` -> (0, 11, 1). Raises LabError for junk."""
    found = re.match(r"\s*v?(\d+)\.(\d+)(?:\.(\d+))?", text or "")
    if not found:
        raise LabError(f"cannot read a vLLM version from {text!r}; expected something like 0.26.0")
    return tuple(int(part) for part in found.groups() if part is not None)


@dataclass(frozen=True)
class ServeSpec:
    """Everything that defines one server (one arm of a sweep)."""

    model: str
    backend: str
    fa_version: int | None = None
    kv_cache_dtype: str = "auto"                 # "fp8": an FP8 KV cache
    max_model_len: int = 32768
    max_num_batched_tokens: int | None = None   # None: vLLM's default (printed in the log)
    gpu_memory_utilization: float = 0.85
    tensor_parallel_size: int = 1                # GPUs one model is split across (vLLM's own tensor parallelism)
    load_format: str | None = "dummy"          # random weights: timing depends on shapes only
    skip_tokenizer_init: bool = True           # prompts are token-id lists
    host: str = "127.0.0.1"
    port: int = 8000
    profiler_dir: str | None = None
    profiler_options: dict = field(default_factory=dict)
    extra_args: tuple[str, ...] = ()

    @property
    def arm(self) -> Arm:
        """The arm this server runs, as asked (LabError for a combination vLLM does not have)."""
        return Arm.of(self.backend, self.fa_version, self.kv_cache_dtype)

    def check(self) -> None:
        _ = self.arm  # building the arm checks backend, FlashAttention version and KV-cache dtype
        if not 0 < self.gpu_memory_utilization <= 1:
            raise LabError(f"gpu memory utilization {self.gpu_memory_utilization} must be in (0, 1]")
        if self.tensor_parallel_size < 1:
            raise LabError(f"tensor parallel size {self.tensor_parallel_size} must be at least 1")
        if self.profiler_dir is not None and not os.path.isabs(self.profiler_dir):
            raise LabError(f"profiler folder {self.profiler_dir!r} must be an absolute path (vLLM requires it)")
        config = Path(self.model) / "config.json"
        if self.arm.backend == OURS.backend and config.is_file():  # refused here, before any server starts
            why = refusal(self.arm, read_json(config))
            if why:
                raise LabError(f"{self.model}: {why}")


def build_command(spec: ServeSpec, vllm_version: str,
                  launcher: tuple[str, ...] | list[str] = DEFAULT_LAUNCHER) -> tuple[list[str], dict[str, str]]:
    """The argv and the extra environment variables that start ``spec`` on the given vLLM release.

    A pure function (no process, no file): the tests pin it per version.
    """
    spec.check()
    version = parse_version(vllm_version)
    modern = version >= CLI_CONFIG_SINCE
    argv = [*launcher, "serve", spec.model,
            "--host", spec.host, "--port", str(spec.port),
            "--max-model-len", str(spec.max_model_len),
            "--gpu-memory-utilization", f"{spec.gpu_memory_utilization:g}",
            "--no-enable-prefix-caching"]
    env: dict[str, str] = {}
    if spec.load_format:
        argv += ["--load-format", spec.load_format]
    if spec.skip_tokenizer_init:
        argv += ["--skip-tokenizer-init"]
    if spec.max_num_batched_tokens is not None:
        argv += ["--max-num-batched-tokens", str(spec.max_num_batched_tokens)]
    if spec.tensor_parallel_size > 1:
        argv += ["--tensor-parallel-size", str(spec.tensor_parallel_size)]
    argv += spec.arm.server_args(cli_config=modern)
    env.update(spec.arm.server_env(cli_config=modern))
    if spec.profiler_dir is not None:
        if modern:
            config = {"profiler": "torch", "torch_profiler_dir": spec.profiler_dir, **spec.profiler_options}
            argv += ["--profiler-config", json.dumps(config, separators=(",", ":"))]
        else:
            env["VLLM_TORCH_PROFILER_DIR"] = spec.profiler_dir
    if version < QUIET_REQUESTS_SINCE:
        argv += ["--disable-log-requests"]
    argv += list(spec.extra_args)
    return argv, env


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def request(base_url: str, path: str, payload: dict | None = None, timeout: float = 60.0,
            method: str | None = None) -> tuple[int, str]:
    """One plain HTTP call (GET without ``payload``, POST with it): returns (status, body text).

    HTTP errors come back as their status; a refused or broken connection raises LabError.
    """
    data = None if payload is None else json.dumps(payload).encode()
    req = urllib.request.Request(base_url.rstrip("/") + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"} if data else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise LabError(f"{base_url}{path}: no answer ({reason})") from None


def post(base_url: str, path: str, payload: dict | None = None, timeout: float = 600.0) -> tuple[int, str]:
    """POST to a running server, e.g. ``post(url, "/start_profile")``; returns (status, body text).

    The default timeout is long because ``/stop_profile`` waits while the traces are written.
    """
    return request(base_url, path, payload if payload is not None else {}, timeout=timeout, method="POST")


class Server:
    """A ``vllm serve`` child process for one arm (a :class:`~lab.measure.vllm.arms.Arm` or its label, e.g.
    ``FLASH_ATTN/FA3``); see the module docstring for an example.

    Attributes after :meth:`start`: ``base_url``, ``model_name`` (send it as the request's "model"),
    ``facts`` (:class:`lab.measure.vllm.serverlog.LogFacts`: backend, FlashAttention version, chunk size,
    KV-cache tokens read back from the log), ``argv``/``env_overrides`` (the exact command),
    ``warnings`` (facts the log did not confirm) and ``ready_s`` (seconds to become ready).
    """

    def __init__(self, model: str | os.PathLike, arm: Arm | str, *, log_path: str | os.PathLike, max_model_len: int = 32768,
                 max_num_batched_tokens: int | None = None, gpu_memory_utilization: float = 0.85,
                 tensor_parallel_size: int = 1, load_format: str | None = "dummy", skip_tokenizer_init: bool = True,
                 port: int | None = None, profiler_dir: str | os.PathLike | None = None, profiler_options: dict | None = None,
                 extra_args: tuple[str, ...] = (), vllm_version: str | None = None,
                 launcher: tuple[str, ...] | list[str] | None = None,
                 ready_timeout: float = DEFAULT_READY_TIMEOUT_S, env: dict[str, str] | None = None,
                 clock=time.monotonic):
        arm = Arm.parse(arm) if isinstance(arm, str) else arm
        model = str(model)
        if os.path.isdir(model):  # a local folder with config.json: give vLLM an absolute path
            model = os.path.abspath(model)
        self.spec = ServeSpec(
            model=model, backend=arm.backend, fa_version=arm.fa_version, kv_cache_dtype=arm.kv_cache_dtype,
            max_model_len=max_model_len,
            max_num_batched_tokens=max_num_batched_tokens, gpu_memory_utilization=gpu_memory_utilization,
            tensor_parallel_size=tensor_parallel_size, load_format=load_format,
            skip_tokenizer_init=skip_tokenizer_init, port=port or free_port(),
            profiler_dir=None if profiler_dir is None else os.path.abspath(profiler_dir),
            profiler_options=dict(profiler_options or {}), extra_args=tuple(extra_args))
        self.spec.check()
        self.vllm_version = vllm_version or _installed_vllm_version()
        self.argv, self.env_overrides = build_command(self.spec, self.vllm_version,
                                                      launcher or DEFAULT_LAUNCHER)
        self.env_overrides.update(MULTICAST_OFF)  # last: overrides whatever the caller's environment says
        self.log_path = Path(log_path)
        self.pgid_path = self.log_path.with_suffix(".pgid")
        self.ready_timeout = ready_timeout
        self._clock = clock  # what the ready timeout is measured on (a test can stop it until an event)
        self.base_env = dict(os.environ if env is None else env)
        self.model_name = model
        self.base_url = f"http://{self.spec.host}:{self.spec.port}"
        self.facts = LogFacts()
        self.warnings: list[str] = []
        self.ready_s: float | None = None
        self._proc: subprocess.Popen | None = None
        self._log = None
        self._old_sigterm = None

    # --- lifecycle -------------------------------------------------------------------------------
    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def command_line(self) -> str:
        """The command as one shell line (environment overrides first), for logs and provenance."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.env_overrides.items()))
        return (env + " " if env else "") + " ".join(shlex.quote(a) for a in self.argv)

    def start(self) -> Server:
        """Start the server and wait until /health answers; raise LabError (and clean up) if it cannot."""
        if self._proc is not None:
            raise LabError("this server is already started")
        self._log = open_server_log(self.log_path, self.pgid_path)  # an earlier log is kept as server.N.log
        self._log.write(f"# lab.measure.vllm.server: {self.command_line()}\n")
        self._log.flush()
        wait_for_gpu_memory(self.spec.gpu_memory_utilization, self.base_env.get("CUDA_VISIBLE_DEVICES", "").split(",")[0])
        argv = self.argv
        if sys.platform.startswith("linux"):
            argv = [sys.executable, "-c", _EXEC_WITH_PARENT_DEATH_SIGNAL, *self.argv]
        started = self._clock()
        try:
            self._proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, start_new_session=True,
                                          env={**self.base_env, **self.env_overrides})
        except OSError as exc:
            self._close_log()
            raise LabError(f"could not run {self.argv[0]}: {exc.strerror or exc}") from None
        # the group id on disk lets a wrapper script kill a server whose client was killed with -9
        self.pgid_path.write_text(str(self._proc.pid))
        atexit.register(self.stop)
        self._install_sigterm_handler()
        try:
            self._wait_ready(started)
            self.ready_s = self._clock() - started
            self.model_name = self._served_model_name()
            self.facts = read_facts(read_text(self.log_path))
            self._check_facts()
        except BaseException:
            self.stop()
            raise
        return self

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def stop(self, grace_s: float = 30.0) -> None:
        """Stop the server and every process of its group: SIGTERM, then SIGKILL after ``grace_s``."""
        proc, self._proc = self._proc, None
        if proc is not None:
            _signal_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                _signal_group(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
            # the engine process may outlive the API server for a moment; never leave it behind
            deadline = time.monotonic() + 10
            while group_members(proc.pid) and time.monotonic() < deadline:
                time.sleep(0.2)
            if group_members(proc.pid):
                _signal_group(proc.pid, signal.SIGKILL)
            self.pgid_path.unlink(missing_ok=True)
        self._close_log()
        self._restore_sigterm_handler()
        atexit.unregister(self.stop)  # never raises, registered or not

    # --- talking to it ---------------------------------------------------------------------------
    def post(self, path: str, payload: dict | None = None, timeout: float = 600.0) -> tuple[int, str]:
        """POST to this server, e.g. ``server.post("/start_profile")``; returns (status, body text)."""
        return post(self.base_url, path, payload, timeout)

    def log_tail(self, lines: int = 20) -> list[str]:
        return tail(self.log_path, lines)

    def died_message(self, when: str) -> str:
        """One line: the server died (when), its exit status, the log's most telling error, the log path."""
        status = None if self._proc is None else self._proc.poll()
        text = read_text(self.log_path, max_bytes=64 * 1024 * 1024)
        reason = error_summary(text) or " | ".join(self.log_tail(3)) or "the log is empty"
        code = f" with status {status}" if status is not None else ""
        return f"vLLM server ({self.arm_label()}) exited{code} {when}: {reason} (log: {self.log_path})"

    @property
    def arm(self) -> Arm:
        """The arm this server runs: its FlashAttention version as the log confirmed it, else as asked."""
        return self.spec.arm.confirmed(self.facts.fa_version)

    def arm_label(self) -> str:
        """FLASH_ATTN/FA3, FLASH_ATTN/FA2, FLEX_ATTENTION, ...: :attr:`arm`'s label, what its data carries."""
        return self.arm.label

    def record(self) -> dict:
        """What provenance needs: the command, the flags asked for, and what the log confirmed."""
        return {
            "command": self.command_line(),
            "vllm_version": self.vllm_version,
            "backend": self.spec.backend,
            "fa_version_requested": self.spec.fa_version,
            "kv_cache_dtype": self.spec.kv_cache_dtype,
            "max_model_len": self.spec.max_model_len,
            "max_num_batched_tokens_requested": self.spec.max_num_batched_tokens,
            "gpu_memory_utilization": self.spec.gpu_memory_utilization, "tensor_parallel_size": self.spec.tensor_parallel_size,
            "load_format": self.spec.load_format, "skip_tokenizer_init": self.spec.skip_tokenizer_init,
            "prefix_caching": False, "profiler_dir": self.spec.profiler_dir,
            "ready_s": None if self.ready_s is None else round(self.ready_s, 1),
            "log": self.facts.as_dict(),
            "warnings": list(self.warnings),
        }

    # --- internals -------------------------------------------------------------------------------
    def _wait_ready(self, started: float) -> None:
        next_note = started + 30
        while True:
            if self._proc.poll() is not None:
                raise LabError(self.died_message("before it was ready"))
            try:
                status, _ = request(self.base_url, "/health", timeout=5)
                if status == 200:
                    return
            except LabError:
                pass  # not listening yet
            now = self._clock()
            if now - started > self.ready_timeout:
                last = " | ".join(self.log_tail(2)) or "the log is empty"
                raise LabError(f"vLLM server ({self.arm_label()}) was not ready after {self.ready_timeout:.0f} s "
                               f"(raise --ready-timeout if it is still compiling); last log lines: {last} "
                               f"(log: {self.log_path})")
            if now >= next_note:
                print(f"  waiting for vLLM ({self.arm_label()}): {now - started:.0f} s", file=sys.stderr, flush=True)
                next_note += 30
            time.sleep(0.5)

    def _served_model_name(self) -> str:
        """The name requests must use, as the server lists it (the model argument unless renamed)."""
        try:
            status, body = request(self.base_url, "/v1/models", timeout=10)
            if status == 200:
                return json.loads(body)["data"][0]["id"]
        except (LabError, ValueError, RecursionError, KeyError, IndexError, TypeError):
            pass
        return self.model_name

    def _check_facts(self) -> None:
        facts, spec = self.facts, self.spec
        if facts.backend is None:
            self.warnings.append(f"the log names no attention backend; {spec.backend} was asked for")
        elif spec.arm.vllm_backend in facts.backends_seen:
            facts.backend = spec.arm.vllm_backend
            others = [b for b in facts.backends_seen if b != facts.backend]
            if others:
                self.warnings.append(f"the log also names {', '.join(others)} besides {spec.backend}")
        else:
            raise LabError(f"asked vLLM for {spec.backend} but its log says it runs {facts.backend} "
                           f"({facts.backend_line!r}); not measuring a mislabelled arm (log: {self.log_path})")
        if spec.fa_version is not None:
            if facts.fa_version is None:
                self.warnings.append(f"the log does not confirm FlashAttention version {spec.fa_version}")
            elif facts.fa_version != spec.fa_version:
                raise LabError(f"asked for FlashAttention {spec.fa_version} but the log says version "
                               f"{facts.fa_version} ({facts.fa_version_line!r}) (log: {self.log_path})")
        if facts.kv_cache_dtype != (spec.kv_cache_dtype if spec.kv_cache_dtype.startswith("fp8") else None):
            raise LabError(f"asked for KV-cache dtype {spec.kv_cache_dtype} but the log says "
                           f"{facts.kv_cache_dtype or 'nothing of a quantized KV cache'} (log: {self.log_path})")
        if spec.max_num_batched_tokens is not None and facts.max_num_batched_tokens not in (None, spec.max_num_batched_tokens):
            raise LabError(f"asked for max_num_batched_tokens={spec.max_num_batched_tokens} but the log says "
                           f"{facts.max_num_batched_tokens} (log: {self.log_path})")
        if facts.max_num_batched_tokens is None:
            self.warnings.append("the log does not state the chunked-prefill chunk size (max_num_batched_tokens)")

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def _install_sigterm_handler(self) -> None:
        """Turn SIGTERM into a normal exit while the server runs, so ``with``/atexit clean-up happens."""
        if threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            def _exit(signum, frame):
                raise SystemExit(128 + signum)
            self._old_sigterm = signal.signal(signal.SIGTERM, _exit)

    def _restore_sigterm_handler(self) -> None:
        if self._old_sigterm is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._old_sigterm)
            self._old_sigterm = None


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of a process group; from /proc on Linux, else via kill(0)."""
    proc = Path("/proc")
    if proc.is_dir():
        members = []
        for entry in proc.iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            # fields after the command name, which is in parentheses and may hold spaces
            fields = stat[stat.rfind(")") + 2:].split()
            if len(fields) > 2 and fields[0] != "Z" and int(fields[2]) == pgid:
                members.append(int(entry.name))
        return members
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return []
    except PermissionError:
        pass
    return [pgid]


def gpu_memory_fraction_free(gpu: str = "0") -> float | None:
    """Free memory of one GPU (nvidia-smi's ``--id``) as a fraction of its total (None when it cannot tell)."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.free,memory.total", "--format=csv,noheader,nounits",
                              f"--id={gpu}"], capture_output=True, text=True, timeout=20)
        free, total = (float(x) for x in out.stdout.strip().splitlines()[0].split(","))
        return free / total
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def wait_for_gpu_memory(fraction: float, gpu: str = "0", timeout_s: float = 60.0) -> None:
    """Wait until the GPU (nvidia-smi's ``--id``, a server's first CUDA_VISIBLE_DEVICES entry; "" is 0) has ``fraction``
    of its memory free (a server stopped a moment ago may still be releasing it, and vLLM refuses to start without
    it). Gives up quietly after ``timeout_s``: vLLM then says what is missing itself."""
    deadline = time.monotonic() + timeout_s
    noted = False
    while True:
        free = gpu_memory_fraction_free(gpu.strip() or "0")
        if free is None or free >= fraction + 0.01 or time.monotonic() > deadline:
            return
        if not noted:
            print(f"  waiting for GPU {gpu.strip() or 0} memory: {free:.0%} free, vLLM needs {fraction:.0%}", file=sys.stderr, flush=True)
            noted = True
        time.sleep(2)


def _installed_vllm_version() -> str:
    version = detect().vllm
    if version is None:
        raise LabError("vLLM is not installed for this Python; on a machine with an NVIDIA GPU run "
                       "`pip install -r requirements-gpu.txt` (or put a vLLM site tree on PYTHONPATH)")
    return version
