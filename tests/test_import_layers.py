"""The modules stand in layers: no module imports, at any depth of its own imports
(lazy ones and annotation-only ones included), a module that imports it back."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("experiments", "benchmarks", "jaxcnn")


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, known: set[str]) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        found |= {n for n in names if n in known}
    return found


def _graph() -> dict[str, set[str]]:
    files = {_module(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}
    known = set(files)
    graph = {m: _imports(p, known) - {m} for m, p in files.items()}
    for m in graph:  # a package's __init__ is not an import of its submodules' own
        graph[m] = {d for d in graph[m] if not m.startswith(d + ".")}
    return graph


def _reaches(graph: dict[str, set[str]], start: str, goal: str) -> bool:
    seen, todo = set(), [start]
    while todo:
        node = todo.pop()
        if node == goal:
            return True
        if node not in seen:
            seen.add(node)
            todo.extend(graph.get(node, ()))
    return False


@pytest.mark.parametrize(
    "first, second",
    [
        ("experiments.studies.devices", "experiments.studies.targets"),
        ("experiments.studies.base", "experiments.studies.targets"),
        ("experiments.report.figures", "experiments.report.views"),
        ("jaxcnn.formulation", "jaxcnn.onednn"),
    ],
)
def test_no_two_modules_import_each_other(first, second):
    graph = _graph()
    assert _reaches(graph, second, first) is False or _reaches(graph, first, second) is False
    # positive control: the walk does find a chain that exists
    assert _reaches(graph, "experiments.studies.targets", "experiments.studies.base")


# experiments/ in rooms, top floor first: an import may only point to a lower room (or
# within its own). The two doors, `python -m experiments.run` and `python -m
# experiments.report`, stand above every room; the library below them all.
ROOMS = (
    "experiments.cli",
    "experiments.report",
    "experiments.predict",
    "experiments.harness",
    "experiments.studies",
    "experiments.records",
    "jaxcnn",
)
DOORS = ("experiments.run", "experiments.report.__main__")


def _room(module: str) -> int | None:
    if module in DOORS:
        return -1
    floors = [i for i, room in enumerate(ROOMS) if module == room or module.startswith(room + ".")]
    return floors[0] if floors else None


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import from a room to a room above it, as 'importer -> imported'."""
    out = []
    for module, imported in sorted(graph.items()):
        floor = _room(module)
        for other in sorted(imported):
            other_floor = _room(other)
            if floor is not None and other_floor is not None and other_floor < floor:
                out.append(f"{module} -> {other}")
    return out


def test_every_experiments_module_is_in_a_room():
    loose = [m for m in _graph() if m.startswith("experiments.") and _room(m) is None]
    assert loose == [], f"modules outside the rooms {ROOMS}: {loose}"


def test_no_import_runs_back_up_a_floor():
    graph = _graph()
    assert upward_imports(graph) == []
    # positive control: a record-store import of the report is caught
    graph["experiments.records.store"] = {
        *graph["experiments.records.store"],
        "experiments.report.figures",
    }
    assert upward_imports(graph) == ["experiments.records.store -> experiments.report.figures"]


def test_the_library_imports_nothing_of_the_study():
    graph = _graph()
    assert [
        f"{m} -> {d}"
        for m in graph
        if m.startswith("jaxcnn")
        for d in graph[m]
        if d.startswith(("experiments", "benchmarks"))
    ] == []


def _outside_imports(source: str, package: str, inside: str) -> set[str]:
    """The jaxcnn modules outside `inside` that the module `package`.<name> with
    `source` imports, at any place in it (lazy, annotation-only, relative ones too)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's own package upwards
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            names = [f"{base}.{a.name}" for a in node.names] if base == "jaxcnn" else [base]
        else:
            continue
        found |= {
            n
            for n in names
            if (n == "jaxcnn" or n.startswith("jaxcnn."))
            and n != inside
            and not n.startswith(inside + ".")
        }
    return found


def test_perf_is_a_leaf_of_the_library():
    perf = ROOT / "jaxcnn" / "perf"
    files = sorted(perf.rglob("*.py"))
    assert len(files) >= 9  # the checker saw the package
    leaks = {
        str(p.relative_to(ROOT)): _outside_imports(p.read_text(), "jaxcnn.perf", "jaxcnn.perf")
        for p in files
    }
    assert {p: found for p, found in leaks.items() if found} == {}
    # positive control: a module of perf that reaches into the rest of jaxcnn, each way
    synthetic = (
        "import jaxcnn.devices\n"
        "from jaxcnn import host_loop\n"
        "from jaxcnn.perf import chips\n"
        "def f():\n"
        "    from .. import targets\n"
        "    from . import price\n"
    )
    assert _outside_imports(synthetic, "jaxcnn.perf", "jaxcnn.perf") == {
        "jaxcnn.devices",
        "jaxcnn.host_loop",
        "jaxcnn.targets",
    }
