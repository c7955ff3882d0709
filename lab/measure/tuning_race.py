"""Race the tuned forward kernel's variants against FlashAttention 3 on one GPU, in one process.

Each variant is one setting of the tuned kernel's switches (lab.measure.attention.switches.Switches), tile loads (pointers,
host-side or in-kernel TMA descriptors) and a fixed launch, so no autotuning: one compile each; the
Gluon kernel's variants (GLUON: lab.measure.attention.hopper, Hopper only) race beside them. Every
variant is checked against the fp32 reference first; then FA3 (vLLM's vllm_flash_attn, fa_version=3),
cuDNN, FA4, FlexAttention's FLASH backend and every checked variant are timed in interleaved rounds, each round starting elsewhere.
Causal prefill, 28 query over 4 KV heads, d=128, bf16, batch 1, as chapter 4's benchmark:

    python -m lab tuning-race --out /tmp/race --deadline-s 330
    python -m lab tuning-race --out /tmp/race --only 'gluon|+ kv-major order, TMA' --rounds 5 --rep-ms 100

(Until 2026-12 this was ``scripts/race_tuned.py``; the provenance of data/h200/kernels-tuning-race and
kernels-hopper-race records that name.)

Prints one table per length (ms, TFLOP/s, ours/FA3) and writes OUT/race.csv and OUT/provenance.json
(through lab.store; rewritten after each length, so a run cut short keeps what it measured). A variant
that fails to compile or is wrong is a row with its error, not a crash. --deadline-s stops starting
new checks and rounds after that many seconds.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from lab import REPO_ROOT, LabError, env, store
from lab.cli import path_arg, positive_count, positive_number, sizes
from lab.folders import dataset_lock
from lab.measure.attention.reference import attention_flops, attention_torch
from lab.measure.attention.switches import Switches
from lab.measure.candidates import Prepared, candidate_fn, timed_call
from lab.measure.timing import rounds_text, time_in_rounds
from lab.names import in_data

DEFAULT_OUT = REPO_ROOT / "data" / "local" / "tuning-race"

#: launches as (BLOCK_M, BLOCK_N, num_warps, num_stages, register cap or 0)
CURRENT = (128, 64, 8, 2, 128)   # the tuned kernel's pick at 16k and 32k in the run of record
WIDE = (128, 128, 8, 3, 0)
LAUNCHES = {"128x64w8s2r128": CURRENT, "128x128w8s3": WIDE, "128x128w8s2": (128, 128, 8, 2, 0),
            "128x64w8s3": (128, 64, 8, 3, 0), "128x64w4s3": (128, 64, 4, 3, 0), "64x64w4s3": (64, 64, 4, 3, 0),
            "128x128w4s2": (128, 128, 4, 2, 0), "128x128w4s3": (128, 128, 4, 3, 0)}


#: the Gluon kernel (lab.measure.attention.hopper) as (BLOCK_N, STAGES, overlap, ping-pong, persistent plan or
#: None: lab.measure.attention.hopper_persistent), BLOCK_M 128, by its variant id in lab.names.VARIANTS (whose
#: ``written`` name the race.csv row carries)
GLUON = {"gluon-default": (128, 2, True, True, None), "gluon-s3": (128, 3, True, True, None),
         "gluon-overlap": (128, 2, True, False, None), "gluon-pingpong": (128, 2, False, True, None),
         "gluon-neither": (128, 2, False, False, None), "gluon-n64": (64, 4, True, True, None),
         "gluon-persistent": (128, 2, True, True, "strided"), "gluon-balanced": (128, 2, True, True, "balanced")}


def variants() -> list[tuple[str, dict, object, str]]:
    """(name, switches, tma, launch): the current kernel, each step on its own, then combinations."""
    base = {}
    kv = {"kv_major": True}
    lazy = {"rescale_threshold": 8.0}
    rows = [("current, pointers", base, False, "128x64w8s2r128"),
            ("current, TMA", base, True, "128x64w8s2r128")]
    for tma, tag in ((False, "pointers"), (True, "TMA")):
        rows += [(f"+ kv-major order, {tag}", kv, tma, "128x64w8s2r128"),
                 (f"+ persistent, {tag}", {"persistent": True}, tma, "128x64w8s2r128"),
                 (f"+ lazy rescale, {tag}", lazy, tma, "128x64w8s2r128"),
                 (f"+ poly exp2, {tag}", {"poly_exp2": True}, tma, "128x64w8s2r128")]
    rows += [("+ device TMA", base, "device", "128x64w8s2r128")]
    for launch in ("128x128w4s2", "128x128w4s3", "128x64w4s3", "128x128w8s2"):
        rows += [(f"+ warp specialise {launch}, TMA", {"warp_specialize": True}, True, launch),
                 (f"+ warp specialise {launch}, device TMA", {"warp_specialize": True}, "device", launch)]
    for launch in ("128x128w8s3", "128x128w8s2", "128x64w8s3", "128x64w4s3", "64x64w4s3"):
        for tma in (False, True):
            rows.append((f"launch {launch}, kv-major, {'TMA' if tma else 'pointers'}", kv, tma, launch))
    for tma in (False, True):
        tag = "TMA" if tma else "pointers"
        rows += [(f"kv-major + persistent, {tag}", {**kv, "persistent": True}, tma, "128x64w8s2r128"),
                 (f"kv-major + lazy, {tag}", {**kv, **lazy}, tma, "128x64w8s2r128"),
                 (f"kv-major + poly, {tag}", {**kv, "poly_exp2": True}, tma, "128x64w8s2r128"),
                 (f"kv-major + lazy + poly, {tag}", {**kv, **lazy, "poly_exp2": True}, tma, "128x64w8s2r128"),
                 (f"kv-major + persistent + lazy + poly, {tag}", {**kv, "persistent": True, **lazy, "poly_exp2": True},
                  tma, "128x64w8s2r128")]
    rows += [(in_data(variant), {"gluon": launch}, None, "BLOCK_N {}, {} stages".format(*launch[:2]))
             for variant, launch in GLUON.items()]
    return rows


def _gluon_entry(launch: tuple):
    """(q, k, v) -> (timed call, identity): the Gluon kernel with one fixed launch."""
    from lab.measure.attention.hopper import hopper_forward  # lazy: the kernels load triton and torch
    from lab.measure.attention.hopper_persistent import persistent_forward

    block_n, stages, overlap, pingpong, how = launch

    def prepare(q, k, v):
        if how:
            return (lambda: persistent_forward(q, k, v, True, launch=(block_n, stages), how=how)), (lambda out: out)
        return (lambda: hopper_forward(q, k, v, True, launch=(block_n, stages), overlap=overlap,
                                       pingpong=pingpong)), (lambda out: out)
    return prepare


def _config(launch: str) -> dict:
    bm, bn, w, s, regs = LAUNCHES[launch]
    return {"BLOCK_M": bm, "BLOCK_N": bn, "num_warps": w, "num_stages": s, **({"maxnreg": regs} if regs else {})}


#: the peers timed beside our variants (lab.measure.candidates): FA3 is the one ours is measured against
PEERS = ("fa3", "sdpa-cudnn", "fa4", "flex-flash")


def _peer(name: str):
    """(q, k, v) -> (timed call, output back to (batch, heads, n, d)); layout changes made before timing."""
    def prepare(q, k, v):
        fn = candidate_fn(name, "prefill")
        restore = (lambda out: fn.restore(out, q)) if isinstance(fn, Prepared) else (lambda out: out)
        return timed_call(fn, q, k, v, True), restore
    return prepare


def _error_note(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200] if text else ''}"


class Race:
    """One run: rows of every length so far. ``device``, ``head_dim`` and ``timer`` exist for the CPU test."""

    def __init__(self, args, device: str = "cuda", timer=None, head_dim: int = 128):
        self.args, self.started, self.rows = args, time.time(), []
        self.device, self.timer, self.head_dim = device, timer, head_dim

    def sync(self) -> None:
        if self.device == "cuda":
            import torch
            torch.cuda.synchronize()

    def left(self) -> float:
        return self.args.deadline_s - (time.time() - self.started)

    def log(self, text: str) -> None:
        print(f"[{time.time() - self.started:6.1f} s] {text}", flush=True)

    def length(self, n: int, chosen) -> None:
        import torch

        from lab.measure.attention.tuned import tuned_forward  # lazy: the kernels load triton and torch

        gen = torch.Generator(device=self.device).manual_seed(n)
        dtype = torch.bfloat16 if self.device == "cuda" else torch.float16  # the interpreter's bf16 dot is wrong
        q, k, v = (torch.randn(1, h, n, self.head_dim, generator=gen, device=self.device).to(dtype) for h in (28, 4, 4))
        reference = attention_torch(q, k, v, True)
        flops = attention_flops(1, 28, n, n, self.head_dim, True)
        entries = [(name, {}, None, "", _peer(name)) for name in PEERS]
        for name, switches, tma, launch in chosen:
            if "gluon" in switches:
                entries.append((name, {}, tma, launch, _gluon_entry(switches["gluon"])))
                continue
            sw, config = Switches(**switches), _config(launch)
            entries.append((name, switches, tma, launch,
                            lambda q, k, v, sw=sw, tma=tma, config=config:
                            (lambda: tuned_forward(q, k, v, True, config=config, tma=tma, switches=sw),
                             lambda out: out)))
        ready = []
        for name, switches, tma, launch, prepare in entries:
            row = {"n": n, "variant": name, "tma": str(tma), "launch": launch, "status": "ok", "ms": float("nan"),
                   "max_abs_err": float("nan"), "note": "", **{f"sw_{key}": val for key, val in switches.items()}}
            self.rows.append(row)
            if self.left() < 20:
                row.update(status="skipped", note="deadline")
                continue
            t0 = time.time()
            try:
                call, to_bhnd = prepare(q, k, v)
                out = to_bhnd(call())
                self.sync()
                row["max_abs_err"] = (out.float() - reference.float()).abs().max().item()
                if not row["max_abs_err"] <= 2e-2:
                    row.update(status="wrong", note=f"max abs error {row['max_abs_err']:.3g}")
                else:
                    ready.append((row, call))
            except Exception as exc:  # a variant that does not compile here is a result
                row.update(status="error", note=_error_note(exc))
                self.sync()
            self.log(f"{n:6d} check {name:52s} {row['status']:7s} err {row['max_abs_err']:.1e} "
                     f"[{time.time() - t0:.1f} s] {row['note']}")
        self.time_rounds(n, ready, flops)

    def time_rounds(self, n: int, ready: list, flops: float) -> None:
        from triton.testing import do_bench

        timer = self.timer or do_bench

        def measure(item, _):
            row, call = item
            try:
                return timer(call, warmup=10, rep=self.args.rep_ms, return_mode="median")
            except Exception as exc:
                row.update(status="error", note=_error_note(exc))
                self.sync()
                return None

        def deadline(turn) -> bool:
            if self.left() < 10:
                self.log(f"{n}: deadline, {turn} rounds timed")
            return self.left() < 10

        timed = time_in_rounds(ready, measure, self.args.rounds, stop=deadline,
                               after_round=lambda turn, _: self.log(f"{n}: round {turn + 1}/{self.args.rounds} done"))
        for (row, _), times in zip(ready, timed, strict=True):
            if times and row["status"] == "ok":
                row.update(ms=statistics.median(times), ms_rounds=rounds_text(times))
                row["tflops"] = flops / (row["ms"] * 1e-3) / 1e12
        fa3 = next((r["ms"] for r in self.rows if r["n"] == n and r["variant"] == "fa3" and r["ms"] == r["ms"]), None)
        for row in self.rows:
            if row["n"] == n:
                row["vs_fa3"] = fa3 / row["ms"] if fa3 and row["ms"] == row["ms"] else float("nan")

    def print_table(self, n: int) -> None:
        mine = sorted((r for r in self.rows if r["n"] == n), key=lambda r: (r["ms"] != r["ms"], r["ms"]))
        print(f"\n{'variant':56s} {'ms':>8s} {'TFLOP/s':>8s} {'ours/FA3':>8s}  status", flush=True)
        for r in mine:
            print(f"{r['variant']:56s} {r['ms']:8.3f} {r.get('tflops', float('nan')):8.1f} "
                  f"{r.get('vs_fa3', float('nan')):8.3f}  {r['status']} {r['note']}", flush=True)

    def write(self, complete: bool) -> None:
        import pandas as pd

        self.args.out.mkdir(parents=True, exist_ok=True)
        store.write_csv(self.args.out, "race.csv", pd.DataFrame(self.rows))
        store.write_provenance(self.args.out, store.new_provenance(
            "kernels", dtype="bfloat16", flags={"lengths": self.args.lengths, "rounds": self.args.rounds,
                                                        "rep_ms": self.args.rep_ms},
            run="tuned-kernel variants against FA3 (python -m lab tuning-race)", shape="causal prefill, batch 1, 28 query / 4 KV heads, d=128", complete=complete,
            reference="fp32 attention (lab.measure.attention.reference.attention_torch), max abs error 2e-2",
            fa3="vllm.vllm_flash_attn.flash_attn_varlen_func(fa_version=3)", seconds=round(time.time() - self.started, 1)))


def add_arguments(parser) -> None:
    parser.add_argument("--out", type=path_arg, default=DEFAULT_OUT,
                        help=f"folder for race.csv and provenance.json (default {DEFAULT_OUT.relative_to(REPO_ROOT)})")
    parser.add_argument("--lengths", default="16384,32768", help="prompt lengths, comma-separated (16k = 16384)")
    parser.add_argument("--rounds", type=positive_count, default=3, help="interleaved timing rounds per length")
    parser.add_argument("--rep-ms", type=positive_count, default=60,
                        help="milliseconds of repeats per variant per round")
    parser.add_argument("--deadline-s", type=positive_number, default=330,
                        help="stop starting checks and rounds after this many seconds")
    parser.add_argument("--only", default="", help="run only variants whose name contains one of these |-separated texts")


def main(args) -> int:
    args.lengths = list(sizes(args.lengths, example="16384,32768", option="--lengths"))
    wanted = args.only.split("|")
    chosen = [v for v in variants() if any(text in v[0] for text in wanted)]
    if not chosen:
        raise LabError(f"--only {args.only!r}: no variant's name contains it; the names are in "
                       "lab.measure.tuning_race.variants()")
    caps = env.detect()
    if not caps.has_gpu or caps.triton_mode != "gpu":
        raise LabError("no CUDA GPU here (or TRITON_INTERPRET=1): `python -m lab tuning-race` times kernels "
                       "on a GPU; run it on a GPU machine")
    args.out = args.out if args.out.is_absolute() else Path.cwd() / args.out
    with dataset_lock(args.out, kinds=("kernels",)):
        race = Race(args)
        race.log(f"{len(chosen)} variants + {', '.join(PEERS)} at {args.lengths} on {caps.gpu}")
        for n in args.lengths:
            race.length(n, chosen)
            race.print_table(n)
            race.write(complete=False)
        race.write(complete=True)
    race.log("done")
    return 0
