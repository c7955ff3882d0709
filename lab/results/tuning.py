"""What the forward kernel's tuning runs say (``python -m lab tune-forward``, data/h200/kernels/tuning_forward.csv).

Two questions a reader of a benchmark should ask, answered from the same files:

* How much do timings move on their own? Each tuning round times cuDNN at the start and at the
  end of every shape; the change between the two is the drift of an unchanged kernel. One criterion
  then holds for every comparison the book makes (a step, a variant, a target): two timings differ
  only when their ratio, either way up, is further from 1 than that drift (:func:`beyond_drift`).
* Which kernel variants were tried and lost, and by how much, against the plain kernel of the
  same round (ratios are only taken within a round: rounds ran on different machine starts).
"""

from __future__ import annotations

import json
import math
import re

from lab import LabError
from lab.results.facts import Fact
from lab.results.quantities import Quantity

#: The reference timed at the start and end of every shape in a round.
REFERENCE = "sdpa CUDNN_ATTENTION"


#: How far an unchanged kernel's time moves within a run: chapter 4's criterion for a change, the method appendix's
#: first measure of drift.
DRIFT = Quantity("h200.tuning.drift_pct", "the largest change of cuDNN's time between the start and the end of one "
                 "shape of a tuning run: how far an unchanged kernel's time moves within a run", run="h200/kernels",
                 file="tuning_forward.csv", unit="%")


def drift(tuning) -> Fact:
    """:func:`drift_pct` of the tuning table of the benchmark's first full run, as the fact every page glues."""
    return DRIFT.fact(drift_pct(tuning))


def apart_pct(ratio: float) -> float:
    """How far apart two timings are, in percent, whichever is larger: ``ratio`` of the two either way up
    (1.05 and 1/1.05 are both 5% apart); NaN if the ratio is not a positive number."""
    if not ratio > 0:
        return math.nan
    return 100 * (max(ratio, 1 / ratio) - 1)


def beyond_drift(ratio: float, drift: float) -> bool:
    """Whether two timings (or speeds) whose ratio is ``ratio`` differ by more than ``drift`` percent: the one
    criterion for a step, a variant or a target."""
    return bool(apart_pct(ratio) > drift)


def drift_pct(tuning) -> float:
    """Largest change, in percent, of the reference's time between the start and end of a shape
    (:func:`apart_pct` of the two)."""
    worst = None
    for (_, _), group in tuning.groupby(["round", "shape"]):
        start = group[group.setting == f"{REFERENCE} (start)"].ms
        end = group[group.setting == f"{REFERENCE} (end)"].ms
        if len(start) and len(end):
            change = apart_pct(float(end.iloc[0]) / float(start.iloc[0]))
            worst = change if worst is None else max(worst, change)
    if worst is None:
        raise LabError(f"no '{REFERENCE} (start)' and '(end)' pair in the tuning table")
    return worst


def variants(tuning, shape: str = "prefill 16k"):
    """One row per (round, variant) at ``shape``: the best launch of the variant, the best plain
    launch of the same round, and how often the variant failed to compile or run."""
    import pandas as pd

    ours = tuning[(tuning["shape"] == shape) & tuning.setting.str.startswith("tuned")]
    if ours.empty:
        raise LabError(f"no tuned-kernel rows at {shape!r} in the tuning table")
    rows = []
    for rnd, group in ours.groupby("round"):
        plain = group[(group.variant == "plain") & group.ms.notna()]
        best_plain = plain.loc[plain.ms.idxmin()] if len(plain) else None
        reference = tuning[(tuning["round"] == rnd) & (tuning["shape"] == shape) &
                           (tuning.setting == f"{REFERENCE} (start)")].ms
        for variant, v in group.groupby("variant", sort=False):
            ok = v[v.ms.notna()]
            best = ok.loc[ok.ms.idxmin()] if len(ok) else None
            rows.append({
                "round": rnd, "variant": variant, "tried": len(v), "failed": len(v) - len(ok),
                "best_setting": None if best is None else f"{best.setting.removeprefix('tuned ')} tma={int(best.tma)}",
                "best_ms": math.nan if best is None else float(best.ms),
                "plain_ms": math.nan if best_plain is None else float(best_plain.ms),
                "reference_ms": float(reference.iloc[0]) if len(reference) else math.nan,
                "failure": "" if len(ok) == len(v) else str(v[v.ms.isna()].note.iloc[0]).split(":")[0],
            })
    table = pd.DataFrame(rows)
    table["vs_plain"] = table.plain_ms / table.best_ms            # > 1: the variant is faster
    table["vs_reference"] = table.reference_ms / table.best_ms
    return table


def change_pct(before_ms: float, after_ms: float) -> float:
    """How much faster ``after`` is than ``before``, in percent (negative: slower; NaN if either is missing)."""
    if not (before_ms > 0 and after_ms > 0):
        return math.nan
    return 100 * (before_ms / after_ms - 1)


#: How the ablation marks a step measured on top of the kept ones but not kept itself (lab.measure.timing).
NOT_KEPT = "(tried, not kept)"


def step_changes(ablation, noise_pct: float):
    """Each ablation step against the step it was built on, at every length: the step before it, or for a
    step tried and not kept (:data:`NOT_KEPT`) the last kept step. One row per (n, step) with ``after_step``
    (the step compared with), ``change_pct`` (how much faster, in percent; negative: slower) and ``beyond_drift``
    (:func:`beyond_drift` of the two times against ``noise_pct``)."""
    import pandas as pd

    if ablation.empty:
        raise LabError("the ablation table is empty; run `python -m lab bench` (it times the ablation at 16k and 32k)")
    rows = []
    for n in sorted(ablation.n.unique()):
        steps = ablation[ablation.n == n].sort_values("step")
        base = steps.iloc[0]
        for after in steps.iloc[1:].itertuples():
            change = change_pct(base.ms, after.ms)
            rows.append({"n": int(n), "step": int(after.step), "change": after.change, "after_step": int(base.step),
                         "change_pct": change, "beyond_drift": beyond_drift(base.ms / after.ms, noise_pct)})
            if NOT_KEPT not in str(after.change):
                base = after
    return pd.DataFrame(rows)


#: Columns of tuning_forward.csv; the last six came with the rounds that recorded resources and clocks.
TABLE_COLUMNS = ("round", "code", "shape", "setting", "variant", "tma", "ms", "max_abs_err", "note",
                 "registers", "spills", "shared_kib", "programs_per_sm", "sm_mhz", "clock_limit")


def log_rows(lines, round_no: int, code: str, variant: str = "plain") -> list[dict]:
    """The lines of one ``tune.jsonl`` (python -m lab tune-forward) as rows of tuning_forward.csv."""
    rows = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise LabError(f"tune.jsonl line {number} is not JSON ({exc}); was the run cut off? "
                           "drop the broken line and convert again") from None
        launch = "launch" in entry
        rows.append({
            "round": round_no, "code": code, "shape": entry["shape"],
            "setting": "tuned " + re.sub(r" tma=\d$", "", entry["label"]) if launch else entry["label"],
            "variant": variant if launch else "", "tma": entry.get("tma", "") if launch else "",
            "ms": entry.get("ms"), "max_abs_err": entry.get("err"), "note": entry.get("note", ""),
            **{key: entry.get(key, "") for key in TABLE_COLUMNS[9:]},
        })
    return rows


def register_cap_pairs(tuning, shape: str = "prefill 16k"):
    """Launches timed with and without a register cap in the same round (rounds that recorded
    resources): one row per pair, with the resident programs per multiprocessor of each.

    A cap helps when it lets one more program fit on a multiprocessor (two programs can overlap one's
    matrix products with the other's softmax); when it does not, it only adds spills."""
    import pandas as pd

    ours = tuning[(tuning["shape"] == shape) & tuning.setting.str.startswith("tuned") & tuning.programs_per_sm.notna()]
    capped = ours[ours.setting.str.contains(r" r\d+$")]
    rows = []
    for row in capped.itertuples():
        base = row.setting.rsplit(" r", 1)[0]
        plain = ours[(ours["round"] == row.round) & (ours.setting == base) & (ours.tma == row.tma)]
        if plain.empty:
            continue
        plain = plain.iloc[0]
        rows.append({"round": row.round, "launch": base.removeprefix("tuned "), "tma": row.tma,
                     "cap": int(row.setting.rsplit(" r", 1)[1]),
                     "registers": int(plain.registers), "programs_per_sm": int(plain.programs_per_sm), "ms": float(plain.ms),
                     "registers_capped": int(row.registers), "spills_capped": int(row.spills),
                     "programs_per_sm_capped": int(row.programs_per_sm), "ms_capped": float(row.ms)})
    if not rows:
        raise LabError(f"no launch timed both with and without a register cap at {shape!r} in the tuning table")
    table = pd.DataFrame(rows)
    table["speedup"] = table.ms / table.ms_capped
    return table


def race_best(race, reference: str = "fa3"):
    """The fastest variant of the tuned kernel at each length of a tuning race (python -m lab tuning-race,
    race.csv), against ``reference`` timed in the same race: one row per n with variant, ms, reference_ms and
    vs_reference (reference ms / variant ms), and how many variants ran and failed."""
    import pandas as pd

    peers = {"fa3", "fa4", "flex-flash", "sdpa-cudnn"}
    rows = []
    for n, group in race.groupby("n"):
        ours = group[~group.variant.isin(peers)]
        ok = ours[(ours.status == "ok") & ours.ms.notna()]
        ref = group[(group.variant == reference) & (group.status == "ok")]
        if ok.empty or ref.empty:
            raise LabError(f"the tuning race has no timed variant and {reference} at n={n}")
        best = ok.loc[ok.ms.idxmin()]
        rows.append({"n": int(n), "variant": best.variant, "ms": float(best.ms), "reference_ms": float(ref.ms.iloc[0]),
                     "vs_reference": float(ref.ms.iloc[0]) / float(best.ms), "variants": len(ours),
                     "failed": int((ours.status != "ok").sum())})
    return pd.DataFrame(rows)


def race_vs(race, variants, reference: str = "fa3"):
    """Each of ``variants`` at each length of a race (python -m lab tuning-race, race.csv), against ``reference``
    timed in the same race: one row per (n, variant) in the order given, with ms, vs_reference (reference ms
    / variant ms) and the largest error against the fp32 reference. A variant missing or not timed at some
    length is an error (a table of this race would silently lose a row)."""
    import pandas as pd

    rows = []
    for n, group in race.groupby("n"):
        timed = group[(group.status == "ok") & group.ms.notna()].set_index("variant")
        for name in (reference, *variants):
            if name not in timed.index:
                raise LabError(f"the race has no timed {name!r} at n={n}; it has {sorted(timed.index)}")
        ref_ms = float(timed.loc[reference].ms)
        rows += [{"n": int(n), "variant": name, "ms": float(timed.loc[name].ms), "vs_reference": ref_ms / float(timed.loc[name].ms),
                  "max_abs_err": float(timed.loc[name].max_abs_err)} for name in variants]
    return pd.DataFrame(rows)
