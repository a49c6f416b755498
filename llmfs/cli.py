"""The ``llmfs`` command line: one entry point, one sub-command per course task.

Each sub-command lives in its own module, imported only when it runs, so that ``llmfs demo`` never
pays for JupyterLab or matplotlib. A command module exposes ``add_arguments(parser)`` and
``main(args) -> int``.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence

from llmfs import __version__

VERSION = f"llmfs {__version__}"

# name -> (module, one-line help). The order is the order of `llmfs --help` within each group.
COMMANDS: dict[str, tuple[str, str]] = {
    "start": ("llmfs.course.start", "copy the student notebooks to your folder, open JupyterLab"),
    "check": ("llmfs.course.grading.selfcheck", "check your own notebooks: progress and hints"),
    "demo": ("llmfs.demo", "print chapter 2's trace table in the terminal"),
    "gpt2": ("llmfs.gpt.gpt2_command", "run GPT-2 from a Hugging Face folder you already have"),
    "grade": ("llmfs.course.grading.grade", "grade submissions into a resumable gradebook"),
    "key": ("llmfs.course.grading.key", "write the answer key (one page per chapter)"),
    "build": ("llmfs.course.build", "generate notebooks/ (student versions) from solutions/"),
    "figures": ("llmfs.widgets.figures", "regenerate every figure under figures/"),
}

#: Who each command is for, in the order `llmfs --help` lists the groups: a learner needs only
#: the first group, and should not have to read past the instructors' tools to find it.
AUDIENCES: dict[str, tuple[str, ...]] = {
    "for learners": ("start", "check", "demo", "gpt2"),
    "for instructors and course authors": ("grade", "key", "build", "figures"),
}


def _command_listing() -> str:
    """The commands grouped by audience, as ``llmfs --help`` shows them."""
    width = max(len(name) for name in COMMANDS) + 2
    lines = []
    for audience, names in AUDIENCES.items():
        lines.append(f"{audience}:")
        lines += [f"  {name:<{width}}{COMMANDS[name][1]}" for name in names]
        lines.append("")
    lines.append("Run `llmfs COMMAND --help` for a command's options.")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    """The parser with one sub-command per entry of :data:`COMMANDS`."""
    parser = argparse.ArgumentParser(
        prog="llmfs",
        usage="llmfs [-h] [--version] COMMAND ...",
        description="LLM from scratch: course tools.",
        epilog=_command_listing(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=VERSION)
    # The commands are listed by audience in the epilog; argparse's own list would mix them.
    sub = parser.add_subparsers(
        dest="command", metavar="COMMAND", help=argparse.SUPPRESS, prog="llmfs"
    )
    for name, (module_name, help_text) in COMMANDS.items():
        command = sub.add_parser(name, help=help_text, description=help_text)
        command.add_argument("--version", action="version", version=VERSION)
        # The sub-command's own parser, so that its mistakes show its usage (see main).
        command.set_defaults(_module=module_name, _parser=command)
        # Options are declared by the command's module; importing it is cheap (heavy
        # dependencies are imported inside main()).
        importlib.import_module(module_name).add_arguments(command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Runs one command; returns its exit status.

    A usage error exits with status 2 (``SystemExit``) after printing the usage of the parser it
    belongs to: ``llmfs start --bogus`` shows ``llmfs start``'s options, not the command list.
    """
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        owner = parser if args.command is None else args._parser
        owner.error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command is None:
        parser.print_help()
        return 0
    return int(importlib.import_module(args._module).main(args) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
