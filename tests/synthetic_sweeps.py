"""A made-up H200 study for tests: sweep.csv tables from known formulas, with provenance like a real run's.

Only for exercising code paths that need H200 data before it exists; never written under data/.
"""

from __future__ import annotations

import shutil

import pandas as pd

from lab import REPO_ROOT, store

LENGTHS = [256, 1024, 4096, 8192, 16384, 32768]
#: arm -> (a s, b s/token, c s/token², ITL ms at 0, ITL ms per 1000 tokens)
ARMS = {
    "FLASH_ATTN/FA3": (0.02, 25e-6, 300e-12, 5.0, 0.01),
    "FLASH_ATTN/FA2": (0.02, 27e-6, 600e-12, 5.1, 0.03),
    "FLEX_ATTENTION": (0.02, 26e-6, 3000e-12, 5.4, 1.5),
}
SLUGS = {"FLASH_ATTN/FA3": "flash_attn-fa3", "FLASH_ATTN/FA2": "flash_attn-fa2", "FLEX_ATTENTION": "flex_attention"}


def write_study(root, study="h200/vllm0.26-qwen2.5-7b", arms=ARMS, chunk=8192, lengths=LENGTHS,
                with_reference=True, tp=None):
    """Write the made-up arms under ``root/study``; copy the A10G reference dataset beside them."""
    if with_reference:
        shutil.copytree(REPO_ROOT / "data" / "reference", root / "reference", dirs_exist_ok=True)
    for arm, (a, b, c, itl0, slope) in arms.items():
        folder = root / study / SLUGS[arm]
        rows = []
        for n in lengths:
            itl = itl0 + slope * n / 1000
            ttft = a + b * n + c * n * n
            rows.append({"arm": arm, "backend": arm.split("/")[0], "target_len": n, "actual_len": n, "ttft_s": ttft,
                         "prefill_ms_per_token": ttft * 1000 / n, "itl_ms": itl, "itl_p10_ms": itl * 0.97,
                         "itl_p90_ms": itl * 1.05, "reps": 3, "status": "ok", "error": None})
        store.write_csv(folder, "sweep.csv", pd.DataFrame(rows))
        fa = int(arm[-1]) if "/FA" in arm else None
        record = store.new_provenance("vllm-sweep", model="qwen2.5-7b-128k (random weights)", dtype="bfloat16",
                                     flags={"backend": arm.split("/")[0], "fa_version": fa,
                                            "max_num_batched_tokens": chunk, "max_model_len": 33024,
                                            **({"tensor_parallel_size": tp} if tp else {})},
                                     command="python -m lab vllm-sweep (synthetic test data)", arm=arm,
                                     server={"ready_s": 300.0 if fa == 2 else 80.0})
        record.update(gpu="NVIDIA H200", vllm="0.26.0")
        store.write_provenance(folder, record)
    return root
