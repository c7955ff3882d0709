"""Execute every chapter live on this machine (no LAB_STATIC) and write a summary: chapter, seconds, ok/error.

``scripts/check_live.sh`` runs this on a GPU box; on a CPU machine it checks the same notebooks take their
"no GPU here" paths. Each chapter runs in a kernel of its own (jupytext reads the MyST file, nbclient runs
it, as the book build does) under a time limit: 150 s, or a cold vLLM start and its work (160 + 110 s) for a
chapter that starts a server. A chapter's code is its cells and the page modules (``lab.book.pages``) they
import, and those import in turn; a chapter whose code measures on the GPU (it asks ``lab.env.detect()`` or
opens a run panel) is in the GPU lane, whose chapters run one after another, the rest in parallel beside them.

No site build is needed. The chapters glue their facts into a fact registry of this run's own
(``OUT/facts``, emptied first; ``LAB_FACTS_DIR`` and ``LAB_BOOK_PAGE`` set per chapter, as the site build
sets them; the course kit counts its slides in the chapters executed here, ``OUT/notebooks``, emptied first and
named by ``LAB_EXECUTED_DIR``), and a page that quotes other pages (its page modules import ``lab.book.quoted``: the
interview page, the course kit) runs after both lanes are done, one at a time in reading order, so every page it
quotes has glued what it will glue (one that failed did not: the quoting page then names the facts missing).

There is no total budget unless ``--budget-s`` sets one: every chapter gets its whole limit, so the check
takes at most the GPU lane's limits (or the CPU lane's, if longer) and then the quoting pages' (printed at
the start; 1,860 s for the whole book, of which its chapters used about ten minutes on an H100). A caller
that must finish sooner (one ten-minute device call: ``--budget-s 540``) sets a budget: no chapter then runs
past it, and a chapter that would start with under 30 s of it left is recorded as skipped.

What each chapter measured comes from the chapter itself: live cells call ``lab.env.note_live(...)``,
which appends to the file named by ``LAB_LIVE_LOG`` that this command sets per chapter. It also sets
``LAB_PANEL_AUTORUN=1``, so each run panel (chapters 04-07) runs its default plan while the cell executes.

Writes ``summary.csv``, ``summary.json`` and ``provenance.json`` to ``--out`` (default
data/local/live-check), plus each executed notebook under ``notebooks/`` and the glued facts under ``facts/``.
"""

from __future__ import annotations

import argparse
import ast
import heapq
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from lab import REPO_ROOT, LabError
from lab.book import fact_registry, slides
from lab.book.run_panels.servers import LOG_DIR
from lab.cli import OneLineParser, path_arg, positive_count, positive_number, run_cli
from lab.folders import check_output, dataset_lock
from lab.store import new_provenance, write_atomic, write_csv, write_json_atomic, write_provenance

BOOK = REPO_ROOT / "book"
DEFAULT_OUT = REPO_ROOT / "data" / "local" / "live-check"
#: Seconds a chapter may take unless --limit or --limit-s says otherwise.
DEFAULT_LIMIT_S = 150
#: A chapter that calls one of these starts a vLLM server of its own (its kernel's pool: none is shared).
VLLM_MARKERS = ("sweep_panel(", "load_panel(", "capture_panel(")
#: A cold vLLM start on the H200, to ready: 72-154 s for the FA3, FlexAttention and Triton servers of data/h200/
#: (``server.ready_s`` in their provenance; FA2 on Hopper, which no panel starts by default, took 264 s).
VLLM_COLD_START_S = 160
#: What such a chapter does once its server is ready (a sweep, a load point, a capture: 30-70 s on the H200),
#: its kernel's start and its other cells, with room.
VLLM_CHAPTER_WORK_S = 110
#: A chapter whose code calls one of these measures on the GPU: such chapters never run two at a time.
GPU_MARKERS = ("env.detect(", "run_live(", "_panel(", "this_machine_figure(")  # the last: chapter 1 measures the GPU
#: Where a chapter's own code lives besides its cells (the README: a chapter's facts come from its page module).
#: Only these are followed: lab's other modules measure only when a page calls them (lab.store asks
#: env.detect() for every provenance), so following them would put every chapter in the GPU lane.
PAGES = "lab.book.pages"
#: A page module that imports this quotes what other pages glued (the interview page, the course kit).
QUOTED = "lab.book.quoted"
#: With --budget-s, a chapter is not started with less than this left of it (it would only time out).
MIN_START_S = 30
COLUMNS = ("chapter", "lane", "status", "seconds", "limit_s", "measured", "error")


@dataclass
class ChapterResult:
    chapter: str
    lane: str
    status: str          # ok, error, timeout, skipped
    seconds: float
    limit_s: float
    measured: str = ""   # what the chapter's live cells said they measured ('; '-joined), empty if none
    error: str = ""


def toc_chapters(toc: Path = REPO_ROOT / "_toc.yml") -> list[Path]:
    """The book's chapters in reading order, as the table of contents lists them."""
    names = re.findall(r"(?:root|file):\s*(\S+)", toc.read_text(encoding="utf-8"))
    paths = [REPO_ROOT / f"{name}.md" for name in names]
    missing = [p for p in paths if not p.exists()]
    if missing:
        raise LabError(f"{toc}: lists {missing[0].relative_to(REPO_ROOT)}, which does not exist")
    return paths


_CELL = re.compile(r"```\{code-cell\}[^\n]*\n(.*?)```", re.DOTALL)


def _imports(code: str) -> set[str]:
    """Every module a piece of code imports, inside functions too (``from a import b``: ``a`` and ``a.b``)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return set()
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def _cells(text: str) -> list[str]:
    """A MyST chapter's code cells as Python (the cell's YAML options and IPython magics left out)."""
    cells = []
    for cell in _CELL.findall(text):
        if cell.startswith("---"):
            cell = cell.split("\n---\n", 1)[-1]
        cells.append("\n".join(line for line in cell.splitlines() if not line.startswith((":", "%", "!"))))
    return cells


def _module_file(name: str) -> Path | None:
    path = REPO_ROOT.joinpath(*name.split("."))
    return next((p for p in (path / "__init__.py", path.with_suffix(".py")) if p.is_file()), None)


def page_modules(path: Path) -> dict[str, str]:
    """The page modules a chapter's code cells import, and those they import in turn (with the packages
    above them, which run on import): module name -> source."""
    todo = [name for cell in _cells(path.read_text(encoding="utf-8")) for name in _imports(cell)]
    sources: dict[str, str] = {}
    while todo:
        name = todo.pop()
        if name in sources or not (name == PAGES or name.startswith(PAGES + ".")):
            continue
        file = _module_file(name)
        if file is None:            # ``from lab.book.pages.ch06 import FA3``: a name, not a module
            continue
        sources[name] = file.read_text(encoding="utf-8")
        todo += [*_imports(sources[name]), name.rpartition(".")[0]]
    return sources


def chapter_code(path: Path) -> str:
    """What a chapter runs, as text: its own file and the source of every page module it reaches."""
    return "\n".join([path.read_text(encoding="utf-8"), *page_modules(path).values()])


def starts_vllm(path: Path) -> bool:
    """Whether a chapter's code starts a vLLM server (then its limit covers a cold start)."""
    code = chapter_code(path)
    return any(marker in code for marker in VLLM_MARKERS)


def default_limit(path: Path, default: float = DEFAULT_LIMIT_S) -> float:
    """A chapter's time limit: a cold vLLM start and the chapter's work where it starts a server, else ``default``
    (``--limit-s``; a chapter that starts a server never gets less than it needs for one)."""
    return max(default, VLLM_COLD_START_S + VLLM_CHAPTER_WORK_S) if starts_vllm(path) else default


def lane_of(path: Path) -> str:
    """'gpu' (its code measures on the GPU: one at a time), 'cpu', or 'text' (no code cell: nothing to run).

    Its code includes the page modules it reaches: chapter 2 measures nothing in its cells, but its page module
    takes facts of chapter 1's, which measure this machine's ceilings when live."""
    if "{code-cell}" not in path.read_text(encoding="utf-8"):
        return "text"
    code = chapter_code(path)
    return "gpu" if any(marker in code for marker in GPU_MARKERS) else "cpu"


def quotes(path: Path) -> bool:
    """Whether a chapter quotes facts other pages glued (its cells or a page module it reaches import
    lab.book.quoted): it runs once the pages before it have."""
    sources = [*_cells(path.read_text(encoding="utf-8")), *page_modules(path).values()]
    return any(QUOTED in _imports(source) for source in sources)


def page_name(path: Path) -> str:
    """The chapter's name in the fact registry, as the site build names it (Sphinx's docname: book/<stem>)."""
    return f"{BOOK.name}/{path.stem}"


def execute_notebook(md: Path, notebook_out: Path, cell_timeout: float) -> None:
    """Run one chapter in a fresh kernel (book/ as working folder, like the build) and save the result.

    Raises nbclient's CellExecutionError on the first failing cell, after saving what ran.
    """
    import jupytext
    import nbformat
    from nbclient import NotebookClient  # lazy: only running a notebook needs the Jupyter client stack

    nb = jupytext.read(md)
    if not any(cell.cell_type == "code" for cell in nb.cells):
        raise LabError(f"{md}: no code cells (is it a MyST notebook with a jupytext header?)")
    client = NotebookClient(nb, timeout=int(cell_timeout), kernel_name="python3",
                            resources={"metadata": {"path": str(md.parent)}})
    try:
        client.execute()
    finally:
        write_atomic(notebook_out, lambda tmp: nbformat.write(nb, str(tmp)))


def _say(line: str) -> None:
    print(line, flush=True)


def _notes(log: Path) -> str:
    if not log.exists():
        return ""
    notes = []
    for line in log.read_text(encoding="utf-8").splitlines():
        try:
            notes.append(json.loads(line)["what"])
        except (ValueError, KeyError, TypeError):
            continue
    return "; ".join(dict.fromkeys(notes))


def _last_error(text: str) -> str:
    """The most telling line of a failed child: its last line (the failing cell's ``Name: message``)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return (lines[-1] if lines else "no output")[:300]


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def stop_leftover_servers(folder: Path | None = None) -> list[int]:
    """Kill the process group of every run-panel server a chapter left behind (its ``.pgid`` file).

    A server is stopped by its kernel at exit; a kernel killed at its time limit may not get to, and the
    GPU must be free for the next chapter. Returns the groups signalled."""
    killed = []
    for pgid_file in sorted(Path(folder or LOG_DIR).glob("*.pgid")):
        try:
            pgid = int(pgid_file.read_text().strip())
            os.killpg(pgid, signal.SIGKILL)
            killed.append(pgid)
        except (ValueError, ProcessLookupError, PermissionError, OSError):
            pass
        pgid_file.unlink(missing_ok=True)
    return killed


def run_chapter(md: Path, lane: str, limit_s: float, out: Path, say=None) -> ChapterResult:
    """Execute ``md`` in a child process (its own process group, killed whole at the limit)."""
    say = say or _say
    name = md.stem
    log = out / "notes" / f"{name}.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.unlink(missing_ok=True)
    facts = out / "facts"
    facts.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "LAB_STATIC"}
    # LAB_PANEL_AUTORUN: each run panel runs its default plan as the cell executes (lab.book.run_panels.base);
    # the fact registry's two variables as lab.book.sphinxext sets them, so glue_all records and quoted() reads here;
    # the executed chapters' folder, so the course kit counts its slides from the decks of this run's chapters
    env.update(LAB_LIVE_LOG=str(log), LAB_PANEL_AUTORUN="1", MPLBACKEND="Agg", PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join([str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
               **{fact_registry.FOLDER_ENV: str(facts), fact_registry.PAGE_ENV: page_name(md),
                  slides.EXECUTED_ENV: str(out / "notebooks")})
    argv = [sys.executable, "-m", "lab.book.live_check", "--one", str(md), "--limit-s", str(limit_s),
            "--notebook", str(out / "notebooks" / f"{name}.ipynb")]
    say(f"[live-check] {name}: started ({lane} lane, limit {limit_s:.0f} s)")
    started = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, env=env, cwd=str(REPO_ROOT))
    try:
        output, _ = proc.communicate(timeout=limit_s)
        status = "ok" if proc.returncode == 0 else "error"
        error = "" if status == "ok" else _last_error(output)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        status, error = "timeout", f"still running after {limit_s:.0f} s; stopped"
    seconds = round(time.monotonic() - started, 1)
    if lane == "gpu":
        for pgid in stop_leftover_servers():
            say(f"[live-check] {name}: killed a vLLM server it left running (process group {pgid})")
    result = ChapterResult(name, lane, status, seconds, limit_s, _notes(log), error)
    say(f"[live-check] {name}: {status} in {seconds:.0f} s" + (f": {error}" if error else "")
        + (f" (measured: {result.measured})" if result.measured else ""))
    return result


def longest_s(limits: dict[Path, float], lanes: dict[Path, str], quoting: set[Path], jobs: int) -> float:
    """How long :func:`check_all` takes if every chapter runs to its limit and no budget cuts it: the GPU lane
    or the CPU lane's pool beside it, whichever is longer, then the quoting pages one after another."""
    gpu = sum(limit for md, limit in limits.items() if lanes[md] == "gpu" and md not in quoting)
    workers = [0.0] * max(1, jobs)
    for md, limit in limits.items():
        if lanes[md] == "cpu" and md not in quoting:
            heapq.heapreplace(workers, workers[0] + limit)  # the first worker free takes the next chapter
    return max(gpu, max(workers)) + sum(limits[md] for md in quoting)


def check_all(chapters: list[Path], out: Path, *, default: float, overrides: dict[str, float],
              budget_s: float | None, jobs: int, say=None) -> list[ChapterResult]:
    """Run the GPU lane in order in this thread and the CPU lane in a pool beside it, then the pages that quote
    others in reading order; ``budget_s`` None: no total budget, every chapter gets its own limit."""
    say = say or _say
    lanes = {md: lane_of(md) for md in chapters}
    limits = {md: 0.0 if lanes[md] == "text" else overrides.get(md.stem, default_limit(md, default)) for md in chapters}
    quoting = {md for md in chapters if lanes[md] != "text" and quotes(md)}
    longest = longest_s(limits, lanes, quoting, jobs)
    say(f"[live-check] {len(chapters)} chapters; at most {longest:.0f} s if each runs to its limit"
        + (f", cut at the budget of {budget_s:.0f} s" if budget_s is not None and budget_s < longest else ""))
    deadline = None if budget_s is None else time.monotonic() + budget_s
    shutil.rmtree(out / "facts", ignore_errors=True)  # this run's registry: no page quotes an earlier run's facts
    shutil.rmtree(out / "notebooks", ignore_errors=True)  # nor counts slides in an earlier run's chapters
    results: dict[Path, ChapterResult] = {}
    lock = threading.Lock()

    def one(md: Path) -> None:
        left = float("inf") if deadline is None else deadline - time.monotonic()
        limit = min(limits[md], left)
        if lanes[md] == "text":
            result = ChapterResult(md.stem, "text", "ok", 0.0, 0.0, measured="", error="")
        elif left < min(MIN_START_S, limits[md]):   # the budget leaves it too little to do anything
            result = ChapterResult(md.stem, lanes[md], "skipped", 0.0, 0.0, error=f"budget of {budget_s:.0f} s spent")
            say(f"[live-check] {md.stem}: skipped (budget spent)")
        else:
            result = run_chapter(md, lanes[md], limit, out, say)
        with lock:
            results[md] = result

    first = [md for md in chapters if md not in quoting]
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [pool.submit(one, md) for md in first if lanes[md] in ("cpu", "text")]
        for md in (md for md in first if lanes[md] == "gpu"):
            one(md)
        for future in futures:
            future.result()
    # one at a time, in reading order: the site build's order, in which a page may quote a quoting page before it
    for md in (md for md in chapters if md in quoting):
        one(md)
    return [results[md] for md in chapters]


def write_summary(out: Path, results: list[ChapterResult], args, total_s: float) -> None:
    import pandas as pd

    rows = [asdict(r) for r in results]
    write_csv(out, "summary.csv", pd.DataFrame(rows, columns=list(COLUMNS)))
    passed = sum(r.status == "ok" for r in results)
    write_json_atomic(out / "summary.json", {"chapters": rows, "total_s": round(total_s, 1),
                                             "passed": passed, "of": len(results)})
    write_provenance(out, new_provenance(
        "live-check", flags={"budget_s": args.budget_s, "default_limit_s": args.limit_s, "jobs": args.jobs,
                             "limits_s": {r.chapter: r.limit_s for r in results}, "static": False},
        files={"summary.csv": "one row per chapter: lane, status, seconds, its limit, what it measured live",
               "summary.json": "the same rows, with the total time",
               "notebooks/": "each chapter as executed (outputs included)",
               "notes/": "what each chapter's live cells reported (lab.env.note_live)"},
        elapsed_s=round(total_s, 1)))


def _known(name: str) -> str:
    names = [p.stem for p in toc_chapters()]
    if name not in names:
        raise argparse.ArgumentTypeError(f"no chapter {name!r}; choose from {', '.join(names)}")
    return name


def chapter_list(text: str) -> list[str]:
    """``--chapters``: comma-separated names of chapters in _toc.yml (``.md`` optional); none is refused."""
    wanted = [name.strip().removesuffix(".md") for name in text.split(",") if name.strip()]
    if not wanted:
        raise argparse.ArgumentTypeError(f"expected comma-separated chapter names, got {text!r}")
    return [_known(name) for name in wanted]


def chapter_limit(text: str) -> tuple[str, float]:
    """``--limit CHAPTER=SECONDS``: a chapter of _toc.yml and a positive number of seconds."""
    name, _, value = text.partition("=")
    try:
        seconds = positive_number(value)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected CHAPTER=SECONDS (a positive number), "
                                         "e.g. 06-vllm-sweeps=240") from None
    return _known(name.strip().removesuffix(".md")), seconds


def add_arguments(parser) -> None:
    parser.add_argument("--chapters", type=chapter_list,
                        help="comma-separated chapter names (default: every chapter in _toc.yml)")
    parser.add_argument("--limit-s", type=positive_number, default=DEFAULT_LIMIT_S,
                        help=f"seconds per chapter (default {DEFAULT_LIMIT_S}; a chapter that starts a vLLM server: "
                             f"{VLLM_COLD_START_S + VLLM_CHAPTER_WORK_S}, a cold start and its work)")
    parser.add_argument("--limit", type=chapter_limit, action="append", default=[], metavar="CHAPTER=S",
                        help="one chapter's limit")
    parser.add_argument("--budget-s", type=positive_number, default=None,
                        help="total seconds: no chapter runs past them, and one that would start with under "
                             f"{MIN_START_S} s left is skipped (default: none, every chapter gets its whole limit; "
                             "540 fits one ten-minute device call)")
    parser.add_argument("--jobs", type=positive_count, default=4, help="chapters without GPU work run this many at a time (default 4)")
    parser.add_argument("--out", type=path_arg, default=DEFAULT_OUT, help=f"summary folder (default {DEFAULT_OUT})")
    parser.add_argument("--one", type=path_arg, help=argparse.SUPPRESS)       # internal: execute one chapter
    parser.add_argument("--notebook", type=path_arg, help=argparse.SUPPRESS)  # internal: where --one saves it


def _select(names: list[str] | None) -> list[Path]:
    chapters = toc_chapters()
    by_name = {p.stem: p for p in chapters}
    return chapters if names is None else [by_name[name] for name in names]


def main(args) -> int:
    if args.one is not None:
        from nbclient.exceptions import CellExecutionError

        try:
            execute_notebook(args.one, args.notebook, args.limit_s)
        except CellExecutionError as exc:  # the cell's own exception, on the last line the parent reads
            print(f"{exc.ename}: {str(exc.evalue).strip().splitlines()[0] if str(exc.evalue).strip() else ''}",
                  file=sys.stderr)
            return 1
        except LabError as exc:
            print(f"LabError: {exc}", file=sys.stderr)
            return 1
        return 0
    chapters = _select(args.chapters)
    out = args.out.resolve()
    check_output(out, "--out", [("the chapters folder", BOOK)])
    with dataset_lock(out, kinds=("live-check",)):
        return _check(args, chapters, out)


def _check(args, chapters: list[Path], out: Path) -> int:
    started = time.monotonic()
    results = check_all(chapters, out, default=args.limit_s, overrides=dict(args.limit),
                        budget_s=args.budget_s, jobs=args.jobs)
    total = time.monotonic() - started
    write_summary(out, results, args, total)
    print_summary(results, total, out)
    return 0 if all(r.status == "ok" for r in results) else 1


def print_summary(results: list[ChapterResult], total_s: float, out: Path) -> None:
    width = max(len(r.chapter) for r in results)
    print(f"\n{'chapter':{width}}  lane  status   seconds  measured / error")
    for r in results:
        print(f"{r.chapter:{width}}  {r.lane:4}  {r.status:7}  {r.seconds:7.1f}  {(r.measured or r.error or '-')[:110]}")
    passed = sum(r.status == "ok" for r in results)
    print(f"{passed} of {len(results)} chapters ok in {total_s:.0f} s -> {out}")


def cli(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m lab.book.live_check", description=__doc__.strip().splitlines()[0],
                                     epilog=__doc__.split("\n", 2)[2], formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return run_cli(parser, main, argv)


if __name__ == "__main__":
    sys.exit(cli())
