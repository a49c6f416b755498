"""The ``llmfs`` command line: one entry point, one sub-command per course task.

Each sub-command lives in its own module, imported only when it runs, so that ``llmfs demo`` never
pays for JupyterLab or matplotlib. A command module exposes ``add_arguments(parser)`` and
``main(args) -> int``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# name -> (module, one-line help). The order is the order of `llmfs --help`.
COMMANDS: dict[str, tuple[str, str]] = {
    "start": ("llmfs.course.start", "copy the student notebooks to your folder, open JupyterLab"),
    "demo": ("llmfs.demo", "print chapter 2's trace table in the terminal"),
    "build": ("llmfs.course.build", "generate notebooks/ (student versions) from solutions/"),
    "check": ("llmfs.course.selfcheck", "self-check: which exercises in your notebooks are right"),
    "grade": ("llmfs.course.grade", "grade submitted student notebooks against the manifest"),
    "figures": ("llmfs.widgets.figures", "regenerate every figure under figures/"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="llmfs", description="LLM from scratch: course tools.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        command = sub.add_parser(name, help=help_text, description=help_text)
        command.set_defaults(_module=module_name)
        module = _import_optional(module_name)
        if module is not None and hasattr(module, "add_arguments"):
            module.add_arguments(command)
    return parser


def _import_optional(module_name: str):
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        # Only a missing *command module* is tolerated here (a command not built yet shows in
        # --help but fails clearly when run); a missing dependency inside it must surface.
        if error.name == module_name:
            return None
        raise


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    module = _import_optional(args._module)
    if module is None:
        print(f"llmfs {args.command}: not available in this version", file=sys.stderr)
        return 2
    return int(module.main(args) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
