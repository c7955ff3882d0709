"""Let Triton's CPU interpreter use loop bounds computed from ``tl.program_id`` under NumPy >= 2.4.

The interpreter (Triton 3.6) holds every scalar as a one-element array and turns it into a Python
int with ``int(array)``, which NumPy 2.4 refuses for arrays that are not 0-d. A kernel whose loop
runs ``range(0, hi)`` with ``hi`` derived from the program id (causal tile skipping, KV splits) then
fails in the interpreter only. This wraps the interpreter's tensor patching so that conversion reads
the single element instead. It changes nothing on a GPU.
"""

from __future__ import annotations

import numpy as np


def apply() -> None:
    from triton.runtime import interpreter

    if getattr(interpreter, "_lab_index_fix", False):
        return
    original = interpreter._patch_lang_tensor

    def patched(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(np.asarray(self.handle.data).reshape(-1)[0]))

    interpreter._patch_lang_tensor = patched
    interpreter._lab_index_fix = True
