"""What the sweep chapter reports: the studies on file, their fits, and the roofline floor under them.

A *study* is one GPU and engine (``reference/a10g-vllm0.11-qwen2.5-7b``, ``h200/vllm0.26-qwen2.5-7b``,
a reader's ``local/vllm``); its arms are the attention backends. Everything here reads the cached
``sweep.csv`` tables through :func:`sweep_table`, so new runs show up without code.

The floor is the roofline's answer to "how fast could this be at best" for Qwen2.5-7B on that GPU
(datasheet peak FLOP/s from :mod:`lab.results.hardware`, the GPU's one bandwidth ceiling from
:mod:`lab.results.bandwidth`, FLOPs and bytes from :mod:`lab.results.roofline`): prefill can be no faster
than its FLOPs over peak FLOP/s, a decode step no faster than the weights plus the KV cache it reads over
the bandwidth ceiling.

How fast decode reads the cache is estimated one way, everywhere: :func:`kv_read_rate`, the slope of ITL
against context over every measured length.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from lab import LabError
from lab.measure.vllm import arms
from lab.results import data, reference
from lab.results.bandwidth import bandwidth_ceiling, short_name, slope_rate
from lab.results.concurrency import floor_step_s, kv_bytes_per_step
from lab.results.data import DATA_DIR, load, load_sweeps
from lab.results.facts import Fact
from lab.results.fit import decode_growth, fit_quadratic, ok_rows, shared_lengths
from lab.results.hardware import match_device
from lab.results.modelshape import qwen25_7b
from lab.results.quantities import Quantity
from lab.results.roofline import model_phase, roof

A10G_STUDY = reference.DATASET
SHARE_AT = (2048, 8192, 32768)
#: The arms' labels (lab.measure.vllm.arms): the A10G study's FLASH_ATTN and FLEX_ATTENTION, the H200's FA3 and FA2.
FLASH, FLEX = arms.FLASH.label, arms.FLEX.label
FA3, FA2 = arms.FA3.label, arms.FA2.label
#: The H200 study with vLLM's default settings; its variants (another chunk size, two GPUs) have folders of their own.
H200_STUDY = "h200/vllm0.26-qwen2.5-7b"


# --- the quantities of a prompt-length sweep, one family per study (members: [arm, ...]); chapters 1 and 6 ---

def _sweep(gpu: str, run: str, provenance: str) -> dict[str, Quantity]:
    where = f"the {gpu.upper()} sweep, one request at a time"
    q = lambda key, means, unit, file="sweep.csv": Quantity(f"{gpu}.sweep.{key}", f"{means}, {where}",  # noqa: E731
                                                            run=run, file=file, unit=unit)
    fit = ("of the least-squares fit TTFT = a + b n + c n² over the prompt lengths every arm of the study ran, or where "
           "a member says so the arm's own (the fit, or its 95% interval)")
    return {"a": q("fit_a", f"the constant a {fit}", "ms"), "b": q("fit_b", f"the linear coefficient b {fit}", "µs/token"),
            "c": q("fit_c", f"the quadratic coefficient c {fit}", "ps/token²"),
            "c_ratio": q("c_ratio", "one arm's fitted c over another's", "×"),
            "share": q("quadratic_share", "c n² / (b n + c n²) of an arm's fit at a prompt length", "%"),
            "b_eff": q("matmul_efficiency", "the matmul FLOPs of one token at the datasheet bf16 peak over the fitted b",
                       "%"),
            "c_eff": q("attention_efficiency", "the causal attention FLOPs per token² at the datasheet peak over the "
                       "fitted c", "%"),
            "ttft": q("ttft", "median TTFT of the repetitions at a prompt length", "s"),
            "ttft_fit": q("ttft_fit", "an arm's fitted TTFT at a prompt length (past the fitted lengths, a prediction)",
                          "s"),
            "fit_error": q("fit_error", "an arm's fitted TTFT over its measured TTFT at a prompt length, minus one", "%"),
            "ttft_ratio": q("ttft_ratio", "one arm's TTFT over another's at a prompt length", "×"),
            "ttft_extra": q("ttft_extra", "how much longer one arm's TTFT is than another's at a prompt length", "%"),
            "itl": q("itl", "median inter-token gap pooled over the repetitions' decode gaps at a context length", "ms"),
            "itl_growth": q("itl_growth", "an arm's ITL at its longest context over its shortest, minus one", "%"),
            "itl_ratio": q("itl_ratio", "one arm's ITL over another's at a context length", "×"),
            "length": q("length", "a prompt length the sweep ran (its target length)", "tokens"),
            "x_floor": q("over_floor", "a measured TTFT or ITL over its roofline floor", "×"),
            "setting": q("setting", "a setting of the sweep as its provenance records it", "", provenance),
            "ready": q("server_ready", "seconds from an arm's server start to its first answer", "s",
                       "<arm>/provenance.json")}


SWEEP_QUANTITIES = {"a10g": _sweep("a10g", A10G_STUDY, "provenance.json"),
                    "h200": _sweep("h200", "h200/vllm0.26-qwen2.5-7b", "<arm>/provenance.json")}


def study_of(dataset: str, root: Path = DATA_DIR) -> str:
    """The study a dataset belongs to: the first two folders of its path under ``root`` (data/).

    ``h200/vllm0.26-qwen2.5-7b/FLASH_ATTN_FA3`` -> ``h200/vllm0.26-qwen2.5-7b``: one arm per folder,
    one study per GPU and engine version, so every arm of that GPU is drawn together.
    """
    path = Path(dataset)
    if path.is_absolute():
        path = path.relative_to(root)
    return "/".join(path.parts[:2])


def fit_rows(table, study: str, arm: str, lengths=None):
    """An arm's measured rows that its prefill fit covers: ``lengths`` (target lengths), by default the lengths every
    arm of its study measured (:func:`lab.results.fit.shared_lengths`)."""
    if lengths is None:
        lengths = shared_lengths(table[table["study"] == study])
    rows = ok_rows(arm_rows(table, study, arm))
    return rows[rows["target_len"].isin(lengths)]


def prefill_fit(table, study: str, arm: str, lengths=None):
    """The arm's fit t = a + b·n + c·n² over :func:`fit_rows`; None under 3 lengths (a reader's partial run)."""
    rows = fit_rows(table, study, arm, lengths)
    return fit_quadratic(rows["actual_len"], rows["ttft_s"]) if rows["actual_len"].nunique() >= 3 else None


def fits_by_arm(table) -> dict:
    """(study, arm) -> the arm's :func:`prefill_fit`, for every arm that has one."""
    fits = {}
    for study, arm in ok_rows(table)[["study", "arm"]].drop_duplicates().itertuples(index=False):
        fit = prefill_fit(table, study, arm)
        if fit is not None:
            fits[study, arm] = fit
    return fits


#: Columns the sweep table carries from each dataset's provenance (so no reader reloads it by name).
PROVENANCE_COLUMNS = ("provenance", "vllm", "chunk", "tensor_parallel", "max_model_len")


def _provenance_columns(dataset: str, root: Path) -> dict:
    prov = load(Path(root) / dataset).provenance
    flags = prov.get("flags", {}) or {}
    chunk = flags.get("max_num_batched_tokens")
    return {"provenance": prov, "vllm": prov.get("vllm"), "chunk": None if chunk is None else int(chunk),
            "tensor_parallel": int(flags.get("tensor_parallel_size") or 1),
            "max_model_len": flags.get("max_model_len")}


def sweep_table(root=DATA_DIR):
    """All sweeps with a ``study`` column and their provenance; a re-run of the same arm and length
    replaces the earlier row.

    Provenance travels with the rows: ``provenance`` (the dataset's whole record), ``vllm``,
    ``chunk`` (max_num_batched_tokens), ``tensor_parallel`` (GPUs one server spans, 1 unless the
    flags say otherwise) and ``max_model_len``.
    """
    import pandas as pd

    table = load_sweeps(root)
    table.insert(0, "study", table["dataset"].map(lambda name: study_of(name, Path(root))))
    per_dataset = {name: _provenance_columns(name, Path(root)) for name in table["dataset"].unique()}
    extra = pd.DataFrame([per_dataset[name] for name in table["dataset"]], index=table.index,
                         columns=list(PROVENANCE_COLUMNS))
    table = pd.concat([table, extra], axis=1)
    return table.drop_duplicates(["study", "arm", "target_len"], keep="last").reset_index(drop=True)


def sweeps(root=DATA_DIR):
    """Every measured row of every sweep (failed lengths dropped), with a ``study`` column."""
    return ok_rows(sweep_table(root)).reset_index(drop=True)


def provenance(table, study: str, arm: str | None = None) -> dict:
    """Provenance of a study's first arm, or of ``arm`` (GPU, engine and flags are shared by its arms);
    read from the table's ``provenance`` column."""
    rows = table[table["study"] == study]
    if arm is not None:
        rows = rows[rows["arm"] == arm]
    if rows.empty:
        raise LabError(f"no sweep rows for study {study!r}" + (f" and arm {arm!r}" if arm else ""))
    return rows["provenance"].iloc[0]


def flag_values(table, study: str, key: str) -> list:
    """The distinct values a provenance flag takes over the arms of a study (e.g. max_model_len)."""
    rows = table[table["study"] == study].drop_duplicates("dataset")
    values = {(prov.get("flags", {}) or {}).get(key) for prov in rows["provenance"]}
    return sorted(v for v in values if v is not None)


def chunk_size(table, study: str) -> int | None:
    """max_num_batched_tokens the study's server prefilled with (from provenance flags)."""
    value = table.loc[table["study"] == study, "chunk"].dropna()
    return None if value.empty else int(value.iloc[0])


def gpu_count(table, study: str) -> int:
    """How many GPUs one server of the study spans (its tensor-parallel size)."""
    return int(table.loc[table["study"] == study, "tensor_parallel"].iloc[0])


def find_study(table, gpu: str, chunk: int | None = None, gpus: int = 1) -> str | None:
    """The committed study measured on a GPU whose name contains ``gpu`` (local runs excluded).

    Only studies whose server spans ``gpus`` GPUs; with ``chunk``, only those whose server used that
    chunk size; otherwise the one with most arms (then most measured rows: a side experiment with
    one arm never wins over the main sweep).
    """
    candidates = []
    for study, rows in table.groupby("study"):
        if study.startswith("local/") or gpu.lower() not in str(rows["gpu"].iloc[0]).lower():
            continue
        if chunk is not None and chunk_size(table, study) != chunk:
            continue
        if gpu_count(table, study) != gpus:
            continue
        candidates.append((rows["arm"].nunique(), len(rows), -len(study), study))
    return max(candidates)[-1] if candidates else None  # most arms, then most rows, then the plainer name


def arm_rows(table, study: str, arm: str):
    rows = table[(table["study"] == study) & (table["arm"] == arm)]
    return rows.sort_values("actual_len")


def fit_summary(table, study: str):
    """One row per arm: the quadratic fit over the lengths every arm measured (``fitted_to``: the longest of them;
    ``longest``: the arm's own), with 95% intervals, quad shares, decode growth."""
    import pandas as pd

    out = []
    for arm in sorted(table.loc[table["study"] == study, "arm"].unique()):
        rows, fit = arm_rows(table, study, arm), prefill_fit(table, study, arm)
        if fit is None:
            continue
        row = {"arm": arm, "points": fit.points, "fitted_to": int(fit_rows(table, study, arm)["target_len"].max()),
               "a_s": fit.a,
               "b_us_per_token": fit.b_us_per_token, "b_lo": fit.b_ci[0] * 1e6, "b_hi": fit.b_ci[1] * 1e6,
               "c_ps_per_token2": fit.c_ps_per_token2, "c_lo": fit.c_ci[0] * 1e12, "c_hi": fit.c_ci[1] * 1e12,
               "longest": int(rows["actual_len"].max())}
        for n in SHARE_AT:
            row[f"share_{n}_pct"] = fit.quad_share(n) * 100
        itl = rows.dropna(subset=["itl_ms"])
        if len(itl) >= 2:
            growth = decode_growth(itl["actual_len"], itl["itl_ms"])
            row.update(itl_short_ms=growth.short_itl_ms, short_len=growth.short_len,
                       itl_long_ms=growth.long_itl_ms, long_len=growth.long_len, itl_growth_pct=growth.growth_pct)
        out.append(row)
    return pd.DataFrame(out)


def _shape():
    return qwen25_7b()


def _device(gpu_name: str):
    device = match_device(gpu_name)
    if device is None:
        raise LabError(f"no datasheet figures for {gpu_name!r} in lab.results.hardware; the floor cannot be drawn")
    return device


def floors(gpu_name: str, lengths, gpus: int = 1) -> dict:
    """Roofline floors of Qwen2.5-7B on this GPU at each prompt/context length (arrays, SI units).

    prefill_s: all prefill FLOPs (matmuls + causal attention) over peak bf16 FLOP/s;
    decode_s: one decode step's bytes (the weights and the KV cache of n tokens:
    :func:`lab.results.concurrency.floor_step_s`) over the GPU's bandwidth ceiling (``bandwidth_source`` says which: a measured read stream, or a datasheet).
    Also the per-token constants of the prefill floor: b_floor (s/token) and c_floor (s/token²).
    With ``gpus`` > 1 (tensor parallel) each GPU holds 1/gpus of the weights and of the KV heads and
    works at the same time, so both floors divide by the GPU count; communication is not in the floor.
    """

    device, shape = _device(gpu_name), _shape()
    one = roof(device)
    peak, bandwidth = one.peak_flops * gpus, one.bandwidth * gpus  # GPUs working together add up
    lengths = np.asarray(sorted(set(int(n) for n in lengths)), dtype=int)
    prefill, prefill_attention = [], []
    for n in lengths:
        p = model_phase(shape, "prefill", int(n), fused=True, sram_bytes=device.smem_per_sm)
        prefill.append(p["total"].flops / peak)
        prefill_attention.append(p["attention"].flops / peak)
    # the decode floor is lab.results.concurrency's, the one every chapter uses: weights + KV over the ceiling
    decode = [floor_step_s(1, int(n), bandwidth, shape) for n in lengths]
    decode_kv = [kv_bytes_per_step(1, int(n), shape) / bandwidth for n in lengths]
    # per-token constants of the floor, whatever lengths were asked for: the matmul FLOPs of one token,
    # and causal attention's FLOPs per token² at a long prompt (where partly-masked tiles no longer count)
    n_ref = 1 << 17
    attention_ref = model_phase(shape, "prefill", n_ref, fused=True, sram_bytes=device.smem_per_sm)["attention"]
    return {"n": lengths, "prefill_s": np.array(prefill), "prefill_attention_s": np.array(prefill_attention),
            "decode_s": np.array(decode), "decode_kv_s": np.array(decode_kv),
            "b_floor": shape.linear_flops_per_token() / peak,
            "c_floor": attention_ref.flops / n_ref**2 / peak,
            "device": device.name, "peak_flops": peak, "bandwidth": bandwidth, "gpus": gpus,
            "bandwidth_source": bandwidth_ceiling(device).source,
            "kv_bytes_per_token": shape.kv_bytes_per_token()}


def against_floor(table, study: str):
    """Per arm and length: measured TTFT and ITL beside their floors, and the ratio measured / floor."""
    import pandas as pd

    rows = table[table["study"] == study]
    gpu = str(rows["gpu"].iloc[0])
    floor = floors(gpu, rows["actual_len"], gpu_count(table, study))
    index = {int(n): i for i, n in enumerate(floor["n"])}
    out = []
    for row in rows.itertuples():
        i = index[int(row.actual_len)]
        out.append({"arm": row.arm, "n": int(row.actual_len), "ttft_s": row.ttft_s,
                    "prefill_floor_s": floor["prefill_s"][i], "ttft_x_floor": row.ttft_s / floor["prefill_s"][i],
                    "itl_ms": row.itl_ms, "decode_floor_ms": floor["decode_s"][i] * 1e3,
                    "itl_x_floor": row.itl_ms / (floor["decode_s"][i] * 1e3)})
    return pd.DataFrame(out).sort_values(["arm", "n"]).reset_index(drop=True)


def kv_read_rate(table, study: str, arm: str) -> dict:
    """How fast decode absorbs a longer context: the slope of ITL against the KV bytes of the context
    (:func:`lab.results.bandwidth.slope_rate`, the one way this book turns times into a read rate).

    The slope is the extra time each step spends per extra byte of cache; its inverse is the rate at which
    attention reads the cache (``ms_per_1k_tokens``: the same slope per 1000 cached tokens).
    """
    rows = arm_rows(table, study, arm).dropna(subset=["itl_ms"])
    if len(rows) < 2:
        raise LabError(f"{study} {arm}: fewer than two ITL measurements")
    kv = _shape().kv_bytes_per_token()
    rate, _ = slope_rate(rows["actual_len"].to_numpy(float) * kv, rows["itl_ms"].to_numpy(float) / 1e3)
    rate = rate if rate > 0 else math.inf  # ITL that does not grow: no finite rate
    return {"ms_per_1k_tokens": 1e3 * kv * 1e3 / rate, "kv_gb_per_s": rate / 1e9, "kv_bytes_per_token": kv}


def arm_source(table, study: str, arm: str) -> str:
    """The sweep file one arm's rows come from (data/<dataset>/sweep.csv)."""
    datasets = arm_rows(table, study, arm)["dataset"].unique()
    if len(datasets) != 1:
        raise LabError(f"{study} {arm}: rows from {len(datasets)} datasets; expected one")
    return f"data/{datasets[0]}/sweep.csv"


def kv_read_fact(table, study: str, arm: str) -> Fact:
    """:func:`kv_read_rate` as a fact (GB/s): the one estimate of how fast an arm's decode reads the cache."""
    return Fact(kv_read_rate(table, study, arm)["kv_gb_per_s"], arm_source(table, study, arm),
                quantity=f"{study}.{arm}.kv_read_rate", unit="GB/s",
                method="KV bytes per token / slope of ITL against context (least squares over every measured context)")


def kv_read_pct_fact(table, study: str, arm: str) -> Fact:
    """:func:`kv_read_fact` as a percentage of the bandwidth ceiling of the study's GPUs (all of them, in a
    tensor-parallel study)."""
    gpu = str(arm_rows(table, study, arm)["gpu"].iloc[0])
    rate, one = kv_read_fact(table, study, arm), bandwidth_ceiling(gpu)
    value = 100 * rate.value * 1e9 / (one.value * gpu_count(table, study)) if one.measured else None
    return Fact(value, f"{rate.source} over {one.source}",
                quantity=f"{study}.{arm}.kv_read_pct_of_ceiling", unit="%",
                method=f"{rate.quantity} / {short_name(gpu)}.bandwidth_ceiling")


def h200_sweeps(root: Path | None = None):
    """Committed rows of the H200 default-settings study with a measured TTFT (its variants and readers'
    data/local runs left out), or None when there are none."""

    try:
        table = data.load_sweeps() if root is None else data.load_sweeps(root)
    except LabError:  # no sweep at all
        return None
    table = table[table["dataset"].str.startswith(f"{H200_STUDY}/") & table["gpu"].str.contains("H200")]
    if "status" in table.columns:
        table = table[table["status"].isna() | (table["status"].astype(str) == "ok")]
    table = table[table["ttft_s"].apply(lambda v: isinstance(v, (int, float)) and math.isfinite(v))]
    return table if len(table) else None


def longest_common(table, arms) -> int | None:
    """Longest target length every one of ``arms`` measured."""
    common = None
    for arm in arms:
        lengths = set(table[table["arm"] == arm]["target_len"])
        common = lengths if common is None else common & lengths
    return int(max(common)) if common else None


def compare_arms(table, study: str, slow: str, fast: str):
    """TTFT and ITL of two arms at the lengths both measured: ratio slow / fast."""
    a = arm_rows(table, study, slow).set_index("target_len")
    b = arm_rows(table, study, fast).set_index("target_len")
    common = a.index.intersection(b.index)
    import pandas as pd

    return pd.DataFrame({"n": a.loc[common, "actual_len"].astype(int),
                         f"{slow} TTFT (s)": a.loc[common, "ttft_s"], f"{fast} TTFT (s)": b.loc[common, "ttft_s"],
                         "TTFT ratio": a.loc[common, "ttft_s"] / b.loc[common, "ttft_s"],
                         f"{slow} ITL (ms)": a.loc[common, "itl_ms"], f"{fast} ITL (ms)": b.loc[common, "itl_ms"],
                         "ITL ratio": a.loc[common, "itl_ms"] / b.loc[common, "itl_ms"]}).reset_index(drop=True)


def study_label(table, study: str) -> str:
    """``NVIDIA H200, vLLM 0.26.0``; a server over several GPUs: ``2x NVIDIA H200 (tensor parallel), vLLM 0.26.0``."""
    prov, gpus = provenance(table, study), gpu_count(table, study)
    gpu = prov["gpu"] if gpus == 1 else f"{gpus}x {prov['gpu']} (tensor parallel)"
    return f"{gpu}, vLLM {prov['vllm'] or '?'}"


def finite_number(value):
    """A finite float, or None for a missing or failed measurement."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None
