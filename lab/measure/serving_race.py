"""The server's attention steps, our kernels against FlashAttention 3 on the same paged cache, in one run.

The steps a vLLM server running a 32k prompt issues (``--max-num-batched-tokens 8192``): prefill chunks of 8,192
tokens over a cached prefix of 0 and of 24,576 tokens (the first and the last chunk), and decode at 32,768 keys for
one sequence and for 16; and the step a busy server issues (chapter 6b's load: 1,024-token prompts), a *mixed* step
of 128 decoding sequences at 1,088 keys (put first, as vLLM orders them for the backend) beside 7 new prompts'
1,024-token chunks. Each step is built once (Qwen2.5-7B's attention: 28 query heads, 4 KV heads, head dim
128, bfloat16, 16-token pages scattered over the pool) and run by:

* ``fa3``: vLLM's FlashAttention 3 (``flash_attn_varlen_func`` with the block table), what its FLASH_ATTN backend
  calls;
* ``ours``: :func:`lab.measure.attention.serving.server_step` under each prefill setting of :data:`PREFILL_SPACE`
  (prefill steps), or with the decode splits planned for the step's longest sequence and for a captured graph's
  bound, the server's longest sequence (decode steps), or (the mixed step) under :data:`MIXED_SPACE`, each with the
  decode rows sent to the prefill kernel with the chunks and to the decode kernel.

Every output is compared with FA3's (largest difference; without vLLM, FA3's row is an error and the first
candidate that runs is the reference; the kernels' exactness against an fp64 reference is
tested at smaller sizes), then all are timed in interleaved rounds, each a median of CUDA-graph replays.
Writes ``race.csv`` (step, candidate, ms, ms_rounds, vs_fa3, max_abs_diff, config), ``best_prefill.json`` (the
fastest prefill setting, what the backend's ``LAB_OURS_PREFILL_CONFIG`` takes) and ``provenance.json``; prints each
step's ratios against FA3.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from lab import REPO_ROOT, LabError, env, store
from lab.cli import path_arg, positive_count
from lab.folders import writes_folder
from lab.measure.ncu_output import MIXED_PROMPTS, query_rows
from lab.measure.timing import replay_ms, rounds_text, time_in_rounds

DEFAULT_OUT = REPO_ROOT / "data" / "local" / "serving-race"
#: (name, query tokens per sequence, cached prefix per sequence)
def mixed_step(decodes: int, keys: int):
    """A busy server's step: ``decodes`` sequences with one new token over ``keys`` keys, put first as vLLM orders
    them for the backend, then :data:`~lab.measure.ncu_output.MIXED_PROMPTS` new prompts' first chunks."""
    prompts, tokens = MIXED_PROMPTS
    return (f"mixed {decodes} decodes + {prompts} x {tokens}", [1] * decodes + [tokens] * prompts,
            [keys - 1] * decodes + [0] * prompts)


STEPS = (("prefill 8192 over 0", [8192], [0]),
         ("prefill 8192 over 24576", [8192], [24576]),
         ("decode 1 x 32768", [1], [32767]),
         ("decode 16 x 32768", [1] * 16, [32767] * 16),
         mixed_step(128, 1089))
STEP_KINDS = ("prefill", "decode", "mixed")   # a step's kind is its name's first word


#: Prefill launch settings raced: the tuned kernel's space, with its register cap (maxnreg) on the two 128x64
#: settings, which lets two 8-warp programs share a multiprocessor where one uncapped 128x128 program fills it
#: (data/h100/kernel-counters-chunk: 254 registers per thread, one program per SM); then the Gluon kernel
#: (:mod:`lab.measure.attention.hopper_paged`, Hopper only) with FA3's two stages of 128-key tiles, three, and four of
#: 64 keys.
PREFILL_SPACE = ({"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 2},
                 {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 3},
                 {"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3},
                 {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3},
                 {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 2, "maxnreg": 128},
                 {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 3, "maxnreg": 128},
                 {"kernel": "gluon", "BLOCK_N": 128, "STAGES": 2},
                 {"kernel": "gluon", "BLOCK_N": 128, "STAGES": 3},
                 {"kernel": "gluon", "BLOCK_N": 64, "STAGES": 4})
#: The mixed step's prefill settings: the serving default and the Gluon setting the race picked on an H100.
MIXED_SPACE = ({"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3}, {"kernel": "gluon", "BLOCK_N": 128, "STAGES": 3})
COLUMNS = ("step", "candidate", "ms", "ms_rounds", "vs_fa3", "max_abs_diff", "config")
CHUNK_CANDIDATES = ("fa3", "ours")
#: A mixed job's candidates: FA3, ours with the decode rows in the prefill kernel's tiles, ours with them split off.
MIXED_CANDIDATES = ("fa3", "ours-chunks", "ours-decode")


def setting_label(config: dict) -> str:
    """A prefill setting as the race names it: ``ours 128x64 w8 s2`` (`` r128`` with a register cap), or the Gluon
    kernel's ``ours gluon 128-key tiles s2``."""
    if config.get("kernel") == "gluon":
        return f"ours gluon {config['BLOCK_N']}-key tiles s{config['STAGES']}"
    cap = f" r{config['maxnreg']}" if config.get("maxnreg") else ""
    return f"ours {config['BLOCK_M']}x{config['BLOCK_N']} w{config['num_warps']} s{config['num_stages']}{cap}"


def step_candidates(step, inputs, split_bound: int, prefill_space=PREFILL_SPACE, mixed_space=None):
    """(label, call, config) of FA3 and of ours (each prefill setting of ``prefill_space``, or the decode splits, or
    at a mixed step each of ``mixed_space`` (default :data:`MIXED_SPACE`) with its decodes in the chunks' kernel and
    split off) at one step; FA3 first."""
    import torch

    from lab.measure.attention.serving import DECODE_CONFIG, server_step

    q, k_cache, v_cache, cu, seq_lens, table = inputs
    name, q_lens, prefixes = step
    longest_q, longest_k = max(q_lens), max(p + n for p, n in zip(prefixes, q_lens, strict=True))
    scale = q.shape[-1] ** -0.5

    def fa3():
        from vllm.v1.attention.backends.fa_utils import flash_attn_varlen_func  # vLLM's FA3: only on a GPU box

        out = torch.empty_like(q)
        flash_attn_varlen_func(q=q, k=k_cache, v=v_cache, out=out, cu_seqlens_q=cu, max_seqlen_q=longest_q,
                               seqused_k=seq_lens, max_seqlen_k=longest_k, softmax_scale=scale, causal=True,
                               block_table=table, fa_version=3)
        return out

    def ours(config: dict | None = None, split_keys: int = longest_k, num_decodes: int = 0):
        def call():
            out = torch.empty_like(q)
            return server_step(q, k_cache, v_cache, out, cu, seq_lens, table, max_query_len=longest_q,
                               split_keys=split_keys, scale=scale, num_decodes=num_decodes, prefill_config=config)
        return call

    found = [("fa3", fa3, None)]
    if name.startswith("mixed"):
        decodes = q_lens.index(max(q_lens))  # the leading sequences with one new token
        for c in mixed_space or MIXED_SPACE:
            found += [(f"{setting_label(c)}, decodes with the chunks", ours(c), c),
                      (f"{setting_label(c)}, decodes to the decode kernel", ours(c, num_decodes=decodes), c)]
    elif longest_q > 1:
        found += [(setting_label(c), ours(c), c) for c in prefill_space]
    else:
        found += [("ours, splits for the step", ours(), DECODE_CONFIG),
                  (f"ours, splits for {split_bound} keys (a captured graph)", ours(split_keys=split_bound),
                   DECODE_CONFIG)]
    return found


def progress_line(row: dict) -> str:
    """One candidate's result as the race prints it (a candidate no round timed says so)."""
    timed = (f"{row['ms']:8.3f} ms  {row['vs_fa3']:.3f}x FA3" if row.get("ms") and row.get("vs_fa3")
             else "not timed" if not row.get("error") else row["error"])
    diff = f"  (largest difference {row['max_abs_diff']:.2e})" if row.get("max_abs_diff") is not None else ""
    return f"{row['step']:26s} {row['candidate']:44s} {timed}{diff}"


def _server_calls(step, split_bound: int, seed: int) -> list:
    """FA3's call and ours (in the server's prefill setting: ``LAB_OURS_PREFILL_CONFIG``, else
    :data:`lab.measure.attention.serving.PREFILL_CONFIG`) at ``step``, on a fresh paged cache; FA3 first."""
    import torch

    from lab.measure.attention.paged_prefill import paged_batch
    from lab.measure.attention.serving import PREFILL_CONFIG, prefill_config_from_env

    inputs = paged_batch(step[1], step[2], 28, 4, 128, 16, torch.bfloat16, "cuda", seed=seed, spare_pages=64)
    config = prefill_config_from_env() or PREFILL_CONFIG
    return [call for _, call, _ in step_candidates(step, inputs, split_bound, prefill_space=(config,),
                                                   mixed_space=(config,))]


def chunk_call(candidate: str, batch: int, n: int):
    """One call of ``candidate`` on the last chunk (at most :data:`lab.measure.ncu_output.CHUNK` tokens) of an
    ``n``-token prompt in each of ``batch`` sequences, over its cached prefix, on a paged cache: ``fa3``, or ``ours``
    in the server's prefill setting. What ``python -m lab kernel-counters --jobs chunk:ours:1:32768`` profiles."""
    if candidate not in CHUNK_CANDIDATES:
        raise LabError(f"no chunk candidate {candidate!r}; known: {', '.join(CHUNK_CANDIDATES)}")
    chunk = query_rows("chunk", n)
    step = (f"prefill {chunk} over {n - chunk}", [chunk] * batch, [n - chunk] * batch)
    return dict(zip(CHUNK_CANDIDATES, _server_calls(step, n, seed=n + batch), strict=True))[candidate]


def mixed_call(candidate: str, decodes: int, keys: int):
    """One call of ``candidate`` (:data:`MIXED_CANDIDATES`) on :func:`mixed_step`'s step, the prefill kernel in the
    server's setting. What ``python -m lab kernel-counters --jobs mixed:ours-decode:128:1089`` profiles."""
    if candidate not in MIXED_CANDIDATES:
        raise LabError(f"no mixed candidate {candidate!r}; known: {', '.join(MIXED_CANDIDATES)}")
    calls = _server_calls(mixed_step(decodes, keys), keys, seed=keys + decodes)
    return dict(zip(MIXED_CANDIDATES, calls, strict=True))[candidate]


def race(rounds: int, rep_ms: int, split_bound: int, progress=print, save=lambda rows: None,
         kinds=STEP_KINDS) -> list[dict]:
    """The candidates of every step of ``kinds`` (:data:`STEP_KINDS`), checked against FA3 then timed; ``save(rows)``
    gets the rows so far after each step, so a crash keeps the steps already raced."""
    import torch

    from lab.measure.attention.paged_prefill import paged_batch

    rows = []
    for step in (s for s in STEPS if s[0].split()[0] in kinds):
        name, q_lens, prefixes = step
        inputs = paged_batch(q_lens, prefixes, 28, 4, 128, 16, torch.bfloat16, "cuda", seed=0, spare_pages=64)
        candidates = step_candidates(step, inputs, split_bound)
        reference = None  # FA3's output; where FA3 cannot run (no vLLM), the first candidate's that does
        step_rows = []
        for label, fn, config in candidates:
            row = {"step": name, "candidate": label, "config": json.dumps(config) if config else ""}
            try:
                out = fn().float()
                reference = out if reference is None else reference
                row["max_abs_diff"] = (out - reference).abs().max().item()
                step_rows.append((row, fn))
            except Exception as exc:  # a setting that does not compile or fit is a row, not the end of the race
                row["error"] = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}"
                rows.append(row)
                progress(progress_line(row))
        times = time_in_rounds(step_rows, lambda item, turn: replay_ms([item[1]], rep_ms), rounds)
        fa3_ms = next((statistics.median(t) for (row, _), t in zip(step_rows, times, strict=True)
                       if row["candidate"] == "fa3" and t), None)
        for (row, _), measured in zip(step_rows, times, strict=True):
            row["ms"] = statistics.median(measured) if measured else None
            row["ms_rounds"] = rounds_text(measured)
            row["vs_fa3"] = fa3_ms / row["ms"] if fa3_ms and row["ms"] else None
            rows.append(row)
            progress(progress_line(row))
        save(rows)
        del inputs, candidates, reference
        torch.cuda.empty_cache()
    return rows


def add_arguments(parser) -> None:
    parser.add_argument("--out", type=path_arg, default=DEFAULT_OUT, help=f"output folder (default {DEFAULT_OUT})")
    parser.add_argument("--rounds", type=positive_count, default=3, help="interleaved timing rounds (default 3)")
    parser.add_argument("--rep-ms", type=positive_count, default=100, help="ms of graph replays per candidate and round")
    parser.add_argument("--split-bound", type=positive_count, default=131072 + 64,
                        help="keys a captured decode graph plans its splits for: the server's --max-model-len "
                             "(default 131136, a sweep to 128k tokens)")
    parser.add_argument("--steps", type=step_kinds, default=STEP_KINDS,
                        help=f"the kinds of step to race, comma-separated (default all: {','.join(STEP_KINDS)})")


def step_kinds(text: str) -> tuple[str, ...]:
    """``--steps``: kinds of step among :data:`STEP_KINDS`, comma-separated."""
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    unknown = [k for k in kinds if k not in STEP_KINDS]
    if unknown or not kinds:
        raise argparse.ArgumentTypeError(f"no step kind {', '.join(unknown) or repr(text)}: pick among "
                                         f"{', '.join(STEP_KINDS)}")
    return kinds


@writes_folder("--out", kinds=("serving-race",))
def main(args) -> int:
    import pandas as pd

    if not env.detect().gpu:
        raise LabError("serving-race times kernels on a GPU; this machine has none")
    started = time.time()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    def save(rows: list[dict]):
        store.write_csv(out, "race.csv", pd.DataFrame(rows, columns=[*COLUMNS, "error"]))

    rows = race(args.rounds, args.rep_ms, args.split_bound, progress=lambda line: print(line, flush=True), save=save,
                kinds=args.steps)
    table = pd.DataFrame(rows, columns=[*COLUMNS, "error"])
    if "prefill" in args.steps:
        store.write_json_atomic(out / "best_prefill.json", best_prefill_config(table))
    store.write_provenance(out, store.new_provenance(
            "serving-race", model="Qwen2.5-7B attention (28 query heads, 4 KV heads, head dim 128)", dtype="bfloat16",
        flags={"rounds": args.rounds, "rep_ms": args.rep_ms, "split_bound": args.split_bound, "page_size": 16,
               "steps": [[name, len(q_lens), sum(q_lens), max(p + n for p, n in zip(prefixes, q_lens, strict=True))]
                         for name, q_lens, prefixes in STEPS if name.split()[0] in args.steps],
               "step_columns": ["name", "sequences", "query tokens", "longest keys"],
               "prefill_space": list(PREFILL_SPACE), "mixed_space": list(MIXED_SPACE)},
        elapsed_s=round(time.time() - started, 1),
        files={"race.csv": "one row per step and candidate: median ms of graph replays, ratio to FA3",
               **({"best_prefill.json": "the fastest prefill setting at the last chunk of a 32k prompt "
                                        "(what LAB_OURS_PREFILL_CONFIG takes)"} if "prefill" in args.steps else {})}))
    return 0


def fastest_of_ours(table, step: str):
    """Our fastest timed candidate at one step of a race's rows (a pandas row: candidate, ms, vs_fa3, config...)."""
    ours = table[(table.step == step) & table.candidate.str.startswith("ours") & table.ms.notna()]
    if ours.empty:
        raise LabError(f"the serving race timed no candidate of ours at {step!r}")
    return ours.sort_values("ms").iloc[0]


def best_prefill_config(table, step: str = "prefill 8192 over 24576") -> dict:
    """The fastest prefill setting of a race's rows at ``step`` (what ``LAB_OURS_PREFILL_CONFIG`` should say)."""
    return json.loads(fastest_of_ours(table, step).config)
