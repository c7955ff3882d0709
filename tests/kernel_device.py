"""Where the kernel tests run and how closely they check: the compiled kernels on a CUDA GPU, or Triton's
interpreter on the CPU (``TRITON_INTERPRET=1``, or no GPU); the tolerance each dtype is held to against the
fp32/fp64 reference. Imported by the kernel test files, so one rule decides for all of them."""

import os

import torch

ON_GPU = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"
DEVICE = "cuda" if ON_GPU else "cpu"
# the interpreter's tl.dot is wrong for bf16, so bf16 is checked on a GPU only
TOLERANCE = {torch.float32: 1e-5, torch.float16: 4e-3, torch.bfloat16: 2e-2}
