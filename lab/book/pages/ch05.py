"""Chapter 5, decode and split-KV: every fact the chapter states, its figures and its tables.

    glue_all(ch05.facts())          # the one hidden cell
    ch05.rows_figure(), ch05.rows_table(), ch05.split_plans(), ch05.split_errors(), ch05.decode_figure(),
    ch05.explorer()

The runs it reads, each once: the kernel benchmark of record (data/h200/kernels, decode.csv), the decode-rows
sweep (data/h200/decode-rows, with the points data/h200/decode-rows-extra adds), and the H200's two measured
ceilings (lab.results.roofline.measured_roof). Every H200 decode argument is held against the *measured* ridge.

Glue names other pages take from here (the interview page, the course kit): ``dec_intensity`` (decode attention's
FLOP per byte for Qwen2.5-7B), ``dec_tokens_at_ridge`` (the speculative-decoding crossover: query tokens per step
at the H200's measured ridge), ``h200_ridge_measured``, ``mla_ai``, the ``rows_*`` crossings and the ``d_*`` shares
of the bandwidth ceiling.
"""

from __future__ import annotations

import functools

import pandas as pd
import torch

from lab import env
from lab.book.facts import Fact
from lab.book.kernel_explorers import decode_explorer
from lab.book.plots.kernels import plot_decode, plot_decode_rows
from lab.measure.attention import triton_decode
from lab.measure.attention.reference import attention_torch
from lab.measure.candidates import ALL_CANDIDATES
from lab.names import label, labels
from lab.results import data, decode_rows, roofline
from lab.results.bandwidth import bandwidth_ceiling
from lab.results.hardware import device
from lab.results.kernel_runs import RECORD, decode_share, with_ceiling_share
from lab.results.modelshape import DEEPSEEK_V2_MLA, qwen25_7b
from lab.results.quantities import Quantity
from lab.results.units import power_of_ten

MODEL = qwen25_7b()
H200 = device("H200-SXM")
CONTEXT = 32768                         # the cached context the chapter's arithmetic and its table use
BATCHES = (1, 16)
DECODE_COLUMNS = ("candidate", "batch", "n", "status", "ms", "ms_eager", "gbps")
#: The candidates the chapter quotes at 32k, and their short glue names.
QUOTED = {"ours-tuned": "tuned", "sdpa-flash": "flash", "sdpa-cudnn": "cudnn", "ours-teaching": "teaching",
          "flex": "flex", "naive": "naive"}
#: The decode-rows sweep's kernels (lab.measure.decode_rows), their rows the query heads of a group but for
#: ``fa3-tokens``' (a group of 7 × query tokens).
ROW_KERNELS = ("ours-tuned", "fa3", "fa3-tokens")
ROWS_KEYS = {"ours-tuned": "ours", "fa3": "fa3", "fa3-tokens": "tok"}
SPECS = "lab.results.hardware: NVIDIA H200 datasheet"
SHAPE = "lab.results.modelshape: Qwen2.5-7B"
MLA_SRC = "lab.results.roofline.mla_decode_attention_intensity, DeepSeek-V2's shape (lab.results.modelshape)"
PLAN = "lab.measure.attention.triton_decode.split_plan"

# --- the quantities chapter 5 teaches ------------------------------------------------------------------

INTENSITY = Quantity("decode.attention_intensity", "FLOP per KV-cache byte of one decode step's attention in bf16: "
                     "query heads per KV head × query tokens per step", run="lab.results.roofline", unit="FLOP/B")
MLA_INTENSITY = Quantity("decode.mla_attention_intensity", "FLOP per cached byte of latent attention's decode, run "
                         "as multi-query attention over the cached latent (DeepSeek-V2's shape, bf16)",
                         run="lab.results.roofline", unit="FLOP/B")
KV_PER_LAYER = Quantity("decode.kv_bytes_per_layer", "K and V of one sequence in one layer of Qwen2.5-7B (4 KV heads, "
                        "d=128, bf16)", run=SHAPE, unit="B")
FLOOR = Quantity("h200.decode.floor", "one layer's K/V of one sequence over the H200's bandwidth ceiling: the least "
                 "time its decode attention can take", run="h200/bandwidth", file="read_stream.csv", unit="us")
TOKENS_AT_RIDGE = Quantity("h200.decode.tokens_at_measured_ridge", "query tokens per step at which Qwen2.5-7B's "
                           "decode attention (7 query heads per KV head) reaches the H200's measured ridge: the "
                           "measured ridge over the intensity of one token", run=roofline.MATMUL_RUN,
                           file="measurements.json", unit="tokens")
MLA_OVER_RIDGE = Quantity("h200.decode.mla_over_measured_ridge", "latent attention's one-token decode intensity over "
                          "the H200's measured ridge", run=roofline.MATMUL_RUN, file="measurements.json", unit="×")
DECODE_US = Quantity("h200.decode.time", "one layer's decode attention (one new token per sequence, 28 query heads "
                     "over 4 KV heads, d=128, bf16), median of CUDA-graph replays, K/V from HBM",
                     run=RECORD, file="decode.csv", unit="us")
DECODE_EAGER_US = Quantity("h200.decode.time_eager", "the same decode step launched from Python (do_bench median, "
                           "L2 flushed): the host's launch work included", run=RECORD, file="decode.csv", unit="us")
_ROWS = dict(run=decode_rows.RUNS[0], file="rows.csv")
ROWS_LAST_FLAT = Quantity("h200.decode_rows.last_flat", "the most query rows per KV head at which a candidate's decode "
                          "step (batch 8 × 32k, 4 KV heads) stays within lab.results.decode_rows.FLAT of its fastest",
                          unit="rows", **_ROWS)
ROWS_FIRST_OFF = Quantity("h200.decode_rows.first_off", "the next rows per KV head measured past the last flat point",
                          unit="rows", **_ROWS)
ROWS_MOST = Quantity("h200.decode_rows.most_rows", "the most query rows per KV head the sweep timed", unit="rows", **_ROWS)
ROWS_MOST_TF = Quantity("h200.decode_rows.most_tflops", "FLOP/s reached at the most rows", unit="TFLOP/s", **_ROWS)
ROWS_MOST_PCT = Quantity("h200.decode_rows.most_pct_of_matmul", "FLOP/s at the most rows over the H200's measured "
                         "matmul ceiling", unit="%", **_ROWS)
ROWS_READ_PCT = Quantity("h200.decode_rows.fewest_pct_of_read", "K/V read rate at the fewest rows over the H200's "
                         "bandwidth ceiling", unit="%", **_ROWS)
ROWS_TOKENS = Quantity("h200.decode_rows.query_tokens", "query tokens per sequence of FA3's speculative-shape point "
                       "(a group of 7 verifying that many tokens)", unit="tokens", **_ROWS)
ROWS_DETAIL = f"with the points of data/{decode_rows.RUNS[1]}/rows.csv"


# --- the runs, each read once ----------------------------------------------------------------------------

@functools.cache
def _bench():
    """The benchmark of record and its decode table, with each row's share of the bandwidth ceiling."""
    ds = data.load(RECORD)
    return ds, with_ceiling_share(ds.csv("decode.csv", DECODE_COLUMNS), ds.gpu)


@functools.cache
def _rows():
    """The decode-rows sweep, the measured roof it sits under, and where each candidate leaves the floor."""
    points, roof = decode_rows.sweep(), decode_rows.roof()
    return points, roof, decode_rows.crossings(points, roof).set_index("candidate")


def _bench_row(candidate: str, batch: int, n: int):
    table = _bench()[1]
    return table[(table.candidate == candidate) & (table.batch == batch) & (table.n == n)].iloc[0]


# --- facts -------------------------------------------------------------------------------------------

def _shape_facts() -> dict:
    intensity = roofline.decode_attention_intensity(MODEL.q_heads, MODEL.kv_heads)
    kv_bytes = 2 * MODEL.kv_heads * CONTEXT * MODEL.head_dim * 2
    ceiling = bandwidth_ceiling(H200)
    ridge = roofline.measured_ridge()
    mla = DEEPSEEK_V2_MLA
    mla_ai = [roofline.mla_decode_attention_intensity(mla.heads, mla.latent_dim, mla.rope_dim, tokens) for tokens in (1, 2)]
    return {
        "dec_intensity": INTENSITY.fact(intensity, MODEL.name, 1),
        "dec_group": Fact(MODEL.q_heads // MODEL.kv_heads, SHAPE),
        "dec_mb_32k": KV_PER_LAYER.fact(kv_bytes, CONTEXT).to("MB"),
        "dec_ceiling_tbs": ceiling.to("TB/s"),
        "dec_floor_us": FLOOR.fact(kv_bytes / ceiling.value * 1e6 if ceiling.measured else None, CONTEXT),
        "h200_ridge_measured": ridge,
        "rows_matmul_tf": roofline.matmul_ceiling().to("TFLOP/s"),
        "dec_tokens_at_ridge": TOKENS_AT_RIDGE.fact(ridge.value / intensity if ridge.measured else None, MODEL.name),
        "h100_ridge_datasheet": roofline.datasheet_ridge("H100-SXM"),
        "h200_sms": Fact(H200.sm_count, SPECS), "idle_sms": Fact(H200.sm_count - MODEL.q_heads, SPECS),
        "mla_name": Fact(mla.name, MLA_SRC), "mla_heads": Fact(mla.heads, MLA_SRC),
        "mla_ai": MLA_INTENSITY.fact(mla_ai[0], mla.name, 1), "mla_ai_2": MLA_INTENSITY.fact(mla_ai[1], mla.name, 2),
        "rows_mla_vs_ridge": MLA_OVER_RIDGE.fact(mla_ai[0] / ridge.value if ridge.measured else None, mla.name),
    }


def _rows_facts() -> dict:
    points, _, cross = _rows()
    facts = {"rows_flat_pct": Fact(100 * decode_rows.FLAT, "lab.results.decode_rows.FLAT")}
    for candidate, key in ROWS_KEYS.items():
        c = cross.loc[candidate]
        at = lambda quantity, value, who=candidate: quantity.fact(value, who, detail=ROWS_DETAIL)  # noqa: E731
        facts |= {f"rows_{key}_flat": at(ROWS_LAST_FLAT, int(c.last_flat)),
                  f"rows_{key}_off": at(ROWS_FIRST_OFF, int(c.first_off)),
                  f"rows_{key}_most": at(ROWS_MOST, int(c.most_rows)),
                  f"rows_{key}_most_tf": at(ROWS_MOST_TF, float(c.most_tflops)),
                  f"rows_{key}_most_pct": at(ROWS_MOST_PCT, float(c.most_pct_of_matmul)),
                  f"rows_{key}_read_pct": at(ROWS_READ_PCT, float(c.fewest_pct_of_read))}
    tokens = points[points.candidate == "fa3-tokens"].set_index("rows").query_tokens
    for end, column in (("flat", "last_flat"), ("off", "first_off")):
        rows = int(cross.loc["fa3-tokens", column])
        facts[f"rows_tok_{end}_tokens"] = ROWS_TOKENS.fact(int(tokens.loc[rows]), "fa3-tokens", rows, detail=ROWS_DETAIL)
    return facts


def _plan_facts() -> dict:
    plan = split_plans(styled=False)
    one = plan[(plan.batch == 1) & plan.kernel.str.startswith("tuned")].iloc[0]
    return {"plan_b1_splits": Fact(int(one.splits), PLAN), "plan_b1_programs": Fact(int(one.programs), PLAN),
            "plan_b1_keys": Fact(int(one["keys per split"]), PLAN)}


def _bench_facts() -> dict:
    facts = {}
    for candidate, key in QUOTED.items():
        for batch in BATCHES:
            facts[f"d_{key}_b{batch}_us"] = DECODE_US.fact(1e3 * float(_bench_row(candidate, batch, CONTEXT).ms),
                                                           candidate, batch, CONTEXT)
            facts[f"d_{key}_b{batch}_pct"] = decode_share(candidate, batch, CONTEXT)
    short = _bench_row("ours-tuned", 1, 1024)
    return facts | {"d_tuned_1k_graph_us": DECODE_US.fact(1e3 * float(short.ms), "ours-tuned", 1, 1024),
                    "d_tuned_1k_eager_us": DECODE_EAGER_US.fact(1e3 * float(short.ms_eager), "ours-tuned", 1, 1024)}


def _split_facts() -> dict:
    errors = _split_errors()
    where = "on this machine's GPU" if _device() == "cuda" else "in Triton's interpreter on this machine's CPU"
    return {"split_worst": Fact(max(errors.values()), "computed on this machine when the page was built",
                                 power_of_ten),
            "split_where": Fact(where, "the machine that built the page")}


@functools.cache
def facts() -> dict[str, Fact]:
    """Every fact chapter 5 states, by glue name."""
    return _shape_facts() | _rows_facts() | _plan_facts() | _bench_facts() | _split_facts()


# --- figures and tables ------------------------------------------------------------------------------

def rows_figure():
    """Decode time and FLOP/s against query rows per KV head, under the measured roofline."""
    points, roof, _ = _rows()
    source = f"data/{decode_rows.RUNS[0]} (+ {decode_rows.RUNS[1]}); ceilings: data/{roofline.MATMUL_RUN}, data/h200/bandwidth"
    return plot_decode_rows(points, roof, labels(ROW_KERNELS), f"{_bench()[0].gpu}, batch 8 × 32k, 4 KV heads, d=128, bf16; {source}")


def rows_table():
    """Every point of the decode-rows sweep: kernel, rows, query tokens, time, FLOP/s, K/V read rate, timer."""
    points = _rows()[0]
    table = points.assign(kernel=points.candidate.map(label))[
        ["kernel", "rows", "query_tokens", "ms", "tflops", "gb_per_s", "timer"]].rename(
        columns={"rows": "rows per KV head", "query_tokens": "query tokens", "ms": "ms per step", "tflops": "TFLOP/s",
                 "gb_per_s": "K/V read (GB/s)", "timer": "timed by"})
    return table.style.hide(axis="index").format({"ms per step": "{:.3f}", "TFLOP/s": "{:.0f}", "K/V read (GB/s)": "{:,.0f}"})


def split_plans(styled: bool = True):
    """How many pieces :func:`triton_decode.split_plan` cuts a 32k cache into, per kernel and batch."""
    rows = []
    for batch in BATCHES:
        for label, per_split, programs in (("teaching: one program per query head", batch * MODEL.q_heads, 2 * H200.sm_count),
                                           ("tuned: one program per KV head", batch * MODEL.kv_heads, 4 * H200.sm_count)):
            splits, keys = triton_decode.split_plan(CONTEXT, per_split, 64, programs)
            rows.append({"batch": batch, "kernel": label, "splits": splits, "keys per split": keys,
                         "programs": splits * per_split})
    table = pd.DataFrame(rows)
    return table.style.hide(axis="index").format({"keys per split": "{:,}", "programs": "{:,}"}) if styled else table


def _device() -> str:
    caps = env.detect()
    return "cuda" if caps.has_gpu and caps.triton_mode == "gpu" else "cpu"


@functools.cache
def _split_errors() -> dict[str, float]:
    """Both kernels, the cache cut into 1, 3 and 7 pieces, against a float64 reference (float32, 300 tokens)."""
    where = _device()
    gen = torch.Generator(device=where).manual_seed(1)
    q = torch.randn(2, 8, 1, 64, generator=gen, device=where)
    k = torch.randn(2, 2, 300, 64, generator=gen, device=where)
    v = torch.randn(2, 2, 300, 64, generator=gen, device=where)
    ref = attention_torch(q, k, v, compute_dtype=torch.float64)
    errors = {}
    for splits in (1, 3, 7):
        teaching = triton_decode.teaching_decode(q, k, v, num_splits=splits)
        tuned = triton_decode.tuned_decode(q, k, v, config={"num_splits": splits, "BLOCK_N": 16})
        errors[f"teaching, {splits} pieces"] = (teaching.double() - ref).abs().max().item()
        errors[f"tuned, {splits} pieces"] = (tuned.double() - ref).abs().max().item()
    return errors


def split_errors():
    """The table of :func:`_split_errors`: however the cache is cut, the answer is the same."""
    errors = _split_errors()
    table = pd.DataFrame({"kernel": list(errors), "max |error| vs float64 reference": list(errors.values())})
    return table.style.hide(axis="index").format(power_of_ten, subset=["max |error| vs float64 reference"])


def decode_figure():
    """Each candidate's share of the bandwidth ceiling against the cached context, at batch 1 and 16."""
    ds, table = _bench()
    p = ds.provenance
    source = f"{ds.gpu}, torch {p['torch']}, Triton {p['triton']}; data/{ds.name}; graph replay, K/V from HBM"
    return plot_decode(table, labels(ALL_CANDIDATES), list(BATCHES), source)


def explorer():
    """The decode explorer over every kernel benchmark on file (the run of record first)."""
    return decode_explorer()
