"""Dataset folders and who may write them: one writer at a time, no output onto an input, earlier runs' files kept.

* :func:`dataset_lock`: every tool that writes a folder holds its lock while it writes; a second
  writer is refused with one line naming the first (two sweeps into one folder would store every
  record twice and rename each other's server log);
* :func:`check_kind` (through ``dataset_lock(..., kinds=...)``): a folder holding another kind of dataset
  (a bandwidth run's, for a sweep) is refused before anything is written into it;
* :func:`check_output`: an output path that is one of the command's inputs (or inside an input folder)
  is refused before anything is read or written;
* :func:`set_aside`: a file a new run would replace (a resumed sweep's ``server.log``) is moved to the
  first free ``name.N.ext`` instead, so every run's evidence survives;
* :func:`open_server_log`: a server's new log, after a stale ``server.pgid`` of a killed run is handled.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
from collections.abc import Iterable
from pathlib import Path

from lab import LabError
from lab.store import alive, command_line, read_json

# --- one writer per dataset folder -------------------------------------------------------------------

#: The lock file of a folder being written (removed when its writer is done; a killed writer's is taken over).
LOCK_NAME = ".writer.lock"
_HELD: dict[Path, list] = {}   # folder -> [fd, depth]: this process's locks (re-entrant)


def _process_start(pid: int) -> str | None:
    """When ``pid`` started (clock ticks since boot, from /proc): tells a reused pid from its first owner."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()
    return fields[19] if len(fields) > 19 else None


def _owner(text: str) -> tuple[int | None, str | None, str]:
    """(pid, start, command) as a lock file records them; None for a file that says nothing readable."""
    pid, _, rest = text.strip().partition(" ")
    start, _, command = rest.partition(" ")
    return (int(pid) if pid.isdigit() else None), (start if start.isdigit() else None), command


def _live_owner(text: str) -> tuple[int, str] | None:
    """The recorded owner of a lock if that process still runs (the same one: its start time matches)."""
    pid, start, command = _owner(text)
    if pid is None or pid == os.getpid() or not alive(pid):
        return None
    if start is not None and _process_start(pid) not in (None, start):
        return None  # the pid now belongs to another process: the writer is gone
    return pid, command


def _refuse_busy(folder: Path, option: str, pid, command: str):
    raise LabError(f"{folder}: another run is writing this folder (pid {pid}{': ' + command[:80] if command else ''}); "
                   f"wait for it to end{' or choose another ' + option if option else ''}")


def _named(option: str, folder: Path) -> str:
    return f"{option} {folder}" if option else str(folder)


def _make_folder(folder: Path, option: str) -> list[Path]:
    """Create ``folder`` and its missing parents; return those created (deepest first)."""
    created = []
    for parent in [folder, *folder.parents]:
        if parent.exists() or parent.is_symlink():
            break
        created.append(parent)
    if folder.is_symlink() and not folder.exists():
        raise LabError(f"{_named(option, folder)}: a symbolic link that leads nowhere (or back to itself); "
                       "expected a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise LabError(f"{_named(option, folder)}: is a file; expected a folder") from None
    except OSError as exc:
        raise LabError(f"{_named(option, folder)}: cannot create the folder ({exc.strerror or exc})") from None
    return created


def _acquire(folder: Path, option: str) -> int:
    path = folder / LOCK_NAME
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise LabError(f"{_named(option, folder)}: cannot write there ({exc.strerror or exc})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = _owner(os.pread(fd, 4096, 0).decode("utf-8", "replace"))
            os.close(fd)
            _refuse_busy(folder, option, owner[0] or "unknown", owner[2])
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:   # else the last writer removed the file between our open and our lock: try again
            break
        os.close(fd)
    recorded = os.pread(fd, 4096, 0).decode("utf-8", "replace")
    live = _live_owner(recorded)
    if live is not None:   # a lock written by hand or over a network file system: its owner still runs
        os.close(fd)
        _refuse_busy(folder, option, *live)
    mine = f"{os.getpid()} {_process_start(os.getpid()) or '-'} {command_line()}\n".encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, mine, 0)
    return fd


def check_kind(folder: Path, kinds: tuple[str, ...], option: str = "--out") -> None:
    """Refuse a folder whose ``provenance.json`` records a kind of dataset other than ``kinds`` (the kinds the
    writing tool writes): its files would be mixed with another study's. A folder without one is anyone's."""

    path = Path(folder) / "provenance.json"
    if not kinds or not (path.exists() or path.is_symlink()):
        return
    record = read_json(path)
    kind = record.get("kind") if isinstance(record, dict) else None
    if kind not in kinds:
        command = record.get("command") if isinstance(record, dict) else None
        raise LabError(f"{_named(option, folder)}: holds a {kind or 'unknown'} dataset"
                       f"{f' ({str(command)[:60]})' if command else ''}, not a {' or '.join(kinds)} one; "
                       f"choose another {option or 'folder'}")


@contextlib.contextmanager
def dataset_lock(folder: Path, option: str = "--out", kinds: tuple[str, ...] = ()):
    """Be the one writer of ``folder`` while the block runs; a second writer is refused with one line.

    ``option`` names the folder in a refusal (``--out``; "" where no option chose it). The lock is an
    exclusive ``flock`` on ``folder/.writer.lock``, which records the owner's pid and command. The kernel drops the lock of a writer that was killed, so its file is taken over; a lock
    file naming a process that still runs is respected. A folder this call created is removed again if
    the block leaves it empty (a refused run leaves no empty folder behind). Re-entrant in one process.
    ``kinds``: the provenance kinds the tool writes; a folder holding another kind is refused (:func:`check_kind`)
    before the block runs.
    """
    folder = Path(folder)
    key = Path(os.path.abspath(folder))
    if key in _HELD:
        _HELD[key][1] += 1
        try:
            yield folder
        finally:
            _HELD[key][1] -= 1
        return
    created = _make_folder(folder, option)
    try:
        fd = _acquire(folder, option)
    except BaseException:
        _remove_empty(created)
        raise
    _HELD[key] = [fd, 1]
    try:
        check_kind(folder, kinds, option)
        yield folder
    finally:
        del _HELD[key]
        (folder / LOCK_NAME).unlink(missing_ok=True)
        os.close(fd)
        _remove_empty(created)


def writes_folder(option: str = "--out", kinds: tuple[str, ...] = ("kernels",)):
    """Decorate a command's ``main(args)`` that writes the folder its ``option`` names: the command runs as
    that folder's one writer (:func:`dataset_lock`), from its first check to its last file; a folder holding
    a dataset of another kind than ``kinds`` is refused first."""
    attribute = option.lstrip("-").replace("-", "_")

    def decorate(main):
        @functools.wraps(main)
        def locked(args):
            with dataset_lock(Path(getattr(args, attribute)), option, kinds):
                return main(args)
        return locked
    return decorate


def _remove_empty(folders: list[Path]) -> None:
    for folder in folders:                 # deepest first
        try:
            folder.rmdir()
        except OSError:
            return                         # not empty (or gone): keep it and everything above


# --- outputs never overwrite inputs --------------------------------------------------------------------

def _same(a: Path, b: Path) -> bool:
    try:
        if os.path.samefile(a, b):
            return True
    except OSError:
        pass
    return Path(os.path.realpath(a)) == Path(os.path.realpath(b))


def _inside(path: Path, folder: Path) -> bool:
    return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(folder))


def check_output(output: Path, option: str, inputs: Iterable[tuple[str, Path | None]]) -> None:
    """Refuse an output (file or folder) that is one of the inputs or lies inside an input folder.

    ``inputs``: (how the command line names it, path) pairs; None paths are skipped. Symbolic links and
    hard links are seen through, so ``census T --json link-to-T`` is refused too.
    """
    for name, path in inputs:
        if path is None:
            continue
        path = Path(path)
        if _same(output, path):
            raise LabError(f"{option} {output} is {name} {path}: a tool never writes onto its input; "
                           f"choose another {option}")
        if path.is_dir() and _inside(output, path):
            raise LabError(f"{option} {output} lies inside {name} {path}: a tool never writes into its input; "
                           f"choose another {option}")


# --- evidence: every run's log survives -----------------------------------------------------------------

def set_aside(path: Path) -> Path | None:
    """Move an existing ``name.ext`` to the first free ``name.N.ext`` (1, 2, ...) and return where it went, so a
    new run's file never replaces an earlier run's (a resumed sweep keeps the crashed run's server log)."""
    path = Path(path)
    if path.is_dir():
        raise LabError(f"{path}: is a folder; expected a file (move the folder away and rerun)")
    if not path.exists():
        return None
    number = 1
    while True:
        target = path.with_name(f"{path.stem}.{number}{path.suffix}")
        try:
            os.link(path, target)          # fails if the name is taken: never replaces an earlier log
        except FileExistsError:
            number += 1
            continue
        path.unlink()
        return target


def check_stale_group(pgid_path: Path) -> None:
    """A process-group file (``server.pgid``) left by a run that was killed: removed if that group is gone;
    refused with one line (nothing started) while it still runs, since that server may hold the GPU and port."""
    pgid_path = Path(pgid_path)
    if not pgid_path.exists():
        return
    try:
        text = pgid_path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        text = ""
    if text.isdigit() and int(text) > 1:
        try:
            os.killpg(int(text), 0)
        except ProcessLookupError:
            pass
        except PermissionError:              # another user's group: it runs
            raise LabError(f"{pgid_path}: process group {text} of another user still runs; stop it and rerun") from None
        else:
            raise LabError(f"{pgid_path}: a server of an earlier run (process group {text}) still runs; "
                           f"stop it with `kill -- -{text}` and rerun")
    pgid_path.unlink(missing_ok=True)


def open_server_log(log_path: Path, pgid_path: Path):
    """A new server's log, open for writing, after a stale ``pgid_path`` is handled (:func:`check_stale_group`)
    and an earlier session's log set aside (``server.log`` -> ``server.N.log``), so each run keeps its own."""
    check_stale_group(pgid_path)
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    set_aside(log_path)
    return open(log_path, "w", encoding="utf-8")
