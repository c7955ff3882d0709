"""Open a chapter in JupyterLab on this machine and run it through the Jupyter server, as a reader's Run would.

``scripts/check_live.sh --jupyter`` (or ``python -m lab jupyter-check``) starts JupyterLab on 127.0.0.1 with a
random token, checks that it serves its page (``/lab``), opens a chapter through the server's contents API
(jupytext's contents manager reads the MyST file as a notebook, as JupyterLab does when a reader opens it),
starts a kernel for it (``/api/sessions``) and runs its code cells in order over the kernel's websocket, up to
and including the cell that holds the run panel (chapter 04's ``kernel_panel(...)`` by default). It reports
what each cell printed, whether one failed, and what the panel measured (``lab.env.note_live``); then it stops
the kernel and the server. Exit status 0 when every cell ran and the panel measured something (on a machine
without a GPU: when every cell ran, the panel saying why it cannot run here), 1 otherwise, 2 on bad input.

Writes ``summary.json``, ``provenance.json`` and the server's ``jupyter.log`` to ``--out`` (default
data/local/jupyter-check).
"""

from __future__ import annotations

import html
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

from lab import REPO_ROOT, LabError, env
from lab.cli import path_arg, positive_number, text_arg
from lab.folders import check_output, dataset_lock
from lab.store import read_jsonl, write_json_atomic
from lab.store import new_provenance, write_provenance
from lab.measure.vllm.replies import error_message

BOOK = REPO_ROOT / "book"
DEFAULT_OUT = REPO_ROOT / "data" / "local" / "jupyter-check"
DEFAULT_CHAPTER = "04-flashattention-triton"
#: The source of the cell that holds the chapter's run panel (the last cell run).
DEFAULT_PANEL = "kernel_panel("


# --- the server ------------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def lab_app_dir() -> Path | None:
    """JupyterLab's application folder where pip put it outside this interpreter's prefix (``pip install --target``,
    as ``scripts/check_live.sh`` does offline); None where JupyterLab finds its own (``<prefix>/share/jupyter/lab``)."""
    if (Path(sys.prefix) / "share" / "jupyter" / "lab" / "static").is_dir():
        return None
    for entry in map(Path, sys.path):
        if (entry / "share" / "jupyter" / "lab" / "static").is_dir():
            return entry / "share" / "jupyter" / "lab"
    return None


class JupyterServer:
    """``python -m jupyterlab`` on 127.0.0.1 with a token, in its own process group, serving ``root``."""

    def __init__(self, root: Path, log: Path, extra_env: dict[str, str]):
        try:
            import jupyterlab
            import jupytext  # noqa: F401  (its contents manager opens the MyST chapters)
            import websocket  # noqa: F401  (websocket-client: a jupyter_server dependency)
        except ModuleNotFoundError as exc:
            raise LabError(f"{exc.name} is not installed for {sys.executable}: scripts/gpu_setup.sh installs "
                           "JupyterLab (offline: from the wheels of scripts/live_wheels.sh)") from None
        self.version = jupyterlab.__version__
        self.port, self.token = free_port(), secrets.token_hex(24)
        self.base = f"http://127.0.0.1:{self.port}"
        self.runtime = Path(tempfile.mkdtemp(prefix="lab-jupyter-"))
        argv = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
                f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0",
                f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={root}",
                "--ServerApp.contents_manager_class=jupytext.TextFileContentsManager"]
        # live, as a reader's kernel: no LAB_STATIC (the site build's switch)
        environment = {**{k: v for k, v in os.environ.items() if k != "LAB_STATIC"}, **extra_env,
                       "JUPYTER_RUNTIME_DIR": str(self.runtime)}
        if os.geteuid() == 0:      # the lent GPU boxes run commands as root
            argv.append("--allow-root")
        app_dir = lab_app_dir()
        if app_dir is not None:
            argv.append(f"--LabApp.app_dir={app_dir}")
            environment["JUPYTER_PATH"] = os.pathsep.join(filter(None, [str(app_dir.parent),
                                                                        os.environ.get("JUPYTER_PATH")]))
        self.log = open(log, "w", encoding="utf-8")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True, env=environment, cwd=str(root))

    def call(self, method: str, path: str, body: dict | None = None, timeout: float = 30) -> tuple[int, bytes]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def json(self, method: str, path: str, body: dict | None = None, timeout: float = 30):
        status, data = self.call(method, path, body, timeout)
        if status >= 300:
            raise LabError(f"JupyterLab {method} {path} answered {status}: {error_message(data)}")
        return json.loads(data) if data else None

    def wait_ready(self, timeout: float) -> float:
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if self.proc.poll() is not None:
                raise LabError(f"JupyterLab exited with status {self.proc.returncode} before it was ready "
                               f"(log: {self.log.name})")
            try:
                if self.call("GET", "/api/status", timeout=5)[0] == 200:
                    return time.monotonic() - started
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.25)
        raise LabError(f"JupyterLab did not answer /api/status within {timeout:.0f} s (log: {self.log.name})")

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=20)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.runtime, ignore_errors=True)


#: The frontend extensions a chapter needs in JupyterLab: jupytext's (a MyST file opens as a notebook) and the
#: widget manager (a run panel's controls are ipywidgets).
NEEDED_EXTENSIONS = ("jupyterlab-jupytext", "jupyter-widgets-jupyterlab-manager")


def check_frontend(server: JupyterServer, page: bytes) -> list[str]:
    """JupyterLab's page loads: its main script is served, and the extensions a chapter needs are there."""
    match = re.search(rb'src="([^"]*static/lab/main\.[^"]+\.js)"', page) or re.search(rb'/static/lab/main\.[0-9a-f]+\.js',
                                                                                    page)
    script = (match.group(1) if match and match.groups() else match.group(0) if match else b"").decode()
    status = server.call("GET", urllib.parse.urlparse(script).path)[0] if script else None
    if status != 200:
        raise LabError(f"JupyterLab's page names no main script it serves ({script or 'none'}: {status}); its "
                       f"application files are missing (log: {server.log.name})")
    extensions = sorted(e["name"] for e in server.json("GET", "/lab/api/extensions"))
    missing = [name for name in NEEDED_EXTENSIONS if name not in extensions]
    if missing:
        raise LabError(f"JupyterLab lacks the extension {missing[0]} (installed: {', '.join(extensions) or 'none'})")
    return extensions


# --- a kernel, driven over its websocket as JupyterLab's frontend drives it --------------------------

class Kernel:
    """A kernel started for a notebook through ``/api/sessions``; :meth:`run` executes one cell's source."""

    def __init__(self, server: JupyterServer, path: str):
        import websocket  # lazy: optional (JupyterServer says when it is missing)

        self.server = server
        self.session = server.json("POST", "/api/sessions", {"path": path, "type": "notebook", "name": path,
                                                             "kernel": {"name": "python3"}})
        kernel = self.session["kernel"]["id"]
        self.ws = websocket.create_connection(
            f"ws://127.0.0.1:{server.port}/api/kernels/{kernel}/channels?token={server.token}",
            header=[f"Authorization: token {server.token}"], timeout=30)
        self.client_session = uuid.uuid4().hex

    def run(self, source: str, timeout: float) -> dict:
        """Execute ``source``; returns {"status": ok|error|timeout, "text": what it printed, "error": "Name: message"}."""
        import websocket

        msg_id = uuid.uuid4().hex
        self.ws.send(json.dumps({
            "header": {"msg_id": msg_id, "session": self.client_session, "username": "lab", "msg_type": "execute_request",
                       "version": "5.3", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
            "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
            "content": {"code": source, "silent": False, "store_history": True, "user_expressions": {},
                        "allow_stdin": False, "stop_on_error": True}}))
        text, error, replied, idle = [], "", None, False
        deadline = time.monotonic() + timeout
        while not (replied and idle):
            left = deadline - time.monotonic()
            if left <= 0:
                return {"status": "timeout", "text": "".join(text), "error": f"no reply within {timeout:.0f} s"}
            self.ws.settimeout(min(left, 30))
            try:
                message = json.loads(self.ws.recv())
            except websocket.WebSocketTimeoutException:
                continue
            if message.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind, content = message["header"]["msg_type"], message.get("content", {})
            if kind == "stream":
                text.append(content.get("text", ""))
            elif kind in ("display_data", "execute_result"):
                text.append(_shown(content.get("data", {})) + "\n")
            elif kind == "error":
                error = f"{content.get('ename')}: {content.get('evalue')}"
            elif kind == "execute_reply":
                replied = content.get("status", "error")
            elif kind == "status" and content.get("execution_state") == "idle":
                idle = True
        return {"status": "ok" if replied == "ok" and not error else "error", "text": "".join(text), "error": error}

    def close(self) -> None:
        try:
            self.ws.close()
        finally:
            self.server.call("DELETE", f"/api/sessions/{self.session['id']}")


# --- the command --------------------------------------------------------------------------------------

def add_arguments(parser) -> None:
    parser.add_argument("--chapter", type=text_arg, default=DEFAULT_CHAPTER,
                        help=f"the chapter to open (default {DEFAULT_CHAPTER})")
    parser.add_argument("--panel", type=text_arg, default=DEFAULT_PANEL,
                        help=f"the last cell run is the first whose source holds this (default {DEFAULT_PANEL!r})")
    parser.add_argument("--book", type=path_arg, default=BOOK, help=argparse_default("the chapters' folder", BOOK))
    parser.add_argument("--ready-timeout", type=positive_number, default=120.0,
                        help="seconds JupyterLab may take to answer (default 120)")
    parser.add_argument("--cell-timeout", type=positive_number, default=600.0,
                        help="seconds one cell may take (default 600: the panel measures on the GPU)")
    parser.add_argument("--out", type=path_arg, default=DEFAULT_OUT, help=argparse_default("summary folder", DEFAULT_OUT))


def argparse_default(what: str, path: Path) -> str:
    return f"{what} (default {path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path})"


def main(args) -> int:
    book, out = Path(args.book).resolve(), Path(args.out).resolve()
    md = book / f"{args.chapter.removesuffix('.md')}.md"
    if not md.is_file():
        raise LabError(f"--chapter {args.chapter}: no {md}")
    check_output(out, "--out", [("--book", book)])
    with dataset_lock(out, kinds=("live-check",)):
        return _check(args, md, out)


def _check(args, md: Path, out: Path) -> int:
    notes = out / "notes.jsonl"
    notes.unlink(missing_ok=True)
    extra = {"LAB_LIVE_LOG": str(notes), "LAB_PANEL_AUTORUN": "1", "MPLBACKEND": "Agg", "PYTHONUNBUFFERED": "1",
             "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    started = time.monotonic()
    server = JupyterServer(md.parent, out / "jupyter.log", extra)
    summary = {"jupyterlab": server.version, "url": f"{server.base}/lab (token not kept)", "chapter": md.stem,
               "cells": [], "ok": False}
    try:
        summary["ready_s"] = round(server.wait_ready(args.ready_timeout), 1)
        _say(f"JupyterLab {server.version} on {server.base} (token) ready in {summary['ready_s']:.0f} s")
        status, page = server.call("GET", "/lab")
        if status != 200 or b"jupyter-config-data" not in page:
            raise LabError(f"{server.base}/lab answered {status} without JupyterLab's page (log: {server.log.name})")
        summary["lab_page_bytes"] = len(page)
        summary["lab_extensions"] = check_frontend(server, page)
        model = server.json("GET", f"/api/contents/{urllib.parse.quote(md.name)}?type=notebook&content=1")
        cells = [c for c in model["content"]["cells"] if c["cell_type"] == "code"]
        last = next((i for i, c in enumerate(cells) if args.panel in _source(c)), None)
        if last is None:
            raise LabError(f"{md}: no code cell holds {args.panel!r} (--panel)")
        _say(f"/lab served ({len(page):,} bytes); {md.name} opened as a notebook of {len(model['content']['cells'])} "
             f"cells; running code cells 1-{last + 1} of {len(cells)} (the last holds {args.panel!r})")
        kernel = Kernel(server, md.name)
        try:
            for number, cell in enumerate(cells[:last + 1], 1):
                result = kernel.run(_source(cell), args.cell_timeout)
                summary["cells"].append({"cell": number, **{k: result[k] for k in ("status", "error")},
                                         "printed": result["text"][-2000:]})
                if result["status"] != "ok":
                    _say(f"cell {number}: {result['status']}: {result['error']}")
                    break
            else:
                summary["panel_printed"] = result["text"].strip().splitlines()[-20:]
                for line in summary["panel_printed"]:
                    _say(f"  panel: {line}")
        finally:
            kernel.close()
    finally:
        server.stop()
    measured = [r["what"] for r in read_jsonl(notes)] if notes.exists() else []
    cells_ok = bool(summary["cells"]) and all(c["status"] == "ok" for c in summary["cells"]) \
        and len(summary["cells"]) == last + 1
    has_gpu = env.detect().has_gpu
    summary.update(measured=measured, gpu=has_gpu, seconds=round(time.monotonic() - started, 1),
                   ok=cells_ok and (bool(measured) or not has_gpu))
    write_json_atomic(out / "summary.json", summary)
    write_provenance(out, new_provenance("live-check", flags={"check": "jupyterlab", "chapter": md.stem,
                                                              "panel": args.panel},
                                         files={"summary.json": "what ran, cell by cell, and what the panel measured",
                                                "jupyter.log": "the JupyterLab server's console"},
                                         elapsed_s=summary["seconds"]))
    verdict = ("the panel ran: " + "; ".join(measured)) if measured else \
        "the panel did not measure (no GPU here: it says why)" if not has_gpu else "the panel did not run"
    _say(f"{md.stem}: {sum(c['status'] == 'ok' for c in summary['cells'])} of {last + 1} cells ran in JupyterLab; "
         f"{verdict} -> {out}")
    return 0 if summary["ok"] else 1


def _shown(data: dict) -> str:
    """What a display shows, as text: its plain text, or its HTML without tags (a panel's message, a table)."""
    plain = data.get("text/plain", "")
    if "text/html" in data and (not plain or plain.startswith("<IPython.core.display")):
        return " ".join(re.sub(r"<[^>]+>", " ", html.unescape(data["text/html"])).split())[:500]
    return plain


def _source(cell) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _say(line: str) -> None:
    print(f"[jupyter-check] {line}", flush=True)


if __name__ == "__main__":
    from lab.cli import module_cli
    sys.exit(module_cli(sys.modules[__name__], "python -m lab.book.jupyter_check"))
