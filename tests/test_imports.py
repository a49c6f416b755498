"""The package's imports run one way.

The layers, lowest first: errors <- layout <- storage and views <- backends <- ops and einsum <-
course data (CourseError, the manifest, the attempts log) <- the course's exercise engine <-
widgets <- course tools (build,
start, the exercise checks) and the command line. So the course and the widgets never import each
other both ways: the exercise widgets read the manifest and write the attempts log, the course's
tools use the widgets, and nothing of the widgets is imported by the course's data.

A module may import, at module level, only modules of its own layer or below, and the module-level
imports form no cycle. A function-local import of an llmfs module is allowed (the core types
route ``+`` and ``materialize`` to the compute layer above them, for instance), but each one
carries a comment saying why, on its line or the line above.

The graph is read from the source with :mod:`ast` (nothing is imported). ``from package import
name`` counts as an import of the submodule ``package.name`` when that submodule exists, else of
``package`` itself; a submodule's implicit import of its parent packages is not an edge (Python
runs ``llmfs/tensor/__init__.py`` first, but the facade's imports are checked on their own).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE_ROOT = Path(__file__).resolve().parent.parent / "llmfs"

#: Module-name prefixes and their layer, most specific prefix first. Higher layers may import
#: lower ones at module level, never the reverse.
LAYERS: list[tuple[str, int, str]] = [
    ("llmfs.tensor.errors", 0, "errors"),
    ("llmfs.tensor.layout", 1, "layout"),
    ("llmfs.tensor.dtypes", 1, "layout"),
    ("llmfs.tensor.threads", 1, "layout"),  # the copy threads: below the storage that uses them
    ("llmfs.tensor.tensor", 2, "storage and views"),
    ("llmfs.tensor.view", 2, "storage and views"),
    ("llmfs.tensor.strided", 2, "storage and views"),
    ("llmfs.tensor.traversal", 2, "storage and views"),
    ("llmfs.tensor.operators", 2, "storage and views"),
    ("llmfs.tensor.backends", 3, "backends"),
    ("llmfs.tensor.ops", 4, "ops and einsum"),
    ("llmfs.tensor.einsum", 4, "ops and einsum"),
    ("llmfs.tensor", 4, "ops and einsum"),  # the package facade re-exports the layers below
    # The course's data: CourseError, where the course lives, the manifest, the attempts log.
    # The exercise widgets read the manifest and write the log, so these sit below the widgets.
    ("llmfs.course.paths", 5, "course data"),
    ("llmfs.course.manifest", 5, "course data"),
    ("llmfs.course.attempts", 5, "course data"),
    # The exercise engine (entries, run, judge, misconceptions, state, text API) decides every
    # verdict; the widgets draw it and the grader uses it, so it sits above the data, below both.
    ("llmfs.course.exercises", 6, "course engine"),
    ("llmfs.widgets", 7, "widgets"),
    # The course's tools (build, start, the exercise checks) and the command line use widgets.
    ("llmfs.course", 8, "course tools"),
    ("llmfs.gpt", 8, "course tools"),  # the capstone model, trained and plotted by a command
    ("llmfs.demo", 8, "course tools"),
    ("llmfs.cli", 8, "course tools"),
    ("llmfs.__main__", 8, "course tools"),
    ("llmfs", 8, "course tools"),
]

#: Course modules the widgets may import: the data layer above, and the package that defines
#: CourseError (its ``__init__`` imports nothing else).
COURSE_DATA = {
    "llmfs.course",
    "llmfs.course.paths",
    "llmfs.course.manifest",
    "llmfs.course.attempts",
}


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    line: int
    module_level: bool
    commented: bool


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE_ROOT.rglob("*.py"))}


def layer_of(module: str) -> tuple[int, str]:
    if module == "llmfs.course":
        return 5, "course data"  # the package itself only defines CourseError
    for prefix, layer, label in LAYERS:
        if module == prefix or module.startswith(prefix + "."):
            return layer, label
    raise AssertionError(f"{module} belongs to no layer: add it to LAYERS in {__file__}")


def _resolve(importer: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module an ``ImportFrom`` names (relative imports resolved)."""
    if node.level == 0:
        return node.module or ""
    package = importer.split(".") if is_package else importer.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _has_comment(lines: list[str], line: int) -> bool:
    here = lines[line - 1]
    above = lines[line - 2].strip() if line >= 2 else ""
    return "#" in here or above.startswith("#")


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> list[Import]:
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    tree = ast.parse(source, filename=str(path))
    is_package = path.name == "__init__.py"
    found: list[Import] = []

    def visit(node: ast.AST, module_level: bool, type_checking: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(child, False, type_checking)
                continue
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                visit(child, module_level, True)
                continue
            targets: list[str] = []
            if isinstance(child, ast.Import):
                targets = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = _resolve(name, is_package, child)
                for alias in child.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in modules else base)
            for target in targets:
                if (target == "llmfs" or target.startswith("llmfs.")) and not type_checking:
                    found.append(
                        Import(
                            name,
                            target,
                            child.lineno,
                            module_level,
                            _has_comment(lines, child.lineno),
                        )
                    )
            visit(child, module_level, type_checking)

    visit(tree, True, False)
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def import_graph() -> list[Import]:
    modules = all_modules()
    edges: list[Import] = []
    for name, path in modules.items():
        edges.extend(imports_of(name, path, modules))
    return edges


def find_cycle(edges: list[tuple[str, str]]) -> list[str] | None:
    """One cycle of the directed graph (as a closed path), or ``None``."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        if a != b:
            graph.setdefault(a, set()).add(b)
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    stack: list[str] = []

    def dfs(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state:
                cycle = dfs(nxt)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            cycle = dfs(start)
            if cycle:
                return cycle
    return None


# -- the checker itself ---------------------------------------------------------------------------


def test_find_cycle_reports_a_closed_path_and_accepts_a_dag() -> None:
    assert find_cycle([("a", "b"), ("b", "c"), ("c", "a")]) == ["a", "b", "c", "a"]
    assert find_cycle([("a", "b"), ("b", "c"), ("a", "c")]) is None


def test_relative_imports_are_resolved(tmp_path: Path) -> None:
    node = ast.parse("from ..errors import X").body[0]
    assert isinstance(node, ast.ImportFrom)
    assert _resolve("llmfs.tensor.backends.base", False, node) == "llmfs.tensor.errors"
    assert _resolve("llmfs.tensor.backends", True, node) == "llmfs.tensor.errors"


def test_function_local_imports_are_found() -> None:
    edges = import_graph()
    assert any(not edge.module_level for edge in edges), "the walk must see function bodies"
    assert any(edge.module_level for edge in edges)


# -- the package ----------------------------------------------------------------------------------


def test_every_module_has_a_layer() -> None:
    for name in all_modules():
        layer_of(name)


def test_module_level_imports_form_no_cycle() -> None:
    edges = [(e.importer, e.imported) for e in import_graph() if e.module_level]
    cycle = find_cycle(edges)
    assert cycle is None, "import cycle among module-level imports: " + " -> ".join(cycle or [])


@pytest.mark.parametrize(
    "edge",
    [e for e in import_graph() if e.module_level],
    ids=lambda e: f"{e.importer}->{e.imported}",
)
def test_module_level_imports_point_down_the_layers(edge: Import) -> None:
    mine, my_label = layer_of(edge.importer)
    theirs, their_label = layer_of(edge.imported)
    assert theirs <= mine, (
        f"{edge.importer} (layer '{my_label}') imports {edge.imported} (layer '{their_label}', "
        f"higher) at line {edge.line}: imports run errors <- layout <- storage and views <- "
        "backends <- ops and einsum <- course data <- course engine <- widgets <- course tools"
    )


def test_widgets_import_only_the_course_data_never_its_tools() -> None:
    """The course's tools import the widgets; the widgets never import them back (not even in a
    function): they read only the manifest and the attempts log."""
    offenders = [
        f"{e.importer}:{e.line} imports {e.imported}"
        for e in import_graph()
        if e.importer.startswith("llmfs.widgets")
        and e.imported.startswith("llmfs.course")
        and e.imported not in COURSE_DATA
        and not e.imported.startswith("llmfs.course.exercises")
    ]
    assert offenders == []


def test_the_engine_and_the_grader_never_import_widgets() -> None:
    """The exercise engine and grading (``llmfs grade``, ``llmfs check``) import no widget, at
    module level or in a function: the widgets draw what the engine decides, never the reverse,
    and a grade never depends on drawing code."""
    edges = import_graph()
    assert any(e.importer.startswith("llmfs.course.exercises") for e in edges)
    offenders = [
        f"{e.importer}:{e.line} imports {e.imported}"
        + ("" if e.module_level else " (in a function)")
        for e in edges
        if e.importer.startswith(("llmfs.course.exercises", "llmfs.course.grading"))
        and e.imported.startswith("llmfs.widgets")
    ]
    assert offenders == []


def test_the_course_data_imports_neither_widgets_nor_course_tools() -> None:
    offenders = [
        f"{e.importer}:{e.line} imports {e.imported}"
        for e in import_graph()
        if e.importer in COURSE_DATA
        and (e.imported.startswith("llmfs.widgets") or layer_of(e.imported)[0] > 5)
    ]
    assert offenders == []


def test_every_function_local_import_says_why() -> None:
    silent = [
        f"{e.importer}:{e.line} imports {e.imported}"
        for e in import_graph()
        if not e.module_level and not e.commented
    ]
    assert silent == [], "function-local imports of llmfs modules need a comment saying why:\n" + (
        "\n".join(silent)
    )
