"""The package's imports run one way.

The layers, lowest first, are the package's own packages and modules (:data:`LAYERS`): a module
belongs to the layer of the longest package or module name in the table that contains it, so a
new module of ``llmfs.gpt`` is in the gpt layer without being listed. Inside ``llmfs.tensor``,
whose modules sit side by side, the table names each module group: the errors, the layout
algebra, the tensor types (tape, owner, view), the backends, the ops, einsum and autograd, the
speed code above them (the cached dispatch and the layout memo) and the package's facade. Then
gpt, the course engine (every package of ``llmfs.course``: the exercise engine and its checks,
grading, the notebook builder), the widgets (every module of ``llmfs.widgets``) and the course
tools (the command line and the demo). The top package ``llmfs`` holds only the version and sits
below them all.

The rules, each checked on the package below and shown to fail on a small package made for it:

* every module is in a layer (a module outside every entry of the table fails);
* every import points to its own layer or below: module-level imports, imports inside functions
  and ``importlib.import_module("...")`` / ``__import__("...")`` calls with a literal name alike,
  with no exception (a call that must run up the layers goes through
  :mod:`llmfs.tensor.above`, where the upper layer puts itself);
* the imports form no cycle, function-local imports included;
* an import names a module that exists;
* transitively, at run time: importing the modules of a layer (in a fresh interpreter) loads no
  module of a higher layer, which also catches what the source does not show (an
  ``import_module`` of a computed name); and importing the grader, the sandbox worker or any
  exercise check, each alone, loads no ``llmfs.widgets`` module.

The graph is read from the source with :mod:`ast` (nothing is imported). ``from package import
name`` counts as an import of the submodule ``package.name`` when that submodule exists, else of
``package`` itself; a submodule's implicit import of its parent packages is not an edge (Python
runs ``llmfs/tensor/__init__.py`` first, but the facade's imports are checked on their own).
Imports under ``if TYPE_CHECKING:`` are not edges: they never run.
"""

from __future__ import annotations

import ast
import functools
import json
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE_ROOT = Path(__file__).resolve().parent.parent / "llmfs"

#: The layers, lowest first: (name, the packages and modules it holds). A module is in the layer
#: of the longest entry that is its name or a package containing it.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # The top package holds only the version (``llmfs.__version__``): below everything, so any
    # module may ask for it.
    ("package root", ("llmfs",)),
    ("errors", ("llmfs.tensor.errors", "llmfs.tensor.error_base")),
    ("layout", ("llmfs.tensor.layout", "llmfs.tensor.checks", "llmfs.tensor.dtypes")),
    (
        "tensor types",
        (
            "llmfs.tensor.above",
            "llmfs.tensor.tape",
            "llmfs.tensor.tensor",
            "llmfs.tensor.view",
            "llmfs.tensor.traversal",
            "llmfs.tensor.strided",
        ),
    ),
    ("backends", ("llmfs.tensor.backends",)),
    ("ops", ("llmfs.tensor.ops", "llmfs.tensor.writes", "llmfs.tensor.compare")),
    (
        "einsum and autograd",
        (
            "llmfs.tensor.einsum",
            "llmfs.tensor.autograd",
            "llmfs.tensor.functional",
            "llmfs.tensor.finite_difference",
        ),
    ),
    ("speed", ("llmfs.tensor.dispatch", "llmfs.tensor.derived")),
    ("tensor facade", ("llmfs.tensor",)),
    ("gpt", ("llmfs.gpt",)),
    ("course engine", ("llmfs.course",)),
    ("widgets", ("llmfs.widgets",)),
    (
        "course tools",
        ("llmfs.__main__", "llmfs.cli", "llmfs.demo"),
    ),
)


def layer_index(module: str, layers: Sequence[tuple[str, Sequence[str]]] = LAYERS) -> int | None:
    """The layer of ``module``: that of the longest entry that is ``module`` or a package
    containing it; ``None`` when no entry contains it."""
    best: tuple[int, int] | None = None
    for index, (_, entries) in enumerate(layers):
        for entry in entries:
            if module == entry or module.startswith(entry + "."):
                if best is None or len(entry) > best[0]:
                    best = (len(entry), index)
    return None if best is None else best[1]


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    line: int
    module_level: bool


# -- reading the graph ----------------------------------------------------------------------------


def module_name(path: Path, root: Path = PACKAGE_ROOT) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules(root: Path = PACKAGE_ROOT) -> dict[str, Path]:
    return {module_name(path, root): path for path in sorted(root.rglob("*.py"))}


def _resolve(importer: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module an ``ImportFrom`` names (relative imports resolved)."""
    return _absolute(importer, is_package, node.level, node.module or "")


def _absolute(importer: str, is_package: bool, level: int, name: str) -> str:
    if level == 0:
        return name
    package = importer.split(".") if is_package else importer.split(".")[:-1]
    base = package[: len(package) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def _import_call(node: ast.Call) -> str | None:
    """The module named by ``importlib.import_module("...")`` or ``__import__("...")`` (a literal
    first argument), else ``None``."""
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if called not in ("import_module", "__import__") or not node.args:
        return None
    first = node.args[0]
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> list[Import]:
    """Every import of a module of the package that ``name`` (at ``path``) makes."""
    top = name.split(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    found: list[Import] = []

    def targets_of(node: ast.AST) -> list[str]:
        if isinstance(node, ast.Import):
            return [alias.name for alias in node.names]
        if isinstance(node, ast.ImportFrom):
            base = _resolve(name, is_package, node)
            return [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                for alias in node.names
            ]
        if isinstance(node, ast.Call) and (called := _import_call(node)) is not None:
            level = len(called) - len(called.lstrip("."))
            return [_absolute(name, is_package, level, called[level:])]
        return []

    def visit(node: ast.AST, module_level: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for branch in child.orelse:  # only the else branch runs
                    visit(branch, module_level)
                continue
            for target in targets_of(child):
                if target == top or target.startswith(top + "."):
                    found.append(Import(name, target, child.lineno, module_level))
            inside = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            visit(child, module_level and not inside)

    visit(tree, True)
    return found


def import_graph(root: Path = PACKAGE_ROOT) -> list[Import]:
    modules = all_modules(root)
    edges: list[Import] = []
    for name, path in modules.items():
        edges.extend(imports_of(name, path, modules))
    return edges


def find_cycle(edges: Sequence[tuple[str, str]]) -> list[str] | None:
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


# -- the rules ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rules:
    """A package and the layers its imports must obey."""

    root: Path
    layers: Sequence[tuple[str, Sequence[str]]]

    def names(self) -> list[str]:
        return [name for name, _ in self.layers]

    def missing_layers(self) -> list[str]:
        return [
            f"{name} is in no layer: add its package or module to LAYERS in {__file__}, at the "
            "layer of what it imports and of what imports it"
            for name in all_modules(self.root)
            if layer_index(name, self.layers) is None
        ]

    def upward_imports(self, edges: Sequence[Import]) -> list[str]:
        modules = all_modules(self.root)
        names = self.names()
        problems = []
        for edge in edges:
            if edge.imported not in modules:
                problems.append(
                    f"{edge.importer}:{edge.line} imports {edge.imported}, which "
                    "is no module of the package"
                )
                continue
            mine = layer_index(edge.importer, self.layers)
            theirs = layer_index(edge.imported, self.layers)
            if mine is None or theirs is None or theirs <= mine:
                continue
            where = "at module level" if edge.module_level else "inside a function"
            problems.append(
                f"{edge.importer}:{edge.line} (layer {mine}, {names[mine]}) imports "
                f"{edge.imported} (layer {theirs}, {names[theirs]}) {where}: imports run "
                f"{' <- '.join(names)}; move the code, or let the upper module put itself in "
                "llmfs.tensor.above for the lower one to call"
            )
        return problems

    def cycles(self, edges: Sequence[Import]) -> list[str]:
        cycle = find_cycle([(e.importer, e.imported) for e in edges])
        return [] if cycle is None else ["import cycle: " + " -> ".join(cycle)]

    def problems(self) -> list[str]:
        edges = import_graph(self.root)
        return [*self.missing_layers(), *self.upward_imports(edges), *self.cycles(edges)]

    def loaded_above(self, layer: int, modules: Sequence[str]) -> list[str]:
        """Imports ``modules`` (all of layer ``layer``) in a fresh interpreter and names every
        module of the package they load from a higher layer. Their parent packages run first
        (Python imports a package before its modules); what those load is not counted here, as
        the packages' own imports are checked with their own layers."""
        top = self.root.name
        parents = sorted(
            {".".join(m.split(".")[:k]) for m in modules for k in range(1, m.count(".") + 1)}
        )
        mine = f"m == {top!r} or m.startswith({top + '.'!r})"
        code = (
            "import importlib, json, sys\n"
            f"for name in {parents!r}:\n"
            "    importlib.import_module(name)\n"
            f"before = {{m for m in sys.modules if {mine}}}\n"
            f"for name in {list(modules)!r}:\n"
            "    importlib.import_module(name)\n"
            f"print(json.dumps(sorted(m for m in sys.modules if ({mine}) and m not in before)))\n"
        )
        result = subprocess.run(
            [sys.executable, "-c", code],
            cwd=self.root.parent,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        loaded = json.loads(result.stdout.strip().splitlines()[-1])
        names = self.names()
        return [
            f"importing layer {layer} ({names[layer]}) loads {name} (layer {theirs}, "
            f"{names[theirs]})"
            for name in loaded
            if (theirs := layer_index(name, self.layers)) is not None and theirs > layer
        ]

    def modules_by_layer(self) -> dict[int, list[str]]:
        """The modules of each layer that can be imported without running a program (a
        ``__main__`` module runs its command when imported)."""
        out: dict[int, list[str]] = {}
        for name in all_modules(self.root):
            index = layer_index(name, self.layers)
            if index is not None and name.split(".")[-1] != "__main__":
                out.setdefault(index, []).append(name)
        return out


PACKAGE = Rules(PACKAGE_ROOT, LAYERS)


@functools.cache
def package_graph() -> tuple[Import, ...]:
    return tuple(import_graph())


# -- the package ----------------------------------------------------------------------------------


def test_every_module_has_a_layer() -> None:
    problems = PACKAGE.missing_layers()
    assert problems == [], "\n".join(problems)


def test_imports_point_down_the_layers() -> None:
    problems = PACKAGE.upward_imports(package_graph())
    assert problems == [], "\n".join(problems)


def test_imports_form_no_cycle() -> None:
    problems = PACKAGE.cycles(package_graph())
    assert problems == [], "\n".join(problems)


def test_the_graph_sees_module_level_and_function_local_imports() -> None:
    edges = package_graph()
    assert any(not edge.module_level for edge in edges), "the walk must see function bodies"
    assert any(edge.module_level for edge in edges)
    assert len({e.importer for e in edges}) > 50  # most modules import another one


def test_the_engine_and_the_grader_never_import_widgets() -> None:
    """The exercise engine and grading (``llmfs grade``, ``llmfs check``) import no widget, at
    module level or in a function: the widgets draw what the engine decides, never the reverse,
    and a grade never depends on drawing code."""
    edges = package_graph()
    assert any(e.importer.startswith("llmfs.course.exercises") for e in edges)
    offenders = [
        f"{e.importer}:{e.line} imports {e.imported}"
        + ("" if e.module_level else " (in a function)")
        for e in edges
        if e.importer.startswith(("llmfs.course.exercises", "llmfs.course.grading"))
        and e.imported.startswith("llmfs.widgets")
    ]
    assert offenders == []


def widgets_loaded_by(root: Path, *modules: str) -> dict[str, list[str]]:
    """For each of ``modules``: the modules of ``<package>.widgets`` that importing it loads
    (its parent packages included: whatever the import costs), each import made in a process of
    its own that has imported nothing of the package before. One interpreter, which imports only
    the standard library and NumPy (when installed: every child would import it), forks one child
    per module (cheaper than an interpreter each); a child that cannot import its module fails
    the test with its traceback."""
    top = root.name
    code = (
        "import importlib, json, os, sys, traceback\n"
        "try:\n"
        "    import numpy\n"
        "except ImportError:\n"
        "    pass\n"
        f"found = {{}}\n"
        f"for module in {list(modules)!r}:\n"
        "    read, write = os.pipe()\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        os.close(read)\n"
        "        try:\n"
        "            importlib.import_module(module)\n"
        f"            loaded = sorted(m for m in sys.modules if m == {top + '.widgets'!r} "
        f"or m.startswith({top + '.widgets.'!r}))\n"
        "            os.write(write, json.dumps(loaded).encode())\n"
        "            os._exit(0)\n"
        "        except BaseException:\n"
        "            traceback.print_exc()\n"
        "            os._exit(1)\n"
        "    os.close(write)\n"
        "    with os.fdopen(read, 'rb') as stream:\n"
        "        data = stream.read()\n"
        "    _, status = os.waitpid(pid, 0)\n"
        "    if status != 0:\n"
        "        sys.exit(f'importing {module} failed')\n"
        "    found[module] = json.loads(data)\n"
        "print(json.dumps(found))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=root.parent,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    loaded: dict[str, list[str]] = json.loads(result.stdout.strip().splitlines()[-1])
    return loaded


def judging_entry_points() -> list[str]:
    """What a verdict runs through: the grader (``llmfs grade``: grading, scoring, the self-check
    of the solutions and their truths), the sandbox worker it starts, the verdict module, and
    every module of the exercise checks (``llmfs check``, the notebooks' checks)."""
    checks = sorted(m for m in all_modules() if m.startswith("llmfs.course.exercise_checks"))
    grader = [f"llmfs.course.grading.{m}" for m in ("grade", "score", "selfcheck", "truths")]
    return [*grader, "llmfs.course.grading.worker", "llmfs.course.exercises.verdict", *checks]


def test_judging_loads_no_widget_module() -> None:
    """Transitively, at run time: importing the grader, the sandbox worker or any exercise
    check, each in a fresh process that has imported nothing of llmfs, loads no
    ``llmfs.widgets`` module (a verdict never waits on, or depends on, drawing code)."""
    entries = judging_entry_points()
    assert "llmfs.course.exercise_checks.spec" in entries  # the grader's table of checks
    offenders = {
        m: loaded for m, loaded in widgets_loaded_by(PACKAGE_ROOT, *entries).items() if loaded
    }
    assert offenders == {}


def test_a_judging_module_that_loads_a_widget_is_reported(tmp_path: Path) -> None:
    # Through a module of its own package, at import: the source of the check shows nothing.
    root = make_package(
        tmp_path, {"check.py": "import pkg.helper\n", "helper.py": "import pkg.widgets.draw\n"}
    )
    (root / "widgets").mkdir()
    (root / "widgets" / "__init__.py").write_text("", encoding="utf-8")
    (root / "widgets" / "draw.py").write_text("", encoding="utf-8")
    assert widgets_loaded_by(root, "pkg.check", "pkg.helper") == {
        "pkg.check": ["pkg.widgets", "pkg.widgets.draw"],
        "pkg.helper": ["pkg.widgets", "pkg.widgets.draw"],
    }
    (root / "helper.py").write_text("", encoding="utf-8")
    assert widgets_loaded_by(root, "pkg.check") == {"pkg.check": []}


@pytest.mark.parametrize("layer", range(len(LAYERS)), ids=[name for name, _ in LAYERS])
def test_importing_a_layer_loads_nothing_above_it(layer: int) -> None:
    modules = PACKAGE.modules_by_layer().get(layer, [])
    assert modules, f"layer {layer} holds no module"
    problems = PACKAGE.loaded_above(layer, modules)
    assert problems == [], "\n".join(problems)


def test_the_layers_are_the_packages_modules_with_no_entry_twice() -> None:
    entries = [entry for _, group in LAYERS for entry in group]
    assert len(entries) == len(set(entries))
    modules = all_modules()
    assert [e for e in entries if e not in modules] == []


# -- each rule fails when broken ------------------------------------------------------------------


def make_package(tmp_path: Path, files: dict[str, str]) -> Path:
    """A package ``pkg`` under ``tmp_path`` with ``files`` (name -> source; ``__init__`` is
    added empty where missing)."""
    root = tmp_path / "pkg"
    root.mkdir(parents=True)
    (root / "__init__.py").write_text("", encoding="utf-8")
    for name, source in files.items():
        (root / name).write_text(source, encoding="utf-8")
    return root


#: ``pkg.low`` (and anything else in the package) below ``pkg.high``.
SMALL_LAYERS = (("low", ("pkg",)), ("high", ("pkg.high",)))


def small_rules(root: Path) -> Rules:
    return Rules(root, SMALL_LAYERS)


def test_a_module_is_in_the_layer_of_its_longest_entry() -> None:
    assert layer_index("pkg.low", SMALL_LAYERS) == 0
    assert layer_index("pkg.high", SMALL_LAYERS) == 1
    assert layer_index("pkg.high.deep", SMALL_LAYERS) == 1
    assert layer_index("pkg.higher", SMALL_LAYERS) == 0  # a name prefix is not a package
    assert layer_index("other", SMALL_LAYERS) is None
    assert layer_index("llmfs.gpt.new_module") == layer_index("llmfs.gpt")
    assert layer_index("llmfs.tensor.backends.metal.emulator") == layer_index(
        "llmfs.tensor.backends"
    )


def test_a_package_that_keeps_the_rules_has_no_problems(tmp_path: Path) -> None:
    root = make_package(
        tmp_path,
        {
            "low.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.high\n",
            "high.py": "from pkg import low\n\ndef f():\n    from . import low\n",
        },
    )
    rules = small_rules(root)
    assert rules.problems() == []
    for layer, modules in rules.modules_by_layer().items():
        assert rules.loaded_above(layer, modules) == []


def test_a_module_without_a_layer_is_reported(tmp_path: Path) -> None:
    root = make_package(tmp_path, {"low.py": "", "high.py": ""})
    rules = Rules(root, (("low", ("pkg.low",)), ("high", ("pkg.high.x",))))
    problems = rules.problems()
    assert [p.split(" ")[0] for p in problems] == ["pkg", "pkg.high"]
    assert all(" is in no layer: add its package or module to LAYERS" in p for p in problems)


def test_an_upward_module_level_import_is_reported(tmp_path: Path) -> None:
    root = make_package(tmp_path, {"low.py": "from pkg.high import thing\n", "high.py": ""})
    problems = small_rules(root).problems()
    assert len(problems) == 1
    assert problems[0].startswith(
        "pkg.low:1 (layer 0, low) imports pkg.high (layer 1, high) at module level"
    )


def test_an_upward_import_in_a_function_is_reported_whatever_its_comment(tmp_path: Path) -> None:
    low = "def f():\n    # imported on use, to avoid a cycle\n    import pkg.high  # on use\n"
    root = make_package(tmp_path, {"low.py": low, "high.py": ""})
    problems = small_rules(root).problems()
    assert len(problems) == 1 and "pkg.low:3" in problems[0] and "inside a function" in problems[0]


def test_loading_a_higher_layer_at_run_time_is_reported(tmp_path: Path) -> None:
    # A computed name: the source shows no import of pkg.high, the interpreter loads it.
    low = "import importlib\nimportlib.import_module('pkg.' + 'high')\n"
    root = make_package(tmp_path, {"low.py": low, "high.py": ""})
    rules = small_rules(root)
    assert rules.problems() == []
    assert rules.loaded_above(0, ["pkg.low"]) == [
        "importing layer 0 (low) loads pkg.high (layer 1, high)"
    ]
    # Through a module of its own layer, loaded at import: the same report.
    helper = make_package(
        tmp_path / "b", {"low.py": "import pkg.helper\n", "helper.py": "import pkg.high\n"}
    )
    (helper / "high.py").write_text("", encoding="utf-8")
    assert small_rules(helper).loaded_above(0, ["pkg.low"]) == [
        "importing layer 0 (low) loads pkg.high (layer 1, high)"
    ]


def test_importlib_and_dunder_import_names_are_imports(tmp_path: Path) -> None:
    low = (
        "import importlib\nfrom importlib import import_module\n"
        "def f():\n    return importlib.import_module('pkg.high')\n"
        "def g():\n    return import_module('.high', __package__)\n"
        "h = __import__('pkg.high')\n"
    )
    root = make_package(tmp_path, {"low.py": low, "high.py": ""})
    problems = small_rules(root).problems()
    assert [p.split(" ")[0] for p in problems] == ["pkg.low:4", "pkg.low:6", "pkg.low:7"]


def test_a_cycle_through_a_function_local_import_is_reported(tmp_path: Path) -> None:
    files = {"low.py": "import pkg.other\n", "other.py": "def f():\n    from pkg import low\n"}
    root = make_package(tmp_path, {**files, "high.py": ""})
    problems = small_rules(root).problems()
    assert problems == ["import cycle: pkg.low -> pkg.other -> pkg.low"]


def test_an_import_of_a_missing_module_is_reported(tmp_path: Path) -> None:
    root = make_package(tmp_path, {"low.py": "import pkg.gone\n", "high.py": ""})
    assert small_rules(root).problems() == [
        "pkg.low:1 imports pkg.gone, which is no module of the package"
    ]


def test_find_cycle_reports_a_closed_path_and_accepts_a_dag() -> None:
    assert find_cycle([("a", "b"), ("b", "c"), ("c", "a")]) == ["a", "b", "c", "a"]
    assert find_cycle([("a", "b"), ("b", "c"), ("a", "c")]) is None


def test_relative_imports_are_resolved() -> None:
    node = ast.parse("from ..errors import X").body[0]
    assert isinstance(node, ast.ImportFrom)
    assert _resolve("llmfs.tensor.backends.base", False, node) == "llmfs.tensor.errors"
    assert _resolve("llmfs.tensor.backends", True, node) == "llmfs.tensor.errors"
