"""Chapter 5, decode and split-KV: every fact the chapter states, its figures and its tables.

    glue_all(ch05.facts())          # the one hidden cell
    ch05.rows_figure(), ch05.rows_table(), ch05.split_plans(), ch05.decode_figure(),
    ch05.check_table({"teaching": split_kv.check(), "tuned": split_kv_tuned.check()})   # the kernels' checks
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

from lab import env
from lab.book.facts import Fact
from lab.book.kernel_explorers import decode_explorer
from lab.book.plots.kernels import plot_decode, plot_decode_rows
from lab.measure.attention import split_kv
from lab.measure.candidates import ALL_CANDIDATES
from lab.names import key, label, labels
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
SHORT = 2048                            # a short context, where launching from Python is most of a decode step
BATCHES = (1, 16)
DECODE_COLUMNS = ("candidate", "batch", "n", "status", "ms", "ms_eager", "gbps")
#: The candidates the chapter quotes at 32k (glue names by lab.names.key).
QUOTED = ("ours-tuned", "sdpa-flash", "sdpa-cudnn", "ours-teaching", "flex", "naive")
#: The decode-rows sweep's kernels (lab.measure.decode_rows), their rows the query heads of a group but for
#: ``fa3-tokens``' (a group of 7 × query tokens).
ROW_KERNELS = ("ours-tuned", "fa3", "fa3-tokens")
SPECS = "lab.results.hardware: NVIDIA H200 datasheet"
SHAPE = "lab.results.modelshape: Qwen2.5-7B"
MLA_SRC = "lab.results.roofline.mla_decode_attention_intensity, DeepSeek-V2's shape (lab.results.modelshape)"
PLAN = "lab.measure.attention.split_kv.split_plan"

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
FIRST_LENGTH = Quantity("h200.decode.first_length", "the shortest cached context the kernel benchmark timed decode at, "
                        "its first decode shape (lengths are timed in ascending order)", run=RECORD, file="decode.csv",
                        unit="tokens")
_ROWS = dict(run=decode_rows.RUNS[0], file="rows.csv")
ROWS_LAST_FLAT = Quantity("h200.decode_rows.last_flat", "the most query rows per KV head at which a candidate's decode "
                          "step (batch 8 × 32k, 4 KV heads) stays within lab.results.decode_rows.FLAT of its fastest",
                          unit="rows", **_ROWS)
ROWS_FIRST_OFF = Quantity("h200.decode_rows.first_off", "the next rows per KV head measured past the last flat point",
                          unit="rows", **_ROWS)
ROWS_MOST = Quantity("h200.decode_rows.most_rows", "the most query rows per KV head the sweep timed", unit="rows", **_ROWS)
ROWS_MOST_TF = Quantity("h200.decode_rows.most_tflops", "FLOP/s reached at the most rows", unit="TFLOP/s", **_ROWS)
ROWS_MOST_PCT = Quantity("h200.decode_rows.most_pct_of_matmul", "FLOP/s at the most rows over the H200's measured "
                         "matmul rate", unit="%", **_ROWS)
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
        "rows_matmul_tf": roofline.matmul_rate().to("TFLOP/s"),
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
    for candidate in ROW_KERNELS:
        c, at_key = cross.loc[candidate], key(candidate)
        at = lambda quantity, value, who=candidate: quantity.fact(value, who, detail=ROWS_DETAIL)  # noqa: E731
        facts |= {f"rows_{at_key}_flat": at(ROWS_LAST_FLAT, int(c.last_flat)),
                  f"rows_{at_key}_off": at(ROWS_FIRST_OFF, int(c.first_off)),
                  f"rows_{at_key}_most": at(ROWS_MOST, int(c.most_rows)),
                  f"rows_{at_key}_most_tf": at(ROWS_MOST_TF, float(c.most_tflops)),
                  f"rows_{at_key}_most_pct": at(ROWS_MOST_PCT, float(c.most_pct_of_matmul)),
                  f"rows_{at_key}_read_pct": at(ROWS_READ_PCT, float(c.fewest_pct_of_read))}
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
    for candidate in QUOTED:
        for batch in BATCHES:
            facts[f"d_{key(candidate)}_b{batch}_us"] = DECODE_US.fact(1e3 * float(_bench_row(candidate, batch, CONTEXT).ms),
                                                           candidate, batch, CONTEXT)
            facts[f"d_{key(candidate)}_b{batch}_pct"] = decode_share(candidate, batch, CONTEXT)
    return facts | _launch_facts()


def _launch_facts() -> dict:
    """The tuned kernel at batch 1 replayed from a graph against launched from Python: at SHORT, over the lengths
    after the first, and at the first decode shape the run timed (the smallest length), where every kernel's
    Python-launched time stands apart from the next length's."""
    table = _bench()[1]
    one = table[(table.batch == 1) & (table.status == "ok")]
    first, second = sorted(set(one.n))[:2]
    tuned = one[one.candidate == "ours-tuned"].set_index("n").sort_index()
    later = tuned[tuned.index > first]
    short = tuned.loc[SHORT]
    eager = one.pivot(index="candidate", columns="n", values="ms_eager")
    slower = int((eager[first] > eager[second]).sum())
    us = lambda quantity, ms, n: quantity.fact(1e3 * float(ms), "ours-tuned", 1, n)  # noqa: E731
    # each end of the spread is the time at the length where it fell (one quantity, one value per length)
    end = lambda quantity, column, pick: us(quantity, later[column].loc[pick], int(pick))  # noqa: E731
    return {"d_short_n": Fact(SHORT, "lab.book.pages.ch05.SHORT"),
            "d_tuned_short_graph_us": us(DECODE_US, short.ms, SHORT),
            "d_tuned_short_eager_us": us(DECODE_EAGER_US, short.ms_eager, SHORT),
            "d_tuned_later_eager_min_us": end(DECODE_EAGER_US, "ms_eager", later.ms_eager.idxmin()),
            "d_tuned_later_eager_max_us": end(DECODE_EAGER_US, "ms_eager", later.ms_eager.idxmax()),
            "d_tuned_later_graph_min_us": end(DECODE_US, "ms", later.ms.idxmin()),
            "d_tuned_later_graph_max_us": end(DECODE_US, "ms", later.ms.idxmax()),
            "d_first_n": FIRST_LENGTH.fact(int(first), 1),
            "d_tuned_first_eager_us": us(DECODE_EAGER_US, tuned.loc[first].ms_eager, first),
            "d_first_slower": Fact(f"all {slower}" if slower == len(eager) else f"{slower} of the {len(eager)}",
                                   f"data/{RECORD}/decode.csv: kernels slower launched from Python at the first length "
                                   "than at the next, of those timed at batch 1")}


@functools.cache
def facts() -> dict[str, Fact]:
    """Every fact chapter 5 states, by glue name."""
    return _shape_facts() | _rows_facts() | _plan_facts() | _bench_facts()


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
    """How many pieces :func:`split_kv.split_plan` cuts a 32k cache into, per kernel and batch."""
    rows = []
    for batch in BATCHES:
        for kernel, per_split, programs in (("teaching: one program per query head", batch * MODEL.q_heads, 2 * H200.sm_count),
                                            ("tuned: one program per KV head", batch * MODEL.kv_heads, 4 * H200.sm_count)):
            splits, keys = split_kv.split_plan(CONTEXT, per_split, 64, programs)
            rows.append({"batch": batch, "kernel": kernel, "splits": splits, "keys per split": keys,
                         "programs": splits * per_split})
    table = pd.DataFrame(rows)
    return table.style.hide(axis="index").format({"keys per split": "{:,}", "programs": "{:,}"}) if styled else table


def check_table(errors: dict):
    """The decode kernels' checks (``{kernel: module.check()}``) as a table: kernel, pieces the cache was cut into,
    largest |error| against the float64 reference, and where it ran."""
    caps = env.detect()
    where = "this machine's GPU" if caps.has_gpu and caps.triton_mode == "gpu" else "Triton's interpreter on this machine's CPU"
    rows = [{"kernel": kernel, "cache cut into": pieces, "largest |error| vs float64": error}
            for kernel, by_pieces in errors.items() for pieces, error in by_pieces.items()]
    return (pd.DataFrame(rows).style.hide(axis="index").format(power_of_ten, subset=["largest |error| vs float64"])
            .set_caption(f"Checked when this page was built, in {where}: one decode step of 2 sequences over 300 "
                         "cached tokens, 8 query heads over 2 KV heads, head dim 64, float32"))


def decode_figure():
    """Each candidate's share of the bandwidth ceiling against the cached context, at batch 1 and 16."""
    ds, table = _bench()
    p = ds.provenance
    source = f"{ds.gpu}, torch {p['torch']}, Triton {p['triton']}; data/{ds.name}; graph replay, K/V from HBM"
    return plot_decode(table, labels(ALL_CANDIDATES), list(BATCHES), source)


def explorer():
    """The decode explorer over every kernel benchmark on file (the run of record first)."""
    return decode_explorer()
