"""The package's imports run one way.

The layers, lowest first: errors <- layout <- views <- backends <- ops <- einsum <- gpt <- course
engine (CourseError, the manifest, the attempts log, the exercise engine) <- widgets <- course
tools (build, start, grading, the exercise checks, the command line). So the tensor library never
reaches into the course, and the course and the widgets never import each other both ways: the
widgets read the manifest and write the attempts log, the course's tools use the widgets.

The rules, each checked on the package below and shown to fail on a small package made for it:

* every module has an explicit layer in :data:`LAYERS` (a new module fails until it gets one);
* every import points to its own layer or below: module-level imports, imports inside functions
  and ``importlib.import_module("...")`` / ``__import__("...")`` calls with a literal name alike.
  The only exceptions are the function-local imports named in :data:`INVERSIONS`, each with its
  reason; a comment beside an import excuses nothing;
* the imports form no cycle once the inversions are set aside (the inversions close the one
  cycle the core has on purpose: the tensor types route ``+`` and ``materialize`` to the ops
  built on them);
* every inversion is still an import of the package, inside a function, and runs upward (a stale
  or needless entry is removed, so the list stays short).

The graph is read from the source with :mod:`ast` (nothing is imported). ``from package import
name`` counts as an import of the submodule ``package.name`` when that submodule exists, else of
``package`` itself; a submodule's implicit import of its parent packages is not an edge (Python
runs ``llmfs/tensor/__init__.py`` first, but the facade's imports are checked on their own).
Imports under ``if TYPE_CHECKING:`` are not edges: they never run.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parent.parent / "llmfs"

#: The layers, lowest first: a module's layer is its index here.
LAYER_NAMES = (
    "errors",
    "layout",
    "views",
    "backends",
    "ops",
    "einsum",
    "gpt",
    "course engine",
    "widgets",
    "course tools",
)

#: Every module of the package, its layer and that layer's name (checked against
#: :data:`LAYER_NAMES`). A module may import modules of its own layer or below.
LAYERS: list[tuple[str, int, str]] = [
    ("llmfs.tensor.error_base", 0, "errors"),  # how an error class is declared
    ("llmfs.tensor.errors", 0, "errors"),
    ("llmfs.tensor.checks", 1, "layout"),  # the input checks and limits the algebra stands on
    ("llmfs.tensor.layout", 1, "layout"),
    ("llmfs.tensor.dtypes", 1, "layout"),
    ("llmfs.tensor.tensor", 2, "views"),
    ("llmfs.tensor.view", 2, "views"),
    ("llmfs.tensor.derived", 2, "views"),  # the views' derived-layout cache
    ("llmfs.tensor.grad_methods", 2, "views"),  # the autograd surface of Tensor and TensorView
    ("llmfs.tensor.traversal", 2, "views"),
    ("llmfs.tensor.strided", 2, "views"),
    ("llmfs.tensor.operators", 2, "views"),
    # The tape (grad mode, the recording decorator): below the views and ops it decorates.
    ("llmfs.tensor.tape", 2, "views"),
    ("llmfs.tensor.backends", 3, "backends"),
    ("llmfs.tensor.backends.base", 3, "backends"),
    ("llmfs.tensor.backends.numpy_backend", 3, "backends"),
    ("llmfs.tensor.backends.numpy_copies", 3, "backends"),  # the numpy backend's fast copies
    ("llmfs.tensor.backends.threads", 3, "backends"),  # the threads those copies split over
    ("llmfs.tensor.backends.reference", 3, "backends"),
    ("llmfs.tensor.backends.metal", 3, "backends"),
    ("llmfs.tensor.backends.metal.backend", 3, "backends"),
    ("llmfs.tensor.backends.metal.device", 3, "backends"),
    ("llmfs.tensor.backends.metal.emulator", 3, "backends"),
    ("llmfs.tensor.backends.metal.errors", 3, "backends"),
    ("llmfs.tensor.backends.metal.lint", 3, "backends"),
    ("llmfs.tensor.backends.metal.msl", 3, "backends"),
    ("llmfs.tensor.backends.metal.ops", 3, "backends"),
    ("llmfs.tensor.backends.metal.toolchain", 3, "backends"),
    ("llmfs.tensor.ops", 4, "ops"),
    ("llmfs.tensor.dispatch", 4, "ops"),  # the ops' cached dispatch decisions
    ("llmfs.tensor.writes", 4, "ops"),  # copyto casts with the ops' dtype rules
    ("llmfs.tensor.functional", 4, "ops"),  # layers as single ops (gelu, layer_norm, softmax)
    # einsum's plans are built from the ops; autograd's backward rules run ops and einsums.
    ("llmfs.tensor.einsum", 5, "einsum"),
    ("llmfs.tensor.einsum.contraction", 5, "einsum"),
    ("llmfs.tensor.einsum.descriptor", 5, "einsum"),
    ("llmfs.tensor.einsum.labels", 5, "einsum"),
    ("llmfs.tensor.einsum.output", 5, "einsum"),
    ("llmfs.tensor.einsum.parse", 5, "einsum"),
    ("llmfs.tensor.einsum.plan", 5, "einsum"),
    ("llmfs.tensor.autograd", 5, "einsum"),
    ("llmfs.tensor", 5, "einsum"),  # the package facade re-exports every layer below
    # The capstone model, on the tensor library and on NumPy. Its figure and its training
    # command draw with the widgets, so they sit higher (below).
    ("llmfs.gpt", 6, "gpt"),
    ("llmfs.gpt.__main__", 6, "gpt"),
    ("llmfs.gpt.checkpoint", 6, "gpt"),
    ("llmfs.gpt.errors", 6, "gpt"),
    ("llmfs.gpt.experiment", 6, "gpt"),
    ("llmfs.gpt.evaluate", 6, "gpt"),
    ("llmfs.gpt.model", 6, "gpt"),
    ("llmfs.gpt.reference", 6, "gpt"),
    ("llmfs.gpt.task", 6, "gpt"),
    ("llmfs.gpt.sampling", 6, "gpt"),  # generation's arguments and token choice
    ("llmfs.gpt.kv_cache", 6, "gpt"),  # the KV cache owners of tensor_model.generate
    ("llmfs.gpt.tensor_model", 6, "gpt"),
    ("llmfs.gpt.tokenizer", 6, "gpt"),
    ("llmfs.gpt.tensor_train", 6, "gpt"),
    ("llmfs.gpt.text_model", 6, "gpt"),  # the text model: corpus, tokenizer, training, loader
    # CourseError (the package's __init__), where the course lives, the manifest, the attempts
    # log and the exercise engine: the widgets read and write them, so they sit below the widgets.
    ("llmfs.course", 7, "course engine"),
    ("llmfs.course.paths", 7, "course engine"),
    ("llmfs.course.manifest", 7, "course engine"),
    ("llmfs.course.attempts", 7, "course engine"),
    ("llmfs.course.exercises", 7, "course engine"),
    ("llmfs.course.exercises.api", 7, "course engine"),
    ("llmfs.course.exercises.compare", 7, "course engine"),
    ("llmfs.course.exercises.describe", 7, "course engine"),
    ("llmfs.course.exercises.detectors", 7, "course engine"),
    ("llmfs.course.exercises.entries", 7, "course engine"),
    ("llmfs.course.exercises.feedback", 7, "course engine"),
    ("llmfs.course.exercises.hints", 7, "course engine"),
    ("llmfs.course.exercises.judge", 7, "course engine"),
    ("llmfs.course.exercises.misconceptions", 7, "course engine"),
    ("llmfs.course.exercises.op_detectors", 7, "course engine"),
    ("llmfs.course.exercises.record", 7, "course engine"),
    ("llmfs.course.exercises.rows", 7, "course engine"),
    ("llmfs.course.exercises.reveals", 7, "course engine"),
    ("llmfs.course.exercises.run", 7, "course engine"),
    ("llmfs.course.exercises.state", 7, "course engine"),
    ("llmfs.widgets", 8, "widgets"),
    ("llmfs.widgets.comparison", 8, "widgets"),
    ("llmfs.widgets.diagram", 8, "widgets"),
    ("llmfs.widgets.examples", 8, "widgets"),
    ("llmfs.widgets.html", 8, "widgets"),
    ("llmfs.widgets.live", 8, "widgets"),
    ("llmfs.widgets.model", 8, "widgets"),
    ("llmfs.widgets.plot", 8, "widgets"),
    ("llmfs.widgets.predict", 8, "widgets"),
    ("llmfs.widgets.progress", 8, "widgets"),  # a progress bar with the time left
    ("llmfs.widgets.rows", 8, "widgets"),
    ("llmfs.widgets.storage", 8, "widgets"),
    ("llmfs.widgets.style", 8, "widgets"),
    ("llmfs.widgets.svg", 8, "widgets"),
    ("llmfs.widgets.text", 8, "widgets"),
    # The capstone's loss figure is drawn with the widgets' plot helpers (gpt/plot.py imports
    # widgets/plot.py), so it is a widget whatever its package.
    ("llmfs.gpt.plot", 8, "widgets"),
    ("llmfs.__main__", 9, "course tools"),
    ("llmfs", 9, "course tools"),  # the root holds only __version__, read by the tools
    ("llmfs.cli", 9, "course tools"),
    ("llmfs.demo", 9, "course tools"),
    ("llmfs.course.build", 9, "course tools"),
    ("llmfs.course.names_table", 9, "course tools"),
    ("llmfs.course.notebooks", 9, "course tools"),
    ("llmfs.course.start", 9, "course tools"),
    # The exercise checks report with the widgets' tables and verdicts (report.py and spec.py
    # import widgets), and the grader runs them: they are course tools, above the widgets.
    ("llmfs.course.exercise_checks", 9, "course tools"),
    ("llmfs.course.exercise_checks.attention", 9, "course tools"),
    ("llmfs.course.exercise_checks.broadcasting", 9, "course tools"),
    ("llmfs.course.exercise_checks.cases", 9, "course tools"),
    ("llmfs.course.exercise_checks.outcomes", 9, "course tools"),
    ("llmfs.course.exercise_checks.reshape", 9, "course tools"),
    ("llmfs.course.exercise_checks.strides", 9, "course tools"),
    ("llmfs.course.exercise_checks.views", 9, "course tools"),
    ("llmfs.course.exercise_checks.einsum", 9, "course tools"),
    ("llmfs.course.exercise_checks.gpt", 9, "course tools"),
    ("llmfs.course.exercise_checks.gradients", 9, "course tools"),
    ("llmfs.course.exercise_checks.kernels", 9, "course tools"),
    ("llmfs.course.exercise_checks.report", 9, "course tools"),
    ("llmfs.course.exercise_checks.shortcuts", 9, "course tools"),
    ("llmfs.course.exercise_checks.spec", 9, "course tools"),
    ("llmfs.course.exercise_checks.training", 9, "course tools"),
    ("llmfs.course.exercise_checks.generation", 9, "course tools"),
    ("llmfs.course.exercise_checks.cooperate", 9, "course tools"),
    ("llmfs.course.grading", 9, "course tools"),
    ("llmfs.course.grading.channel", 9, "course tools"),
    ("llmfs.course.grading.collect", 9, "course tools"),
    ("llmfs.course.grading.extract", 9, "course tools"),
    ("llmfs.course.grading.isolation", 9, "course tools"),
    ("llmfs.course.grading.grade", 9, "course tools"),
    ("llmfs.course.grading.gradebook", 9, "course tools"),
    ("llmfs.course.grading.kernel", 9, "course tools"),
    ("llmfs.course.grading.key", 9, "course tools"),
    ("llmfs.course.grading.limits", 9, "course tools"),
    ("llmfs.course.grading.reports", 9, "course tools"),
    ("llmfs.course.grading.runner", 9, "course tools"),
    ("llmfs.course.grading.sandbox", 9, "course tools"),
    ("llmfs.course.grading.score", 9, "course tools"),
    ("llmfs.course.grading.selfcheck", 9, "course tools"),
    ("llmfs.course.grading.worker", 9, "course tools"),
    # `llmfs figures` regenerates every committed figure, the capstone's loss curve (gpt.plot)
    # among them: a command, above the widgets it draws with.
    ("llmfs.widgets.figures", 9, "course tools"),
    # `python -m llmfs.gpt.train` trains the capstone and draws its loss figure (gpt.plot).
    ("llmfs.gpt.train", 9, "course tools"),
]

#: The imports that run up the layers: (importer, imported, why). Each must stay inside a
#: function (it runs on first use, once both modules are loaded); nothing else may run upward.
INVERSIONS: list[tuple[str, str, str]] = [
    (
        "llmfs.tensor.operators",
        "llmfs.tensor.ops",
        "a + b, a < b and the other operators of a tensor or view are the ops' functions",
    ),
    (
        "llmfs.tensor.view",
        "llmfs.tensor.ops",
        "materialize(), to_numpy(), tolist() and integer-array indexing copy with the backend "
        "that ops chooses",
    ),
    (
        "llmfs.tensor.grad_methods",
        "llmfs.tensor.autograd",
        "t.backward() runs the engine, whose rules compute with the ops built on the views",
    ),
    (
        "llmfs.tensor.ops",
        "llmfs.tensor.einsum.plan",
        "ops.einsum runs an einsum plan, and the plans compute with the ops",
    ),
]


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
    """A package and what its imports must obey."""

    root: Path
    layers: Sequence[tuple[str, int, str]]
    layer_names: Sequence[str]
    inversions: Sequence[tuple[str, str, str]]

    def layer_of(self) -> dict[str, int]:
        return {module: layer for module, layer, _ in self.layers}

    def missing_layers(self) -> list[str]:
        known = self.layer_of()
        problems = [
            f"{name} has no layer: add it to LAYERS in {__file__}, at the layer of what it "
            "imports and of what imports it"
            for name in all_modules(self.root)
            if name not in known
        ]
        seen: set[str] = set()
        for module, layer, label in self.layers:
            if module in seen:
                problems.append(f"LAYERS lists {module} twice: keep one entry")
            seen.add(module)
            if not 0 <= layer < len(self.layer_names) or self.layer_names[layer] != label:
                problems.append(
                    f"LAYERS gives {module} layer {layer} named {label!r}: the layers "
                    f"are {list(enumerate(self.layer_names))}"
                )
        return problems

    def upward_imports(self, edges: Sequence[Import]) -> list[str]:
        known = self.layer_of()
        modules = all_modules(self.root)
        allowed = {(a, b) for a, b, _ in self.inversions}
        problems = []
        for edge in edges:
            mine, theirs = known.get(edge.importer), known.get(edge.imported)
            if edge.imported not in modules:
                problems.append(
                    f"{edge.importer}:{edge.line} imports {edge.imported}, which "
                    "is no module of the package"
                )
            if mine is None or theirs is None or theirs <= mine:
                continue
            if not edge.module_level and (edge.importer, edge.imported) in allowed:
                continue
            where = "at module level" if edge.module_level else "inside a function"
            problems.append(
                f"{edge.importer}:{edge.line} (layer {mine}, {self.layer_names[mine]}) imports "
                f"{edge.imported} (layer {theirs}, {self.layer_names[theirs]}) {where}: imports "
                f"run {' <- '.join(self.layer_names)}; move the code, or name the inversion and "
                "its reason in INVERSIONS if it must run upward"
            )
        return problems

    def cycles(self, edges: Sequence[Import]) -> list[str]:
        allowed = {(a, b) for a, b, _ in self.inversions}
        pairs = [(e.importer, e.imported) for e in edges if (e.importer, e.imported) not in allowed]
        cycle = find_cycle(pairs)
        return [] if cycle is None else ["import cycle: " + " -> ".join(cycle)]

    def stale_inversions(self, edges: Sequence[Import]) -> list[str]:
        known = self.layer_of()
        local = {(e.importer, e.imported) for e in edges if not e.module_level}
        problems = []
        for importer, imported, _ in self.inversions:
            if (importer, imported) not in local:
                problems.append(
                    f"INVERSIONS names {importer} -> {imported}, which is no "
                    "function-local import: remove the entry"
                )
            elif known.get(imported, -1) <= known.get(importer, -1):
                problems.append(
                    f"INVERSIONS names {importer} -> {imported}, which does not run "
                    "upward: remove the entry"
                )
        return problems

    def problems(self) -> list[str]:
        edges = import_graph(self.root)
        return [
            *self.missing_layers(),
            *self.upward_imports(edges),
            *self.cycles(edges),
            *self.stale_inversions(edges),
        ]


PACKAGE = Rules(PACKAGE_ROOT, LAYERS, LAYER_NAMES, INVERSIONS)


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


def test_imports_form_no_cycle_but_the_named_inversions() -> None:
    problems = PACKAGE.cycles(package_graph())
    assert problems == [], "\n".join(problems)


def test_every_inversion_is_a_function_local_import_running_upward() -> None:
    problems = PACKAGE.stale_inversions(package_graph())
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


#: ``pkg.low`` below ``pkg.high``; the package's __init__ at the bottom (it is empty).
SMALL_LAYERS = [("pkg", 0, "low"), ("pkg.low", 0, "low"), ("pkg.high", 1, "high")]
SMALL_NAMES = ("low", "high")


def small_rules(root: Path, *inversions: tuple[str, str, str]) -> Rules:
    return Rules(root, SMALL_LAYERS, SMALL_NAMES, inversions)


def test_a_package_that_keeps_the_rules_has_no_problems(tmp_path: Path) -> None:
    root = make_package(
        tmp_path,
        {
            "low.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.high\n",
            "high.py": "from pkg import low\n\ndef f():\n    from . import low\n",
        },
    )
    assert small_rules(root).problems() == []


def test_a_module_without_a_layer_is_reported(tmp_path: Path) -> None:
    root = make_package(tmp_path, {"low.py": "", "high.py": "", "new.py": "import pkg.low\n"})
    problems = small_rules(root).problems()
    assert len(problems) == 1 and problems[0].startswith("pkg.new has no layer: add it to LAYERS")


def test_a_layer_named_wrongly_or_twice_is_reported(tmp_path: Path) -> None:
    root = make_package(tmp_path, {"low.py": "", "high.py": ""})
    rules = Rules(root, [*SMALL_LAYERS[:2], ("pkg.high", 1, "low")], SMALL_NAMES, ())
    assert rules.problems() == [
        "LAYERS gives pkg.high layer 1 named 'low': the layers are [(0, 'low'), (1, 'high')]"
    ]
    twice = Rules(root, [*SMALL_LAYERS, ("pkg.low", 0, "low")], SMALL_NAMES, ())
    assert twice.problems() == ["LAYERS lists pkg.low twice: keep one entry"]


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


def test_a_named_inversion_is_allowed_in_a_function_only(tmp_path: Path) -> None:
    inversion = ("pkg.low", "pkg.high", "the reason")
    local = make_package(tmp_path / "a", {"low.py": "def f():\n    import pkg.high\n"})
    (local / "high.py").write_text("", encoding="utf-8")
    assert small_rules(local, inversion).problems() == []
    module_level = make_package(tmp_path / "b", {"low.py": "import pkg.high\n", "high.py": ""})
    problems = small_rules(module_level, inversion).problems()
    assert [p.split(" ")[0] for p in problems] == ["pkg.low:1", "INVERSIONS"]
    assert "is no function-local import: remove the entry" in problems[1]


def test_an_inversion_that_does_not_run_upward_is_reported(tmp_path: Path) -> None:
    root = make_package(tmp_path, {"low.py": "", "high.py": "def f():\n    import pkg.low\n"})
    problems = small_rules(root, ("pkg.high", "pkg.low", "no need")).problems()
    assert problems == [
        "INVERSIONS names pkg.high -> pkg.low, which does not run upward: remove the entry"
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
    layers = [*SMALL_LAYERS, ("pkg.other", 0, "low")]
    problems = Rules(root, layers, SMALL_NAMES, ()).problems()
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
