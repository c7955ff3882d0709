"""How vLLM finds the book's kernels: the plugin's entry point is discovered with vllm_plugin/ on the path (in every
vLLM process, since the server's command puts it there for the OURS arm), it registers vLLM's CUSTOM backend, and a
server of the OURS arm is asked for --attention-backend CUSTOM with the lab and the plugin on its PYTHONPATH."""

import os
import subprocess
import sys

import pytest

from lab import REPO_ROOT
from lab.measure.vllm.plugin import BACKEND_CLASS, PLUGIN_PATH
from lab.measure.vllm.server import ServeSpec, build_command

FIND = ("from importlib.metadata import entry_points; "
        "print([(e.name, e.value) for e in entry_points(group='vllm.general_plugins')])")


def _discovered(pythonpath: str) -> str:
    env = {**os.environ, "PYTHONPATH": pythonpath}
    return subprocess.run([sys.executable, "-c", FIND], env=env, capture_output=True, text=True, check=True,
                          cwd="/").stdout


def test_the_entry_point_is_found_with_the_plugin_folder_on_the_path_and_not_without():
    assert "('lab_attention', 'lab.measure.vllm.plugin:register')" in _discovered(f"{REPO_ROOT}{os.pathsep}{PLUGIN_PATH}")
    assert "lab_attention" not in _discovered(str(REPO_ROOT))


def test_the_entry_point_loads_without_vllm():
    # the plugin names a class path; vLLM and Triton are imported only when vLLM picks the backend
    code = ("import sys; from importlib.metadata import entry_points; "
            "[e.load() for e in entry_points(group='vllm.general_plugins') if e.name == 'lab_attention']; "
            "print('vllm' in sys.modules, 'triton' in sys.modules)")
    env = {**os.environ, "PYTHONPATH": f"{REPO_ROOT}{os.pathsep}{PLUGIN_PATH}"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_a_server_of_ours_asks_for_the_custom_slot_with_the_plugin_on_its_path(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/opt/site")
    monkeypatch.setenv("LAB_OURS_PREFILL_CONFIG", '{"BLOCK_M": 128}')
    argv, env = build_command(ServeSpec(model="m", backend="OURS"), "0.26.0")
    assert argv[argv.index("--attention-backend") + 1] == "CUSTOM"
    assert env["PYTHONPATH"].split(os.pathsep) == [str(REPO_ROOT), str(PLUGIN_PATH), "/opt/site"]
    assert env["LAB_OURS_PREFILL_CONFIG"] == '{"BLOCK_M": 128}'  # recorded in the command line, so in provenance
    _, env = build_command(ServeSpec(model="m", backend="FLASH_ATTN", fa_version=3), "0.26.0")
    assert "PYTHONPATH" not in env


def test_register_points_vllms_custom_slot_at_the_backend():
    pytest.importorskip("vllm")
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    from lab.measure.vllm.plugin import register

    register()
    assert AttentionBackendEnum.CUSTOM.get_path() == BACKEND_CLASS
    assert AttentionBackendEnum.CUSTOM.get_class().get_name() == "CUSTOM"
