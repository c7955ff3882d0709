"""The tuned forward kernel's optional steps, as one value (what the ablation switches on one by one)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Switches:
    """The tuned kernel's optional steps, each switchable so that the ablation can measure what it buys.

    ``split_diagonal``: off-diagonal tiles without a mask. ``heavy_first``: the heaviest query tiles
    launched first. ``kv_major``: one KV head's query heads and tiles launched together (what runs at
    once reads one head's K/V, which stays in L2), instead of every head of a query tile side by side.
    ``persistent``: a few programs per multiprocessor take units of work from a counter. ``warp_specialize``:
    Triton's automatic warp specialisation of the key loop (needs TMA loads on Hopper). ``rescale_threshold``:
    FA4's lazy rescaling, the accumulator rescaled only when a row max grows by more than this (log2
    units; 0: always). ``poly_exp2``: FA4's half of the exponentials as a polynomial on the FMA units
    (16-bit inputs only: its 1e-4 relative error is below their rounding, not fp32's).
    """

    split_diagonal: bool = True
    heavy_first: bool = True
    kv_major: bool = False
    persistent: bool = False
    warp_specialize: bool = False
    rescale_threshold: float = 0.0
    poly_exp2: bool = False

    def constexprs(self, sixteen_bit: bool) -> dict:
        return dict(SPLIT_DIAGONAL=self.split_diagonal, HEAVY_FIRST=self.heavy_first, KV_MAJOR=self.kv_major,
                    PERSISTENT=self.persistent, WARP_SPECIALIZE=self.warp_specialize,
                    RESCALE_THRESHOLD=float(self.rescale_threshold), POLY_EXP2=self.poly_exp2 and sixteen_bit)


#: What tuned_forward runs by default (the ablation's steps switch these on one by one; a step that
#: lost on the H200 stays off here, see lab.measure.timing.FA3_STEPS).
DEFAULT_SWITCHES = Switches(kv_major=True)
