"""The book's self-check questions: one module per chapter (``ch01`` ... ``ch07``, ``ch06b``, ``ch06c``), each with its
``questions()`` and the ``quiz()`` its last cell shows. A chapter imports only its own module.

Every number an option states is a :class:`lab.book.quiz.Cited` fact of the chapter's page module, a
:class:`lab.book.quiz.Measured` cell of a dataset or a :class:`lab.book.quiz.Computed` value from ``lab``;
``holds`` states, on those values, why the marked option is the right one. ``tests/test_quiz.py`` checks
every question against the data it cites, and that the quizzes are balanced: no letter holds the right
answer in more than 40% of the questions the reader sees, and the right option is the longest in at most
40%. ``common`` holds what several chapters' questions cite.
"""

from __future__ import annotations

import importlib

from lab import LabError

#: chapter file stem -> the module of its questions (for the tests; a chapter imports its own module).
CHAPTERS = {"01-roofline": "ch01", "02-naive-attention": "ch02", "03-tiling-online-softmax": "ch03",
            "04-flashattention-triton": "ch04", "04b-backward-pass": "ch04b",
            "05-decode-split-kv": "ch05", "06-vllm-sweeps": "ch06",
            "06b-busy-server": "ch06b", "06c-our-kernels-in-vllm": "ch06c", "07-the-trace": "ch07"}


def module_of(chapter: str):
    """The questions module of a chapter file stem, e.g. ``module_of("06-vllm-sweeps").questions()``."""
    if chapter not in CHAPTERS:
        raise LabError(f"no quiz for chapter {chapter!r}; known: {', '.join(CHAPTERS)}")
    return importlib.import_module(f"{__name__}.{CHAPTERS[chapter]}")
