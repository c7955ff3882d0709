"""What the Gluon kernel tests share: whether a Hopper GPU is here (Gluon has no CPU interpreter), Triton's own
ptxas, and the kernels compiled for sm_90a in a child process, one folder per variant (its PTX, cubin, shared
memory and warps), which the tests read."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import triton

PTXAS = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9 \
    and os.environ.get("TRITON_INTERPRET") != "1"
hopper_only = pytest.mark.skipif(not HOPPER, reason="needs a Hopper GPU (Gluon has no CPU interpreter)")

# Compiled in a child process started with TRITON_INTERPRET=0: the suite runs under TRITON_INTERPRET=1, under
# which Triton's library functions (the reductions' combine functions) are interpreter objects the compiler refuses.
_COMPILE = """
import importlib, json, sys
from pathlib import Path
module, function = sys.argv[2].split(":")
compile_kernel = getattr(importlib.import_module(module), function)
for i, kw in enumerate(json.loads(sys.argv[3])):
    if "launch" in kw:
        kw["launch"] = tuple(kw["launch"])
    compiled = compile_kernel(**kw)
    folder = Path(sys.argv[1]) / str(i)
    folder.mkdir()
    (folder / "k.ptx").write_text(compiled.asm["ptx"])
    (folder / "k.cubin").write_bytes(compiled.asm["cubin"])
    (folder / "shared").write_text(str(compiled.metadata.shared))
    (folder / "warps").write_text(str(compiled.metadata.num_warps))
"""


def compile_variants(out: Path, compile_kernel: str, variants: dict[str, dict]) -> dict[str, Path]:
    """Each variant (name -> keyword arguments) compiled by ``compile_kernel`` ("module:function") under ``out``:
    name -> its folder."""
    subprocess.run([sys.executable, "-c", _COMPILE, str(out), compile_kernel, json.dumps(list(variants.values()))],
                   env={**os.environ, "TRITON_INTERPRET": "0"}, check=True,
                   cwd=Path(__file__).resolve().parent.parent, timeout=900)
    return {name: out / str(i) for i, name in enumerate(variants)}


def ptxas_report(folder: Path) -> str:
    """ptxas's verbose report (registers, spills, advisories) on a variant's PTX, assembled again for sm_90a."""
    return subprocess.run([str(PTXAS), "-arch=sm_90a", "-v", str(folder / "k.ptx"), "-o", str(folder / "re.cubin")],
                          capture_output=True, text=True, check=True).stderr
