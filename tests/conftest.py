"""Shared test setup."""

import contextlib
import functools
import http.server
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from lab import REPO_ROOT
from lab import env as _env

# Kernels tests (issue 5): Triton reads TRITON_INTERPRET when it is imported, so without a GPU the
# interpreter must be switched on before any test module imports triton.
_env.use_triton_interpreter_without_gpu()


def pytest_collection_modifyitems(config, items):
    """Mark every test that needs the built site (the ``built_site`` fixture, directly or through another
    fixture) ``site``, so ``-m "not site and not browser and not slow"`` is the quick CPU subset (README)."""
    for item in items:
        if "built_site" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.site)


def _jupyter_book() -> list[str]:
    exe = Path(sys.executable).with_name("jupyter-book")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "jupyter_book.cli.main"]


@pytest.fixture(scope="session")
def built_site() -> Path:
    """Build the whole site once per test session (as scripts/build_site.sh does) and return _build/html.

    The build executes every chapter against the cached data with warnings as errors; a failing
    cell or any warning fails every test that needs the site, with the build log in the message.
    """
    html = REPO_ROOT / "_build" / "html"
    if os.environ.get("LAB_REUSE_SITE") == "1" and (html / "index.html").exists():
        return html  # developer shortcut: reuse a site built a moment ago
    prebuilt = Path(os.environ.get("LAB_SITE_HTML", "/nonexistent"))
    if (prebuilt / "index.html").exists():
        return prebuilt  # developer shortcut: a site built elsewhere (jupyter-book build --path-output)
    env = {**os.environ, "LAB_STATIC": "1", "PYTHONWARNINGS": "default"}
    proc = subprocess.run([*_jupyter_book(), "build", str(REPO_ROOT), "--all", "--warningiserror", "--keep-going", "--quiet"],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=1800)
    log = (proc.stdout + proc.stderr)[-8000:]
    if proc.returncode != 0:
        pytest.fail(f"book build failed (exit {proc.returncode}):\n{log}", pytrace=False)
    # as scripts/build_site.sh does: the course kit's slide decks beside the pages
    slides = subprocess.run([sys.executable, "-m", "lab", "slides"], cwd=REPO_ROOT, env=env, capture_output=True,
                            text=True, timeout=600)
    if slides.returncode != 0:
        pytest.fail(f"slide export failed (exit {slides.returncode}):\n{(slides.stdout + slides.stderr)[-4000:]}",
                    pytrace=False)
    return html


@contextlib.contextmanager
def serve_folder(folder: Path):
    """Serve ``folder`` over HTTP on 127.0.0.1 (a free port, threaded); yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class names it so
        pass


@pytest.fixture(scope="session")
def serve():
    """``with serve(folder) as url:`` serves any folder on 127.0.0.1 (for pages made inside a test)."""
    return serve_folder


@pytest.fixture(scope="session")
def served_site(built_site: Path):
    """The built site served on 127.0.0.1: ``(base_url, html_folder)``."""
    with serve_folder(built_site) as url:
        yield url, built_site


@pytest.fixture
def public_tmp():
    """A fresh folder an ordinary user may enter (pytest's tmp_path is private to root), removed afterwards:
    for the fault tests that run a command as uid 65534 so that a file with mode 000 is unreadable to it."""
    folder = Path(tempfile.mkdtemp(prefix="lab-faults-"))
    folder.chmod(0o755)
    yield folder
    for path in [folder, *folder.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() else 0o644)
    shutil.rmtree(folder)


@pytest.fixture
def full_disk(tmp_path):
    """A folder on a file system of 256 KiB (a tmpfs mounted for the test; skipped where mounting is not
    allowed): writing a few hundred KiB there fails with ENOSPC, as on a full disk."""
    folder = tmp_path / "small-disk"
    folder.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(folder)],
                                           capture_output=True).returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs root): no full disk to write to")
    yield folder
    subprocess.run(["umount", "-l", str(folder)], check=True)


@pytest.fixture
def model(tmp_path):
    """A model folder for the load study's tests: the real config.json and a tokenizer folder (the fake client
    only checks it is there)."""
    folder = tmp_path / "model"
    (folder / "tokenizer").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "data" / "models" / "qwen2.5-7b-128k" / "config.json", folder)
    (folder / "tokenizer" / "tokenizer.json").write_text("{}")
    return str(folder)
