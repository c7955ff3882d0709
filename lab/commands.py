"""The table of ``python -m lab`` commands, and how a command that made a data folder is spelled now.

Core (no imports): ``lab.__main__`` builds the parser from :data:`COMMANDS`; ``lab.results.data`` reads it to
give each data folder the command that makes it now beside the one recorded in its provenance.
"""

from __future__ import annotations

import shlex

#: command name -> the module that owns it (``add_arguments``, ``main``). Modules not importable here are
#: skipped in ``python -m lab --help``.
COMMANDS = {
    "reference": "lab.results.reference",
    "datasets": "lab.results.data",
    "env": "lab.env",
    "hardware": "lab.results.hardware",
    "device-properties": "lab.measure.device_properties",
    "bench": "lab.measure.bench",
    "backward-race": "lab.measure.backward_race",
    "tuning-race": "lab.measure.tuning_race",
    "tune-forward": "lab.measure.tune_forward",
    "tune-backward": "lab.measure.tune_backward",
    "flex-masks": "lab.measure.attention.flex_masks",
    "probe": "lab.measure.probes",
    "dram-bytes": "lab.measure.dram_bytes",
    "kernel-counters": "lab.measure.kernel_counters",
    "decode-rows": "lab.measure.decode_rows",
    "bandwidth": "lab.measure.bandwidth",
    "flex-decomposition": "lab.measure.flex_decomposition",
    "value-dependence": "lab.measure.value_dependence",
    "paged-bench": "lab.measure.paged_bench",
    "serving-race": "lab.measure.serving_race",
    "vllm-sweep": "lab.measure.vllm.sweep",
    "vllm-concurrency": "lab.measure.vllm.concurrency",
    "vllm-tokenizer": "lab.measure.vllm.tokenizer",
    "vllm-agreement": "lab.measure.vllm.agreement",
    "vllm-load": "lab.measure.vllm.load",
    "vllm-interference": "lab.measure.vllm.interference",
    "vllm-spread": "lab.measure.vllm.spreader",
    "fit": "lab.results.fit",
    "capture": "lab.measure.capture",
    "clock-probe": "lab.measure.clock_probe",
    "census": "lab.measure.census",
    "census-synthetic": "lab.measure.census.synthetic",
    "tables": "lab.results.tables",
    "carry": "lab.carry",
    "slides": "lab.book.slides",
    "live-check": "lab.book.live_check",
    "jupyter-check": "lab.book.jupyter_check",
    "glued-values": "lab.book.glued_values",
}

#: modules and scripts that made committed data folders under names they no longer have -> the command now
RENAMED = {
    "lab.vllm.sweep": "vllm-sweep",                    # before lab.measure.vllm (2026-10)
    "scripts/race_tuned.py": "tuning-race",            # the scripts below became commands in 2026-12
    "scripts/tune_kernels.py": "tune-forward",
    "scripts/tune_backward.py": "tune-backward",
    "scripts/census_synthetic.py": "census-synthetic",
    "scripts/carry.py": "carry",
    "scripts/glued_values.py": "glued-values",
}
_BY_MODULE = {module: name for name, module in COMMANDS.items()} | RENAMED


def command_now(recorded: str) -> str:
    """The command a provenance file recorded, as it is spelled today: ``python3 -m lab.measure.dram_bytes --out X``
    -> ``python -m lab dram-bytes --out X``, ``scripts/race_tuned.py --out X`` -> ``python -m lab tuning-race --out X``.
    A record that is no command line of lab's (free text, another tool) comes back as it was."""
    try:
        words = shlex.split(recorded)
    except ValueError:          # unbalanced quotes: not a command line
        return recorded
    if words and words[0].rsplit("/", 1)[-1] in ("python", "python3"):
        words = words[1:]
    if len(words) >= 2 and words[0] == "-m":
        program, rest = words[1], words[2:]
    elif words:
        program, rest = words[0], words[1:]
    else:
        return recorded
    if program == "lab":
        return shlex.join(["python", "-m", "lab", *rest])
    name = _BY_MODULE.get(program) or _BY_MODULE.get(program.removeprefix("./"))
    return shlex.join(["python", "-m", "lab", name, *rest]) if name else recorded
