"""The package's shape: profan's packages in layers, each importing only from its own layer or
those below it; no import cycles between profan's modules nor between its packages; no private
name imported across packages; no module past ~600 lines.

Imports are read from the source (``ast``), function-local ones included (a local import that
only hides a cycle is still a cycle); imports under ``if TYPE_CHECKING:`` are left out (they
never run: they only name types for annotations, so a layer may name a type of a layer above
it there).  A "package" for the layer and private-name rules is a top-level unit of profan: a
subpackage (``profan.cost``, ``profan.report``, …) or a top-level module (``profan.units``).

Known offenders that another helper is fixing are listed with the owner as expected failures;
each has its own test id, so fixing one shows as XPASS until its entry is removed here.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "profan"
MAX_LINES = 600

# file (relative to the repository) -> why it may stay longer, or who is splitting it
LONG_FILES: dict[str, str] = {}

# Known violations being removed by their owner (issue 9): the modules -> owner and plan.
KNOWN_CYCLES: dict[frozenset[str], str] = {
}  # fmt: skip
KNOWN_PRIVATE_IMPORTS: dict[tuple[str, str], str] = {}

# profan's packages (top-level units, ``unit_of``) from the bottom up.  A unit imports only
# units of its own layer or of layers below it, deferred (function-local) imports included:
# data flows one way, from the inputs (HLO, traces) through the model (cost, roofline) to what
# users read (reports) and the commands.  Within a layer, units may import one another (no
# cycle: ``test_no_cycle_between_packages``).  Every unit has a layer: a new package says
# where it sits by being added here.
LAYERS: list[tuple[str, ...]] = [
    # base: no profan domain type; anything may use them
    ("errors", "version", "lazy", "paths", "units", "escape", "arrays", "beside", "gunzip",
     "inputs", "tomlschema", "outputs"),
    ("cache",),  # the store: keys, bytes, entries, trust, eviction; each package's codec calls it
    ("hlo",),
    ("chips", "cost"),
    ("attribute",),
    ("sharding",),
    ("trace", "xprof"),
    ("roofline",),
    ("memory",),
    ("report",),
    ("whatif",),
    ("export", "capture"),
    ("api",),
    ("commands", "cli", "pytest_plugin", "__main__", ""),  # "": profan's own __init__
]  # fmt: skip

# Inside ``report``, the same rule one level down (``report_part``): the model and what formats
# it, then the rules (read the model), the analysis that builds a report (runs the rules), the
# checks on built reports (budgets, baselines, diffs), and the renderers (read all of them).
REPORT_LAYERS: list[tuple[str, ...]] = [
    ("", "model", "slices", "format", "keys", "stored"),  # "": report's own __init__
    ("rules",),
    ("analysis",),
    ("check",),
    ("render",),
]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


MODULES = _modules()


def unit_of(module: str) -> str:
    """``profan.cost.flops`` -> ``profan.cost``; ``profan.roofline`` -> ``profan.roofline``."""
    return ".".join(module.split(".")[:2])


@dataclass(frozen=True)
class Import:
    importer: str
    target: str  # a profan module
    name: str | None  # the name imported from it (``from target import name``)
    line: int


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node except those under ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def _resolve(importer: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = importer.split(".")
    if MODULES[importer].name != "__init__.py":
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(module: str) -> list[Import]:
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    found: list[Import] = []
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MODULES:
                    found.append(Import(module, alias.name, None, node.lineno))
        elif isinstance(node, ast.ImportFrom):
            source = _resolve(module, node)
            if source not in MODULES:
                continue
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                if submodule in MODULES:  # ``from profan.report import rules``
                    found.append(Import(module, submodule, None, node.lineno))
                else:
                    found.append(Import(module, source, alias.name, node.lineno))
    return found


ALL_IMPORTS = [imp for module in MODULES for imp in imports_of(module)]


def import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for imp in ALL_IMPORTS:
        if imp.target != imp.importer:
            graph[imp.importer].add(imp.target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        # iterative depth-first search (deep import chains must not hit the recursion limit)
        work = [(node, iter(sorted(graph[node])))]
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        while work:
            current, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[current] = min(low[current], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[current])
            if low[current] == index[current]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == current:
                        break
                if len(component) > 1:
                    found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def layer_of(unit: str) -> int | None:
    """The index in ``LAYERS`` of a unit (``profan.cost`` -> 3), None when it has none."""
    name = unit.removeprefix("profan").removeprefix(".")
    return next((i for i, layer in enumerate(LAYERS) if name in layer), None)


def upward_imports(imports: list[Import]) -> list[Import]:
    """Imports of a unit from a unit of a higher layer (units without a layer left out)."""
    out = []
    for imp in imports:
        low, high = layer_of(unit_of(imp.target)), layer_of(unit_of(imp.importer))
        if low is not None and high is not None and low > high:
            out.append(imp)
    return out


def unit_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {unit_of(m): set() for m in MODULES}
    for imp in ALL_IMPORTS:
        if unit_of(imp.target) != unit_of(imp.importer):
            graph[unit_of(imp.importer)].add(unit_of(imp.target))
    return graph


def private_imports() -> list[Import]:
    """``from profan.x import _name`` (or ``import profan.x._mod``) across top-level units."""
    out = []
    for imp in ALL_IMPORTS:
        if unit_of(imp.importer) == unit_of(imp.target):
            continue
        private_name = (
            imp.name is not None and imp.name.startswith("_") and not imp.name.endswith("__")
        )
        private_module = any(part.startswith("_") and part != "__init__" for part in
                             imp.target.split(".")[2:])  # fmt: skip
        if private_name or private_module:
            out.append(imp)
    return out


def report_part(module: str) -> str | None:
    """``profan.report.render.html.page`` -> ``render``; ``profan.report`` -> ``""``; None
    outside ``profan.report``."""
    parts = module.split(".")
    if parts[:2] != ["profan", "report"]:
        return None
    return parts[2] if len(parts) > 2 else ""


def report_layer_of(part: str) -> int | None:
    return next((i for i, layer in enumerate(REPORT_LAYERS) if part in layer), None)


def upward_report_imports(imports: list[Import]) -> list[Import]:
    """Imports inside ``profan.report`` of a part from a part of a higher ``REPORT_LAYERS``
    layer (parts without a layer left out; ``test_every_report_part_has_one_layer``)."""
    out = []
    for imp in imports:
        low_part, high_part = report_part(imp.target), report_part(imp.importer)
        if low_part is None or high_part is None:
            continue
        low, high = report_layer_of(low_part), report_layer_of(high_part)
        if low is not None and high is not None and low > high:
            out.append(imp)
    return out


# -------------------------------------------------------------------------------- the checks


def test_the_checks_see_every_module_and_real_imports() -> None:
    """The analysis itself: it finds profan's modules and edges that are known to exist."""
    assert {"profan.report.analysis.build", "profan.report.model", "profan.cli"} <= set(MODULES)
    edges = {(imp.importer, imp.target) for imp in ALL_IMPORTS}
    assert (
        "profan.report.analysis.build",
        "profan.report.rules.catalogue",
    ) in edges  # `from profan.report import rules`
    assert ("profan.report.rules.catalogue", "profan.report.model") in edges
    assert ("profan.report.model", "profan.report.rules.catalogue") not in edges


def test_cycle_finder_on_a_small_graph() -> None:
    """Tarjan's components on a hand-made graph: a→b→c→a and e⇄f are cycles; d→a, g are not."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"f"}, "f": {"e"}, "g": set()}
    assert cycles(graph) == [["a", "b", "c"], ["e", "f"]]


def _cycle_params() -> list:
    params = []
    for cycle in cycles(import_graph()):
        owner = KNOWN_CYCLES.get(frozenset(cycle))
        marks = [pytest.mark.xfail(reason=owner, strict=False)] if owner else []
        params.append(pytest.param(cycle, marks=marks, id=" ".join(cycle)))
    return params or [pytest.param(None, id="none")]


@pytest.mark.parametrize("cycle", _cycle_params())
def test_no_import_cycle(cycle: list[str] | None) -> None:
    assert cycle is None, f"import cycle between {', '.join(cycle)}"


def test_every_package_has_one_layer() -> None:
    units = {unit_of(m) for m in MODULES}
    listed = [name for layer in LAYERS for name in layer]
    assert len(listed) == len(set(listed)), "a unit listed in two layers"
    assert not [u for u in sorted(units) if layer_of(u) is None], "units without a layer"
    known = {("profan." + name).rstrip(".") for name in listed}
    assert not known - units, f"stale LAYERS entries: {sorted(known - units)}"


def test_layer_check_on_planted_imports() -> None:
    """The check itself: an import from a higher layer is reported, deferred ones included;
    one from the same or a lower layer is not."""
    planted = [
        Import("profan.memory.render", "profan.report.format", "percent", 1),  # memory < report
        Import("profan.cache.store", "profan.hlo.model", "Module", 1),  # cache < hlo
        Import(
            "profan.report.analysis.build", "profan.memory.model", "MemoryReport", 1
        ),  # downward
        Import("profan.cost.flops", "profan.chips.peaks", None, 1),  # same layer
    ]
    assert upward_imports(planted) == planted[:2]
    assert layer_of("profan") == len(LAYERS) - 1 and layer_of("profan.nothing") is None


def _upward_params() -> list:
    return [
        pytest.param(imp, id=f"{imp.importer}:{imp.target}") for imp in upward_imports(ALL_IMPORTS)
    ] or [pytest.param(None, id="none")]


@pytest.mark.parametrize("imp", _upward_params())
def test_no_upward_import_between_packages(imp: Import | None) -> None:
    assert imp is None, (
        f"{MODULES[imp.importer].relative_to(PACKAGE.parent)}:{imp.line} imports "
        f"{imp.target}{'.' + imp.name if imp.name else ''}, a layer above "
        f"{unit_of(imp.importer)} (tests/test_architecture.py LAYERS): move what both need "
        "down, or hand it in from above"
    )


def test_no_cycle_between_packages() -> None:
    found = cycles(unit_graph())
    assert not found, f"import cycle between packages: {'; '.join(map(', '.join, found))}"


def _private_params() -> list:
    params = []
    for imp in private_imports():
        owner = KNOWN_PRIVATE_IMPORTS.get((imp.importer, f"{imp.target}.{imp.name}"))
        marks = [pytest.mark.xfail(reason=owner, strict=False)] if owner else []
        params.append(
            pytest.param(imp, marks=marks, id=f"{imp.importer}:{imp.target}.{imp.name or ''}")
        )
    return params or [pytest.param(None, id="none")]


@pytest.mark.parametrize("imp", _private_params())
def test_no_private_import_across_packages(imp: Import | None) -> None:
    assert imp is None, (
        f"{MODULES[imp.importer].relative_to(PACKAGE.parent)}:{imp.line} imports the private "
        f"{imp.name or imp.target} from {imp.target} (another package): make it public there"
    )


def _length_params() -> list:
    params = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = str(path.relative_to(PACKAGE.parent))
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines <= MAX_LINES:
            continue
        reason = LONG_FILES.get(relative)
        marks = [pytest.mark.xfail(reason=reason, strict=False)] if reason else []
        params.append(pytest.param(relative, lines, marks=marks, id=relative))
    return params or [pytest.param(None, 0, id="none")]


@pytest.mark.parametrize(("path", "lines"), _length_params())
def test_no_module_past_600_lines(path: str | None, lines: int) -> None:
    assert path is None, f"{path} has {lines} lines (> {MAX_LINES}): split it by idea"


def test_long_file_exceptions_are_still_needed() -> None:
    """An exception for a file that no longer exists is stale: remove it."""
    for relative in LONG_FILES:
        assert (PACKAGE.parent / relative).is_file(), f"stale LONG_FILES entry {relative}"


def test_every_report_part_has_one_layer() -> None:
    parts = {report_part(m) for m in MODULES} - {None}
    listed = [name for layer in REPORT_LAYERS for name in layer]
    assert len(listed) == len(set(listed)), "a part listed in two layers"
    assert not [p for p in sorted(parts) if report_layer_of(p) is None], "parts without a layer"
    assert not set(listed) - parts, f"stale REPORT_LAYERS entries: {sorted(set(listed) - parts)}"


def test_report_layer_check_on_planted_imports() -> None:
    """The check itself: a rule importing a renderer, or the model a rule, is reported (a
    deferred import would be too: they are in ``ALL_IMPORTS``); a renderer importing the
    analysis or the model is not, nor an import from outside ``report``."""
    planted = [
        Import("profan.report.rules.catalogue", "profan.report.render.terminal", None, 1),
        Import("profan.report.model", "profan.report.rules.savings", "ranked", 1),
        Import("profan.report.check.budget", "profan.report.render.format", None, 1),
        Import("profan.report.render.terminal", "profan.report.analysis.memory", None, 1),
        Import("profan.report.check.diff", "profan.report.model", "Report", 1),
        Import("profan.api", "profan.report.render.terminal", None, 1),
    ]
    assert upward_report_imports(planted) == planted[:3]


def _upward_report_params() -> list:
    return [
        pytest.param(imp, id=f"{imp.importer}:{imp.target}")
        for imp in upward_report_imports(ALL_IMPORTS)
    ] or [pytest.param(None, id="none")]


@pytest.mark.parametrize("imp", _upward_report_params())
def test_no_upward_import_inside_report(imp: Import | None) -> None:
    assert imp is None, (
        f"{MODULES[imp.importer].relative_to(PACKAGE.parent)}:{imp.line} imports "
        f"{imp.target}{'.' + imp.name if imp.name else ''}, a part of profan.report above "
        f"{report_part(imp.importer)!r} (tests/test_architecture.py REPORT_LAYERS)"
    )
