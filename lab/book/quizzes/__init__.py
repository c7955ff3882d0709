"""The book's self-check questions, one function per chapter (``CHAPTERS`` maps file stems to them).

Every number an option states is a :class:`lab.book.quiz.Measured` cell of a dataset or a
:class:`lab.book.quiz.Computed` value from ``lab`` (hardware table, model shape, I/O model); ``holds``
states, on those values, why the marked option is the right one. ``tests/test_quiz.py`` checks every
question against the data it cites, and that the quizzes are balanced: no letter holds the right answer
in more than 40% of the questions the reader sees, and the right option is the longest in at most 40%.

    common       what the questions cite (the A10G study, lengths, devices, the model shape)
    foundations  chapters 01-03: the roofline, the n×n matrix, tiling and the online softmax
    kernels      chapters 04-05: the Triton kernels, decode and split-KV, batch on the decode roofline
    serving      chapters 06-07: live vLLM sweeps and the trace
    busy         chapter 06b: the busy server (load, a long prompt among decoders, an FP8 KV cache)
"""

from __future__ import annotations

from lab import LabError
from lab.book import fact_registry
from lab.book.quiz import Cited, Quiz
from lab.book.quizzes.busy import busy_server
from lab.book.quizzes.common import A10G, FLASH, FLEX
from lab.book.quizzes.foundations import naive_attention, roofline, tiling
from lab.book.quizzes.kernels import decode_split_kv, triton_kernels
from lab.book.quizzes.serving import the_trace, vllm_sweeps

__all__ = ["A10G", "CHAPTERS", "FLASH", "FLEX", "chapter_quiz"]

#: chapter file stem -> its questions.
CHAPTERS = {
    "01-roofline": roofline,
    "02-naive-attention": naive_attention,
    "03-tiling-online-softmax": tiling,
    "04-flashattention-triton": triton_kernels,
    "05-decode-split-kv": decode_split_kv,
    "06-vllm-sweeps": vllm_sweeps,
    "06b-busy-server": busy_server,
    "07-the-trace": the_trace,
}


def chapter_quiz(chapter: str) -> Quiz:
    """The self-check quiz for a chapter file stem, e.g. ``chapter_quiz("06-vllm-sweeps")``."""
    if chapter not in CHAPTERS:
        raise LabError(f"no quiz for chapter {chapter!r}; known: {', '.join(CHAPTERS)}")
    quiz = Quiz(key=chapter, questions=CHAPTERS[chapter]())
    cited = {f"quiz {qi + 1}: {name}": found for qi, question in enumerate(quiz.questions)
             for name, number in question.cites.items() for found in _facts_in(number)}
    fact_registry.record({name: number.fact for name, number in cited.items()},
                         {name: number.text() for name, number in cited.items()})
    return quiz


def _facts_in(number) -> list[Cited]:
    """The facts a cited number shows or is computed from (a share of the ceiling cites the ceiling)."""
    if isinstance(number, Cited):
        return [number]
    return [found for part in getattr(number, "inputs", ()) for found in _facts_in(part)]
