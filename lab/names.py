"""What the book calls each thing it times: one id, one label and one colour per kernel candidate, the Gluon race's
variants, and vLLM's attention backends with the words older releases' logs used for them.

An id is what the data files carry (the ``candidate`` column of a benchmark, the ``variant`` column of a race); the
label is the one wording every chart legend, table, explorer and glued sentence uses for it::

    from lab.names import colour, key, label, registry_name
    label("sdpa-cudnn"), colour("sdpa-cudnn")   # ('SDPA cuDNN', '#2ca02c')
    key("sdpa-cudnn"), key("FLASH_ATTN/FA3")     # ('cudnn', 'fa3'): the short word in glue (fact) names
    registry_name("Flash Attention")            # 'FLASH_ATTN' (vLLM 0.11's log line, in today's registry name)

Core, so the measuring code (the races' variant names, the server log reader), ``lab.results`` (the A10G study's
logs) and ``lab.book`` (legends, tables) read the same table.
"""

from __future__ import annotations

from dataclasses import dataclass

from lab import LabError


@dataclass(frozen=True)
class Name:
    """One thing the book names: its id, its label, its colour in every figure (None: a race variant, drawn in a
    table only), ``written``: how the data files spell it when that is not the id (the races' variants), and
    ``key``: the short word glue (fact) names use for it (``race_tuned_vs_fa3_16k``)."""

    id: str
    label: str
    colour: str | None = None
    written: str | None = None
    key: str | None = None

    @property
    def in_data(self) -> str:
        """The name a data file's row carries for it."""
        return self.written or self.id


#: The kernel candidates of the benchmarks in lab.measure.candidates' order, then the Gluon kernel, the decode-rows
#: sweep's FA3 with query tokens (lab.measure.decode_rows) and the backward race's ``ours`` (our Triton backward). Colours keep 3:1 contrast on a white and on the explorers'
#: dark chart (lab.book.plots.PALETTE says how).
CANDIDATES = {c.id: c for c in (
    Name("naive", "naive (SDPA math)", "#7f7f7f", key="naive"),
    Name("sdpa-flash", "SDPA flash (FlashAttention 2)", "#1f77b4", key="flash"),
    Name("sdpa-cudnn", "SDPA cuDNN", "#2ca02c", key="cudnn"),
    Name("flex", "FlexAttention", "#d62728", key="flex"),
    Name("ours-teaching", "ours, teaching", "#e36b00", key="teaching"),
    Name("ours-tuned", "ours, tuned", "#a06356", key="tuned"),
    Name("fa2", "FA2 (vLLM's vllm_flash_attn)", "#91921a", key="fa2"),
    Name("fa3", "FA3 (vLLM's vllm_flash_attn)", "#696cb8", key="fa3"),
    Name("fa4", "FA4 (flash-attn-4, CuTeDSL)", "#de5eb7", key="fa4"),
    Name("flex-flash", 'FlexAttention, BACKEND="FLASH"', "#637939", key="flexflash"),
    Name("ours-hopper", "ours, Gluon", "#9467bd", key="gluon"),
    Name("ours-persistent", "ours, Gluon persistent", "#12858f", key="persistent"),
    Name("fa3-tokens", "FA3, group of 7 × query tokens", "#9467bd", key="tok"),
    Name("ours", "ours (Triton)", "#a06356", key="ours"),  # the tuned kernel's colour: our backward beside it
)}

#: The Gluon race's rows (lab.measure.tuning_race, data/h200/kernels-hopper-race) in the order chapter 4 builds
#: the schedule up: the Triton kernel it starts from, then the Gluon kernel's parts. ``written`` is the race.csv
#: variant name (kept, so the committed race reads).
VARIANTS = {v.id: v for v in (
    Name("tuned-kv-major-tma", "Triton kernel (compiler's schedule)", written="+ kv-major order, TMA"),
    Name("gluon-neither", "Gluon: producer + 2 consumers", written="gluon 128x128 s2, neither"),
    Name("gluon-overlap", "+ softmax under P·V", written="gluon 128x128 s2, no ping-pong"),
    Name("gluon-default", "+ ping-pong (the default)", written="gluon 128x128 s2"),
    Name("gluon-pingpong", "ping-pong, no overlap", written="gluon 128x128 s2, no overlap"),
    Name("gluon-s3", "default, 3 stages", written="gluon 128x128 s3"),
    Name("gluon-n64", "default, 64-key tiles, 4 stages", written="gluon 128x64 s4"),
    Name("gluon-persistent", "persistent, strided plan", written="gluon 128x128 s2, persistent"),
    Name("gluon-balanced", "persistent, balanced plan", written="gluon 128x128 s2, persistent, balanced"),
)}

#: The Flex recipe's steps that the decomposition (lab.measure.flex_decomposition) and the Nsight Compute jobs
#: (lab.results.flex_counters) time beside the candidates above: vLLM's FlexAttention call taken apart.
FLEX_STEPS = {v.id: v for v in (
    Name("flex-default", "Flex, default call", key="default"),
    Name("flex-forced", "Flex, FORCE_USE_FLEX_ATTENTION", key="forced"),
    Name("flex-tiles16", "Flex, forced with 16 × 16 tiles", key="tiles16"),
    Name("flex-paged", "Flex, vLLM's paged recipe", key="paged"),
    Name("flex-pad8", "Flex, group padded to 8 heads", key="pad8"),
    Name("flex-pad8-mask", "Flex, padded, with a real block mask", key="pad8mask"),
)}

#: The vLLM arms the serving studies run (lab.measure.vllm.arms, by label) -> their short word in glue names. An arm
#: is a backend with its FlashAttention version: ``fa3`` is the same FA3 as the kernel candidate of that key.
ARM_KEYS = {"FLASH_ATTN": "flash", "FLASH_ATTN/FA3": "fa3", "FLASH_ATTN/FA2": "fa2", "FLASH_ATTN/FA3-FP8": "fa3fp8",
            "FLEX_ATTENTION": "flex", "TRITON_ATTN": "triton", "OURS": "ours"}

#: vLLM's attention backends by registry name, each with the words a release before 0.13 logged for it
#: ("Using Flash Attention backend on V1 engine"; the A10G study's logs also say "FlashAttention", "Flex Attention").
BACKENDS = {
    "FLASH_ATTN": ("Flash Attention", "FlashAttention"),
    "FLEX_ATTENTION": ("FlexAttention", "Flex Attention"),
    "FLASHINFER": ("FlashInfer",),
    "TRITON_ATTN": ("Triton",),
    "CUSTOM": (),  # a third-party backend's slot (0.26): the lab's plugin puts the book's kernels there
    "TREE_ATTN": ("TreeAttention",),
    "XFORMERS": ("XFormers",),
}
#: An older log's word -> the registry name.
BACKEND_ALIASES = {alias: name for name, aliases in BACKENDS.items() for alias in aliases}


def named(name_id: str) -> Name:
    """The candidate or race variant of this id; LabError naming the known ids otherwise."""
    found = CANDIDATES.get(name_id) or VARIANTS.get(name_id) or FLEX_STEPS.get(name_id)
    if found is None:
        raise LabError(f"no name for {name_id!r}; lab.names knows {', '.join([*CANDIDATES, *VARIANTS, *FLEX_STEPS])}")
    return found


def label(name_id: str) -> str:
    """The one wording the book uses for this candidate or variant."""
    return named(name_id).label


def labels(ids) -> dict[str, str]:
    """id -> label, in the order given (a legend's or a table's rows)."""
    return {name_id: label(name_id) for name_id in ids}


def colour(name_id: str) -> str:
    """The candidate's colour in every figure and explorer."""
    found = named(name_id)
    if found.colour is None:
        raise LabError(f"{name_id!r} has no colour: it is a race variant, shown in tables only")
    return found.colour


def key(name_id: str) -> str:
    """The short word glue (fact) names use for a candidate, a Flex step or a vLLM arm (by its label)."""
    if name_id in ARM_KEYS:
        return ARM_KEYS[name_id]
    found = named(name_id)
    if found.key is None:
        raise LabError(f"{name_id!r} has no glue key in lab.names")
    return found.key


def in_data(name_id: str) -> str:
    """How a data file's row names this candidate or variant (a race's ``variant`` column)."""
    return named(name_id).in_data


def registry_name(name: str) -> str:
    """vLLM's registry name for a backend as any release logged it (unknown names unchanged)."""
    return BACKEND_ALIASES.get(name, name)
