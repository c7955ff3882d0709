"""Parse the published A10G study (probe logs and its digest) into a dataset with provenance.

The study ("The Inference Wall", part 8) ran vLLM 0.11 on one A10G with FLASH_ATTN and
FLEX_ATTENTION. Its raw logs are read here, never retyped: ``python -m lab reference`` writes
``data/reference/a10g-vllm0.11-qwen2.5-7b/``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from lab import REPO_ROOT, LabError, store
from lab.cli import path_arg
from lab.folders import check_output, dataset_lock
from lab.measure.vllm.arms import FLASH, FLEX
from lab.names import BACKEND_ALIASES
from lab.results.fit import fit_quadratic
from lab.results.quantities import Quantity

DEFAULT_SOURCE = REPO_ROOT.parent / "shared" / "reference" / "inference-wall-part8"
#: The parsed study's dataset name under data/ (what ``lab.results.data.load`` takes).
DATASET = "reference/a10g-vllm0.11-qwen2.5-7b"
#: A prompt's length in the study, as every page quotes it: the tokens it actually had (the study asked for round
#: target lengths, 256 and up, and recorded the actual count beside each, a token or two more).
PROMPT_TOKENS = Quantity("a10g.sweep.prompt_tokens", "the tokens of a prompt of the A10G study (its actual length, "
                         "the sweep's actual_len column)", run=DATASET, file="sweep.csv", unit="tokens")
DEFAULT_OUT = REPO_ROOT / "data" / DATASET
SOURCE_TITLE = "The Inference Wall, part 8: FlashAttention vs FlexAttention in vLLM on an A10G (Oct 2026)"

# --- s1.log: the prompt-length probe ----------------------------------------------------------
# The study's probe logs come in a few layouts: an arm opened by a run line (``[run_s1] TS ARM name
# model=... backend=...``) or only by its title comment (``# S1 arm=name model=... gen=64``, the
# backend then named there or in vLLM's "Using ... backend" line); the fit written as
# ``t = A + Bus*n + Cps*n^2`` (spaces, units and ``²`` vary) or as ``a=A s, b=B us, c=C ps``.

_ARM = re.compile(r"^\[run_s1\] (?P<ts>\S+) ARM (?P<arm>\S+) model=(?P<model>\S+) backend=(?P<backend>\S+)")
_BACKEND_LINE = re.compile(r"INFO .*Using (?P<what>.+?) backend on V1 engine")
_HEADER = re.compile(r"^#\s*S1\s+(?P<fields>.*\barm=.*)$")
_FIELD = re.compile(r"(?P<key>\w+)=(?P<value>\S+)")
_ROW = re.compile(r"^\s+(?P<target>\d+)\s+(?P<actual>\d+)\s+(?P<ttft>[\d.]+)\s+(?P<pref>[\d.]+)\s+(?P<itl>[\d.]+)\s*$")
_ROW_LIKE = re.compile(r"^\s+\d")
_NUM = r"(\d+(?:\.\d*)?)"
_FIT_LINE = re.compile(r"^#\s*prefill fit\b")
_FIT_FORMS = (
    re.compile(rf"t(?:\(n\))?\s*=\s*(?P<a>{_NUM[1:-1]})\s*s?\s*\+\s*(?P<b>{_NUM[1:-1]})\s*us\s*[*·]?\s*n\s*\+\s*"
               rf"(?P<c>{_NUM[1:-1]})\s*ps\s*[*·]?\s*n\s*(?:\^\s*2|²)"),
    re.compile(rf"\ba\s*=\s*(?P<a>{_NUM[1:-1]})\s*s\b.*?\bb\s*=\s*(?P<b>{_NUM[1:-1]})\s*us\b.*?"
               rf"\bc\s*=\s*(?P<c>{_NUM[1:-1]})\s*ps\b"),
)
_SHARE = re.compile(r"^#\s+quad share @ n=\s*(?P<n>\d+): (?P<pct>[\d.]+)%")
_DECODE_LINE = re.compile(r"^#\s*decode ITL\b")
_DECODE = re.compile(r"^#\s*decode ITL: (?P<s_itl>[\d.]+) ms @ (?P<s_len>\d+) -> (?P<l_itl>[\d.]+) ms @ (?P<l_len>\d+)"
                     r"\s+\((?P<pct>[+-]?[\d.]+)%\)")
_FAILED = re.compile(r"^\[run_s1\] (?P<arm>\S+) (?P<why>server died early|NOT READY.*)$")
_START = re.compile(r"^\[run_s\d\] START (?P<ts>\S+)")
#: A fit recomputed from the table must give the printed curvature to this relative tolerance.
_FIT_TOLERANCE = 0.01


@dataclass
class Arm:
    """One server configuration of the probe (one attention backend)."""

    arm: str
    model: str
    backend: str | None
    started: str | None
    backend_log_line: str | None = None
    gen_tokens: int | None = None
    rows: list[dict] = field(default_factory=list)
    fit: dict | None = None
    quad_share: list[dict] = field(default_factory=list)
    decode: dict | None = None
    failure: str | None = None
    first_line: int = 0


class _ProbeLogReader:
    """Reads a probe log line by line; every line it cannot read is a LabError naming the line."""

    def __init__(self, where: str):
        self.where = where
        self.arms: list[Arm] = []
        self.current: Arm | None = None
        self.backend_line: str | None = None     # vLLM's "Using ... backend" line seen before a title
        self.number = 0

    def fail(self, what: str, line: str) -> None:
        raise LabError(f"{self.where}: line {self.number}: {what}: {line.strip()[:80]!r}")

    def feed(self, number: int, line: str) -> None:
        self.number = number
        if m := _ARM.match(line):
            self.current = Arm(arm=m["arm"], model=m["model"], backend=m["backend"], started=m["ts"],
                               first_line=number)
            self.arms.append(self.current)
        elif _BACKEND_LINE.search(line):
            self._backend_line(line.split("] ", 1)[-1].strip())
        elif m := _HEADER.match(line):
            self._header(m, line)
        elif self.current is not None:
            self._in_arm(line)

    def _backend_line(self, text: str) -> None:
        arm = self.current
        if arm is not None and not arm.rows and arm.backend_log_line is None:
            self._attach(arm, text)
        else:
            self.backend_line = text         # for the arm whose title comes next

    @staticmethod
    def _attach(arm: Arm, text: str) -> None:
        arm.backend_log_line = text
        what = _BACKEND_LINE.search("INFO " + text)
        arm.backend = arm.backend or BACKEND_ALIASES.get(what["what"])

    def _header(self, m, line: str) -> None:
        fields = {f["key"]: f["value"] for f in _FIELD.finditer(m["fields"])}
        if not fields.get("gen", "").isdigit():
            self.fail("title comment without gen=N (generated tokens)", line)
        arm = self.current
        if arm is not None and arm.arm != fields["arm"] and not arm.rows and arm.failure is None:
            self.fail(f"table header for arm {fields['arm']} inside arm {arm.arm}", line)
        if arm is None or arm.arm != fields["arm"] or arm.rows:
            arm = self.current = Arm(arm=fields["arm"], model=fields.get("model", "?"),
                                     backend=fields.get("backend"), started=None, first_line=self.number)
            self.arms.append(arm)
        if self.backend_line is not None and arm.backend_log_line is None:
            self._attach(arm, self.backend_line)
        self.backend_line = None
        arm.gen_tokens = int(fields["gen"])

    def _in_arm(self, line: str) -> None:
        arm = self.current
        if m := _ROW.match(line):
            if arm.fit is not None:
                self.fail(f"a table row of arm {arm.arm} after its fit line", line)
            arm.rows.append({"target_len": int(m["target"]), "actual_len": int(m["actual"]), "ttft_s": float(m["ttft"]),
                             "prefill_ms_per_token": float(m["pref"]), "itl_ms": float(m["itl"])})
        elif _ROW_LIKE.match(line):
            self.fail(f"cannot read this table row ({len(line.split())} columns; expected target, actual, "
                      "ttft_s, pref_ms/tok, decode_ms)", line)
        elif _FIT_LINE.match(line):
            found = next((m for form in _FIT_FORMS if (m := form.search(line))), None)
            if found is None:
                self.fail("cannot read the fit line (expected 't = A + Bus*n + Cps*n^2' or 'a=A s, b=B us, c=C ps')",
                          line)
            arm.fit = {"a_s": float(found["a"]), "b_us_per_token": float(found["b"]),
                       "c_ps_per_token2": float(found["c"])}
        elif m := _SHARE.match(line):
            arm.quad_share.append({"n": int(m["n"]), "share_pct": float(m["pct"])})
        elif _DECODE_LINE.match(line):
            m = _DECODE.match(line) or self.fail("cannot read the decode line (expected 'decode ITL: X ms @ N -> "
                                                 "Y ms @ M  (+P%)')", line)
            arm.decode = {"short_len": int(m["s_len"]), "short_itl_ms": float(m["s_itl"]), "long_len": int(m["l_len"]),
                          "long_itl_ms": float(m["l_itl"]), "growth_pct": float(m["pct"])}
        elif (m := _FAILED.match(line)) and m["arm"] == arm.arm:
            arm.failure = (arm.failure + "; " if arm.failure else "") + m["why"]


def _check_arm(arm: Arm, where: str) -> None:
    """A measured arm's table must be whole: closed by its fit and decode lines, which must agree with it."""
    if arm.failure is not None:
        return
    at = f"{where}: arm {arm.arm} (from line {arm.first_line})"
    if not arm.rows:
        raise LabError(f"{where}: arm {arm.arm} has no table rows and no failure line; the log looks truncated")
    if arm.backend is None:
        raise LabError(f"{at}: names no backend (no backend= field and no 'Using ... backend' line)")
    if arm.fit is None or arm.decode is None:
        missing = "prefill fit" if arm.fit is None else "decode ITL"
        raise LabError(f"{at}: the table ends after {len(arm.rows)} rows without its '{missing}' line; "
                       "the log looks truncated")
    first, last = arm.rows[0]["actual_len"], arm.rows[-1]["actual_len"]
    if (arm.decode["short_len"], arm.decode["long_len"]) != (first, last):
        raise LabError(f"{at}: the decode line spans {arm.decode['short_len']}..{arm.decode['long_len']} tokens but "
                       f"the table {first}..{last}; rows are missing")
    if len(arm.rows) >= 4:
        again = fit_quadratic([r["actual_len"] for r in arm.rows], [r["ttft_s"] for r in arm.rows])
        printed = arm.fit["c_ps_per_token2"]
        if abs(again.c_ps_per_token2 - printed) > _FIT_TOLERANCE * abs(printed):
            raise LabError(f"{at}: its {len(arm.rows)} rows give c = {again.c_ps_per_token2:.1f} ps/token^2 but the "
                           f"fit line says {printed:.1f}; rows are missing or altered")


def parse_probe_log(text: str, where: str = "s1.log") -> list[Arm]:
    """Every arm of an s1-style probe log: its table rows, printed fit and decode summary."""
    reader = _ProbeLogReader(where)
    for number, line in enumerate(text.splitlines(), 1):
        reader.feed(number, line)
    if not reader.arms:
        raise LabError(f"{where}: no '[run_s1] ... ARM' line or '# S1 arm=...' title found; "
                       "expected the study's s1 probe log")
    for arm in reader.arms:
        _check_arm(arm, where)
    return reader.arms


# --- s3.log: profiler windows -------------------------------------------------------------------

_TRACE_BLOCK = re.compile(r"^\[run_s3\] (?P<arm>\S+) traces \(engine-process trace sizes, gzipped bytes")
_TRACE_ROW = re.compile(r"^\s*(?P<bytes>\d+) (?P<phase>prefill|decode) (?P<tokens>\d+)\s*$")
_S3_ARM = re.compile(r"^\[run_s3\] \S+ ARM (?P<arm>\S+) backend=(?P<backend>\S+)")


def parse_capture_log(text: str, where: str = "s3.log") -> list[dict]:
    """The profiler windows listed in an s3-style capture log, with their gzipped trace sizes."""
    backends: dict[str, str] = {}
    rows, arm = [], None
    for line in text.splitlines():
        if m := _S3_ARM.match(line):
            backends[m["arm"]] = m["backend"]
        elif m := _TRACE_BLOCK.match(line):
            arm = m["arm"]
        elif arm and (m := _TRACE_ROW.match(line)):
            rows.append({"arm": backends.get(arm, arm), "phase": m["phase"], "tokens": int(m["tokens"]),
                         "trace_gz_bytes": int(m["bytes"])})
        else:
            arm = None if not line.startswith(" ") else arm
    if not rows:
        raise LabError(f"{where}: no trace-size rows found; expected the study's s3 capture log")
    return rows


# --- FACTS.md: published census figures and rig ----------------------------------------------------

_CENSUS_BULLET = re.compile(r"^\s*- (?P<phase>prefill|decode) (?P<k>\d+)k: (?P<body>.+)$")
_CLAUSE = re.compile(
    r"(?P<metric>[a-z][a-z ]*?)\s+~?(?P<v1>[\d,.]+)\s*(?P<u1>ms|s|%)(?P<of> of the window)?(?:\s*\(flash\))?"
    r"\s+vs\s+~?(?P<v2>[\d,.]+)\s*(?P<u2>ms|s|%)")
_FLAG = re.compile(r"--(?P<name>[a-z][a-z-]*)(?: (?P<value>[\d.]+))?")
_VLLM = re.compile(r"vLLM (?P<v>\d+\.\d+\.\d+)")
_CHUNK = re.compile(r"max_num_batched_tokens=(?P<v>\d+)")
_KERNEL_FLASH = re.compile(r"flash runs `(?P<k>[^`]+)`")
_KERNEL_FLEX = re.compile(r"flex runs one compiled Triton kernel `(?P<k>[^`]+)`")
_METRICS = {("attention", "ms"): "attention_ms", ("matmul", "ms"): "matmul_ms", ("window total", "s"): "window_s",
            ("window", "s"): "window_s", ("attention share", "%"): "attention_share_pct",
            ("attention", "%"): "attention_share_pct"}


def _bullets(text: str) -> list[str]:
    """Lines of Markdown with each list item's wrapped continuation lines joined onto it."""
    joined: list[str] = []
    for line in text.splitlines():
        continues = joined and joined[-1].lstrip().startswith("- ") and line.startswith(" ") and not line.lstrip().startswith("- ")
        if continues and line.strip():
            joined[-1] = joined[-1] + " " + line.strip()
        else:
            joined.append(line)
    return joined


def _num(text: str) -> float:
    return float(text.replace(",", "").rstrip("."))


def parse_facts(text: str, windows: list[dict], where: str = "FACTS.md") -> dict:
    """Published census figures, decode kernel names and server flags from the study's digest.

    ``windows`` (from the capture log) turns "prefill 28k" into the exact token count profiled.
    """
    exact = {(w["phase"], round(w["tokens"] / 1024)): w["tokens"] for w in windows}
    census = []
    for line in _bullets(text):
        m = _CENSUS_BULLET.match(line)
        if not m:
            continue
        phase, k = m["phase"], int(m["k"])
        tokens = exact.get((phase, k))
        if tokens is None:
            raise LabError(f"{where}: census line '{phase} {k}k' matches no profiler window of the capture log")
        for clause in m["body"].split(";"):
            c = _CLAUSE.search(clause)
            if not c:
                continue
            key = (c["metric"].strip(), c["u1"])
            metric = _METRICS.get(key)
            if metric is None:
                raise LabError(f"{where}: census clause '{clause.strip()}' has an unknown metric {key}")
            unit = {"attention_share_pct": "%", "window_s": "s"}.get(metric, "ms")
            for arm, value in ((FLASH.label, c["v1"]), (FLEX.label, c["v2"])):
                census.append({"phase": phase, "tokens": tokens, "arm": arm, "metric": metric,
                               "value": _num(value), "unit": unit})
    if not census:
        raise LabError(f"{where}: no census bullets ('- prefill 2k: ...') found")
    flags_line = next((line for line in text.splitlines() if "Server flags" in line), "")
    flags: dict = {}
    for f in _FLAG.finditer(flags_line):
        name = f["name"].replace("-", "_")
        if f["value"] is not None:
            flags[name] = _num(f["value"]) if "." in f["value"] else int(f["value"])
        elif name.startswith("no_"):
            flags[name[3:]] = False
        else:
            flags[name] = True
    chunk, vllm = _CHUNK.search(text), _VLLM.search(text)
    kflash, kflex = _KERNEL_FLASH.search(text), _KERNEL_FLEX.search(text)
    if not (chunk and vllm and kflash and kflex and flags):
        raise LabError(f"{where}: missing the rig description (server flags, vLLM version, chunk size or kernel names)")
    flags["max_num_batched_tokens"] = int(chunk["v"])
    flags["chunked_prefill"] = True
    kernels = [{"arm": FLASH.label, "phase": "decode", "kernel": kflash["k"]},
               {"arm": FLEX.label, "phase": "decode", "kernel": kflex["k"]}]
    return {"census": census, "flags": flags, "vllm": vllm["v"], "decode_kernels": kernels}


# --- the dataset ----------------------------------------------------------------------------------

def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        raise LabError(f"{path}: not found; pass --source pointing at the study's folder (s1.log, s3.log, FACTS.md)") from None
    except IsADirectoryError:
        raise LabError(f"{path}: is a folder, expected the log file") from None
    except UnicodeDecodeError as exc:
        raise LabError(f"{path}: not UTF-8 text (byte {exc.start}); expected the study's plain-text log") from None


def build_reference_dataset(source: Path = DEFAULT_SOURCE, out: Path = DEFAULT_OUT, command: str | None = None) -> Path:
    """Parse the study's files in ``source`` and write the dataset folder ``out``."""
    import pandas as pd

    source = Path(source)
    if source.is_file():
        raise LabError(f"{source}: is a file; --source takes the study's folder (holding s1.log, s3.log, FACTS.md)")
    s1, s3, facts = (_read(source / name) for name in ("s1.log", "s3.log", "FACTS.md"))
    arms = [a for a in parse_probe_log(s1, str(source / "s1.log")) if a.failure is None]
    windows = parse_capture_log(s3, str(source / "s3.log"))
    published = parse_facts(facts, windows, str(source / "FACTS.md"))

    sweep = pd.DataFrame([{"arm": a.backend, "backend": a.backend, **row} for a in arms for row in a.rows])
    fits = pd.DataFrame([{"arm": a.backend, **a.fit} for a in arms if a.fit])
    shares = pd.DataFrame([{"arm": a.backend, **s} for a in arms for s in a.quad_share])
    decode = pd.DataFrame([{"arm": a.backend, **a.decode} for a in arms if a.decode])
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for name, table in (("sweep.csv", sweep), ("fits.csv", fits), ("quad_share.csv", shares),
                        ("decode_summary.csv", decode), ("census.csv", pd.DataFrame(published["census"])),
                        ("traces.csv", pd.DataFrame(windows)), ("decode_kernels.csv", pd.DataFrame(published["decode_kernels"]))):
        store.write_csv(out, name, table)

    models = {a.model for a in arms}
    started = _START.search(s1)
    record = {
        "kind": "reference", "gpu": "NVIDIA A10G", "driver": None, "cuda": None, "torch": None, "triton": None,
        "vllm": published["vllm"], "model": models.pop() if len(models) == 1 else ", ".join(sorted(models)),
        "dtype": "bfloat16",
        "flags": {**published["flags"], "gen_tokens": arms[0].gen_tokens,
                  "backend_log_lines": {a.backend: a.backend_log_line for a in arms}},
        "date": started["ts"][:10] if started else "2026-09-30",
        "command": command or "python -m lab reference",
        "source": {"title": SOURCE_TITLE, "files": ["s1.log", "s3.log", "FACTS.md"],
                   "note": "Figures parsed from the study's published probe and capture logs and its digest; "
                           "medians of 3 reps after one warm request, 64 generated tokens, greedy."},
    }
    store.write_provenance(out, record)
    return out


def add_arguments(parser) -> None:
    parser.add_argument("--source", type=path_arg, default=DEFAULT_SOURCE,
                        help="folder holding the study's s1.log, s3.log and FACTS.md (default: %(default)s)")
    parser.add_argument("--out", type=path_arg, default=DEFAULT_OUT, help="dataset folder to write (default: %(default)s)")


def main(args) -> int:
    resolved = Path(args.out).resolve()
    shown = resolved.relative_to(REPO_ROOT) if resolved.is_relative_to(REPO_ROOT) else args.out
    check_output(Path(args.out), "--out", [("--source", Path(args.source))])
    with dataset_lock(Path(args.out), kinds=("reference",)):
        out = build_reference_dataset(args.source, args.out, command=f"python -m lab reference --out {shown}")
    print(f"wrote {out}")
    return 0
