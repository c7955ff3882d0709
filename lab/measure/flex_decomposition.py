"""Why vLLM's FLEX_ATTENTION arm is slow: FlexAttention standalone, then one vLLM ingredient at a time.

Decode (one query token over a 32k cache, batch 1 and 16) and prefill (16k, causal), 28 query and 4
KV heads (Qwen2.5-7B), head dim 128, bf16. Every variant is checked against an fp32 reference, then
all of a shape's variants are timed in interleaved rounds (median round), CUDA events, L2 flushed.

Variants (``enable_gqa=True`` in every FlexAttention and SDPA call: K/V are never copied per head):

* ``flex-default`` -- ``torch.compile(flex_attention)`` with nothing forced. For a query shorter than
  128 tokens Inductor can lower it to a separate decode template (torch/_inductor/kernel/flex/
  flex_decoding.py, ``create_flex_decoding_kernel``: split-KV over a grid (query tiles,
  batch x KV heads, SPLIT_KV), the query heads of one KV group packed into the tile's rows). The choice
  is ``_use_flex_decoding`` in that file: it refuses the decode template under
  ``FORCE_USE_FLEX_ATTENTION``, for ``q_len >= 128``, and when the query heads per KV head are not a
  power of two (``pw_of_two``, added by pytorch/pytorch PR #160904, Aug 2025, in place of a lowering
  error; provenance flags.sources records whether the installed torch has it). Qwen2.5-7B has 28/4 = 7,
  so even standalone its decode would run the general kernel (``flex_attention_grid``: one program per
  batch x query head x BLOCK_M query rows, so a single query row fills one row of the tile). The
  kernel names and grids in ``note`` show which template ran.
* ``flex-pad8`` (decode) -- the same call with each group's 7 query heads padded to 8 (zeros, outputs
  dropped): the decode template becomes eligible; what the split-KV decode path is worth here.
* ``flex-forced`` -- ``kernel_options={"FORCE_USE_FLEX_ATTENTION": True}``, what vLLM passes.
* ``flex-tiles16`` -- forced, plus ``BLOCK_M=16, BLOCK_N=16`` tiles, as vLLM's direct block-mask build
  sets them (prefill keeps the 128-token causal block mask: only the tile size changes).
* ``flex-paged`` -- vLLM's whole recipe (vllm-project/vllm, vllm/v1/attention/backends/flex_attention.py,
  read at commit 00507c2e; the GPU run records whether the installed vLLM file carries the same
  markers): K and V live in one pool of 16-token pages, physical layout [pages, 16, kv_heads, 2 x d]
  with K and V side by side in the last dim (``get_kv_cache_shape`` + ``get_kv_cache_stride_order``),
  pages assigned in shuffled order; all requests' query tokens packed into batch 1
  (``FlexAttentionImpl.forward``); the block mask built directly from the block table
  (``FlexAttentionMetadata._build_block_mask_direct``: per 16-query block, every page of every request
  in the block, deduplicated; no full blocks, so the mask runs on every tile and causal tiles are not
  skipped); the mask function maps physical to logical positions through an inverse block table
  (``physical_to_logical_mapping``, ``_convert_physical_to_logical``, ``get_paged_mask_mod``);
  kernel options from ``get_kernel_options``: forced, BLOCK_M = BLOCK_N = 16.
* ``sdpa-flash``, ``sdpa-cudnn`` -- torch SDPA backends (lab.measure.bench), the fast kernels.
* ``copy`` -- a device-to-device copy of the same K/V bytes; its ``gb_per_s`` counts read + write.

Writes ``flex_decomposition.csv`` (phase,batch,n,variant,ms,ms_rounds,kv_bytes,gb_per_s,tflops,
max_abs_err,note; ``kv_bytes`` = K and V once, ``gb_per_s`` = kv_bytes / ms for attention,
``tflops`` counts useful FLOPs only) and ``provenance.json`` to ``--out``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import json
import math
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from lab import REPO_ROOT, LabError, store
from lab.cli import count_or_zero, module_cli, path_arg, positive_count, sizes
from lab.folders import writes_folder
from lab.measure.attention.reference import attention_flops, attention_torch
from lab.measure.candidates import Shape, candidate_fn
from lab.measure.timing import rounds_text, time_in_rounds

DEFAULT_OUT = REPO_ROOT / "data" / "local" / "flex-decomposition"
COLUMNS = ("phase", "batch", "n", "variant", "ms", "ms_rounds", "kv_bytes", "gb_per_s", "tflops", "max_abs_err", "note")
DECODE_VARIANTS = ("flex-default", "flex-pad8", "flex-forced", "flex-tiles16", "flex-paged", "sdpa-flash", "sdpa-cudnn", "copy")
PREFILL_VARIANTS = ("flex-default", "flex-forced", "flex-tiles16", "flex-paged", "sdpa-flash", "sdpa-cudnn", "copy")
PAGE = 16          # vLLM's default KV block size, and the block mask's KV block with a direct build
Q_BLOCK = 16       # vLLM's q_block_size with a direct build (torch >= 2.9)
MAX_ABS_ERR = 2e-2
SPIN_CYCLES = 1_000_000   # ~0.5 ms at the H200's 1.98 GHz: longer than a compiled call's CPU overhead
FORCED = {"FORCE_USE_FLEX_ATTENTION": True}
TILES16 = {**FORCED, "BLOCK_M": 16, "BLOCK_N": 16}


# --- the paged layout and its mask (pure; CPU-tested) ----------------------------------------------

@dataclass
class PagedLayout:
    """Requests' K/V scattered over a pool of pages, with the lookups a mask function needs.

    block_table[r, j]: the physical page of request r's logical page j. physical_to_logical[r, p]: the
    logical page of physical page p in request r, or -1. doc_ids[t]: the request of packed query token t;
    q_start[r] its first token; q_offset[r] the logical position of request r's first query token.
    kv_indices / kv_num_blocks: per block of Q_BLOCK packed query tokens, the pages it may read.
    """
    seq_lens: object
    q_lens: object
    block_table: object
    physical_to_logical: object
    doc_ids: object
    q_start: object
    q_offset: object
    kv_indices: object
    kv_num_blocks: object
    num_pages: int
    page: int
    q_block: int

    def to(self, device):
        import torch
        moved = {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in self.__dict__.items()}
        return PagedLayout(**moved)


def paged_layout(seq_lens, q_lens, page: int = PAGE, q_block: int = Q_BLOCK, seed: int = 0,
                 spare_pages: int = 0) -> PagedLayout:
    """Shuffled page assignment for requests of ``seq_lens`` tokens whose last ``q_lens`` are queries.

    Page 0 is never used (vLLM keeps it empty); ``spare_pages`` unused pages are added to the pool.
    """
    import torch

    if len(seq_lens) != len(q_lens) or not seq_lens:
        raise LabError(f"seq_lens and q_lens must be non-empty and of equal length; got {seq_lens}, {q_lens}")
    if any(q < 1 or q > s for q, s in zip(q_lens, seq_lens, strict=True)):
        raise LabError(f"every request needs 1 <= q_len <= seq_len; got q_lens {q_lens}, seq_lens {seq_lens}")
    pages_per = [math.ceil(s / page) for s in seq_lens]
    num_pages = 1 + sum(pages_per) + spare_pages
    gen = torch.Generator().manual_seed(seed)
    physical = (torch.randperm(num_pages - 1, generator=gen) + 1)[: sum(pages_per)]
    block_table = torch.zeros(len(seq_lens), max(pages_per), dtype=torch.int64)
    p2l = torch.full((len(seq_lens), num_pages), -1, dtype=torch.int64)
    used = 0
    for r, count in enumerate(pages_per):
        block_table[r, :count] = physical[used:used + count]
        p2l[r, block_table[r, :count]] = torch.arange(count)
        used += count
    q_lens_t = torch.tensor(q_lens, dtype=torch.int64)
    doc_ids = torch.repeat_interleave(torch.arange(len(q_lens)), q_lens_t)
    q_start = torch.cumsum(q_lens_t, 0) - q_lens_t
    q_offset = torch.tensor(seq_lens, dtype=torch.int64) - q_lens_t
    groups = []
    for g in range(math.ceil(len(doc_ids) / q_block)):
        requests = dict.fromkeys(doc_ids[g * q_block:(g + 1) * q_block].tolist())  # in order, deduplicated
        groups.append(torch.cat([block_table[r, :pages_per[r]] for r in requests]))
    # as wide as the pool (the KV length a BlockMask must cover); padding points at page 0, never read
    width = max(num_pages, max(len(x) for x in groups))
    kv_indices = torch.zeros(1, 1, len(groups), width, dtype=torch.int32)
    for g, pages in enumerate(groups):
        kv_indices[0, 0, g, :len(pages)] = pages.to(torch.int32)
    kv_num_blocks = torch.tensor([[[len(x) for x in groups]]], dtype=torch.int32)
    return PagedLayout(torch.tensor(seq_lens, dtype=torch.int64), q_lens_t, block_table, p2l, doc_ids, q_start,
                       q_offset, kv_indices, kv_num_blocks, num_pages, page, q_block)


def paged_mask_mod(layout: PagedLayout):
    """mask_mod over physical KV positions: valid page of the query's own request, and causal in logical
    positions (the index arithmetic of vLLM's paged mask, written for this experiment)."""
    def mask(b, h, q_idx, kv_idx):
        req = layout.doc_ids[q_idx]
        logical_page = layout.physical_to_logical[req, kv_idx // layout.page]
        logical_kv = logical_page * layout.page + kv_idx % layout.page
        logical_q = q_idx - layout.q_start[req] + layout.q_offset[req]
        return (logical_page >= 0) & (logical_kv < layout.seq_lens[req]) & (logical_q >= logical_kv)
    return mask


def paged_block_mask(layout: PagedLayout):
    from torch.nn.attention.flex_attention import BlockMask

    return BlockMask.from_kv_blocks(layout.kv_num_blocks, layout.kv_indices, None, None,
                                    BLOCK_SIZE=(layout.q_block, layout.page), mask_mod=paged_mask_mod(layout),
                                    seq_lengths=(len(layout.doc_ids), layout.num_pages * layout.page),
                                    compute_q_blocks=False)


def to_paged(q, k, v, layout: PagedLayout):
    """(q, k, v) of shape [B, H, n, d] with each request's queries at the end of its keys, as vLLM sees
    them: packed query [1, Hq, tokens, d] and K/V views [1, Hkv, pages x page, d] of one pool."""
    import torch

    batch, kv_heads, n, d = k.shape
    pool = torch.zeros(layout.num_pages, layout.page, kv_heads, 2 * d, dtype=k.dtype, device=k.device)
    for r in range(batch):
        count = math.ceil(n / layout.page)
        pad = count * layout.page - n
        for half, src in ((slice(0, d), k[r]), (slice(d, 2 * d), v[r])):
            tiles = torch.nn.functional.pad(src, (0, 0, 0, pad)).reshape(kv_heads, count, layout.page, d)
            pool[layout.block_table[r, :count], :, :, half] = tiles.permute(1, 2, 0, 3)
    flat = pool.view(-1, kv_heads, 2 * d)
    key = flat[..., :d][None].permute(0, 2, 1, 3)
    value = flat[..., d:][None].permute(0, 2, 1, 3)
    tokens = q.transpose(1, 2).reshape(-1, q.shape[1], d)  # [tokens, heads, d], requests one after another
    query = tokens[None].permute(0, 2, 1, 3)
    return query, key, value, pool


def from_paged(out, batch: int):
    """The packed output [1, Hq, tokens, d] back to [B, Hq, n_q, d]."""
    heads, tokens, d = out.shape[1:]
    return out[0].reshape(heads, batch, tokens // batch, d).transpose(0, 1)


def pad_group_heads(q, kv_heads: int, to: int):
    """[B, Hq, n, d] with each KV group's query heads padded with zeros to ``to`` heads."""
    import torch

    batch, heads, n, d = q.shape
    grouped = q.reshape(batch, kv_heads, heads // kv_heads, n, d)
    extra = torch.zeros(batch, kv_heads, to - heads // kv_heads, n, d, dtype=q.dtype, device=q.device)
    return torch.cat([grouped, extra], dim=2).reshape(batch, kv_heads * to, n, d)


def unpad_group_heads(out, kv_heads: int, group: int):
    batch, heads, n, d = out.shape
    return out.reshape(batch, kv_heads, heads // kv_heads, n, d)[:, :, :group].reshape(batch, kv_heads * group, n, d)


# --- variants on the GPU -----------------------------------------------------------------------------

_COMPILED = {}


def _flex():
    import torch
    from torch.nn.attention.flex_attention import flex_attention

    if "fn" not in _COMPILED:
        # one compiled graph per variant and shape: past the recompile limit dynamo would fall back to eager
        # (unfused) flex; dynamic=False keeps batch and heads static, which the decode template requires
        for limit in ("recompile_limit", "cache_size_limit"):
            if hasattr(torch._dynamo.config, limit):
                setattr(torch._dynamo.config, limit, max(getattr(torch._dynamo.config, limit), 64))
        _COMPILED["fn"] = torch.compile(flex_attention, fullgraph=True, dynamic=False)
    return _COMPILED["fn"]


def flex_block_mask(n_q: int, n_k: int, device, causal: bool = True):
    """FlexAttention's causal (or all-visible) BlockMask of 128 x 128 blocks, built once per shape. With no
    block mask at all Flex uses one block spanning the whole cache, which the decode template cannot split."""
    from torch.nn.attention.flex_attention import create_block_mask

    key = (causal, n_q, n_k, str(device))
    if key not in _COMPILED:
        visible = (lambda b, h, qi, ki: qi >= ki) if causal else (lambda b, h, qi, ki: qi >= 0)
        _COMPILED[key] = create_block_mask(visible, None, None, n_q, n_k, device=device)
    return _COMPILED[key]


def variant_fn(name: str, q, k, v, causal: bool):
    """A no-argument callable for one variant, and a function that maps its output to [B, Hq, n_q, d]."""
    import torch

    flex = _flex()
    mask = flex_block_mask(q.shape[2], k.shape[2], q.device) if causal else None
    same = lambda out: out  # noqa: E731
    if name in ("flex-default", "flex-forced", "flex-tiles16"):
        options = {"flex-default": None, "flex-forced": FORCED, "flex-tiles16": TILES16}[name]
        return (lambda: flex(q, k, v, block_mask=mask, enable_gqa=True, kernel_options=options)), same
    if name in ("flex-pad8", "flex-pad8-mask"):
        group = q.shape[1] // k.shape[1]
        padded = pad_group_heads(q, k.shape[1], 1 << (group - 1).bit_length())
        if name == "flex-pad8-mask":  # a real (all-visible) block mask: the decode template's splits get keys
            mask = flex_block_mask(q.shape[2], k.shape[2], q.device, causal=False)
        return (lambda: flex(padded, k, v, block_mask=mask, enable_gqa=True)), \
            (lambda out: unpad_group_heads(out, k.shape[1], group))
    if name == "flex-paged":
        n_q = q.shape[2]
        layout = paged_layout([k.shape[2]] * q.shape[0], [n_q] * q.shape[0]).to(q.device)
        query, key, value, pool = to_paged(q, k, v, layout)
        block_mask = paged_block_mask(layout)
        run = lambda: flex(query, key, value, block_mask=block_mask, enable_gqa=True, kernel_options=TILES16)  # noqa: E731
        run.keep = pool  # the views need their pool alive
        return run, (lambda out: from_paged(out, q.shape[0]))
    if name in ("sdpa-flash", "sdpa-cudnn"):
        fn = candidate_fn(name, "prefill" if causal else "decode")
        return (lambda: fn(q, k, v, causal)), same
    if name == "copy":
        src = torch.cat([k.reshape(-1), v.reshape(-1)])
        dst = torch.empty_like(src)
        return (lambda: dst.copy_(src)), None
    raise LabError(f"unknown variant {name!r}; choose from {', '.join(dict.fromkeys(DECODE_VARIANTS + PREFILL_VARIANTS))}")


def kernel_names(fn) -> str:
    """The GPU kernels one call launches, with their grids (torch profiler, one call)."""
    import torch

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json") as tmp:
        prof.export_chrome_trace(tmp.name)
        events = json.load(open(tmp.name)).get("traceEvents", [])
    kernels = [e for e in events if e.get("cat") == "kernel"]
    return "; ".join(f"{e['name'][:70]} grid={e.get('args', {}).get('grid')}" for e in kernels)


def time_call_ms(fn, rep_ms: float, flush) -> float:
    """Median of CUDA-event timings of single calls, L2 flushed before each; at least 3 calls, more while
    ``rep_ms`` lasts (a slow variant is not timed for seconds). A short GPU spin before each call lets the
    CPU enqueue the call before its start event fires, so Python and launch overhead are not timed (vLLM
    replays decode from CUDA graphs, where there is none)."""
    import torch

    spin = getattr(torch.cuda, "_sleep", None)
    starts, ends = [], []
    spent, calls = 0.0, 0
    while calls < 3 or (spent < rep_ms and calls < 200):
        flush.zero_()
        if spin is not None:
            spin(SPIN_CYCLES)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        starts.append(start)
        ends.append(end)
        calls += 1
        if calls in (1, 3) or calls % 20 == 0:
            end.synchronize()
            spent = sum(s.elapsed_time(e) for s, e in zip(starts, ends, strict=True))
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends, strict=True))


# --- one shape ---------------------------------------------------------------------------------------

def random_inputs(batch, q_heads, kv_heads, n_q, n, head_dim, seed: int, device: str = "cuda", scale: float = 1.0):
    """Seeded N(0, scale^2) bf16 q [B, Hq, n_q, d], k and v [B, Hkv, n, d]."""
    import torch

    gen = torch.Generator(device=device).manual_seed(seed)
    def make(h, rows):
        return (scale * torch.randn(batch, h, rows, head_dim, generator=gen, device=device)).to(torch.bfloat16)
    return make(q_heads, n_q), make(kv_heads, n), make(kv_heads, n)


def measure_phase(phase: str, batch: int, n: int, variants, rep_ms: int, rounds: int, q_heads: int = 28,
                  kv_heads: int = 4, head_dim: int = 128, progress=print, device: str = "cuda") -> list[dict]:
    """Check every variant of one shape against the fp32 reference, then time them in interleaved rounds
    (``device`` exists for the CPU test of the bookkeeping)."""
    import torch

    causal = phase == "prefill"
    shape = Shape(phase, batch, q_heads, kv_heads, n, head_dim)
    q, k, v = random_inputs(batch, q_heads, kv_heads, shape.n_q, n, head_dim, seed=n + 7 * batch, device=device)
    reference = attention_torch(q, k, v, causal)
    kv_bytes = 2 * k.numel() * k.element_size()
    flops = attention_flops(batch, q_heads, shape.n_q, n, head_dim, causal)
    flush = torch.empty(256 << 20 if device == "cuda" else 1, dtype=torch.int8, device=device)  # evicts L2
    rows, ready = [], []
    for name in variants:
        row = {"phase": phase, "batch": batch, "n": n, "variant": name, "ms": math.nan, "ms_rounds": "",
               "kv_bytes": kv_bytes, "gb_per_s": math.nan, "tflops": math.nan, "max_abs_err": math.nan, "note": ""}
        rows.append(row)
        started = time.time()
        try:
            fn, back = variant_fn(name, q, k, v, causal)
            out = fn()  # compiles
            torch.cuda.synchronize()
            if back is not None:
                row["max_abs_err"] = (back(out).float() - reference.float()).abs().max().item()
                row["note"] = "enable_gqa=True"
                if name.startswith("flex"):
                    try:
                        row["note"] += "; kernels: " + kernel_names(fn)
                    except Exception as exc:  # the profiler is evidence, not a requirement
                        row["note"] += f"; kernels not listed ({type(exc).__name__})"
            del out
            if back is not None and not row["max_abs_err"] <= MAX_ABS_ERR:
                row["note"] = f"WRONG: max abs error {row['max_abs_err']:.3g} > {MAX_ABS_ERR}; " + row["note"]
            else:
                ready.append((row, fn))
        except Exception as exc:  # a variant this torch cannot run is a result, not a crash
            row["note"] = f"error: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
            with contextlib.suppress(Exception):  # a sticky CUDA error surfaces in the next shape's rows
                torch.cuda.synchronize()
        progress(f"{phase} b={batch} n={n} {name}: checked in {time.time() - started:.1f} s "
                 f"(max abs err {row['max_abs_err']:.3g})")
    timed = time_in_rounds(ready, lambda item, _, flush=flush: time_call_ms(item[1], rep_ms / rounds, flush), rounds)
    for (row, _), times in zip(ready, timed, strict=True):
        row["ms"] = statistics.median(times)
        row["ms_rounds"] = rounds_text(times)
        seconds = row["ms"] * 1e-3
        if row["variant"] == "copy":
            row["gb_per_s"] = 2 * kv_bytes / seconds / 1e9
            row["note"] = "device-to-device copy of the K/V bytes; gb_per_s counts read + write"
        else:
            row["gb_per_s"] = kv_bytes / seconds / 1e9
            row["tflops"] = flops / seconds / 1e12
    del flush
    torch.cuda.empty_cache()
    return rows


# --- CLI ---------------------------------------------------------------------------------------------

def source_markers() -> dict:
    """What the installed torch (and vLLM, when present) say about the choices this experiment isolates."""
    markers = {}
    try:
        from torch._inductor.kernel.flex import flex_decoding

        source = inspect.getsource(flex_decoding._use_flex_decoding)
        markers["torch_use_flex_decoding_checks_power_of_two"] = "pw_of_two" in source
        markers["torch_use_flex_decoding_honours_force"] = "FORCE_USE_FLEX_ATTENTION" in source
    except Exception as exc:  # a torch without this module: say so
        markers["torch_flex_decoding"] = f"not inspected ({type(exc).__name__})"
    spec = importlib.util.find_spec("vllm")
    roots = [Path(spec.origin).parent] if spec is not None and spec.origin else []
    roots.append(Path(os.environ.get("VLLM_SITE", "/tmp/site")) / "vllm")  # the offline bundle, not imported
    path = next((r / "v1/attention/backends/flex_attention.py" for r in roots
                 if (r / "v1/attention/backends/flex_attention.py").exists()), None)
    markers["vllm_flex_file"] = str(path) if path else "not found (vLLM not installed here)"
    if path:
        text = path.read_text(errors="replace")
        for key in ('"FORCE_USE_FLEX_ATTENTION": True', "_build_block_mask_direct", "physical_to_logical",
                    "q_block_size = 16", "K and V are packed into the content dim", "compute_q_blocks"):
            markers[f"vllm has {key}"] = key in text
    return markers


def add_arguments(parser) -> None:
    parser.add_argument("--out", type=path_arg, default=DEFAULT_OUT,
                        help=f"output folder (default {DEFAULT_OUT.relative_to(REPO_ROOT)})")
    parser.add_argument("--decode-n", type=positive_count, default=32768, help="decode context length")
    parser.add_argument("--decode-batches", default="1,16", help="decode batch sizes, comma-separated")
    parser.add_argument("--prefill-n", type=count_or_zero, default=16384, help="prefill length (0 skips prefill)")
    parser.add_argument("--variants", default="", help="subset of the variants (default all)")
    parser.add_argument("--rep-ms", type=positive_count, default=150, help="milliseconds of timed calls per variant and "
                        "shape, shared out among the rounds (every variant gets at least 3 calls per round)")
    parser.add_argument("--rounds", type=positive_count, default=3, help="interleaved rounds")


@writes_folder("--out")
def main(args) -> int:
    import pandas as pd
    import torch

    if not torch.cuda.is_available():
        raise LabError("no CUDA GPU here: the Flex decomposition times kernels on a GPU")
    chosen = [v for v in args.variants.split(",") if v]
    known = set(DECODE_VARIANTS) | set(PREFILL_VARIANTS)
    if any(v not in known for v in chosen):
        raise LabError(f"unknown variant in --variants {args.variants!r}; choose from {', '.join(sorted(known))}")
    batches = list(sizes(args.decode_batches, example="1,16", option="--decode-batches"))
    # the single-stream decode first (the book's vLLM arm), then prefill, then the larger batches
    shapes = ([("decode", b, args.decode_n) for b in batches[:1]] + ([("prefill", 1, args.prefill_n)] if args.prefill_n else [])
              + [("decode", b, args.decode_n) for b in batches[1:]])
    out_dir = args.out if args.out.is_absolute() else Path.cwd() / args.out
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.time()
    flags = {"experiment": "flex-decomposition", "q_heads": 28, "kv_heads": 4, "head_dim": 128,
             "shapes": [list(s) for s in shapes], "rep_ms": args.rep_ms, "rounds": args.rounds,
             "page": PAGE, "q_block": Q_BLOCK, "timer": "CUDA events per call, 256 MB L2 flush and a ~0.5 ms GPU spin (torch.cuda._sleep) before "
             "each so CPU launch overhead is not timed; median call per round, median round (ms_rounds lists them)",
             "reference": "fp32 attention (lab.measure.attention.reference.attention_torch)",
             "max_abs_err": MAX_ABS_ERR, "sources": source_markers()}
    store.write_provenance(out_dir, store.new_provenance("kernels", dtype="bfloat16", flags=flags, complete=False))
    rows: list[dict] = []

    def say(text):
        print(f"[flex +{time.time() - started:.0f}s] {text}", file=sys.stderr, flush=True)

    for phase, batch, n in shapes:
        variants = [v for v in (DECODE_VARIANTS if phase == "decode" else PREFILL_VARIANTS) if not chosen or v in chosen]
        try:
            rows += measure_phase(phase, batch, n, variants, args.rep_ms, args.rounds, progress=say)
        except Exception as exc:  # e.g. out of memory in the reference: the other shapes still run
            say(f"{phase} b={batch} n={n} failed: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}")
            rows += [{"phase": phase, "batch": batch, "n": n, "variant": v, "note": f"shape failed: {type(exc).__name__}"}
                     for v in variants]
        store.write_csv(out_dir, "flex_decomposition.csv", pd.DataFrame(rows).reindex(columns=COLUMNS))  # partial runs keep rows
    store.write_provenance(out_dir, store.new_provenance("kernels", dtype="bfloat16", flags=flags, complete=True,
                                                       seconds=round(time.time() - started, 1)))
    table = pd.DataFrame(rows).reindex(columns=COLUMNS)
    for row in rows:  # which kernels ran: the evidence for the decode-template rules
        if str(row["variant"]).startswith("flex"):
            print(f"{row['phase']} b={row['batch']} {row['variant']}: {str(row.get('note', ''))[:220]}")
    with pd.option_context("display.width", 200):
        print(table.drop(columns=["note", "ms_rounds"]).round(4).to_string(index=False))
    return 0


def cli(argv=None) -> int:
    return module_cli(sys.modules[__name__], "python -m lab.measure.flex_decomposition", argv)


if __name__ == "__main__":
    sys.exit(cli())
