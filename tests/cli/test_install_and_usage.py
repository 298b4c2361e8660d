"""A fresh install works: every third-party import is declared, every usage error is exit 2."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib

import pytest

from cnnforge.cli import app, main
from cnnforge.cli.commands import register
from support.paths import REPO

ROOT = REPO
SRC = ROOT / "src" / "cnnforge"


def _requirement_names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\s<>=!~;\[]", r.strip(), maxsplit=1)[0].lower() for r in requirements}


def _declared() -> tuple[set[str], set[str]]:
    """(runtime, optional) distribution names from pyproject.toml, normalized."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    runtime = _requirement_names(project["dependencies"])
    extras = project.get("optional-dependencies", {}).values()
    optional = set().union(*(_requirement_names(reqs) for reqs in extras))
    return {n.replace("_", "-") for n in runtime}, {n.replace("_", "-") for n in optional}


def _guarded_lines(tree: ast.AST) -> set[int]:
    """Lines of imports inside ``try: ... except ImportError``: optional dependencies."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Try):
            continue
        names = {ast.unparse(h.type) for h in node.handlers if h.type is not None}
        if names & {"ImportError", "ModuleNotFoundError", "(ImportError, ModuleNotFoundError)"}:
            for inner in node.body:
                lines.update(range(inner.lineno, (inner.end_lineno or inner.lineno) + 1))
    return lines


def _third_party_imports() -> dict[str, list[tuple[str, bool]]]:
    """Top-level module -> [(file:line, optional?)] for every non-stdlib import under src/."""
    found: dict[str, list[tuple[str, bool]]] = {}
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text("utf-8"), filename=str(path))
        guarded = _guarded_lines(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                if top in sys.stdlib_module_names or top in ("cnnforge", "__future__"):
                    continue
                where = f"{path.relative_to(ROOT)}:{node.lineno}"
                found.setdefault(top, []).append((where, node.lineno in guarded))
    return found


def test_every_third_party_import_is_declared() -> None:
    runtime, optional = _declared()
    distributions = importlib.metadata.packages_distributions()
    problems = []
    for module, places in sorted(_third_party_imports().items()):
        dists = {d.lower().replace("_", "-") for d in distributions.get(module, [module])}
        if dists & runtime:
            continue
        required = [where for where, guarded in places if not guarded]
        if dists & optional and not required:
            continue
        problems.append(f"{module} ({', '.join(sorted(dists))}) imported at {places[0][0]}")
    assert not problems, "undeclared in pyproject.toml dependencies: " + "; ".join(problems)


def test_typer_is_used_through_its_public_api_only() -> None:
    """typer >= 0.29 carries its own click: importing click would need a declared click."""
    assert "click" not in _third_party_imports()


def _commands() -> list[str]:
    register()  # a run imports its own command's module alone: here every command
    return sorted(c.name or c.callback.__name__ for c in app.registered_commands)


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    return int(exc.value.code or 0), capsys.readouterr().err


def test_all_commands_are_walked() -> None:
    assert {"analyze", "check", "compile", "plan", "simulate", "quantize", "demo"} <= set(
        _commands()
    )


@pytest.mark.parametrize("command", _commands())
def test_unknown_option_is_a_usage_error(command: str, capsys) -> None:
    code, err = _run([command, "--no-such-option"], capsys)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "No such option" in lines[0] and "hint:" in lines[0], err


def _options_with_values(command: str) -> list[str]:
    info = next(c for c in app.registered_commands if (c.name or c.callback.__name__) == command)
    import inspect

    options = []
    for param in inspect.signature(info.callback).parameters.values():
        default = param.default
        decls = getattr(default, "param_decls", None) or ()
        long = [d for d in decls if d.startswith("--") and "/" not in d]
        if long and param.annotation not in (bool, "bool"):
            options.append(long[0])
    return options


@pytest.mark.parametrize("command", _commands())
def test_option_missing_its_value_is_a_usage_error(command: str, capsys) -> None:
    options = _options_with_values(command)
    if not options:
        pytest.skip(f"{command} has no option taking a value")
    for option in options:
        code, err = _run([command, option], capsys)
        assert code == 2, (option, err)
        assert len(err.strip().splitlines()) == 1, (option, err)
        assert "requires an argument" in err, (option, err)


def test_analyze_json_without_value_is_exit_2(capsys) -> None:
    code, err = _run(["analyze", "unet-voc", "-i", "3,64,64", "--json"], capsys)
    assert code == 2
    assert err.startswith("error: Option '--json' requires an argument")
    assert "cnnforge analyze --help" in err


def test_unknown_command_is_exit_2(capsys) -> None:
    code, err = _run(["no-such-command"], capsys)
    assert code == 2 and "No such command" in err
