"""How every command ends, and how its numbers are read.

A command ends in one of these ways, never in a traceback a reader has to decode:

* it returns a status (0 when all went well);
* a LabError (bad input, a refused run): one line, exit status 2;
* a file-system fault (unreadable file, symbolic-link loop, a folder where a file belongs, a full disk):
  one line naming the path, exit status 2;
* Ctrl-C: exit status 130, SIGTERM: exit status 143, both after the clean-up of every ``with`` and
  ``finally`` on the way out (a server is stopped, a temporary file removed), with one line;
* a closed pipe (``python -m lab datasets | head -1``): quietly, status 141, as a Unix tool killed by SIGPIPE.

The argparse types below refuse nonsense numbers (zero or negative counts, ``nan`` seconds) while the
command line is read, naming the option; :class:`OneLineParser` prints such a refusal as one line.
Shared by ``python -m lab`` and the modules that also run on their own (``python -m lab.measure.vllm.sweep``).
"""

from __future__ import annotations

import argparse
import errno
import math
import os
import signal
import sys
import threading
from pathlib import Path

from lab import LabError

#: What to do about a file-system fault, by errno.
_ADVICE = {
    errno.EACCES: "check its permissions",
    errno.EPERM: "check its permissions",
    errno.ELOOP: "a symbolic link that leads back to itself: fix or remove the link",
    errno.ENOTDIR: "a file stands where a folder is expected",
    errno.EISDIR: "a folder stands where a file is expected",
    errno.ENOENT: "check the path",
    errno.ENOSPC: "the disk is full: free some space and rerun (results already written are kept)",
    errno.EROFS: "the file system is read-only: choose a writable place",
    errno.ENAMETOOLONG: "shorten the path",
}


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread like Ctrl-C so that every clean-up on the way out runs."""


def _raise_terminated(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not interrupt the clean-up
    raise Terminated()


def os_error_reason(exc: OSError) -> str:
    """What the system said about a file-system fault and what to do, e.g. "Permission denied (check its permissions)"."""
    advice = _ADVICE.get(exc.errno)
    return f"{exc.strerror or type(exc).__name__}{f' ({advice})' if advice else ''}"


def one_line(text: str) -> str:
    """A message as one line: text it quotes (a server's reply, a file's line) never breaks it in two."""
    return " / ".join(line.strip() for line in text.splitlines() if line.strip())


def describe_os_error(exc: OSError) -> str:
    """One line for a file-system fault: the path(s), what the system said and what to do."""
    paths = " -> ".join(str(p) for p in (exc.filename, exc.filename2) if p is not None)
    return f"{paths + ': ' if paths else ''}{os_error_reason(exc)}"


def _quiet_stdout() -> None:
    """After the reader of our output went away: send what is still buffered nowhere, without a complaint."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def flush_stdout() -> bool:
    """Flush what was printed; False (and quiet from here on) when the reader has gone (``--help | head -1``)."""
    try:
        sys.stdout.flush()
        return True
    except BrokenPipeError:
        _quiet_stdout()
        return False


def run_command(command_main, args) -> int:
    """Run one command's ``main(args)`` and end it as the module docstring says."""
    in_main = threading.current_thread() is threading.main_thread()
    old = signal.getsignal(signal.SIGTERM) if in_main else None
    if in_main and old is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        code = int(command_main(args) or 0)
        return code if flush_stdout() else 141
    except LabError as exc:
        print(f"error: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except Terminated:
        print("terminated (SIGTERM): results already written are kept", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print("interrupted: results already written are kept", file=sys.stderr)
        return 130
    except BrokenPipeError:
        _quiet_stdout()
        return 141
    except OSError as exc:
        print(f"error: {describe_os_error(exc)}", file=sys.stderr)
        return 2
    except RuntimeError as exc:
        if not str(exc).startswith("Symlink loop from"):   # pathlib's resolve() before Python 3.13
            raise
        print(f"error: {str(exc).removeprefix('Symlink loop from ').strip(chr(39))}: {_ADVICE[errno.ELOOP]}",
              file=sys.stderr)
        return 2
    finally:
        if in_main and old is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


def run_cli(parser: argparse.ArgumentParser, command_main, argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run the command; a command line argparse refuses returns its status (2) like any
    other refusal, and ``--help`` returns 0 (for the modules that also run on their own)."""
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 0
    return run_command(command_main, args)


def module_cli(module, prog: str, argv: list[str] | None = None) -> int:
    """The command line of a module that also runs on its own (``python -m lab.measure.X``): its docstring as
    the help, its ``add_arguments`` and ``main``, refusals and ``--help`` as :func:`run_cli` returns them."""
    parser = OneLineParser(prog=prog, description=module.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    module.add_arguments(parser)
    return run_cli(parser, module.main, argv)


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose refusals are one line (the usage is one ``--help`` away), exit status 2."""

    def error(self, message: str):
        self.exit(2, f"error: {self.prog}: {message} (see {self.prog} --help)\n")


# --- argparse types: a number that makes no sense is refused while the command line is read -------

def _number(text: str, kind, what: str, ok) -> int | float:
    try:
        value = kind(text)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if isinstance(value, float) and not math.isfinite(value) or not ok(value):
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    return value


def positive_count(text: str) -> int:
    """A positive integer: a number of repetitions, tokens, requests, heads."""
    return _number(text, int, "a positive integer", lambda v: v > 0)


def count_or_zero(text: str) -> int:
    """An integer of 0 or more (0 meaning none: no warm-up, no prefill)."""
    return _number(text, int, "an integer of 0 or more", lambda v: v >= 0)


def positive_number(text: str) -> float:
    """A finite number above 0: seconds, megabytes, a rate."""
    return _number(text, float, "a positive number", lambda v: v > 0)


def number_or_zero(text: str) -> float:
    """A finite number of 0 or more (0 meaning none or no limit, as the option's help says)."""
    return _number(text, float, "a number of 0 or more", lambda v: v >= 0)


def fraction(text: str) -> float:
    """A finite number in (0, 1]: a share of GPU memory."""
    return _number(text, float, "a number above 0 and at most 1", lambda v: 0 < v <= 1)


def path_arg(text: str) -> Path:
    """A path a user typed; an empty one (an unset variable in ``--out $OUT``) is refused, not read as '.'."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a path, got an empty string")
    return Path(text)


def text_arg(text: str) -> str:
    """A name that may be a path (a model folder or a Hugging Face id, a dataset name or folder); an empty one is
    refused, not read as the current folder."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a name or a path, got an empty string")
    return text


def sizes(text: str, example: str = "1k,2k,4096", option: str | None = None) -> tuple[int, ...]:
    """Comma-separated positive integers, each optionally in units of 1024 with a ``k`` (``32k`` = 32768),
    of 1024² with an ``M`` or of 1024³ with a ``G`` (``256M``, ``4G``: buffer sizes in bytes)."""
    where = f"{option} " if option else ""
    scale = {"k": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    try:
        values = tuple(int(x[:-1]) * scale[x[-1]] if x[-1] in scale else int(x)
                       for x in text.replace(" ", "").split(",") if x)
    except ValueError:
        raise LabError(f"{where}{text!r}: expected comma-separated integers such as {example}") from None
    if not values or min(values) <= 0:
        raise LabError(f"{where}{text!r}: expected positive sizes such as {example}")
    return values
