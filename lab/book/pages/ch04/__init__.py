"""Chapter 4, FlashAttention in Triton: every number it states, its figures and its tables.

Each run is opened once (:func:`runs`, in ``sources``); :func:`facts` (in ``numbers``, beside the quantities it
states) returns every fact the chapter glues, cached, so the interview page and the course kit take the same
facts under the same names without reading a file again; ``tables`` draws the tables and figures. The runs,
and what the chapter takes from each:

    h200/kernels-race            the race of record: every candidate at 4k-128k (the race table and figure)
    h200/kernels                 the benchmark's earlier full run: 1k and the naive path, the autotuner's picks,
                                 the teaching kernel's launches, the tuning rounds (drift, register cap, tricks)
    h200/kernels-ablation        the ablation, each step switched on in turn, FA3 timed beside it
    h200/kernels-tuning-race     every variant of the tuned Triton kernel against FA3
    h200/kernels-hopper-race     the Gluon kernel's schedule, part by part, against FA3 (the Gluon race)
    h200/kernel-counters         chapter 2's counters of FA3, FA4 and our Triton kernel at 16k
    h200/kernel-counters-hopper  FA3 and the Gluon kernel profiled side by side at 16k
    h200/device-logs             the console of the SDPA FA3/FA4 hook probe
    h100/kernels-persistent-race the persistent launch against the per-tile one and FA3, a later H100 lease
                                 (with its repeat and two Nsight Compute runs: ``persistent``)

Every number from data is a named quantity (declared in ``numbers``, or in :mod:`lab.results.kernel_counters`) with one
run of record; a ratio is always taken within one run, and a value quoted from another run than the record
carries that run in its quantity (the page names it). One criterion decides whether two timings differ: they
are further apart than the drift of an unchanged call (:func:`lab.results.tuning.beyond_drift`).
"""

from lab.book.kernel_explorers import prefill_explorer
from lab.book.pages.ch04.numbers import facts
from lab.book.pages.ch04.persistent import persistent_table
from lab.book.pages.ch04.sources import HOPPER_COUNTERS, HOPPER_RACE, TARGET, drift, runs
from lab.book.pages.ch04.tables import (
    ablation_figure,
    ablation_table,
    autotune_space,
    check_table,
    gluon_counters_table,
    gluon_table,
    launch_table,
    prefill_figure,
    race_table,
    register_cap_table,
    teaching_launches_table,
    tricks_table,
    tuning_race_table,
)

__all__ = ["HOPPER_COUNTERS", "HOPPER_RACE", "TARGET", "ablation_figure", "ablation_table", "autotune_space",
           "check_table", "drift", "facts", "gluon_counters_table", "gluon_table", "launch_table", "prefill_explorer",
           "persistent_table", "prefill_figure", "race_table", "register_cap_table", "runs", "teaching_launches_table", "tricks_table",
           "tuning_race_table"]
