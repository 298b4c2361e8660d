"""Rules for the test suite itself.

Test modules never import one another: a builder two modules share lives in tests/support/
(importing a test module also collects its fixtures and tests twice, and hides which helpers
are shared). tests/support/ never imports a test module either, and holds no tests (pytest
would not collect them there). No test skips because a package is missing. Golden files
cannot pass by comparing with what the same run wrote (tests/support/golden.py).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from support.golden import REGEN_ENV, check_files, check_text
from support.paths import TESTS

#: The folders that hold data, not Python the suite runs.
DATA_DIRS = ("golden", "golden_c", "golden_hls")


def _imported_modules(path: Path) -> set[str]:
    """The top-level names of every module ``path`` imports (at any depth of the file)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def _python_files() -> list[Path]:
    """Every Python file of the suite: the stage folders, conftest and tests/support/."""
    return sorted(
        p for p in TESTS.rglob("*.py") if p.relative_to(TESTS).parts[0] not in DATA_DIRS
    )


def _test_modules() -> list[Path]:
    return [p for p in _python_files() if p.name.startswith("test_")]


def test_no_module_imports_a_test_module_or_conftest() -> None:
    test_modules = {p.stem for p in _test_modules()} | {"conftest", "tests"}
    found = {
        str(path.relative_to(TESTS)): sorted(_imported_modules(path) & test_modules)
        for path in _python_files()
    }
    assert {k: v for k, v in found.items() if v} == {}


def test_no_test_skips_for_a_missing_package() -> None:
    """Every package the tests use is a declared dependency (pyproject.toml): a missing or broken
    one must fail, not make its tests vanish (no ``pytest.importorskip``)."""
    found = [
        f"{path.relative_to(TESTS)}:{node.lineno}"
        for path in _python_files()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute) and node.attr == "importorskip"
    ]
    assert found == []


def test_support_holds_no_tests() -> None:
    found = []
    for path in sorted((TESTS / "support").glob("*.py")):
        assert not path.name.startswith("test_"), f"{path.name}: move it out of support/"
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name.startswith(
                ("test_", "Test")
            ):
                found.append(f"{path.name}:{node.name}")
    assert found == []


def test_shared_helpers_are_only_in_support() -> None:
    """No loose helper modules next to the tests: they go to tests/support/."""
    loose = [
        str(p.relative_to(TESTS))
        for p in _python_files()
        if p.parent != TESTS / "support" and not p.name.startswith(("test_", "conftest"))
    ]
    assert loose == []


def test_tests_live_in_stage_folders_with_unique_names() -> None:
    """Test modules sit in a folder per stage or target (tests/passes/, tests/targets/hls/, ...),
    never loose in tests/; their names are unique (pytest imports them by basename)."""
    modules = _test_modules()
    assert [p.name for p in modules if p.parent == TESTS] == []
    names = [p.name for p in modules]
    assert sorted({n for n in names if names.count(n) > 1}) == []


def test_regenerating_a_golden_file_skips_instead_of_passing(tmp_path, monkeypatch) -> None:
    """A regenerating run writes the expectation and skips: it never compares with itself."""
    monkeypatch.setenv(REGEN_ENV, "1")
    with pytest.raises(pytest.skip.Exception):
        check_text(tmp_path / "a.txt", "new")
    with pytest.raises(pytest.skip.Exception):
        check_files(tmp_path / "d", {"x.c": b"1"})
    assert (tmp_path / "a.txt").read_text() == "new"
    monkeypatch.delenv(REGEN_ENV)
    check_text(tmp_path / "a.txt", "new")
    check_files(tmp_path / "d", {"x.c": b"1"})
    for wrong in (
        lambda: check_text(tmp_path / "a.txt", "other"),
        lambda: check_text(tmp_path / "missing.txt", "new"),
        lambda: check_files(tmp_path / "d", {"x.c": b"1", "y.c": b""}),
    ):
        with pytest.raises(AssertionError):
            wrong()
