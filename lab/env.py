"""What this machine can do: GPU, vLLM, Triton, FlashAttention 4. Chapters use it to choose live runs or cached data.

Run ``python -m lab env`` to print the answer for the machine you are on.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass
from importlib.metadata import version


@dataclass(frozen=True)
class Capabilities:
    gpu: str | None          # device name, e.g. "NVIDIA H200"; None without a CUDA GPU
    driver: str | None       # NVIDIA driver version from nvidia-smi
    cuda: str | None         # CUDA version torch was built with
    torch: str | None
    triton: str | None
    vllm: str | None
    triton_mode: str | None  # "gpu", "interpreter" (CPU, TRITON_INTERPRET=1) or None when not installed
    python: str
    machine: str

    @property
    def has_gpu(self) -> bool:
        return self.gpu is not None

    @property
    def can_serve_vllm(self) -> bool:
        return self.has_gpu and self.vllm is not None

    def summary(self) -> str:
        """One sentence a chapter can print to say what it ran on."""
        if self.has_gpu:
            return f"Running live on {self.gpu} (torch {self.torch}, triton {self.triton}, vLLM {self.vllm or 'not installed'})."
        return (f"No GPU on this machine ({self.machine}, Python {self.python}): "
                "figures below come from the cached datasets in data/.")


def _version(module: str) -> str | None:
    if importlib.util.find_spec(module) is None:
        return None
    try:
        return version(module)
    except Exception:  # a package importable from PYTHONPATH without metadata
        mod = __import__(module)
        return getattr(mod, "__version__", "unknown")


def _nvidia_driver() -> str | None:
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None


@functools.lru_cache(maxsize=1)
def detect() -> Capabilities:
    """Probe the machine once per process (cheap: no kernel launches)."""
    torch_version = _version("torch")
    gpu = cuda = None
    if torch_version is not None:
        import torch
        cuda = torch.version.cuda
        if torch.cuda.is_available():
            gpu = torch.cuda.get_device_name(0)
    triton_version = _version("triton")
    triton_mode = None
    if triton_version is not None:
        triton_mode = "gpu" if gpu and os.environ.get("TRITON_INTERPRET") != "1" else "interpreter"
    return Capabilities(
        gpu=gpu, driver=_nvidia_driver() if gpu else None, cuda=cuda, torch=torch_version,
        triton=triton_version, vllm=_version("vllm"), triton_mode=triton_mode,
        python=platform.python_version(), machine=platform.machine(),
    )


def static_build() -> bool:
    """True while the book is being built for the static site (``LAB_STATIC=1``, set by the build).

    Explorers and quizzes then render their in-browser face instead of live widgets.
    """
    return os.environ.get("LAB_STATIC", "") not in ("", "0")


def note_live(what: str) -> None:
    """Record that a live cell measured ``what`` (one short line), for ``lab.book.live_check``'s summary.

    Does nothing unless ``LAB_LIVE_LOG`` names a file (the checker sets it per chapter).
    """
    path = os.environ.get("LAB_LIVE_LOG")
    if path:
        # one short line in append mode (no lab.store: it imports this module); a torn line is skipped by the reader
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"what": str(what), "time": round(time.time(), 1)}) + "\n")


@functools.lru_cache(maxsize=1)
def fa4() -> tuple[str | None, str]:
    """Whether FlashAttention 4 (``flash_attn.cute``, the ``flash-attn-4`` package) imports here.

    Returns (its version, "") when it does, else (None, why not). Not part of :func:`detect`: importing it
    loads the CUTLASS DSL (seconds), which only ``python -m lab env`` and the kernels that use it should pay.
    """
    if importlib.util.find_spec("flash_attn") is None:
        return None, "not installed: scripts/gpu_setup.sh --fa4-wheels DIR installs it"
    try:
        import flash_attn.cute  # noqa: F401
    except Exception as exc:  # any failure to import means FA4 cannot run here; say which
        first_line = (str(exc).strip().splitlines() or [""])[0]
        return None, f"flash_attn.cute does not import: {type(exc).__name__}: {first_line}"
    try:
        return importlib.metadata.version("flash-attn-4"), ""
    except importlib.metadata.PackageNotFoundError:  # importable from a path without metadata
        return getattr(flash_attn.cute, "__version__", "unknown"), ""


def use_triton_interpreter_without_gpu() -> bool:
    """Set TRITON_INTERPRET=1 when there is no GPU, so Triton kernels run on the CPU.

    Must be called before ``triton`` is imported: Triton reads the variable when kernels are defined.
    Returns True when the interpreter is in use. ``TRITON_INTERPRET=0`` set by the caller keeps it off
    (to compile kernels for a GPU this machine does not have, e.g. ``hopper.compile_for_hopper``).
    """
    if os.environ.get("TRITON_INTERPRET") in ("0", "1"):
        return os.environ["TRITON_INTERPRET"] == "1"
    if detect().gpu is None:
        os.environ["TRITON_INTERPRET"] = "1"
        return True
    return False


#: what ``--get`` prints, one value a shell script can use (an empty answer exits 1)
FIELDS = ("vllm", "torch", "triton", "versions", "gpu", "gpus")


def gpu_count() -> int:
    """How many CUDA GPUs torch sees here (0 without torch or a GPU)."""
    if _version("torch") is None:
        return 0
    import torch
    return torch.cuda.device_count()


def field(name: str) -> str | None:
    """One capability by name (:data:`FIELDS`), as text; None when this machine has none."""
    if name == "gpus":
        return str(gpu_count())
    if name == "versions":         # the line a study's console opens with
        return " ".join(f"{module} {_version(module) or '-'}" for module in ("torch", "triton", "vllm"))
    if name in ("vllm", "torch", "triton"):
        return _version(name)      # no torch import for a version: a study asks for vLLM's before anything else
    return detect().gpu


def add_arguments(parser) -> None:
    parser.add_argument("--json", action="store_true", help="print the capabilities as JSON")
    parser.add_argument("--get", choices=FIELDS,
                        help="print one value only (vLLM's version, the number of GPUs, ...); exit 1 when there is none")


def main(args) -> int:
    if args.get:
        value = field(args.get)
        if value is None:
            return 1
        print(value)
        return 0
    caps = detect()
    fa4_version, fa4_why = fa4()
    if args.json:
        print(json.dumps({**asdict(caps), "fa4": fa4_version, "fa4_detail": fa4_why}, indent=1))
    else:
        for key, value in asdict(caps).items():
            print(f"{key:12s} {value if value is not None else '-'}")
        print(f"{'fa4':12s} {fa4_version + ' (flash_attn.cute imports)' if fa4_version else '- (' + fa4_why + ')'}")
        print(caps.summary())
    return 0
