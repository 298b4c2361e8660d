"""The target table (api.targets): --device names resolve there, errors are one line with a
hint, compile recipes come from the records, and a new entry is all a new target needs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from cnnforge import arithmetic
from cnnforge.api import targets
from cnnforge.api.targets import TARGETS, get_target
from cnnforge.errors import InputError
from cnnforge.pipeline.targets import Target
from cnnforge.targets.generic import integer as generic_integer
from cnnforge.targets.generic.target import GenericTarget
from cnnforge.targets.hls import recipe as hls
from cnnforge.targets.hls.device import HLS
from cnnforge.targets.max7800x import recipe as steps
from cnnforge.targets.max7800x.device import MAX78000, MAX78002
from support.cli import run_cli
from support.paths import REPO

SRC = REPO / "src" / "cnnforge"


def test_the_max_parts_come_first_then_hls_and_generic() -> None:
    assert [t.name for t in TARGETS] == ["MAX78000", "MAX78002", "HLS", "generic"]
    assert TARGETS[0].device is MAX78000 and TARGETS[1].device is MAX78002
    assert all(t.description and t.report for t in TARGETS)


def test_each_target_names_its_integer_rules_as_a_module() -> None:
    semantics = {t.name: t.semantics for t in TARGETS}
    assert semantics == {
        "MAX78000": arithmetic,
        "MAX78002": arithmetic,
        "HLS": arithmetic,
        "generic": generic_integer,
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [("MAX78000", MAX78000), ("max78002", MAX78002), (" ai85 ", MAX78000), ("hls", HLS)],
)
def test_names_resolve_case_insensitively(text: str, expected: object) -> None:
    assert get_target(text).device is expected
    assert get_target(expected).device is expected  # a record resolves to its entry
    resolved = get_target(text)
    assert get_target(resolved) is resolved  # a resolved record passes through


def test_a_parametrised_target_reads_its_parameters() -> None:
    target = get_target("generic:onchip=1MiB,act_bytes=1").device
    assert isinstance(target, GenericTarget)
    assert (target.onchip_bytes, target.act_bytes) == (1 << 20, 1)
    assert get_target("GENERIC").name == "generic"


@pytest.mark.parametrize("text", ["MAX99999", "", "generic2", "hls:x=1"])
def test_unknown_names_are_one_line_with_a_hint(text: str) -> None:
    with pytest.raises(InputError, match="unknown device") as info:
        get_target(text)
    line = info.value.one_line()
    assert "\n" not in line and "MAX78000" in line and "generic" in line and "HLS" in line


def test_compile_recipes_come_from_the_table() -> None:
    assert all(get_target(d).compile_steps is steps.STEPS for d in (MAX78000, MAX78002))
    assert get_target(HLS).compile_steps is hls.STEPS
    assert get_target("generic").compile_steps is None  # compile refuses it (below)


def test_a_new_target_is_one_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    toy = dataclasses.replace(MAX78000, name="TOY", die="TOY1")
    entry = Target("TOY", "a toy", arithmetic, device=toy, aliases=("toy1",),
                   compile_steps=steps.STEPS, report=("report.html",))  # fmt: skip
    monkeypatch.setattr(targets, "TARGETS", (*TARGETS, entry))
    assert get_target("toy").device is toy and get_target("TOY1").device is toy
    assert get_target(toy).compile_steps is steps.STEPS


def test_each_target_names_its_own_placer() -> None:
    """No target inherits another's planner: `check` places with the record's own placer, and a
    record that names none places nothing beyond the per-layer rules."""
    from cnnforge.targets.max7800x.rules import plan_max7800x

    assert Target("TOY", "a toy", arithmetic, device=MAX78000).rules.place is None
    assert all(get_target(d.name).rules.place is plan_max7800x for d in (MAX78000, MAX78002))
    assert get_target("HLS").rules.place is hls.place_hls


def test_compile_refuses_a_target_without_a_recipe(tmp_path: Path, capsys) -> None:
    from cnnforge.cli import main

    with pytest.raises(SystemExit) as stop:
        main(["compile", "unet-voc", "-d", "generic", "--ptq", "-o", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "cannot be compiled" in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()


def test_the_pipeline_has_ordinary_imports() -> None:
    """No stage is loaded by name: readers and linters see what the pipeline depends on."""
    offenders = [
        str(p.relative_to(SRC))
        for p in SRC.rglob("*.py")
        if "import_module" in p.read_text() and p.name != "loading.py"
    ]
    assert offenders == []


@pytest.mark.parametrize(
    ("command", "args"),
    [  # `check -d generic` runs the generic integer rules (tests/test_promises_kept.py)
        ("quantize", ["unet-voc", "-i", "3,64,64", "-o", "q.pth"]),
        ("simulate", ["unet-voc", "-i", "3,64,64", "--input", "x.npy", "--output", "out.npy"]),
    ],
)
def test_commands_of_the_hardware_layer_model_refuse_a_budget_target(
    command: str, args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """`quantize`/`simulate` work on MAX7800x/HLS layers: for `generic` they say so in
    one line (exit 2) and point at `budget`, instead of failing inside the MAX lowering."""
    monkeypatch.chdir(tmp_path)
    np.save(tmp_path / "x.npy", np.zeros((3, 64, 64), np.int8))
    code, out, err = run_cli([command, *args, "-d", "generic:onchip=1MiB"], capsys)
    assert code == 2, (out, err)
    assert err.count("\n") == 1 and f"has no `cnnforge {command}`" in err and "budget" in err
    assert list(tmp_path.iterdir()) == [tmp_path / "x.npy"]


def test_each_record_says_what_plan_does() -> None:
    """`cnnforge plan` asks the record (no branch on the target): "place" runs its planner and
    writer, "budget" is the float-model budget flow (a parametrised target), "none" refuses."""
    for target in TARGETS:
        assert target.plans in ("place", "budget", "none"), target.name
        placed = target.planner is not None and target.write is not None
        assert placed == (target.plans == "place"), target.name
        assert (target.plans == "budget") == (target.parse is not None), target.name
    assert {t.name: t.plans for t in TARGETS}["HLS"] == "none"
