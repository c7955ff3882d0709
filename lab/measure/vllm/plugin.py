"""The lab's vLLM plugin: registers the book's kernels as vLLM's CUSTOM attention backend.

vLLM loads every ``vllm.general_plugins`` entry point in each of its processes (API server, engine core,
workers) before it picks a backend (vllm/plugins/__init__.py of 0.26). The entry point lives in
``vllm_plugin/lab_attention-1.0.dist-info/entry_points.txt``; putting ``vllm_plugin`` and the repository on
PYTHONPATH is the whole installation::

    PYTHONPATH=$PWD:$PWD/vllm_plugin:$PYTHONPATH vllm serve MODEL --attention-backend CUSTOM ...

Registering names a class path only; :mod:`lab.measure.vllm.backend` (which imports vLLM and Triton) is imported
when vLLM selects the backend, so a server that runs another backend pays nothing.
"""

from __future__ import annotations

from pathlib import Path

#: The folder to put on PYTHONPATH (it holds the entry point's dist-info).
PLUGIN_PATH = Path(__file__).resolve().parents[3] / "vllm_plugin"
BACKEND_CLASS = "lab.measure.vllm.backend.LabAttentionBackend"


def register() -> None:
    """The entry point: point vLLM's CUSTOM backend at :data:`BACKEND_CLASS` (safe to call more than once)."""
    from vllm.v1.attention.backends.registry import AttentionBackendEnum, register_backend

    register_backend(AttentionBackendEnum.CUSTOM, BACKEND_CLASS)
