"""Command-line entry point: ``python -m lab COMMAND --help``.

Each command lives in the module that owns its concept. A command module defines
``add_arguments(parser)`` and ``main(args) -> int``; its docstring's first line is the help text.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from lab.cli import OneLineParser, flush_stdout, run_command
from lab.commands import COMMANDS


def _load(module_name: str):
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            return None  # the command's module does not exist (yet)
        raise


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of ``only`` (then no other command's module is imported)."""
    parser = OneLineParser(prog="python -m lab", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        if only is not None and name != only:
            continue
        module = _load(module_name)
        if module is None or not hasattr(module, "add_arguments"):
            continue
        summary = (module.__doc__ or name).strip().splitlines()[0]
        command = sub.add_parser(name, help=summary, description=(module.__doc__ or summary).strip(),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(command)
        command.set_defaults(_module=module)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # A named command loads its own module only: `python -m lab env` must work on a bare interpreter
    # (no numpy yet) to say what is missing there.
    parser = build_parser(only=argv[0] if argv and argv[0] in COMMANDS else None)
    try:
        args = parser.parse_args(argv)
    except BrokenPipeError:             # --help into a pipe whose reader has gone
        flush_stdout()
        return 141
    except SystemExit:
        flush_stdout()
        raise
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    return run_command(args._module.main, args)


if __name__ == "__main__":
    sys.exit(main())
