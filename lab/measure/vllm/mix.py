"""A long-tailed mix of prompt and output lengths, as a ``vllm bench serve`` custom dataset (chat-like traffic)."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

from lab.measure.vllm.probe import make_prompt
from lab.measure.vllm.tokenizer import text_of
from lab.store import write_atomic


def write_mix(path: Path, count: int, *, median_input: int = 1024, median_output: int = 128, sigma: float = 1.0,
              max_input: int = 16384, seed: int = 0) -> Path:
    """A long-tailed mix of prompts as a ``vllm bench serve`` custom dataset (JSONL: prompt, output_tokens).

    Input lengths are log-normal around ``median_input`` (``sigma`` in natural-log units: a few prompts
    are ten times the median, as in chat traffic), output lengths log-normal around ``median_output``
    with half that spread; each prompt is random token ids written as text of the synthetic tokenizer.
    """
    rng = random.Random(seed)
    lines = []
    for index in range(count):
        n_in = int(min(max_input, max(16, round(rng.lognormvariate(math.log(median_input), sigma)))))
        n_out = int(min(8 * median_output, max(8, round(rng.lognormvariate(math.log(median_output), sigma / 2)))))
        lines.append(json.dumps({"prompt": text_of(make_prompt(n_in, seed * 1_000_003 + index)), "output_tokens": n_out}))
    return write_atomic(path, lambda tmp: tmp.write_text("\n".join(lines) + "\n", encoding="utf-8"))
