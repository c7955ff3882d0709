"""The interim readers of the interview page and the course kit (:mod:`lab.book.pages.interview`): the facts of
chapters 6 and 6b that those chapters do not yet state from a page module of their own, read as the
interview always read them. Values, each knowing its source, never sentences.

    common   facts that may be missing, one row of a table
    a10g     the published A10G study as chapter 6 reads it: always there (data/reference/)
    h200     this project's H200 vLLM sweeps
    studies  the later studies: concurrency, Flex decomposition and counters
    busy     the busy server (chapter 6b's facts and the answers' additions): load, a long prompt, FP8 KV cache

Each module is imported on its own; this package imports none of them, so a page reaches only the readers it
uses. Each goes when the chapter that teaches its facts states them from its page module.
"""
