"""Run panels: forms in a live chapter that run the book's experiments on the reader's GPU.

- :func:`sweep_panel` (chapter 06): vLLM backends x prompt lengths x repetitions x output tokens x chunk
  size; the server's start phases and every prompt as progress; points land in the sweep explorer.
- :func:`kernel_panel` (chapters 04, 05): attention candidates x lengths (or cached contexts), timed with
  the benchmark's code; the rows join the kernel explorer.
- :func:`capture_panel` (chapter 07): one profiler window on a vLLM server and its census.
- :func:`load_panel` (the busy-server chapter): one load point with ``vllm bench serve`` (a backend, a request
  rate, a number of prompts); it lands in the busy-server explorer.

Each chapter imports its own panel's module (``from lab.book.run_panels.kernels import kernel_panel``) in its
"run it yourself" cell; this package imports none of them. Servers are kept per arm while the kernel
lives and stopped at its exit (:mod:`lab.book.run_panels.servers`). Where a panel cannot run (the static
site, no GPU, no vLLM) it says what it would run and why not (:mod:`lab.book.run_panels.base`).
"""
