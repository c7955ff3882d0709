"""Chapter 6c, our kernels in a real server: its self-check questions (``questions``) and the quiz the chapter shows
(``quiz``)."""

from __future__ import annotations

from lab.book.pages import ch06c
from lab.book.quiz import Question, Quiz, chapter_quiz, cite

KEY = "06c-our-kernels-in-vllm"


def _cite(**names) -> dict:
    return cite(ch06c.facts(), **names)


def questions() -> list[Question]:
    return [_prefill_behind(), _gluon_prefill(), _under_load(), _planted_bug(), _graph_splits()]


def _prefill_behind() -> Question:
    """The book's kernels serving in vLLM against FA3, in one lease: prefill behind, decode level."""
    cites = _cite(n=("ours_long_n", ",d"), ttft=("ours_ttft_ratio_long", ".2f"), itl=("ours_itl_ratio_long", ".2f"),
                  chunk=("race_last_chunk_speed", ".2f"), decode=("race_decode1_speed", ".2f"))
    return Question(
        "Served by vLLM with the book's kernels, a {n}-token prompt's TTFT was {ttft}× FA3's while decode after it "
        "ran at {itl}× FA3's ITL. What explains the two?",
        ["The prefill kernel is slower than FA3's on a server's chunks ({chunk}× its speed), and prefill time is "
         "mostly attention and matmuls; decode is level because a decode step is mostly weight reads and the split-KV "
         "kernel keeps pace with FA3's for one sequence ({decode}×)",
         "Both kernels are equally fast; the TTFT gap is Python overhead of a backend written outside vLLM",
         "Decode reads the KV cache through a block table, which FA3 cannot do, so only our kernel pays for pages",
         "Our backend skips CUDA graphs in decode, which makes every step faster than a captured one"],
        0,
        "The serving race times the same steps on the same paged cache: the last prefill chunk of a long prompt, "
        "over its cached prefix, runs at {chunk}× FA3's speed with our compiler-scheduled Triton kernel, so a long "
        "prompt's TTFT grows; one decode step of one sequence at {n} keys runs at {decode}×, and in a decode step "
        "attention is a small share beside the weight matmuls, so the ITL stays level.",
        cites=cites,
        holds=lambda v: v["ttft"] > 1 and v["chunk"] < 1 and v["decode"] > 0.9)


def _gluon_prefill() -> Question:
    """What brought the long prompt's TTFT level with FA3's: the prefill kernel's schedule, not its memory traffic."""
    cites = _cite(n=("ours_long_n", ",d"), ttft=("ours_ttft_ratio_long", ".2f"), gttft=("gluon_ttft_ratio_long", ".2f"),
                  tchunk=("gluon_race_triton_speed", ".2f"), gchunk=("gluon_race_last_chunk_speed", ".2f"),
                  memory=("chunk_ours_memory", ".0f"))
    return Question(
        "With the Triton prefill kernel, a {n}-token prompt's first token took {ttft}× FA3's time; with the Gluon "
        "kernel, on the same 16-token pages, {gttft}×. What changed?",
        ["Who orders the work: the Gluon kernel has a producer warp load K and V by TMA while two consumer warpgroups "
         "overlap each tile's softmax with the tensor cores, as FA3 does; the Triton kernel leaves that order to "
         "the compiler",
         "The bytes read: the Triton kernel was limited by memory bandwidth on the paged cache, and TMA reads less",
         "The pages: the Gluon kernel copies a whole key tile at once, where the Triton kernel reads a page at a time",
         "The prefix: the Gluon kernel skips the cached prefix's keys, which the chunk's causal mask hides"],
        0,
        "Under Nsight Compute the Triton kernel's busiest memory unit ran at {memory}% of its peak, so memory was not "
        "the limit; the tensor pipe sat idle while its warps met at barriers between loading, softmax and products. "
        "The Gluon kernel keeps chapter 4's scheduled loop; what changes is how work is assigned, where a key tile "
        "comes from (eight one-page TMA copies with 16-token pages) and which rows are stored. It skips no key a row "
        "may see: every cached key is visible to the chunk. In the same race the last chunk ran at {gchunk}× FA3's "
        "speed against {tchunk}× for Triton's fastest setting, which a register cap had already lifted.",
        cites=cites,
        holds=lambda v: v["ttft"] > 1.05 and v["gttft"] < 1.02 and v["gchunk"] > v["tchunk"] and v["memory"] < 60)


def _under_load() -> Question:
    """Level one request at a time, behind in a burst of prompts: where the burst's time went."""
    cites = _cite(cap=("sload_capacity_ratio", ".2f"), everyone=("sload_capacity_prompts", ",d"),
                  ours_first=("sload_ours_burst_first", ".2f"), fa3_first=("sload_fa3_burst_first", ".2f"),
                  ours_span=("sload_ours_burst_span", ".1f"), fa3_span=("sload_fa3_burst_span", ".1f"),
                  ours_itl=("sload_ours_cap_itl", ".1f"), fa3_itl=("sload_fa3_cap_itl", ".1f"),
                  rate=("sload_ours_top_rate", "g"), ours_p99=("sload_ours_top_p99_itl", ".0f"),
                  near=("sload_fa3_near_rate", "g"), fa3_p99=("sload_fa3_near_p99_itl", ".0f"),
                  later=("sload_ours_poisson_ttft_max", ".0f"), once=("wload_capacity_ratio", ".2f"))
    return Question(
        "In the split load study, with all {everyone} prompts sent at once, OURS completed {cap}× FA3's requests per "
        "second. Its first request got its first token {ours_first} s after the burst began (FA3's: {fa3_first} s); "
        "from then to the last request's first token took OURS {ours_span} s and FA3 {fa3_span} s; the median gap "
        "between tokens was {ours_itl} ms against {fa3_itl} ms. Where did OURS lose its throughput?",
        ["Before the first token: a one-time stall at the start of the burst, after which OURS moved the prompts "
         "through their prefills as fast as FA3",
         "In every mixed step: prefill chunks beside decoding sequences made each of OURS's steps slower",
         "In the decode-only steps: the split-KV kernel falls behind FA3's when many sequences decode",
         "In the KV cache: OURS's server holds fewer tokens, so vLLM admits fewer requests at a time"],
        0,
        "Slower steps would have stretched the time from the first request's first token to the last one's; it was "
        "no longer than FA3's, and the median gap between tokens was level, so decode did not lose it either. What "
        "was lost came before the first token: a stall, which a capacity taken from one burst counts against the "
        "backend; it did not come back in the Poisson points that followed (no first token later than {later} ms). "
        "Everything points to Triton compiling the prefill kernel again, for a specialization vLLM's warm-up had not "
        "met; with step-dependent arguments unspecialized and a warm-up, OURS's capacity was {once}× FA3's. The "
        "mixed steps' cost shows elsewhere, in the gaps under Poisson arrivals, and the split brought it level with FA3's at a similar rate: at {rate} req/s OURS's p99 gap was {ours_p99} "
        "ms, FA3's {fa3_p99} ms at {near} req/s.",
        cites=cites,
        holds=lambda v: v["cap"] < 0.9 and v["ours_first"] > 5 * v["fa3_first"] and v["ours_span"] < 1.1 * v["fa3_span"]
        and abs(v["ours_itl"] / v["fa3_itl"] - 1) < 0.05 and v["ours_p99"] < 1.1 * v["fa3_p99"]
        and v["later"] / 1000 < v["ours_first"] / 10   # ms against s: later first tokens a tenth of the stall
        and v["once"] > 0.9)


def _planted_bug() -> Question:
    """Why the agreement check's planted bug shows as outputs that are not finite, in every layer after the first."""
    cites = _cite(bad=("bug_not_finite", ",d"), calls=("bug_calls", ",d"), worst=("agree_worst", ".2f"),
                  tol=("agree_tolerance", ".0f"))
    return Question(
        "Inside a running server, our attention agreed with FA3's to {worst}% of the largest output (the check "
        "allows {tol}%). Handed every sequence one key short, {bad} of {calls} calls gave outputs that were not "
        "finite. Why not finite, rather than a little off?",
        ["A prompt's first query has no key left: −∞ − (−∞) is NaN, and later layers inherit it",
         "bf16 overflows once a key is missing, because the remaining scores of the row grow past its range",
         "FA3 still reads the missing key, so the difference between the two outputs is itself not a number",
         "The block table then points at a page vLLM never wrote, and fresh GPU memory holds NaN"],
        0,
        "Causal attention lets a prompt's first query see one key, its own. One key short, that row has none: its "
        "running maximum stays at −∞, and subtracting it from scores of −∞ gives NaN. The NaN enters the residual "
        "stream, so the next layers' queries, keys and values, and so the KV cache, carry it: every call after the "
        "first layer is NaN, decode calls too. The honest run stayed within {worst}% of FA3's output, bf16's "
        "rounding, so a check that allows {tol}% separates the two.",
        cites=cites,
        holds=lambda v: v["bad"] > 0 and v["worst"] < v["tol"])


def _graph_splits() -> Question:
    """What a CUDA graph fixes in a decode step, and how the split-KV kernel lives with it."""
    return Question(
        "vLLM captures our decode steps into CUDA graphs, and a graph replays one launch grid whatever the sequences' "
        "lengths. How does the backend keep a short sequence from leaving most of its splits idle?",
        ["It captures a new graph for each sequence length it meets while serving",
         "It pads every sequence's keys to the longest length the server allows, so each split has work",
         "Each sequence spreads its own keys over the planned splits, in whole tiles",
         "It runs a decode step eagerly, outside any graph, whenever one of its sequences is short"],
        2,
        "The grid (splits × sequences × KV heads) is fixed when a graph is captured: the split count is planned per "
        "captured batch size, for sequences as long as max_model_len. Each sequence divides its own keys over those "
        "splits in whole 64-key tiles, so a short one keeps as many splits busy as it has tiles, rather than the one "
        "or two a fixed share of keys per split would give it; nothing is padded or recaptured.")


def quiz() -> Quiz:
    """The chapter's self-check, as its last cell shows it."""
    return chapter_quiz(KEY, questions)
