"""FlashAttention 4's two exponent tricks, as Triton functions for the tuned forward kernel.

* :func:`exp2_split` -- half of a score tile's exponentials computed as a polynomial on the FMA units
  instead of the special-function unit (on Blackwell that unit, not the tensor cores, limits the
  softmax; FA4's ``ex2_emulation`` in flash_attn/cute/utils.py).
* :func:`next_max` -- lazy rescaling: the running row max is only raised when the new one is larger by
  more than a threshold, so most tiles skip rescaling the accumulator (FA4's ``rescale_threshold`` in
  flash_attn/cute/softmax.py; P may then reach 2^threshold, harmless in fp32 and 16-bit floats).
"""

from __future__ import annotations

from lab import env

env.use_triton_interpreter_without_gpu()

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

#: 2^f for f in [-0.5, 0.5] as a cubic (relative error under 1e-4, below bf16's rounding of P):
#: FlashAttention 4's trick of computing part of the exponentials on the FMA units instead of the
#: special-function unit. Fitted for this range; FA4 fits [0, 1) and rounds down with an asm add.
C0, C1, C2, C3 = (tl.constexpr(c) for c in (0.9999281167984009, 0.6932609677314758, 0.24261055886745453, 0.05517132580280304))
ROUND = tl.constexpr(12582912.0)  # 2^23 + 2^22: adding it rounds an fp32 to an integer, kept in the low mantissa bits


@triton.jit
def exp2_fma(x):
    """2^x with adds, multiplies and integer ops only: 2^round(x) into the exponent bits, 2^frac from a cubic."""
    x = tl.maximum(x, -127.0)
    shifted = x + ROUND                                  # round to nearest, the integer in the low bits
    f = x - (shifted - ROUND)                            # in [-0.5, 0.5]
    p = C0 + f * (C1 + f * (C2 + f * C3))
    return (p.to(tl.int32, bitcast=True) + (shifted.to(tl.int32, bitcast=True) << 23)).to(tl.float32, bitcast=True)


@triton.jit
def exp2_split(s):
    """exp2 of a score tile: the left half of the columns on the special-function unit, the right half on FMAs."""
    BM: tl.constexpr = s.shape[0]
    BN: tl.constexpr = s.shape[1]
    left, right = s.reshape([BM, 2, BN // 2]).permute(0, 2, 1).split()
    return tl.join(tl.math.exp2(left), exp2_fma(right)).permute(0, 2, 1).reshape([BM, BN])


@triton.jit
def next_max(m_i, tile_max, THRESHOLD: tl.constexpr):
    m_new = tl.maximum(m_i, tile_max)
    if THRESHOLD > 0:  # FA4: keep the old max unless the new one is larger by THRESHOLD (log2 units): P <= 2^THRESHOLD
        m_new = tl.where(m_new - m_i > THRESHOLD, m_new, m_i)
    return m_new
