"""What every run panel shares: a plan in words, why this machine can't run it, a worker, Run/Stop, progress.

A panel has two faces. Where it can run (a live kernel on a machine with a CUDA GPU, plus vLLM for the
serving panels) it is a form with Run and Stop buttons, a status line, a log and a result area. Anywhere
else (the static site, a laptop) it shows what it would run, the equivalent command, and why it can't run
here: no buttons that do nothing.

Work runs on one long-lived worker thread per kernel, never on the widget callback's thread and never on
a thread that ends: a vLLM server is started with ``PR_SET_PDEATHSIG``, which Linux ties to the thread
that started it, so a server started from a short-lived thread would be killed when that thread ended.

``LAB_PANEL_AUTORUN=1`` (set by ``lab.book.live_check``) makes a panel run its default plan as soon as it
is made, and wait for it, printing the progress: that is how an executed chapter measures something.
"""

from __future__ import annotations

import html
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from lab import REPO_ROOT, LabError, env
from lab.book.run_panels.widget import build_widget


class Stopped(Exception):
    """Raised inside a run when the reader pressed Stop; what finished before is kept."""


@dataclass
class Plan:
    """What a run would do: a title, one line per step, and the command that does the same from a shell."""

    title: str
    lines: list[str]
    command: str


def shown_path(path) -> str:
    """A path as the reader would type it: relative to the repository when inside it."""
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)


def why_not_here(needs_vllm: bool = False, caps=None) -> str | None:
    """Why a panel cannot run on this machine, in words; None when it can."""
    if env.static_build():
        return "this is the static book: no Python kernel runs behind the page"
    caps = caps or env.detect()
    if not caps.has_gpu:
        return f"this machine ({caps.machine}) has no CUDA GPU"
    if caps.triton_mode != "gpu":
        return f"Triton runs in interpreter mode here (TRITON_INTERPRET=1) on {caps.gpu}"
    if needs_vllm and caps.vllm is None:
        return "vLLM is not installed for this Python (pip install -r requirements-gpu.txt, or scripts/gpu_setup.sh)"
    return None


def widgets_available() -> bool:
    """ipywidgets and a kernel that can show them (not plain Python, not the static build)."""
    if env.static_build():
        return False
    try:
        import ipywidgets  # noqa: F401
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def autorun_requested() -> bool:
    return os.environ.get("LAB_PANEL_AUTORUN", "") not in ("", "0")


# --- the worker ------------------------------------------------------------------------------------

@dataclass
class Job:
    fn: Callable[[], object]
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None
    result: object = None


class Worker:
    """One daemon thread that runs jobs in order for the kernel's whole life (see the module docstring)."""

    def __init__(self):
        self._jobs: queue.Queue[Job] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, fn: Callable[[], object]) -> Job:
        job = Job(fn)
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="lab-run-panels", daemon=True)
                self._thread.start()
        self._jobs.put(job)
        return job

    def _loop(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                job.result = job.fn()
            except BaseException as exc:  # noqa: BLE001 - handed to whoever waits on the job
                job.error = exc
            finally:
                job.done.set()


WORKER = Worker()


# --- progress --------------------------------------------------------------------------------------

class Progress:
    """Lines of progress with the seconds since the run started; ``listeners`` see each line as it comes."""

    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self.started = clock()
        self.lines: list[str] = []
        self.status = "idle"
        self.listeners: list[Callable[[str], None]] = []
        self._lock = threading.Lock()

    def restart(self) -> None:
        with self._lock:
            self.started, self.lines, self.status = self.clock(), [], "starting"

    def line(self, text: str) -> None:
        stamped = f"[{self.clock() - self.started:5.1f} s] {text}"
        with self._lock:
            self.lines.append(stamped)
        for listener in list(self.listeners):
            listener(stamped)

    def set_status(self, text: str) -> None:
        self.status = text
        self.line(text)


# --- the panel ---------------------------------------------------------------------------------------

class RunPanel:
    """Base of the three panels: subclasses give ``title``, ``needs_vllm``, :meth:`controls`, :meth:`plan`,
    :meth:`run` (on the worker; raise :class:`Stopped` when ``self.cancel`` is set) and :meth:`show_result`."""

    title = "Run it yourself"
    needs_vllm = False

    def __init__(self, caps=None, **defaults):
        self.caps = caps
        self.defaults = defaults
        self.reason = why_not_here(self.needs_vllm, caps)
        self.progress = Progress()
        self.cancel = threading.Event()
        self.job: Job | None = None
        self.widget = None
        self.results: list = []

    # -- to be given by subclasses
    def controls(self) -> dict:  # name -> ipywidget
        raise NotImplementedError

    def plan(self, values: dict) -> Plan:
        raise NotImplementedError

    def run(self, values: dict) -> object:
        raise NotImplementedError

    def show_result(self, result) -> None:
        """Called on the worker after each run and each partial result (points as they land)."""

    def stop_resources(self) -> None:
        """Stop what the run holds (a server), called by Stop from the widget's thread."""

    # -- the two faces
    def static_html(self, values: dict | None = None) -> str:
        plan = self.plan(values or self.defaults)
        items = "".join(f"<li>{html.escape(line)}</li>" for line in plan.lines)
        reason = self.reason or "the page was not run in a live kernel"
        return (f'<div class="lab-run-panel" data-state="needs-gpu">'
                f"<p><b>{html.escape(self.title)}: {html.escape(plan.title)}</b></p>"
                f"<p>Would run:</p><ul>{items}</ul>"
                f"<p><i>Not here: {html.escape(reason)}.</i> On a machine with an NVIDIA GPU, open this chapter in "
                f"Jupyter (scripts/gpu_setup.sh) for Run and Stop buttons, or run from a shell:</p>"
                f"<pre>{html.escape(plan.command)}</pre></div>")

    def _repr_html_(self) -> str:
        return self.static_html()

    def _ipython_display_(self) -> None:
        from IPython.display import HTML, display

        if self.reason is not None or not widgets_available():
            display(HTML(self.static_html()))
            return
        display(self.live_widget())

    # -- running
    @property
    def running(self) -> bool:
        return self.job is not None and not self.job.done.is_set()

    def start(self, values: dict | None = None) -> Job:
        """Run the plan for ``values`` (default: the panel's defaults) on the worker; returns the job."""
        if self.reason is not None:
            raise LabError(f"cannot run here: {self.reason}")
        if self.running:
            raise LabError("a run is already going; press Stop first")
        values = dict(values or self.defaults)
        self.plan(values)  # refuses a bad choice before anything starts
        self.cancel.clear()
        self.progress.restart()
        self.job = WORKER.submit(lambda: self._run_and_report(values))
        return self.job

    def _run_and_report(self, values: dict):
        try:
            result = self.run(values)
        except Stopped:
            self.progress.set_status("stopped: finished points are kept")
            return None
        except LabError as exc:
            self.progress.set_status(f"error: {exc}")
            raise
        self.progress.set_status("done")
        return result

    def stop(self) -> None:
        """Ask the run to stop after the current step and stop its resources now."""
        self.cancel.set()
        self.progress.line("stopping ...")
        self.stop_resources()

    def check_cancel(self) -> None:
        if self.cancel.is_set():
            raise Stopped()

    def wait(self, timeout: float | None = None, echo=None) -> object:
        """Wait for the run, passing each new progress line to ``echo`` (e.g. print) as it comes."""
        if self.job is None:
            raise LabError("nothing was started")
        shown = 0
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.job.done.wait(0.5):
            shown = self._echo(echo, shown)
            if deadline is not None and time.monotonic() > deadline:
                raise LabError(f"the run did not finish in {timeout:.0f} s")
        self._echo(echo, shown)
        if self.job.error is not None:
            raise self.job.error
        return self.job.result

    def _echo(self, echo, shown: int) -> int:
        lines = self.progress.lines
        if echo is not None:
            for line in lines[shown:]:
                echo(line)
        return len(lines)

    def autorun(self) -> object:
        """Run the default plan now and wait (``LAB_PANEL_AUTORUN``); printed progress; what ran is noted."""
        plan = self.plan(self.defaults)
        print(f"{self.title}: {plan.title}", flush=True)
        self.start()
        result = self.wait(echo=lambda line: print(line, flush=True))
        env.note_live(self.note_of(result) or plan.title)
        return result

    def note_of(self, result) -> str:
        """One line on what a run measured, for ``lab.book.live_check``'s summary ('' to use the plan's title)."""
        return ""

    # -- the live face
    def live_widget(self):
        if self.widget is None:
            self.widget = build_widget(self)
        return self.widget
