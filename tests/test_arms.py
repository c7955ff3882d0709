"""The one arm type: labels, dataset slugs and server flags of every known arm, and bad names refused."""

import argparse

import pytest

from lab import LabError
from lab.measure.vllm.arms import (
    ARMS,
    FA2,
    FA3,
    FA3_FP8,
    FLEX,
    OURS,
    TRITON,
    Arm,
    add_arguments,
    from_args,
    known,
    options,
)


def test_known_arms_keep_the_labels_and_folder_names_the_data_already_uses():
    assert [(a.label, a.slug) for a in ARMS.values()] == [
        ("FLASH_ATTN/FA3", "flash_attn-fa3"), ("FLASH_ATTN/FA2", "flash_attn-fa2"),
        ("FLEX_ATTENTION", "flex_attention"), ("TRITON_ATTN", "triton_attn"), ("OURS", "ours"),
        ("FLASH_ATTN/FA3-FP8", "flash_attn-fa3-fp8")]
    assert Arm.of("FLASH_ATTN").slug == "flash_attn"  # vLLM's choice of version, as the A10G study ran it


@pytest.mark.parametrize("arm", list(ARMS.values()) + [Arm.of("FLASH_ATTN"), Arm.of("FLASHINFER", kv_cache_dtype="fp8")])
def test_an_arm_parses_back_from_its_label_and_its_slug(arm):
    assert Arm.parse(arm.label) == arm and Arm.parse(arm.slug) == arm and Arm.parse(arm.slug.upper()) == arm


def test_server_args_select_backend_version_and_kv_cache_dtype():
    assert FA2.server_args() == ["--attention-backend", "FLASH_ATTN", "--attention-config.flash_attn_version", "2"]
    assert FLEX.server_args() == ["--attention-backend", "FLEX_ATTENTION"] and FLEX.server_env() == {}
    assert FA3_FP8.server_args()[-2:] == ["--kv-cache-dtype", "fp8"]
    # before vLLM 0.13 the backend is chosen through the environment; the KV dtype stays a flag
    assert FA3_FP8.server_args(cli_config=False) == ["--kv-cache-dtype", "fp8"]
    assert FA3.server_env(cli_config=False) == {"VLLM_ATTENTION_BACKEND": "FLASH_ATTN", "VLLM_FLASH_ATTN_VERSION": "3"}
    assert TRITON.server_env(cli_config=False) == {"VLLM_ATTENTION_BACKEND": "TRITON_ATTN"}


def test_our_kernels_take_vllms_custom_slot():
    # the plugin registers the book's kernels as vLLM's CUSTOM backend; before 0.13 there was no such flag
    assert OURS.server_args() == ["--attention-backend", "CUSTOM"] and OURS.vllm_backend == "CUSTOM"
    assert FA3.vllm_backend == "FLASH_ATTN"
    with pytest.raises(LabError, match="needs vLLM 0.13"):
        OURS.server_env(cli_config=False)


def test_the_log_confirms_a_flash_attention_version():
    assert Arm.of("FLASH_ATTN").confirmed(3) == FA3
    assert FA3_FP8.confirmed(3) == FA3_FP8 and FA3.confirmed(None) == FA3 and FLEX.confirmed(3) == FLEX


@pytest.mark.parametrize("make, message", [
    (lambda: Arm.of("XFORMERS"), "unknown attention backend"),
    (lambda: Arm.of("FLEX_ATTENTION", 3), "applies to FLASH_ATTN only"),
    (lambda: Arm.of("FLASH_ATTN", 5), "does not exist"),
    (lambda: Arm.of("FLASH_ATTN", 3, "fp4"), "KV-cache dtype 'fp4'"),
    (lambda: Arm("FA3", "FLASH_ATTN", 3), "does not match its settings"),
    (lambda: Arm.parse("flash attention 3"), "does not name an arm"),
    (lambda: known("FLASH_ATTN"), "choose one of FLASH_ATTN/FA3"),
])
def test_a_bad_arm_is_refused_with_a_reason(make, message):
    with pytest.raises(LabError, match=message):
        make()


def test_every_arm_folder_in_data_names_a_known_arm():
    from lab import REPO_ROOT

    folders = [p for p in REPO_ROOT.glob("data/*/vllm*/**/provenance.json") if "local" not in p.parts]
    assert folders, "no vLLM dataset in data/"
    for path in folders:
        # an interference study keeps one folder per chunk size inside its arm's: <arm>/chunk-<n>/
        arm = path.parent.parent if path.parent.name.startswith("chunk-") else path.parent
        assert Arm.parse(arm.name).slug == arm.name, path
        assert Arm.parse(arm.name) in ARMS.values(), path


@pytest.mark.parametrize("arm", list(ARMS.values()))
def test_a_commands_options_name_the_arm_they_were_written_for(arm):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert from_args(parser.parse_args(options(arm).split())) == arm


def test_the_book_shows_flash_attention_first_and_unknown_labels_last():
    from lab.measure.vllm.arms import book_order

    shown = book_order(["TRITON_ATTN", "FAKE", "FLEX_ATTENTION", "FLASH_ATTN/FA2", "FLASH_ATTN/FA3", "FLASH_ATTN", "FLEX_ATTENTION"])
    assert shown == ["FLASH_ATTN", "FLASH_ATTN/FA3", "FLASH_ATTN/FA2", "FLEX_ATTENTION", "TRITON_ATTN", "FAKE"]


QWEN = {"hidden_size": 3584, "num_attention_heads": 28, "use_sliding_window": False}


@pytest.mark.parametrize("config, words", [
    ({**QWEN, "hidden_size": 2688}, "head sizes 64 and 128; this model's is 96: use --backend FLASH_ATTN"),
    ({**QWEN, "head_dim": 256}, "this model's is 256"),
    ({**QWEN, "use_sliding_window": True}, "no sliding window"),
    ({**QWEN, "head_dim": 128, "layer_types": ["full_attention", "sliding_attention"]}, "no sliding window"),
])
def test_what_our_kernels_cannot_serve_is_said_before_a_server_starts(config, words, tmp_path):
    from lab.measure.vllm.arms import refusal
    from lab.measure.vllm.server import ServeSpec

    assert words in refusal(OURS, config) and refusal(FA3, config) is None
    (tmp_path / "config.json").write_text(__import__("json").dumps(config))
    with pytest.raises(LabError, match=words.split(":")[0]) as raised:
        ServeSpec(model=str(tmp_path), backend="OURS").check()
    assert "\n" not in str(raised.value)


def test_our_kernels_serve_qwen_and_refuse_an_fp8_cache():
    from lab.measure.vllm.arms import refusal

    assert refusal(OURS, QWEN) is None
    with pytest.raises(LabError, match="KV cache in the model's dtype, not fp8: use --backend FLASH_ATTN"):
        Arm.of("OURS", kv_cache_dtype="fp8")
