"""Shared test setup."""

# Kernels tests (issue 5): Triton reads TRITON_INTERPRET when it is imported, so without a GPU the
# interpreter must be switched on before any test module imports triton.
from lab import env as _env

_env.use_triton_interpreter_without_gpu()
