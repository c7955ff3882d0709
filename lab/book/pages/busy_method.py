"""The method appendix's page module for the busy-server study: the load points' settings (each arm's provenance and
FA3's first Poisson point's command line), the synthetic tokenizer, the serial TTFTs behind the probe-vs-bench check,
and the interference trials' settings and windows. The results themselves are chapter 6b's
(:func:`lab.book.pages.ch06b.facts`); these are the method's values, each from the file that records it.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from lab import REPO_ROOT
from lab.book.facts import Fact
from lab.measure.vllm import arms
from lab.measure.vllm.tokenizer import model_vocab_size
from lab.results import interference as ri
from lab.results import load as rl
from lab.results.quantities import Quantity
from lab.store import DATA_DIR, read_json

WORKLOAD = "random-1024-128"
MODEL = REPO_ROOT / "data" / "models" / "qwen2.5-7b-128k"
#: A setting of a study as its files record it (members: [setting]).
LOAD_SETTING = Quantity("h200.load.setting", "a setting of the load study as FA3's arm recorded it (its provenance, "
                        "or the command line of its lightest Poisson point)", run=f"h200/{rl.H200_STUDY}",
                        file=f"{WORKLOAD}/{arms.FA3.slug}/provenance.json")
INTERFERENCE_SETTING = Quantity("h200.interference.setting", "a setting of the interference trials as FA3's arm "
                                "recorded it", run="h200/vllm0.26-qwen2.5-7b-interference",
                                file=f"{arms.FA3.slug}/chunk-*/provenance.json")
VOCAB = Quantity("model.vocab_size", "the vocabulary of the synthetic tokenizer's model (Qwen2.5-7B's, from its "
                 "config.json)", run="data/models/qwen2.5-7b-128k: config.json", unit="tokens")


def _flag(argv: list[str], name: str) -> str | None:
    """The value after ``name`` in a command line (None when it is not there)."""
    return argv[argv.index(name) + 1] if name in argv and argv.index(name) + 1 < len(argv) else None


def load_method(root: Path = DATA_DIR) -> dict[str, Fact]:
    """The load points' settings, from FA3's provenance and the command line of its lightest Poisson point."""
    folder = Path(root) / "h200" / rl.H200_STUDY / WORKLOAD / arms.FA3.slug
    where = f"data/h200/{rl.H200_STUDY}/{WORKLOAD}/{arms.FA3.slug}"
    constants = {"bm_agreement_tolerance": Fact(100 * rl.AGREEMENT_TOLERANCE, "lab.results.load.AGREEMENT_TOLERANCE",
                                                "{:.0f}%"),
                 "bm_vocab_size": VOCAB.fact(model_vocab_size(MODEL) if (MODEL / "config.json").exists() else None,
                                             fmt="{:,d}")}
    if not (folder / "provenance.json").exists():
        return constants | {name: Fact(None, where) for name in LOAD_NAMES}
    prov = read_json(folder / "provenance.json")
    flags, server = prov["flags"], prov["server"]
    poisson = rl.poisson_points(rl.read_arm(folder))
    cmd_path = Path(poisson[0]["source"]).with_suffix(".cmd") if poisson else None
    command = cmd_path.read_text(encoding="utf-8").strip() if cmd_path and cmd_path.exists() else None
    argv = shlex.split(command) if command else []
    prov_src, cmd_src = f"{where}/provenance.json", f"{where}/{cmd_path.name if cmd_path else '<point>.cmd'}"
    fractions = sorted(flags["fractions"])
    return {"bm_vllm": Fact(prov["vllm"], prov_src),
            "bm_span_s": LOAD_SETTING.fact(flags["span_s"], "span_s", fmt="{:.0f}"),
            "bm_fraction_lo": Fact(fractions[0], prov_src, "{:g}"),
            "bm_fraction_hi": Fact(fractions[-1], prov_src, "{:g}"),
            "bm_fractions": Fact(", ".join(f"{f:g}" for f in fractions), prov_src),
            "bm_capacity_prompts": LOAD_SETTING.fact(flags["capacity_prompts"], "capacity_prompts", fmt="{:d}"),
            "bm_min_prompts": LOAD_SETTING.fact(flags["min_prompts"], "min_prompts", fmt="{:d}"),
            "bm_max_prompts": LOAD_SETTING.fact(flags["max_prompts"], "max_prompts", fmt="{:,d}"),
            "bm_agreement_prompts": LOAD_SETTING.fact(flags["agreement_prompts"], "agreement_prompts", fmt="{:d}"),
            "bm_input_len": LOAD_SETTING.fact(flags["workload"]["input_len"], "input_len", fmt="{:,d}"),
            "bm_output_len": LOAD_SETTING.fact(flags["workload"]["output_len"], "output_len", fmt="{:d}"),
            "bm_chunk": LOAD_SETTING.fact(flags["max_num_batched_tokens"], "chunk", fmt="{:,d}"),
            "bm_gpu_memory": LOAD_SETTING.fact(server["gpu_memory_utilization"], "gpu_memory", fmt="{:g}"),
            "bm_burstiness": Fact(_flag(argv, "--burstiness"), cmd_src),
            "bm_temperature": Fact(_flag(argv, "--temperature"), cmd_src),
            "bm_command_rate": LOAD_SETTING.fact(poisson[0]["rate"] if poisson else None, "first Poisson rate", fmt="{:g}",
                                                  detail=cmd_src),
            "bm_command": Fact(command, cmd_src)} | constants


LOAD_NAMES = ("bm_vllm", "bm_span_s", "bm_fraction_lo", "bm_fraction_hi", "bm_fractions", "bm_capacity_prompts",
              "bm_min_prompts", "bm_max_prompts", "bm_agreement_prompts", "bm_input_len", "bm_output_len", "bm_chunk",
              "bm_gpu_memory", "bm_burstiness", "bm_temperature", "bm_command_rate", "bm_command")


INTERFERENCE_NAMES = ("bm_inter_ctx_lo", "bm_inter_ctx_hi", "bm_inter_decoders", "bm_inter_lengths",
                      "bm_inter_warm_steps", "bm_inter_after_s", "bm_inter_token_id_chunks", "bm_inter_text_chunks")


def interference_method(root: Path = DATA_DIR) -> dict[str, Fact]:
    """The interference trials' settings (FA3's chunk folders' provenance), which chunk sizes ran on a server that
    skipped its tokenizer (prompts as token ids) and which on the load servers with it, and the steady window."""
    base = Path(root) / "h200" / ri.STUDY / arms.FA3.slug
    records = [read_json(path) for path in sorted(base.glob("chunk-*/provenance.json"))] if base.is_dir() else []
    where = f"data/h200/{ri.STUDY}/{arms.FA3.slug}/chunk-*/provenance.json"
    out = {"bm_steady_gaps": Fact(ri.STEADY_GAPS, "lab.results.interference.STEADY_GAPS", "{:d}")}
    if not records:
        return out | {name: Fact(None, where) for name in INTERFERENCE_NAMES}
    flags = records[0]["flags"]
    trials, (low, high) = flags["trials"], flags["decoder_context"]
    join = lambda values, fmt: " and ".join(format(v, fmt) for v in sorted(set(values))) or None  # noqa: E731
    def chunks(skipped: bool) -> str | None:
        found = join((r["flags"]["max_num_batched_tokens"] for r in records
                      if bool(r["server"]["skip_tokenizer_init"]) == skipped), ",d")
        return f"{found} tokens" if found else None

    return out | {"bm_inter_ctx_lo": INTERFERENCE_SETTING.fact(low, "shortest context", fmt="{:,d} tokens"),
                  "bm_inter_ctx_hi": INTERFERENCE_SETTING.fact(high, "longest context", fmt="{:,d} tokens"),
                  "bm_inter_decoders": Fact(join((t["decoders"] for t in trials), "d"), where),
                  "bm_inter_lengths": Fact(join((t["long_len"] for t in trials), ",d"), where),
                  "bm_inter_warm_steps": INTERFERENCE_SETTING.fact(trials[0]["warm_steps"], "warm steps", fmt="{:d}"),
                  "bm_inter_after_s": INTERFERENCE_SETTING.fact(trials[0]["after_s"], "after_s", fmt="{:g}"),
                  "bm_inter_token_id_chunks": Fact(chunks(True), where),
                  "bm_inter_text_chunks": Fact(chunks(False), where)}


def serial_ttft_table(root: Path = DATA_DIR):
    """The serial point's and the probe's TTFTs on FA3's load server, summarised side by side (ms), or None."""
    import pandas as pd

    folder = Path(root) / "h200" / rl.H200_STUDY / WORKLOAD / arms.FA3.slug
    found = rl.serial_ttfts(folder)
    if found is None:
        return None
    table = pd.DataFrame({"vllm bench serve (serial point)": pd.Series(found["bench"]).describe(),
                          "the probe": pd.Series(found["probe"]).describe()})
    return table.drop(index="std").rename(index={"count": "requests", "50%": "median"})


def method_facts(root: Path = DATA_DIR) -> dict[str, Fact]:
    return load_method(root) | interference_method(root)
