"""Architecture rules the import contracts (pyproject.toml, lint-imports) do not cover.

- No import cycle between packages (the top-level packages and modules of src/cnnforge, each
  ``targets/<name>/`` counting as one package of its own), imports inside functions included.
- No import cycle between modules of src/cnnforge (grimp's graph, imports inside functions
  included). KNOWN_CYCLES lists today's cycles with the change that removes each; the test fails
  on any other cycle and on a listed one that is gone, so delete an entry with the fix.
- Stages are imported by ordinary ``import`` statements that readers and linters can follow:
  ``importlib.import_module`` / ``__import__`` only where a user names the module to load.
- Every folder of Python files is a regular package (``__init__.py``); grimp and import-linter do
  not see namespace packages, so the contracts would silently skip them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import grimp

import cnnforge
from support.paths import REPO

PACKAGE = Path(cnnforge.__file__).parent  # the sources grimp reads: the imported package

# Each cycle: the modules of one strongly connected component of the import graph.
KNOWN_CYCLES: dict[frozenset[str], str] = {}

# Files allowed to import a module by a computed name: the user's model file or module.
DYNAMIC_IMPORTS_ALLOWED = {"frontend/loading.py"}
KNOWN_DYNAMIC_IMPORTS: dict[str, str] = {}

KNOWN_NAMESPACE_PACKAGES: dict[str, str] = {}


def _cycles() -> set[frozenset[str]]:
    """The strongly connected components (more than one module) of cnnforge's import graph."""
    graph = grimp.build_graph("cnnforge", include_external_packages=False, cache_dir=None)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()

    def visit(root: str) -> None:  # iterative Tarjan: no recursion limit on deep chains
        work = [(root, iter(edges[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.add(frozenset(component))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return found


def test_no_new_import_cycles_and_no_stale_known_ones() -> None:
    found = _cycles()
    new = [sorted(c) for c in found - KNOWN_CYCLES.keys()]
    gone = [sorted(c) for c in KNOWN_CYCLES.keys() - found]
    assert not new, f"new import cycles: {new}"
    assert not gone, f"cycles that are gone (delete them from KNOWN_CYCLES): {gone}"


def _package(module: str) -> str:
    """The package a module belongs to: ``cnnforge.passes``, or ``cnnforge.targets.hls`` (every
    target is a package of its own; ``targets`` itself only groups them)."""
    parts = module.split(".")
    return ".".join(parts[:3] if len(parts) >= 3 and parts[1] == "targets" else parts[:2])


def _package_cycles() -> list[list[str]]:
    """Groups of packages that import one another in a circle (each with one import per edge)."""
    graph = grimp.build_graph("cnnforge", include_external_packages=False, cache_dir=None)
    edges: dict[str, dict[str, str]] = {}
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            a, b = _package(module), _package(imported)
            if a != b:
                edges.setdefault(a, {}).setdefault(b, f"{module} -> {imported}")

    def reach(start: str) -> set[str]:
        seen: set[str] = set()
        todo = [start]
        while todo:
            for nxt in edges.get(todo.pop(), {}):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    reached = {p: reach(p) for p in edges}
    groups = {frozenset({p} | {q for q in reached[p] if p in reached.get(q, ())}) for p in edges}
    return [
        sorted(edges[a][b] for a in group for b in group if b in edges.get(a, {}))
        for group in groups
        if len(group) > 1
    ]


def test_no_import_cycle_between_packages() -> None:
    """quant/ranges.py sat above sim and checkpoint I/O inside quant once: hidden in functions,
    such circles are still circles (grimp sees function-level imports)."""
    assert _package_cycles() == []


def _dynamic_imports(path: Path) -> list[int]:
    """Lines calling importlib.import_module or __import__."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call):
            f = node.func
            if (isinstance(f, ast.Attribute) and f.attr == "import_module") or (
                isinstance(f, ast.Name) and f.id in ("import_module", "__import__")
            ):
                lines.append(node.lineno)
    return lines


def test_stages_are_imported_by_name() -> None:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel not in DYNAMIC_IMPORTS_ALLOWED and (lines := _dynamic_imports(path)):
            found[rel] = lines
    assert set(found) == set(KNOWN_DYNAMIC_IMPORTS), (
        f"dynamic imports {found}; known (delete when fixed): {sorted(KNOWN_DYNAMIC_IMPORTS)}"
    )


def test_every_source_folder_is_a_package() -> None:
    folders = {p.parent for p in PACKAGE.rglob("*.py")}
    missing = {
        f.relative_to(PACKAGE).as_posix() for f in folders if not (f / "__init__.py").is_file()
    }
    assert missing == set(KNOWN_NAMESPACE_PACKAGES), (
        f"folders without __init__.py: {sorted(missing)}; known: {sorted(KNOWN_NAMESPACE_PACKAGES)}"
    )


def _cnnforge_imports(path: Path) -> list[tuple[int, str, str | None]]:
    """(line, module, name or None) of every ``cnnforge`` import in one file."""
    found: list[tuple[int, str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("cnnforge"):
            found += [(node.lineno, node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [
                (node.lineno, a.name, None) for a in node.names if a.name.startswith("cnnforge")
            ]
    return found


def test_benchmarks_import_what_exists() -> None:
    """The benchmarks are run by hand, not by the suite: a module or name they import that moved
    must fail here rather than at the next benchmark run."""
    import importlib

    missing = []
    for path in sorted((REPO / "benchmarks").glob("*.py")):
        for line, module, name in _cnnforge_imports(path):
            try:
                imported = importlib.import_module(module)
            except ImportError:
                missing.append(f"{path.name}:{line}: {module}")
                continue
            if name is not None and not hasattr(imported, name):
                try:
                    importlib.import_module(f"{module}.{name}")
                except ImportError:
                    missing.append(f"{path.name}:{line}: {module}.{name}")
    assert not missing, f"benchmarks import what is not there: {missing}"
