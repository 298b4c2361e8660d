"""docs/internal-apis.md's "How to add a target" runs as written: its toy target is one folder
(``targets/toy/``) and one line of the table, and then checks and compiles like any other."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import cnnforge
import cnnforge.targets
from cnnforge.api import targets as table
from support.paths import REPO

DOC = REPO / "docs" / "internal-apis.md"


def _example() -> tuple[dict[str, str], str]:
    """The files of the toy target ({path: text}) and the table line, from the docs."""
    section = DOC.read_text("utf-8").split("## How to add a target", 1)[1]
    blocks = re.findall(r"`(src/[^`]+)`[^`]*?:\n\n```python\n(.*?)```", section, re.S)
    files = {path: text for path, text in blocks if path.startswith("src/cnnforge/targets/")}
    line = re.search(r"one line of the table.*?```python\n(.*?)```", section, re.S)
    assert line is not None, "the docs lost the table line"
    return files, line.group(1).strip()


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The docs' toy target installed as ``cnnforge.targets.toy``, in the table by its line."""
    files, line = _example()
    assert set(files) == {"src/cnnforge/targets/toy/__init__.py",
                          "src/cnnforge/targets/toy/entry.py"}  # fmt: skip
    for path, text in files.items():
        out = tmp_path / path.removeprefix("src/")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, "utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    folders = [*cnnforge.targets.__path__, str(tmp_path / "cnnforge" / "targets")]
    monkeypatch.setattr(cnnforge.targets, "__path__", folders)
    from cnnforge.targets.toy import entry as toy  # the line's import

    item = ast.parse(line.rstrip(","), mode="eval").body  # the line names toy's record
    assert isinstance(item, ast.Attribute) and ast.unparse(item.value) == "toy", line
    monkeypatch.setattr(table, "TARGETS", (*table.TARGETS, getattr(toy, item.attr)))
    yield files
    import sys

    for name in [m for m in sys.modules if m.startswith("cnnforge.targets.toy")]:
        del sys.modules[name]


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 4, 1)).eval()


def test_the_toy_target_checks_and_compiles(toy: dict[str, str], tmp_path: Path) -> None:
    assert "TOY" in table.target_names()
    assert cnnforge.check(_model(), "TOY", (3, 8, 8)).fits
    x = np.random.default_rng(0).integers(-128, 128, (3, 8, 8))
    out = tmp_path / "out"
    compiled = cnnforge.compile(
        _model(), device="toy", input_shape=(3, 8, 8), ptq=True, sample=x, output_dir=out
    )
    lines = (out / "layers.txt").read_text().splitlines()
    assert len(lines) == len(compiled.network.layers) == 2
    summary = json.loads((out / "summary.json").read_text())
    assert summary["device"] == "TOY" and "layers.txt" in summary["files"]
    assert (compiled.simulate(x) == cnnforge.simulate(out / "network.pth", x)).all()


def test_the_toy_target_touches_only_its_folder_and_imports_no_other_target(toy) -> None:
    for path, text in toy.items():
        assert path.startswith("src/cnnforge/targets/toy/")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("cnnforge.targets"), (path, node.module)


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    from cnnforge.cli import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out, out.err


def test_a_targets_own_options_reach_the_cli_without_editing_it(
    toy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A target's own `compile` option, declared in its folder (its ``Target.options``, listed
    by ``targets.declared_options``), is in `compile --help`, goes to its reader, and is refused
    for the other targets."""
    import dataclasses

    from cnnforge.targets.toy import entry as toy_entry

    from cnnforge.cli import compile as compile_cli
    from cnnforge.target_options import TargetOption, TargetOptions

    read: list[dict] = []

    def reader(values: dict, in_place: bool) -> tuple[dict, tuple[str, ...]]:
        read.append(values)
        return {}, ("--toy-turbo",) if values["toy_turbo"] else ()

    option = TargetOption("toy_turbo", "--toy-turbo", "Toy: run the toy at double speed.")
    declared = TargetOptions((option,), reader)
    record = dataclasses.replace(toy_entry.TARGET, options=declared)
    monkeypatch.setattr(table, "TARGETS", (*table.TARGETS[:-1], record))
    every = cnnforge.targets.declared_options
    monkeypatch.setattr(cnnforge.targets, "declared_options", lambda: (*every(), declared))
    command = compile_cli.compile_command
    monkeypatch.setattr(command, "__signature__", command.__signature__)  # restored after
    monkeypatch.setattr(command, "__annotations__", dict(command.__annotations__))
    compile_cli.declare_target_options()
    assert record.option_flags == {"--toy-turbo"}

    code, out, _ = _cli(["compile", "--help"], capsys)
    assert code == 0 and "--toy-turbo" in out and "run the toy at double speed" in out
    model = tmp_path / "toy_model.py"
    model.write_text("from torch import nn\n\n\ndef Net():\n    return nn.Sequential("
                     "nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 4, 1))\n")  # fmt: skip
    np.save(tmp_path / "x.npy", np.random.default_rng(0).integers(-128, 128, (3, 8, 8)))
    args = ["compile", f"{model}:Net", "-i", "3,8,8", "--ptq", "--sample", str(tmp_path / "x.npy"),
            "--toy-turbo"]  # fmt: skip
    code, _, err = _cli([*args, "-d", "MAX78000", "-o", str(tmp_path / "max")], capsys)
    assert code == 2 and "--toy-turbo is for TOY, not for --device MAX78000" in err, err
    code, _, err = _cli([*args, "-d", "toy", "-o", str(tmp_path / "toy")], capsys)
    assert code == 0, err
    assert read[-1] == {"toy_turbo": True} and (tmp_path / "toy" / "layers.txt").is_file()


def test_the_cli_lists_the_options_of_every_target_of_the_table() -> None:
    """``targets.declared_options`` (light, for --help) names exactly the table's options."""
    from_table = {id(t.options) for t in table.TARGETS if t.options is not None}
    assert {id(o) for o in cnnforge.targets.declared_options()} == from_table
