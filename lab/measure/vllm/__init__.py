"""Live vLLM sweeps: serve a model with one attention backend, probe TTFT and ITL against prompt length.

- :mod:`lab.measure.vllm.arms`: the arms (backend, FlashAttention version, KV-cache dtype), their labels and folders.
- :mod:`lab.measure.vllm.server`: start/stop ``vllm serve`` for one arm, confirm from its log what runs.
- :mod:`lab.measure.vllm.serverlog`: read backend, FlashAttention version and chunk size from a server log.
- :mod:`lab.measure.vllm.probe`: stream completions, time every chunk, append measurements to JSONL.
- :mod:`lab.measure.vllm.sweep`: ``python -m lab vllm-sweep``: one arm end to end into a dataset folder.
- :mod:`lab.measure.vllm.concurrency`: ``python -m lab vllm-concurrency``: decode ITL and throughput against concurrency.
"""
