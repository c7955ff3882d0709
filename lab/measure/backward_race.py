"""Race attention backward passes on this GPU: ours against SDPA's flash and cuDNN backends and FlashAttention 4.

One training step of causal attention, 28 query over 4 KV heads, d=128, bf16, batch 1, at each length:
the forward, then autograd's backward for a seeded upstream gradient dO. Candidates (``--candidates``):

* ``ours`` -- the book's tuned Triton forward with its log-sum-exp, then the backward kernels of
  :mod:`lab.measure.attention.backward` (:func:`lab.measure.attention.backward.attention`);
* ``sdpa-flash``, ``sdpa-cudnn`` -- ``torch.nn.functional.scaled_dot_product_attention(..., enable_gqa=True)``
  under ``sdpa_kernel(FLASH_ATTENTION)`` (FlashAttention 2) or ``sdpa_kernel(CUDNN_ATTENTION)``;
* ``fa4`` -- FlashAttention 4's CuTeDSL kernels (``flash_attn.cute.flash_attn_func``, the ``flash-attn-4``
  wheel), whose backward on Hopper is ``FlashAttentionBackwardSm90``; a row says "not available: why"
  where the wheel does not import or has no sm90 backward.

Every candidate is checked first: its dq, dk, dv against fp32 autograd of the reference
(:func:`lab.measure.attention.reference.attention_gradients_torch`), each gradient's largest error at most
:data:`lab.measure.attention.backward.GRAD_TOLERANCE` of its largest entry. Then the checked ones are timed
in interleaved rounds (each round starting at another candidate; ``triton.testing.do_bench`` medians, L2
flushed before each call): the forward alone and forward + backward, back to back; backward = forward +
backward - forward (medians over the rounds). TFLOP/s of the backward credit every candidate with 2.5 times
the forward's matrix FLOPs, causal halved (:func:`lab.measure.attention.backward.backward_flops`).

Writes ``race.csv`` and ``provenance.json`` to ``--out`` (default data/local/backward-race), rewritten
atomically after each length (a run cut short keeps what it measured), and prints each length's table with
every candidate's backward speed against the fastest peer, SDPA-flash and cuDNN. ``--deadline-s`` stops
starting checks and rounds after that many seconds.
"""

from __future__ import annotations

import importlib.util
import math
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lab import REPO_ROOT, LabError, env, store
from lab.cli import path_arg, positive_count, positive_number, sizes
from lab.folders import dataset_lock
from lab.measure.attention.reference import attention_gradients_torch
from lab.measure.candidates import Prepared, candidate_fn
from lab.measure.timing import rounds_text, time_in_rounds

CANDIDATES = ("ours", "sdpa-flash", "sdpa-cudnn", "fa4")
PEERS = CANDIDATES[1:]
DEFAULT_OUT = REPO_ROOT / "data" / "local" / "backward-race"
COLUMNS = ("candidate", "n", "status", "fwd_ms", "fwdbwd_ms", "bwd_ms", "bwd_over_fwd", "tflops_bwd",
           "max_abs_err_dq", "max_abs_err_dk", "max_abs_err_dv", "worst_share_of_largest", "note",
           "fwd_ms_rounds", "fwdbwd_ms_rounds", "config", "seconds")


def _same(t):
    return t


def _tokens_first(t):
    """[batch, heads, n, d] <-> [batch, n, heads, d], as a contiguous tensor (FlashAttention's own layout)."""
    return t.transpose(1, 2).contiguous()


@dataclass(frozen=True)
class Trainee:
    """One candidate's forward as autograd differentiates it. ``forward(q, k, v, causal)`` takes and returns
    tensors in the candidate's layout; ``to_layout``/``from_layout`` go there from [batch, heads, n, d] and
    back (made once per input set, outside any timing)."""

    forward: Callable
    to_layout: Callable = _same
    from_layout: Callable = _same

    def calls(self, q, k, v, do, causal: bool):
        """(forward, forward + backward, back to [batch, heads, n, d]): no-argument calls on leaves made here."""
        import torch

        leaves = tuple(self.to_layout(t).detach().requires_grad_() for t in (q, k, v))
        upstream = self.to_layout(do)

        def forward():
            return self.forward(*leaves, causal)

        def training_step():
            return torch.autograd.grad(self.forward(*leaves, causal), leaves, upstream)
        return forward, training_step, lambda grads: tuple(self.from_layout(g) for g in grads)

    def backward_call(self, q, k, v, do, causal: bool):
        """The backward alone, repeatable (the forward runs once, here): what the counters profile."""
        import torch

        leaves = tuple(self.to_layout(t).detach().requires_grad_() for t in (q, k, v))
        upstream, out = self.to_layout(do), self.forward(*leaves, causal)
        return lambda: torch.autograd.grad(out, leaves, upstream, retain_graph=True)


def fa4_backward() -> str:
    """Why FlashAttention 4 cannot run its backward here ("" when it can)."""
    import torch

    version, why = env.fa4()
    if version is None:
        return why
    if torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9 \
            and importlib.util.find_spec("flash_attn.cute.flash_bwd_sm90") is None:
        return f"flash-attn-4 {version} has no sm90 backward (flash_attn.cute.flash_bwd_sm90)"
    return ""


def trainee(name: str, forward=None) -> Trainee:
    """The candidate ``name``; ``forward`` replaces ours's forward (the CPU test's torch forward). A candidate
    that cannot run here is a LabError saying why."""
    if name == "ours":
        from lab.measure.attention import backward  # lazy: the kernels load triton and torch

        return Trainee(lambda q, k, v, causal: backward.attention(q, k, v, causal, forward=forward))
    if name not in CANDIDATES:
        raise LabError(f"no backward candidate {name!r}; choose from {', '.join(CANDIDATES)}")
    if name == "fa4":
        why = fa4_backward()
        if why:
            raise LabError(f"not available: {why}")
    found = candidate_fn(name, "prefill")   # the same calls the forward benchmark times (lab.measure.candidates)
    if isinstance(found, Prepared):         # FA4: tokens before heads
        return Trainee(found.run, _tokens_first, lambda t: t.transpose(1, 2))
    return Trainee(found)


def backward_only(name: str, q, k, v, do, causal: bool = True):
    """A repeatable call of candidate ``name``'s backward alone on these inputs (lab.measure.kernel_counters)."""
    return trainee(name).backward_call(q, k, v, do, causal)


def speeds(rows: list[dict], n: int) -> dict[str, dict[str, float]]:
    """Each measured candidate's backward speed at length ``n`` against the fastest peer, SDPA-flash and
    cuDNN (their backward ms over its own: above 1 is faster); NaN where the other was not measured."""
    bwd = {r["candidate"]: r["bwd_ms"] for r in rows if r["n"] == n and r["status"] == "ok" and r["bwd_ms"] > 0}
    peers = [ms for name, ms in bwd.items() if name in PEERS]
    others = {"fastest peer": min(peers) if peers else math.nan,
              "sdpa-flash": bwd.get("sdpa-flash", math.nan), "sdpa-cudnn": bwd.get("sdpa-cudnn", math.nan)}
    return {name: {other: ms_other / ms for other, ms_other in others.items()} for name, ms in bwd.items()}


def _error_note(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200] if text else ''}"


class Race:
    """One run: rows of every length so far. ``device``, ``timer``, the head shape, ``dtype`` and ``forward``
    (ours's forward) exist for the CPU test, which runs the kernels in Triton's interpreter."""

    def __init__(self, args, device: str = "cuda", timer=None, head_dim: int = 128, q_heads: int = 28,
                 kv_heads: int = 4, dtype=None, forward=None):
        self.args, self.started, self.rows = args, time.time(), []
        self.device, self.timer, self.forward = device, timer, forward
        self.head_dim, self.q_heads, self.kv_heads, self.dtype = head_dim, q_heads, kv_heads, dtype

    def sync(self) -> None:
        if self.device == "cuda":
            import torch
            torch.cuda.synchronize()

    def left(self) -> float:
        return self.args.deadline_s - (time.time() - self.started)

    def log(self, text: str) -> None:
        print(f"[{time.time() - self.started:6.1f} s] {text}", file=sys.stderr, flush=True)

    def inputs(self, n: int):
        import torch

        gen = torch.Generator(device=self.device).manual_seed(n)
        dtype = self.dtype or torch.bfloat16
        return tuple(torch.randn(1, h, n, self.head_dim, generator=gen, device=self.device).to(dtype)
                     for h in (self.q_heads, self.kv_heads, self.kv_heads, self.q_heads))

    def length(self, n: int) -> None:
        """Check every candidate at length ``n``, then time the checked ones in rounds."""
        import torch

        from lab.measure.attention import backward  # lazy: the kernels load triton and torch

        q, k, v, do = self.inputs(n)
        reference = attention_gradients_torch(q, k, v, do, True)     # fp32 autograd, by query chunks
        tolerance = backward.GRAD_TOLERANCE[q.dtype]
        ready = []
        for name in self.args.candidates:
            row = {"candidate": name, "n": n, "status": "ok", "fwd_ms": math.nan, "fwdbwd_ms": math.nan,
                   "bwd_ms": math.nan, "note": "", "config": ""}
            self.rows.append(row)
            if self.left() < 20:
                row.update(status="skipped", note="deadline")
                continue
            started = time.time()
            try:
                forward, step, restore = trainee(name, self.forward).calls(q, k, v, do, True)
            except LabError as exc:     # a peer that cannot run here is a row that says why
                row.update(status="unavailable", note=str(exc))
                continue
            try:
                errors, worst = backward.gradient_errors(restore(step()), reference)
                self.sync()
                row.update(zip(("max_abs_err_dq", "max_abs_err_dk", "max_abs_err_dv"), errors, strict=True),
                           worst_share_of_largest=worst)
                if not worst <= tolerance:
                    row.update(status="wrong", note=f"largest error {worst:.3g} of the largest gradient > {tolerance}")
                else:
                    ready.append((row, forward, step))
            except Exception as exc:  # a backend that does not support this shape is a result, not a crash
                row.update(status="error", note=_error_note(exc))
                self.sync()
            if name == "ours":
                row["config"] = backward.chosen_launch(n, n, self.q_heads // self.kv_heads, self.head_dim, True,
                                                       fp32=q.dtype == torch.float32)
            row["seconds"] = round(time.time() - started, 1)
            self.log(f"{n:6d} check {name:11s} {row['status']:11s} worst {row.get('worst_share_of_largest', math.nan):.1e} "
                     f"[{row['seconds']:.1f} s] {row['note']}")
        self.time_rounds(n, ready)
        del q, k, v, do, reference
        if self.device == "cuda":
            torch.cuda.empty_cache()

    def time_rounds(self, n: int, ready: list) -> None:
        from lab.measure.attention import backward  # lazy: the kernels load triton and torch

        if self.timer is None:
            from triton.testing import do_bench as timer
        else:
            timer = self.timer
        def measure(item, _):
            row, forward, step = item
            if row["status"] != "ok":
                return None
            try:   # forward alone, then forward + backward, back to back
                return (timer(forward, warmup=10, rep=self.args.rep_ms, return_mode="median"),
                        timer(step, warmup=10, rep=self.args.rep_ms, return_mode="median"))
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
        flops = backward.backward_flops(1, self.q_heads, n, n, self.head_dim, True)
        for (row, _, _), pairs in zip(ready, timed, strict=True):
            fwd, fwdbwd = [pair[0] for pair in pairs], [pair[1] for pair in pairs]
            if row["status"] != "ok" or not fwd:
                continue
            row.update(fwd_ms=statistics.median(fwd), fwdbwd_ms=statistics.median(fwdbwd),
                       fwd_ms_rounds=rounds_text(fwd), fwdbwd_ms_rounds=rounds_text(fwdbwd))
            row["bwd_ms"] = row["fwdbwd_ms"] - row["fwd_ms"]
            row["bwd_over_fwd"] = row["bwd_ms"] / row["fwd_ms"]
            row["tflops_bwd"] = flops / (row["bwd_ms"] * 1e-3) / 1e12 if row["bwd_ms"] > 0 else math.nan

    def table(self, n: int) -> str:
        ratio = speeds(self.rows, n)
        lines = [f"n={n}: causal GQA {self.q_heads}/{self.kv_heads}, d={self.head_dim}; speed = their backward ms / this one's",
                 f"{'candidate':11s} {'fwd ms':>8s} {'bwd ms':>8s} {'bwd/fwd':>7s} {'TFLOP/s':>8s} "
                 f"{'vs best peer':>12s} {'vs flash':>8s} {'vs cuDNN':>8s}  status"]
        for r in (r for r in self.rows if r["n"] == n):
            mine = ratio.get(r["candidate"], {})
            lines.append(f"{r['candidate']:11s} {r['fwd_ms']:8.3f} {r['bwd_ms']:8.3f} {r.get('bwd_over_fwd', math.nan):7.2f} "
                         f"{r.get('tflops_bwd', math.nan):8.1f} {mine.get('fastest peer', math.nan):12.3f} "
                         f"{mine.get('sdpa-flash', math.nan):8.3f} {mine.get('sdpa-cudnn', math.nan):8.3f}  "
                         f"{r['status']} {r['note']}")
        return "\n".join(lines)

    def write(self, complete: bool) -> None:
        import pandas as pd

        from lab.measure.attention import backward  # lazy: the kernels load triton and torch

        store.write_csv(self.args.out, "race.csv", pd.DataFrame(self.rows).reindex(columns=COLUMNS))
        fa4 = env.fa4()
        flags = {"lengths": list(self.args.lengths), "rounds": self.args.rounds, "rep_ms": self.args.rep_ms,
                 "candidates": list(self.args.candidates), "deadline_s": self.args.deadline_s,
                 "q_heads": self.q_heads, "kv_heads": self.kv_heads, "head_dim": self.head_dim, "batch": 1,
                 "causal": True}
        store.write_provenance(self.args.out, store.new_provenance(
            "kernels", dtype=str(self.dtype or "bfloat16").removeprefix("torch."), flags=flags,
            run="attention backward race (python -m lab backward-race)", complete=complete,
            shape=f"causal, batch 1, {self.q_heads} query / {self.kv_heads} KV heads, d={self.head_dim}",
            reference="fp32 autograd of lab.measure.attention.reference.attention_torch, by query chunks "
                      "(attention_gradients_torch)",
            tolerance=f"each gradient's largest error at most {backward.GRAD_TOLERANCE[_dtype(self.dtype)]} of its "
                      "largest entry (lab.measure.attention.backward.GRAD_TOLERANCE)",
            timer="triton.testing.do_bench median (L2 flushed before each call) of the forward alone and of "
                  "forward + backward (torch.autograd.grad), back to back per candidate, in interleaved rounds "
                  "each starting at another candidate; fwd_ms and fwdbwd_ms are medians over the rounds "
                  "(listed in *_rounds), bwd_ms their difference",
            flops=f"backward = {backward.BACKWARD_FLOP_FACTOR} x the forward's matrix FLOPs, causal halved "
                  "(lab.measure.attention.backward.backward_flops); ours does 7 products per tile pair, not 5",
            fa4=f"flash-attn-4 {fa4[0]}" if fa4[0] else f"not available: {fa4[1]}",
            seconds=round(time.time() - self.started, 1)))


def _dtype(dtype):
    import torch

    return dtype or torch.bfloat16


# --- CLI -----------------------------------------------------------------------------------------

def add_arguments(parser) -> None:
    parser.add_argument("--out", type=path_arg, default=DEFAULT_OUT,
                        help=f"output folder (default {DEFAULT_OUT.relative_to(REPO_ROOT)})")
    parser.add_argument("--lengths", default="4k,8k,16k,32k", help="sequence lengths (default 4k,8k,16k,32k)")
    parser.add_argument("--candidates", default=",".join(CANDIDATES),
                        help=f"comma-separated subset of {','.join(CANDIDATES)} (default all)")
    parser.add_argument("--rounds", type=positive_count, default=5, help="interleaved timing rounds per length")
    parser.add_argument("--rep-ms", type=positive_count, default=100,
                        help="milliseconds of repeats per candidate per phase per round (do_bench's rep)")
    parser.add_argument("--deadline-s", type=positive_number, default=540,
                        help="stop starting checks and rounds after this many seconds")


def main(args) -> int:
    args.lengths = sizes(args.lengths, example="4k,16k", option="--lengths")
    args.candidates = [c for c in args.candidates.split(",") if c]
    unknown = [c for c in args.candidates if c not in CANDIDATES]
    if unknown or not args.candidates:
        raise LabError(f"--candidates: unknown candidate {(unknown or [''])[0]!r}; choose from {', '.join(CANDIDATES)}")
    caps = env.detect()
    if not caps.has_gpu or caps.triton_mode != "gpu":
        raise LabError("no CUDA GPU here (or TRITON_INTERPRET=1): `python -m lab backward-race` times kernels "
                       "on a GPU; run it on a GPU machine")
    out_dir = args.out if args.out.is_absolute() else Path.cwd() / args.out
    args.out = out_dir
    with dataset_lock(out_dir):
        race = Race(args)
        race.log(f"{', '.join(args.candidates)} at {', '.join(map(str, args.lengths))} on {caps.gpu}")
        race.write(complete=False)
        for n in args.lengths:
            race.length(n)
            print(race.table(n), flush=True)
            race.write(complete=False)
        race.write(complete=True)
    race.log(f"wrote {out_dir}")
    return 0
