"""The teaching core's import closure: which modules a learner's reading of the core pulls in, and
how many lines they hold.

The core is the modules a learner reads (:data:`CORE`): the layout algebra, the checks, the offset
cursor, the tensor and its views, the tape, autograd and the reference backend. Its closure is
every ``llmfs`` module reachable from them by an import, read statically from the source: module
level and function-local ``import``/``from ... import`` statements, ``from pkg import name``
where ``name`` is a submodule, and ``importlib.import_module("...")`` with a literal name. A
package's ``__init__`` is counted only when a module imports the package itself (``from
llmfs.tensor.backends import get_backend`` reads ``backends/__init__.py``), not as the parent of
every submodule: Python runs it, but a reader of the core does not read it for the core.

It prints the modules with their line counts, the closure's total, and the modules of the
closure that are speed code (:data:`SPEED`: the numpy backend, its copies and threads, the
dispatch plans, the layout memo), which the core must not reach. ``--check`` exits 1 when the
closure holds speed code or more than :data:`LIMIT` lines, or when a closure module branches on
a backend's name.

Run: ``python benchmarks/core_closure.py [--check]`` (needs nothing but the standard library).
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CORE = (
    "llmfs.tensor.layout",
    "llmfs.tensor.checks",
    "llmfs.tensor.traversal",
    "llmfs.tensor.tensor",
    "llmfs.tensor.view",
    "llmfs.tensor.tape",
    "llmfs.tensor.autograd",
    "llmfs.tensor.backends.reference",
)

#: Speed code: none of it may be in the core's closure.
SPEED = (
    "llmfs.tensor.backends.numpy_backend",
    "llmfs.tensor.backends.numpy_copies",
    "llmfs.tensor.backends.threads",
    "llmfs.tensor.dispatch",
    "llmfs.tensor.derived",
)

LIMIT = 6000

#: A branch on a backend's name (``get_backend().name == "reference"``).
NAME_BRANCH = re.compile(r"""\.name\s*[!=]=\s*["']""")


def module_path(name: str) -> Path | None:
    """The source file of module ``name`` under the repository, ``None`` outside it."""
    base = ROOT.joinpath(*name.split("."))
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    return None


def imported_names(name: str, path: Path) -> set[str]:
    """The ``llmfs`` modules ``name`` (at ``path``) imports anywhere in its source."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            for alias in node.names:
                if module_path(f"{source}.{alias.name}") is not None:
                    found.add(f"{source}.{alias.name}")  # a submodule
                else:
                    found.add(source)  # a name the module itself defines
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, (ast.Attribute, ast.Name))
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
            == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.add(node.args[0].value)
    return {n for n in found if n.startswith("llmfs") and module_path(n) is not None}


def closure(roots: tuple[str, ...]) -> dict[str, int]:
    """Every module reachable from ``roots``, with its line count."""
    lines: dict[str, int] = {}
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in lines:
            continue
        path = module_path(name)
        assert path is not None, name
        lines[name] = len(path.read_text().splitlines())
        todo.extend(imported_names(name, path) - set(lines))
    return lines


def main(argv: list[str]) -> int:
    lines = closure(CORE)
    width = max(len(n) for n in lines)
    for name in sorted(lines):
        mark = "  core" if name in CORE else ""
        print(f"{name:<{width}}  {lines[name]:>5}{mark}")
    total = sum(lines.values())
    core = sum(lines[n] for n in CORE)
    print(f"core: {len(CORE)} modules, {core} lines; closure: {len(lines)} modules, {total} lines")
    speed = sorted(n for n in lines if n in SPEED)
    branches = [
        f"{n}:{k}"
        for n in sorted(lines)
        for k, text in enumerate(module_path(n).read_text().splitlines(), 1)  # type: ignore[union-attr]
        if NAME_BRANCH.search(text)
    ]
    print("speed code in the closure:", ", ".join(speed) or "none")
    print("branches on a backend's name:", ", ".join(branches) or "none")
    if "--check" in argv:
        return 1 if speed or branches or total > LIMIT else 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
