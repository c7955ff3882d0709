"""The arms of every vLLM experiment: which attention backend, which FlashAttention version, which KV-cache dtype.

One :class:`Arm` names one server configuration the book compares; the server, the sweeps, the
capture, the run panels and the explorers all take it from here, so adding an arm is one line in
:data:`ARMS`::

    from lab.measure.vllm.arms import ARMS, FA3, Arm
    FA3.label, FA3.slug          # 'FLASH_ATTN/FA3', 'flash_attn-fa3' (the dataset folder's name)
    FA3.server_args()            # ['--attention-backend', 'FLASH_ATTN', '--attention-config.flash_attn_version', '3']
    Arm.parse("flex_attention")  # FLEX (a label or a slug, any case)
    Arm.of("FLASH_ATTN", 3, "fp8").label   # 'FLASH_ATTN/FA3-FP8'

Labels are what data files carry in their ``arm`` column (``FLASH_ATTN/FA3``, ``FLEX_ATTENTION``; the A10G
reference study's ``FLASH_ATTN``, version unstated); the slug is the label in lower case with ``/`` as
``-``, so the folders already in ``data/`` (``flash_attn-fa3``, ``flex_attention``) keep their names.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from lab import LabError
from lab.measure.vllm.plugin import PLUGIN_PATH

#: Backends a dense decoder can run on an NVIDIA GPU, by vLLM's registry names, and OURS: the book's kernels,
#: which the lab's plugin (lab.measure.vllm.plugin) registers in vLLM's CUSTOM slot.
BACKENDS = ("FLASH_ATTN", "FLEX_ATTENTION", "TRITON_ATTN", "FLASHINFER", "OURS")
#: A backend's name in vLLM's registry where it differs from the lab's.
VLLM_NAMES = {"OURS": "CUSTOM"}
#: What the book's kernels take (lab.measure.attention.paged_prefill.HEAD_DIMS; the backend refuses the rest when
#: vLLM starts): head sizes, and the KV cache in the model's own dtype.
OURS_HEAD_SIZES = (64, 128)
#: FlashAttention versions vLLM's FLASH_ATTN backend can be told to use (``flash_attn_version``).
FA_VERSIONS = (2, 3, 4)
#: KV-cache dtypes this project runs: a subset of vLLM 0.26's ``CacheDType`` (vllm/config/cache.py);
#: "auto" stores the KV cache in the model's dtype (bfloat16 here), "fp8" in FP8 E4M3 on CUDA.
KV_CACHE_DTYPES = ("auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2")

_LABEL = re.compile(r"^([A-Z_]+)(?:-FA(\d+))?(?:-([A-Z0-9_]+))?$")


def label_of(backend: str, fa_version: int | None = None, kv_cache_dtype: str = "auto") -> str:
    """``FLASH_ATTN/FA3``, ``FLEX_ATTENTION``, ``FLASH_ATTN/FA3-FP8``: the label an arm's data carries."""
    label = backend + (f"/FA{fa_version}" if fa_version else "")
    return label + (f"-{kv_cache_dtype.upper()}" if kv_cache_dtype != "auto" else "")


@dataclass(frozen=True)
class Arm:
    """One attention-backend arm; an invalid combination cannot be built (LabError says why)."""

    label: str
    backend: str
    fa_version: int | None = None       # None: vLLM's choice (3 on Hopper, 2 on Ampere)
    kv_cache_dtype: str = "auto"

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise LabError(f"unknown attention backend {self.backend!r}; choose one of {', '.join(BACKENDS)}")
        if self.fa_version is not None and self.backend != "FLASH_ATTN":
            raise LabError(f"a FlashAttention version applies to FLASH_ATTN only, not {self.backend}")
        if self.fa_version not in (None, *FA_VERSIONS):
            raise LabError(f"FlashAttention version {self.fa_version} does not exist; use 2, 3 or 4")
        if self.kv_cache_dtype not in KV_CACHE_DTYPES:
            raise LabError(f"KV-cache dtype {self.kv_cache_dtype!r} is not one of {', '.join(KV_CACHE_DTYPES)}")
        if self.backend == "OURS" and self.kv_cache_dtype not in ("auto", "bfloat16"):
            raise LabError(f"the book's kernels read the KV cache in the model's dtype, not {self.kv_cache_dtype}: "
                           "use --backend FLASH_ATTN for an FP8 cache")
        expected = label_of(self.backend, self.fa_version, self.kv_cache_dtype)
        if self.label != expected:
            raise LabError(f"arm label {self.label!r} does not match its settings (expected {expected!r})")

    @classmethod
    def of(cls, backend: str, fa_version: int | None = None, kv_cache_dtype: str | None = "auto") -> Arm:
        """The arm of these settings, its label derived from them."""
        kv_cache_dtype = kv_cache_dtype or "auto"
        return cls(label_of(backend, fa_version, kv_cache_dtype), backend, fa_version, kv_cache_dtype)

    @classmethod
    def parse(cls, text: str) -> Arm:
        """The arm named by a label (``FLASH_ATTN/FA3``) or a slug (``flash_attn-fa3``), any case."""
        found = _LABEL.match(str(text).strip().upper().replace("/", "-"))
        if not found:
            raise LabError(f"{text!r} does not name an arm; use a label such as {', '.join(ARMS)}")
        backend, fa, kv = found.groups()
        return cls.of(backend, int(fa) if fa else None, kv.lower() if kv else "auto")

    @property
    def slug(self) -> str:
        """The arm's dataset folder name: ``flash_attn-fa3``, ``flex_attention``, ``flash_attn-fa3-fp8``."""
        return self.label.lower().replace("/", "-")

    def run_key(self) -> dict:
        """The arm's part of a run key (a resumed run must match it). The KV-cache dtype is there only
        when it is not "auto", so runs from before it was an option keep resuming."""
        key = {"backend": self.backend, "fa_version": self.fa_version}
        return key if self.kv_cache_dtype == "auto" else {**key, "kv_cache_dtype": self.kv_cache_dtype}

    def confirmed(self, fa_version_seen: int | None) -> Arm:
        """This arm with the FlashAttention version the server's log reports (unchanged when it reports none)."""
        if self.backend != "FLASH_ATTN" or fa_version_seen is None:
            return self
        return Arm.of(self.backend, fa_version_seen, self.kv_cache_dtype)

    @property
    def vllm_backend(self) -> str:
        """The backend's name in vLLM's registry, as ``--attention-backend`` takes it and its log names it."""
        return VLLM_NAMES.get(self.backend, self.backend)

    def server_args(self, cli_config: bool = True) -> list[str]:
        """The ``vllm serve`` flags that select this arm.

        ``cli_config`` False: a release before 0.13, which reads the backend from the environment
        (:meth:`server_env`); ``--kv-cache-dtype`` is a flag in every release.
        """
        argv = []
        if cli_config:
            argv += ["--attention-backend", self.vllm_backend]
            if self.fa_version is not None:
                argv += ["--attention-config.flash_attn_version", str(self.fa_version)]
        if self.kv_cache_dtype != "auto":
            argv += ["--kv-cache-dtype", self.kv_cache_dtype]
        return argv

    def server_env(self, cli_config: bool = True, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
        """Environment variables this arm's server needs beyond ``environ``: those that select the backend on a
        release before 0.13 (none from 0.13 on); for OURS, the lab and its plugin on every vLLM process's
        PYTHONPATH, and the prefill setting ``LAB_OURS_PREFILL_CONFIG`` when ``environ`` has one (in the command
        line, so provenance records it)."""
        if self.backend in VLLM_NAMES and not cli_config:
            raise LabError(f"{self.backend} needs vLLM 0.13 or later (--attention-backend {self.vllm_backend})")
        if self.backend == "OURS":
            env = {"PYTHONPATH": os.pathsep.join([str(PLUGIN_PATH.parent), str(PLUGIN_PATH),
                                                  *filter(None, [environ.get("PYTHONPATH")])])}
            if environ.get("LAB_OURS_PREFILL_CONFIG"):
                env["LAB_OURS_PREFILL_CONFIG"] = environ["LAB_OURS_PREFILL_CONFIG"]
            return env
        if cli_config:
            return {}
        env = {"VLLM_ATTENTION_BACKEND": self.backend}
        if self.fa_version is not None:
            env["VLLM_FLASH_ATTN_VERSION"] = str(self.fa_version)
        return env


#: FLASH_ATTN with vLLM's choice of version, as the A10G reference study ran it (vLLM 0.11 chose FA2 on Ampere).
FLASH = Arm("FLASH_ATTN", "FLASH_ATTN")
FA3 = Arm("FLASH_ATTN/FA3", "FLASH_ATTN", 3)
FA2 = Arm("FLASH_ATTN/FA2", "FLASH_ATTN", 2)
FLEX = Arm("FLEX_ATTENTION", "FLEX_ATTENTION")
TRITON = Arm("TRITON_ATTN", "TRITON_ATTN")
FA3_FP8 = Arm("FLASH_ATTN/FA3-FP8", "FLASH_ATTN", 3, "fp8")
#: The book's own kernels (lab.measure.vllm.backend) serving.
OURS = Arm("OURS", "OURS")

#: The arms the book measures and the panels offer, by label, in the order they are shown.
ARMS = {arm.label: arm for arm in (FA3, FA2, FLEX, TRITON, OURS, FA3_FP8)}


def refusal(arm: Arm, config: dict) -> str | None:
    """Why ``arm`` cannot serve a model of this ``config.json`` (None if it can), said before a server starts."""
    if arm.backend != "OURS":
        return None
    heads = config.get("num_attention_heads") or 1
    head_size = config.get("head_dim") or config.get("hidden_size", 0) // heads
    if head_size not in OURS_HEAD_SIZES:
        return (f"the book's kernels take head sizes {' and '.join(map(str, OURS_HEAD_SIZES))}; this model's is "
                f"{head_size}: use --backend FLASH_ATTN")
    if config.get("use_sliding_window") or config.get("layer_types") and "sliding_attention" in config["layer_types"]:
        return "the book's kernels have no sliding window, which this model uses: use --backend FLASH_ATTN"
    return None


def book_order(labels) -> list[str]:
    """Arm labels (each once) in the order the book shows them: :data:`FLASH` (the A10G study's), then
    :data:`ARMS`' order, then any other label alphabetically."""
    order = [FLASH.label, *ARMS]
    return sorted(set(labels), key=lambda label: (order.index(label) if label in order else len(order), label))


def known(label: str) -> Arm:
    """One of :data:`ARMS` by its label; LabError naming the choices otherwise."""
    if label not in ARMS:
        raise LabError(f"unknown arm {label!r}; choose one of {', '.join(ARMS)}")
    return ARMS[label]


def add_arguments(parser) -> None:
    """``--backend``, ``--fa-version`` and ``--kv-cache-dtype``: an arm on a command line (see :func:`from_args`)."""
    parser.add_argument("--backend", required=True, choices=BACKENDS, help="vLLM attention backend")
    parser.add_argument("--fa-version", type=int, choices=FA_VERSIONS,
                        help="FlashAttention version for FLASH_ATTN (default: vLLM's choice, 3 on Hopper)")
    parser.add_argument("--kv-cache-dtype", default="auto", choices=KV_CACHE_DTYPES,
                        help="KV-cache dtype (default auto: the model's, bfloat16; fp8 halves the cache)")


def from_args(args) -> Arm:
    """The arm parsed command-line arguments name (LabError for a combination vLLM does not have)."""
    return Arm.of(args.backend, args.fa_version, getattr(args, "kv_cache_dtype", "auto"))


def options(arm: Arm) -> str:
    """The options of this project's commands (``vllm-sweep``, ``vllm-concurrency``) that name ``arm``."""
    parts = [f"--backend {arm.backend}"] + ([f"--fa-version {arm.fa_version}"] if arm.fa_version else [])
    return " ".join(parts + ([f"--kv-cache-dtype {arm.kv_cache_dtype}"] if arm.kv_cache_dtype != "auto" else []))
