"""The kernel families a census sorts GPU time into, in the order every table and figure lists them.

:mod:`lab.measure.census` puts each kernel of a trace in one of them; :mod:`lab.results.census_windows` reads stored
censuses by them without loading the trace reader.
"""

#: ``communication``: collectives between GPUs (NCCL, vLLM's custom all-reduce); zero on one GPU.
FAMILIES = ("attention", "matmul", "communication", "other")
