"""Architecture rules the import contracts (pyproject.toml, lint-imports) do not cover.

- No import cycle between packages (the top-level packages and modules of src/cnnforge),
  imports inside functions included; the targets stand apart (the ``targets-apart`` contract).
- The floors point one way: no shared stage below the pipeline imports a target, and no stage
  branches on a target's name, its device class or the identity of a step (it asks the record
  it was handed: pipeline/targets.py, passes/target_rules.py).
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
    """The top-level package (or module) a module belongs to: ``cnnforge.passes``."""
    return ".".join(module.split(".")[:2])


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


#: The packages below the targets: none of them imports ``cnnforge.targets``.
BELOW_TARGETS = ("frontend", "passes", "quant", "sim", "analysis", "nn", "ir", "devices")


def test_no_stage_below_the_targets_imports_one() -> None:
    graph = grimp.build_graph("cnnforge", include_external_packages=False, cache_dir=None)
    found = []
    for package in BELOW_TARGETS:
        name = f"cnnforge.{package}"
        modules = {name} | (graph.find_descendants(name) if (PACKAGE / package).is_dir() else set())
        for module in sorted(modules):
            found += [
                f"{module} -> {imported}"
                for imported in sorted(graph.find_modules_directly_imported_by(module))
                if imported.startswith("cnnforge.targets")
            ]
    assert found == [], found


#: Where no code may branch on which target it serves: every package but the targets'.
SHARED = [p for p in sorted(PACKAGE.rglob("*.py")) if "targets" not in p.relative_to(PACKAGE).parts]


def _target_words() -> set[str]:
    """The --device names and aliases of the table, in upper case."""
    from cnnforge.api.targets import TARGETS

    return {n.upper() for t in TARGETS for n in (t.name, *t.aliases)}


def _target_classes() -> set[str]:
    """The names of the classes the target packages define (their device records, ...)."""
    names = set()
    for path in (PACKAGE / "targets").rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        names |= {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    return names


def _branches(tree: ast.AST, words: set[str], classes: set[str]) -> list[tuple[int, str]]:
    """(line, text) of the tests in ``tree`` that ask which target it is."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            names = [
                c.value
                for side in sides
                for c in ast.walk(side)
                if isinstance(c, ast.Constant) and isinstance(c.value, str)
            ]
            steps = [s for s in sides if isinstance(s, ast.Name) and s.id.startswith("step_")]
            if any(n.strip().upper() in words for n in names) or steps:
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "isinstance":
            kinds = {c.id for c in ast.walk(node.args[1]) if isinstance(c, ast.Name)}
            if kinds & classes:
                found.append((node.lineno, ast.unparse(node)))
    return found


def test_no_stage_branches_on_a_target() -> None:
    """The shared stages, the pipeline, the API and the CLI ask the target's record (its rules,
    recipe, ``plans``, ``option_flags``, ...), never "is this the MAX78000?", "is the device a
    Max7800xDevice?" or "is this step the firmware step?"."""
    words, classes = _target_words(), _target_classes()
    found = [
        f"{path.relative_to(PACKAGE)}:{line}: {text}"
        for path in SHARED
        for line, text in _branches(ast.parse(path.read_text(), str(path)), words, classes)
    ]
    assert found == [], found


def test_the_branch_finder_finds_branches() -> None:
    code = (
        "if device.name == 'MAX78000': pass\n"
        "if isinstance(device, Max7800xDevice): pass\n"
        "if any(step is step_firmware for _, step in steps): pass\n"
        "if target.plans == 'place': pass\n"
    )
    found = _branches(ast.parse(code), _target_words(), {"Max7800xDevice"})
    assert [line for line, _ in found] == [1, 2, 3]


#: The one module allowed to touch torch's private API, each use with its reason there.
PRIVATE_TORCH_ALLOWED = {"compute.py"}


def _private_torch(tree: ast.AST) -> list[int]:
    """Lines naming a private part of torch (``torch._C``, ``torch.utils._pytree``, ...)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("torch"):
            names = [*node.module.split("."), *(a.name for a in node.names)]
            if any(n.startswith("_") for n in names):
                found.append(node.lineno)
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and not (
            node.attr.startswith("__")
        ):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id == "torch":
                found.append(node.lineno)
    return found


def test_private_torch_api_lives_in_one_module() -> None:
    found = {
        rel: lines
        for path in sorted(PACKAGE.rglob("*.py"))
        if (rel := path.relative_to(PACKAGE).as_posix()) not in PRIVATE_TORCH_ALLOWED
        and (lines := _private_torch(ast.parse(path.read_text(), str(path))))
    }
    assert found == {}, found
