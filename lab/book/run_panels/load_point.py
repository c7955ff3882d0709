"""The busy-server chapter's panel: one load point with vLLM's own client, ``vllm bench serve``, on the reader's GPU.

Choose a backend, a request rate (or every prompt at once: the backend's capacity), how many prompts and
their input and output length. The panel starts (or reuses) a server of that backend from the kernel's
pool, with the synthetic tokenizer the client needs, and runs the point through the command line's own
code: the options become ``python -m lab vllm-load``'s plan (:func:`lab.measure.vllm.load.plan_from_args`)
and :meth:`lab.measure.vllm.load.Study.point` runs the client, checks its result and keeps it, exactly as
the command does. The point lands in ``data/local/vllm-load/<workload>/<arm>-n<prompts>/`` (one folder per
prompt count, because the count is part of what a folder's points must share), where the busy-server
explorer reads it beside the H200 study.

While the client runs, a line every few seconds says how far it is and how many requests the server has
running and waiting (its ``/metrics``). Stop ends the client (the process this panel started, by its id):
the point is then not kept, and every point finished before it stays.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import signal
import threading
import time
from pathlib import Path

from lab import LabError
from lab.book.explorer_live import LiveExplorer
from lab.book.load_explorer import load_explorer
from lab.book.run_panels.base import Plan, RunPanel, autorun_requested, shown_path
from lab.book.run_panels.servers import MAX_MODEL_LEN, MEMORY_SHARE, ArmKey, available_arms, pool
from lab.folders import dataset_lock
from lab.measure.vllm import arms, tokenizer
from lab.measure.vllm import load as vload
from lab.measure.vllm.bench import VLLM_BENCH, Point
from lab.measure.vllm.progress import Progress
from lab.measure.vllm.replies import queue_counts
from lab.measure.vllm.server import request
from lab.results.load import poisson_points, read_arm
from lab.store import LOCAL_DIR, read_json

#: Request rates offered (requests/s); None: every prompt at once, which measures the backend's capacity.
RATES = (None, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
INPUT_LENS = (128, 256, 512, 1024, 2048, 4096, 8192)
OUTPUT_LENS = (16, 32, 64, 128, 256)
MAX_PROMPTS = 2000
#: The load study's prefill chunk (``--max-num-batched-tokens``), so a reader's point is run like the study's.
CHUNK = 8192
OUT_ROOT = LOCAL_DIR / "vllm-load"
#: Seconds between two progress lines while the client runs.
TICK_S = 5.0
#: Seconds a client has to end after SIGTERM before it is killed.
STOP_GRACE_S = 5.0


def folder_of(out_root: Path, plan: vload.LoadPlan, prompts: int) -> Path:
    return Path(out_root) / plan.workload.name / f"{plan.arm.slug}-n{prompts}"


def cli_args(values: dict, out: Path | None, memory_share: float) -> list[str]:
    """The ``python -m lab vllm-load`` options of this choice (the panel's plan is parsed from them)."""
    n = str(values["num_prompts"])
    argv = ["--arm", values["arm"], "--input-len", str(values["input_len"]), "--output-len", str(values["output_len"]),
            "--min-prompts", n, "--max-prompts", n, "--capacity-prompts", n,
            "--max-num-batched-tokens", str(CHUNK), "--gpu-memory-utilization", f"{memory_share:g}"]
    argv += ["--rates", f"{values['rate']:g}"] if values["rate"] is not None else []
    return argv + (["--out", str(out)] if out is not None else [])


def cli_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vllm-load", add_help=False)
    vload.add_arguments(parser)
    return parser


def plan_of(values: dict, out: Path | None = None, memory_share: float = MEMORY_SHARE) -> vload.LoadPlan:
    """The command line's plan for these options (its checks included: a bad value is its LabError)."""
    return vload.plan_from_args(cli_parser().parse_args(cli_args(values, out, memory_share)))


def client_pids(folder: Path) -> list[int]:
    """The ``vllm bench serve`` processes this process started for ``folder``: the runner of
    :func:`lab.measure.vllm.bench.run_points`, known by the jobs file it was given (``<folder>/batch.jobs.json``)."""
    me, found, jobs = os.getpid(), [], os.fsencode(Path(folder) / "batch.jobs.json")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue  # it ended while we looked, or is not ours to read
        if ppid == me and jobs in argv:
            found.append(int(entry.name))
    return found


def end_clients(folder: Path, grace_s: float = STOP_GRACE_S) -> list[int]:
    """SIGTERM each client of ``folder``; SIGKILL any still there after ``grace_s``. Returns their pids."""
    pids = client_pids(folder)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):   # it ended on its own meanwhile
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while set(client_pids(folder)) & set(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in set(client_pids(folder)) & set(pids):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return pids


class _Lines(Progress):
    """The study's progress lines as the panel's (no deadline: the reader has Stop)."""

    def __init__(self, panel: RunPanel):
        super().__init__(None)
        self.panel = panel

    def say(self, text: str) -> None:
        self.panel.progress.line(text)


class _Watch:
    """While a point's client runs: a progress line every ``tick_s``, and the client ended once Stop is pressed."""

    def __init__(self, panel: LoadPanel, server, point: Point, folder: Path, expected_s: float):
        self.panel, self.server, self.point, self.folder, self.expected_s = panel, server, point, folder, expected_s
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="load-point-watch")

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._done.set()
        self._thread.join(timeout=2 * STOP_GRACE_S)

    def _loop(self) -> None:
        started = last = time.monotonic()
        ended = False
        while not self._done.wait(0.2):
            if self.panel.cancel.is_set() and not ended:
                pids = end_clients(self.folder)
                ended = bool(pids)  # none yet: it is about to start, so look again
                if ended:
                    self.panel.progress.line(f"Stop: ended vllm bench serve (pid {', '.join(map(str, pids))}); "
                                             f"the points already in {shown_path(self.folder)} are kept")
            now = time.monotonic()
            if now - last >= self.panel.tick_s and not self.panel.cancel.is_set():
                last = now
                of = f" of about {self.expected_s:.0f} s" if self.expected_s else ""
                self.panel.progress.line(f"{self.point.slug}: {now - started:.0f} s{of}{self._queue()}")

    def _queue(self) -> str:
        try:
            status, text = request(self.server.base_url, "/metrics", timeout=5)
        except LabError:
            return ""
        counts = queue_counts(text) if status == 200 else None
        return "" if counts is None else f"; the server has {counts[0]} requests running, {counts[1]} waiting"


class LoadPanel(RunPanel):
    title = "Run a load point on your GPU"
    needs_vllm = True

    def __init__(self, caps=None, pool_=None, out_root=OUT_ROOT, bench: str = VLLM_BENCH,
                 bench_env: dict | None = None, tick_s: float = TICK_S, **defaults):
        self.notes = available_arms(caps) if caps is None or caps.has_gpu else {label: "" for label in arms.ARMS}
        first = next((a for a, note in self.notes.items() if not note), arms.FA3.label)
        base = {"arm": first, "rate": 4.0, "num_prompts": 100, "input_len": 1024, "output_len": 128}
        super().__init__(caps, **{**base, **defaults})
        self.pool_, self.out_root = pool_, Path(out_root)
        self.bench, self.bench_env, self.tick_s = bench, bench_env, tick_s   # bench: the client's module (or a fake's .py)
        self.current: ArmKey | None = None
        self.folders: list[Path] = []
        self.live = None   # the explorer shown after a run (lab.book.explorer_live.LiveExplorer)

    def pool(self):
        return self.pool_ or pool()

    def controls(self) -> dict:
        import ipywidgets as w

        style = {"description_width": "initial"}
        offered = [a for a, note in self.notes.items() if not note]
        d = self.defaults
        return {
            "arm": w.Dropdown(options=offered, value=d["arm"] if d["arm"] in offered else offered[0],
                              description="Backend", style=style),
            "rate": w.Dropdown(options=[("every prompt at once (capacity)" if r is None else f"{r:g} requests/s", r)
                                        for r in sorted(set(RATES) | {d["rate"]}, key=lambda r: (r is not None, r or 0))],
                               value=d["rate"], description="Request rate", style=style),
            "num_prompts": w.BoundedIntText(value=d["num_prompts"], min=1, max=MAX_PROMPTS, description="Prompts",
                                            style=style),
            "input_len": w.Dropdown(options=sorted(set(INPUT_LENS) | {d["input_len"]}), value=d["input_len"],
                                    description="Prompt tokens", style=style),
            "output_len": w.Dropdown(options=sorted(set(OUTPUT_LENS) | {d["output_len"]}), value=d["output_len"],
                                     description="Generated tokens", style=style),
        }

    def _checked(self, values: dict) -> tuple[vload.LoadPlan, Point, Path]:
        arm = arms.known(values["arm"])
        if self.notes.get(arm.label):
            raise LabError(f"{arm.label}: {self.notes[arm.label]}")
        rate, n = values["rate"], values["num_prompts"]
        if rate is not None and not (isinstance(rate, (int, float)) and rate > 0):
            raise LabError(f"request rate {rate!r}: a positive number of requests per second, or None for all at once")
        if not (isinstance(n, int) and 1 <= n <= MAX_PROMPTS):
            raise LabError(f"prompts: between 1 and {MAX_PROMPTS}, not {n!r}")
        for name in ("input_len", "output_len"):
            if not (isinstance(values[name], int) and values[name] >= 1):
                raise LabError(f"{name.replace('_', ' ')}: a positive number of tokens, not {values[name]!r}")
        if values["input_len"] + values["output_len"] > MAX_MODEL_LEN:
            raise LabError(f"prompt plus generated tokens must stay within {MAX_MODEL_LEN} tokens")
        plan = plan_of(values, memory_share=self.memory_share())
        point = plan.capacity_point() if rate is None else plan.rate_points(None)[0]
        return plan, point, folder_of(self.out_root, plan, n)

    def memory_share(self) -> float:
        """The servers' share of GPU memory (read without making the kernel's pool where the panel cannot run)."""
        if self.pool_ is not None:
            return self.pool_.memory_share
        return pool().memory_share if self.reason is None else MEMORY_SHARE

    def plan(self, values: dict) -> Plan:
        plan, point, out = self._checked(values)
        key = ArmKey(plan.arm, CHUNK, tokenizer=True)
        running = set(self.pool().running()) if self.reason is None else set()
        start = "already running: no start" if key in running else "started once, then kept for later runs (1-2 min)"
        share, cli_share = self.memory_share(), cli_parser().get_default("gpu_memory_utilization")
        arrivals = ("every prompt at once: the most requests per second this backend completes (its capacity)"
                    if point.rate is None else f"Poisson arrivals at {point.rate:g} requests/s (about "
                                               f"{point.num_prompts / point.rate:.0f} s of arrivals)")
        w = plan.workload
        lines = [f"vLLM {plan.arm.label}, {CHUNK:,}-token prefill chunks, Qwen2.5-7B shape with random weights, "
                 f"{share:.0%} of the GPU's memory (the command line's default, which the H200 study ran, is "
                 f"{cli_share:.0%}: a larger KV cache): {start}",
                 f"vllm bench serve: {point.num_prompts} random prompts of {w.input_len:,} tokens, {w.output_len} "
                 f"generated tokens each, {arrivals}",
                 f"result written to {shown_path(out)}/{point.slug}.json (kept if already there: not run again) "
                 "and shown in the busy-server explorer beside the H200 study"]
        command = "python -m lab vllm-load " + " ".join(shlex.quote(a) for a in cli_args(values, shown_path(out), share))
        if point.rate is None:
            command += "   # then Poisson points at fractions of the capacity it measures"
        return Plan(f"{plan.arm.label}: {point.num_prompts} prompts, "
                    + ("all at once" if point.rate is None else f"{point.rate:g} requests/s"), lines, command)

    def stop_resources(self) -> None:
        # the client is ended by the point's watcher; a server still starting is stopped (a running one is kept)
        if self.current is not None and self.current in self.pool().starting:
            self.pool().stop(self.current)

    def run(self, values: dict) -> Path:
        plan, point, out = self._checked(values)
        with dataset_lock(out, kinds=("vllm-load",)):   # the one writer of this folder, as the command is
            vload.check_resume(plan, out)   # another study's folder: refused before a server starts
            self._ensure_tokenizer()
            self.check_cancel()
            self.current = ArmKey(plan.arm, CHUNK, tokenizer=True)
            server = self.pool().get(self.current, say=self.progress.line, cancelled=self.cancel.is_set)
            self.check_cancel()
            self.folders.append(out)
            study = vload.Study(plan, out, server, str(self.pool().tokenizer_dir()), bench=self.bench,
                                progress=_Lines(self), env=self.bench_env)
            started = time.monotonic()
            try:
                with _Watch(self, server, point, out, vload.expected_s(point, None)):
                    result = study.points([point]).get(point.slug)
                if result is not None and point.rate is None:
                    study.capacity = result["request_throughput"]
            finally:
                vload.write_provenance(out, plan, server, study, time.monotonic() - started)
        self.check_cancel()
        if result is None:
            raise LabError(study.failed[-1] if study.failed else f"{point.slug}: not measured")
        self.show_result((plan, point, out))
        return out / f"{point.slug}.json"

    def _ensure_tokenizer(self) -> None:
        """The synthetic tokenizer beside the model's config.json, written once (as ``python -m lab vllm-tokenizer``)."""
        folder = self.pool().tokenizer_dir()
        if (folder / tokenizer.FILES[0]).exists():
            return
        self.progress.line(f"writing the synthetic tokenizer the client needs to {shown_path(folder)} (once)")
        with dataset_lock(folder, option=""):
            tokenizer.write(folder.parent, folder)

    def note_of(self, path) -> str:
        if path is None:
            return ""
        r = read_json(path)
        rate = "all at once" if r["request_rate"] == "inf" else f"{r['request_rate']:g} req/s"
        return (f"vllm bench serve, {r['num_prompts']} prompts at {rate}: {r['request_throughput']:.3g} req/s, "
                f"TTFT p50/p99 {r['p50_ttft_ms']:.0f}/{r['p99_ttft_ms']:.0f} ms, ITL p50/p99 "
                f"{r['p50_itl_ms']:.1f}/{r['p99_itl_ms']:.1f} ms")

    def show_result(self, result) -> None:
        box = getattr(self, "result_box", None)
        if box is None:
            return
        plan, point, out = result
        explorer = load_explorer(plan.workload.name, local_root=self.out_root, key="load-live")
        arm = f"local/{out.name}"
        if explorer is None or arm not in {c.name: c for c in explorer.controls}["arm"].values:
            return  # an all-at-once point only: no Poisson point of this run to show yet
        self.live = live = LiveExplorer(explorer)
        live.controls["arm"].value = arm
        rates = [r["rate"] for r in poisson_points(read_arm(out))]
        if point.rate in rates:
            live.controls["load"].value = rates.index(point.rate) + 1
        box.children = (live.widget,)


def load_panel(**defaults) -> LoadPanel:
    """The busy-server chapter's "run it yourself": the panel (and, under ``LAB_PANEL_AUTORUN=1``, its default run)."""
    panel = LoadPanel(**defaults)
    if panel.reason is None and autorun_requested():
        panel.autorun()
    return panel
