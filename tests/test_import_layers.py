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
