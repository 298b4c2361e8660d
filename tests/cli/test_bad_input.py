"""Issue 18's named cases: output safety, the security items, numerical edge cases, messages."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from cnnforge.cli import main
from cnnforge.errors import ConfigError, InputError, plain_text
from cnnforge.outputs import MANIFEST
from cnnforge.sim import simulate
from cnnforge.targets.max7800x.ai8x import read_ai8x
from cnnforge.targets.max7800x.ai8x_checkpoint import load_checkpoint_dict
from cnnforge.targets.max7800x.ai8x_yaml_writer import yaml_text
from cnnforge.targets.max7800x.c import emit_c
from cnnforge.targets.max7800x.c.build import build_and_run
from cnnforge.targets.max7800x.plan_flow import plan_and_validate, write_outputs
from support.paths import AI8X

needs_ai8x = pytest.mark.skipif(not AI8X.is_dir(), reason="../shared/data/ai8x is not present")
YAML = AI8X / "networks" / "mnist-chw-ai85.yaml"
CKPT = AI8X / "trained" / "ai85-mnist-qat8-q.pth.tar"
SAMPLE = AI8X / "samples" / "sample_mnist.npy"
PAIR = ["--ai8x-yaml", str(YAML), "--ai8x-checkpoint", str(CKPT)]


def _run(args, capsys) -> tuple[int, str]:
    with pytest.raises(SystemExit) as info:
        main([str(a) for a in args])
    return info.value.code, capsys.readouterr().err


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ") and "(hint: " in lines[0], err
    assert "\x1b" not in err
    return lines[0]


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


# ---- output safety -----------------------------------------------------------------------------


@needs_ai8x
def test_plan_into_the_current_directory_refuses_and_touches_nothing(tmp_path, capsys, monkeypatch):
    (tmp_path / "keep.txt").write_text("mine")
    (tmp_path / MANIFEST).write_text(json.dumps({"files": ["keep.txt"]}))  # even "cnnforge's"
    monkeypatch.chdir(tmp_path)
    before = _tree(tmp_path)
    code, err = _run(["plan", *PAIR, "-o", ".", "--overwrite"], capsys)
    assert code == 2 and "current directory" in _one_line(err)
    assert _tree(tmp_path) == before and sorted(os.listdir(tmp_path)) == [MANIFEST, "keep.txt"]


@needs_ai8x
def test_overwrite_replaces_cnnforge_output_only(tmp_path, capsys):
    out = tmp_path / "out"
    assert _run(["plan", *PAIR, "-o", out], capsys)[0] == 0
    assert (out / MANIFEST).is_file() and (out / "network.yaml").is_file()
    (out / "network.yaml").write_text("stale")
    assert _run(["plan", *PAIR, "-o", out, "--overwrite"], capsys)[0] == 0  # its own: replaced
    assert (out / "network.yaml").read_text() != "stale"
    (out / "notes.txt").write_text("the user's")
    code, err = _run(["plan", *PAIR, "-o", out, "--overwrite"], capsys)
    assert code == 2 and "notes.txt" in _one_line(err) and (out / "notes.txt").exists()
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "data.csv").write_text("1,2")
    code, err = _run(["plan", *PAIR, "-o", mine, "--overwrite"], capsys)
    assert code == 2 and "did not write" in _one_line(err)
    assert _tree(mine) == {"data.csv": b"1,2"}


@needs_ai8x
def test_failed_compile_leaves_no_parents(tmp_path, capsys):
    bad = tmp_path / "bad.npy"
    np.save(bad, np.zeros((3, 5, 5), dtype=np.int8))
    target = tmp_path / "a" / "b" / "c"
    args = ["compile", *PAIR, "--sample", bad, "-o", target, "--no-report"]
    assert _run(args, capsys)[0] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.npy"]


@needs_ai8x
def test_json_report_is_not_replaced_silently(tmp_path, capsys):
    report = tmp_path / "r.json"
    report.write_text("old")
    code, err = _run(["check", *PAIR, "--json", report], capsys)
    assert code == 2 and "already exists" in _one_line(err) and report.read_text() == "old"
    assert _run(["check", *PAIR, "--json", report, "--overwrite"], capsys)[0] == 0
    assert json.loads(report.read_text())


# ---- security ----------------------------------------------------------------------------------


def _yaml_with(tmp_path: Path, **changes) -> Path:
    doc = yaml.safe_load(YAML.read_text())
    for key, value in changes.items():
        if key == "name":
            doc["layers"][1]["name"] = value
        else:
            doc[key] = value
    path = tmp_path / "net.yaml"
    path.write_text(yaml.safe_dump(doc))
    shutil.copy(SAMPLE, tmp_path / "sample_mnist.npy")
    return path


@needs_ai8x
@pytest.mark.parametrize("arch", ["../../escaped", "/tmp/abs", "a\\", "a\nb", "x" * 65])
def test_arch_cannot_leave_the_output(tmp_path, capsys, arch):
    path = _yaml_with(tmp_path, arch=arch)
    args = ["plan", "--ai8x-yaml", path, "--ai8x-checkpoint", CKPT, "-o", tmp_path / "o"]
    code, err = _run(args, capsys)
    assert code == 2 and "`arch`" in _one_line(err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["net.yaml", "sample_mnist.npy"]


@needs_ai8x
@pytest.mark.parametrize("name", ["../../escaped", "/abs/evil"])
def test_network_names_never_make_paths(tmp_path, name):
    network, _ = read_ai8x(YAML, CKPT, device="MAX78000").network, None
    network = dataclasses.replace(network, name=name)
    result = write_outputs(plan_and_validate(network, _device()), _device(), tmp_path / "out")
    out = (tmp_path / "out").resolve()
    assert all((out / f).resolve().is_relative_to(out) for f in result.files), result.files
    assert any(f.endswith("-q.pth.tar") and "/" not in f for f in result.files)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def _device():
    from cnnforge.targets.max7800x.device import get_device

    return get_device("MAX78000")


@needs_ai8x
@pytest.mark.parametrize("name", ["a\nb", "a\n  - processors: 1", "x: 1 # y", "*/ /*"])
def test_layer_names_cannot_inject_into_the_yaml(tmp_path, capsys, name):
    path = _yaml_with(tmp_path, name=name)
    code, err = _run(["check", "--ai8x-yaml", path, "--ai8x-checkpoint", CKPT], capsys)
    assert code == 2 and "`name`" in _one_line(err)  # refused where it enters
    model = read_ai8x(
        YAML, CKPT, device="MAX78000"
    )  # a name that enters another way is escaped where it leaves
    layers = tuple(
        dataclasses.replace(x, name=f"{name}{i}") if i else x
        for i, x in enumerate(model.network.layers)
    )
    renamed = {old.name: new.name for old, new in zip(model.network.layers, layers, strict=True)}
    layers = tuple(
        dataclasses.replace(x, inputs=tuple(renamed.get(n, n) for n in x.inputs)) for x in layers
    )
    network = model.network.with_layers(layers, outputs=(layers[-1].name,))
    places = tuple(dataclasses.replace(p, layer=renamed[p.layer]) for p in model.plan.placements)
    doc = yaml.safe_load(yaml_text(network, dataclasses.replace(model.plan, placements=places)))
    assert len(doc["layers"]) == len(layers)
    assert [x.get("name") for x in doc["layers"][1:]] == [x.name for x in layers[1:]]


@needs_ai8x
def test_network_name_cannot_break_the_c(tmp_path):
    network = dataclasses.replace(
        read_ai8x(YAML, CKPT, device="MAX78000").network, name='a\\ "%s ??/ */ \n'
    )
    sample = np.load(SAMPLE)
    result = simulate(network, sample[None], device=None)
    answer = {k: np.asarray(v)[0] for k, v in result.outputs.items()}
    (tmp_path / "c").mkdir()
    (tmp_path / "b").mkdir()
    emit_c(network, sample, answer, tmp_path / "c", max_verify=4)
    assert build_and_run(tmp_path / "c", build_dir=tmp_path / "b").passed


@needs_ai8x
def test_optimizer_constructor_does_not_run_during_a_load(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(torch.optim.SGD, "__init__", lambda self, *a, **k: calls.append(a))

    class Reduce:
        def __reduce__(self):
            return (torch.optim.SGD, ([torch.zeros(1, requires_grad=True)],))

    path = tmp_path / "evil.pth.tar"
    torch.save({"state_dict": {}, "extras": Reduce(), "optimizer_type": torch.optim.SGD}, path)
    doc = load_checkpoint_dict(path)
    assert calls == [] and not isinstance(doc["extras"], torch.optim.Optimizer)
    assert doc["optimizer_type"] is not torch.optim.SGD
    assert load_checkpoint_dict(CKPT)["epoch"] == 194 if AI8X.is_dir() else True


def test_other_pickled_globals_are_refused(tmp_path):
    class Reduce:
        def __reduce__(self):
            return (os.getcwd, ())

    path = tmp_path / "evil.pth.tar"
    torch.save({"state_dict": {}, "x": Reduce()}, path)
    with pytest.raises(ConfigError, match="not allowed"):
        load_checkpoint_dict(path)


BOMB = (
    'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    + "".join(
        f"{c}: &{c} [*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p}]\n"
        for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    )
    + "arch: *i\n"
)


@pytest.mark.parametrize(
    ("text", "needle"),
    [(BOMB, "aliases"), ("arch: " + "[" * 20_000, "nested"), ("arch: x\x00\n", "control")],
)
def test_yaml_bombs_are_short_errors_in_bounded_memory(tmp_path, capsys, text, needle):
    path = tmp_path / "bomb.yaml"
    path.write_text(text)
    tracemalloc.start()
    try:
        code, err = _run(["check", "--ai8x-yaml", path, "--ai8x-checkpoint", CKPT], capsys)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    line = _one_line(err)
    assert code == 2 and needle in line and len(line) < 300
    assert peak < 64 * 2**20, peak


def test_a_fifo_is_refused_without_reading(tmp_path, capsys):
    fifo = tmp_path / "net.yaml"
    os.mkfifo(fifo)
    code, err = _run(["check", "--ai8x-yaml", fifo, "--ai8x-checkpoint", fifo], capsys)
    assert code == 2 and "not a regular file" in _one_line(err)


MODELS = """\
import sys
import torch
from subprocess import getoutput


class Net(torch.nn.Module):
    def __init__(self, bad: str = ""):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4)
        if bad == "nanw":
            self.conv.weight.data[0, 0, 0, 0] = float("nan")
        if bad == "var":
            self.bn.running_var[1] = -0.5
        if bad == "exit":
            sys.exit(4)
        if bad == "interrupt":
            raise KeyboardInterrupt

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


def build():
    return Net()


VALUE = 5
"""


@pytest.fixture
def models_py(tmp_path: Path) -> Path:
    path = tmp_path / "models.py"
    path.write_text(MODELS)
    return path


@pytest.mark.parametrize(
    ("ref", "needle"),
    [
        ("subprocess:getoutput", "standard-library"),
        ("os:system", "standard-library"),
        ("torch.hub:load", "not an nn.Module class"),
        ("{models}:getoutput", "not an nn.Module class"),
        ("{models}:VALUE", "no class or function"),
    ],
)
def test_model_references_are_checked_before_calling(models_py, capsys, ref, needle):
    code, err = _run(["check", ref.format(models=models_py), "-i", "3,8,8"], capsys)
    assert code == 2 and needle in _one_line(err)


def test_model_factories_and_classes_still_load(models_py, capsys):
    for name in ("Net", "build"):
        assert _run(["check", f"{models_py}:{name}", "-i", "3,8,8"], capsys)[0] == 0


# ---- numbers and messages ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "needle"), [("nanw", "NaN"), ("var", "variance"), ("exit", "sys.exit")]
)
def test_bad_model_values_are_named(models_py, capsys, bad, needle):
    args = ["check", f"{models_py}:Net", "-i", "3,8,8", "--model-arg", f"bad={bad}"]
    code, err = _run(args, capsys)
    assert code == 2 and needle in _one_line(err)


def test_keyboard_interrupt_in_model_code_is_one_line(models_py, capsys):
    args = ["check", f"{models_py}:Net", "-i", "3,8,8", "--model-arg", "bad=interrupt"]
    code, err = _run(args, capsys)
    assert code == 130 and len(err.strip().splitlines()) == 1 and "interrupted" in err


def test_messages_are_plain_with_a_hint(tmp_path, capsys):
    bad = tmp_path / "x.yaml"
    bad.write_text("arch: a\ndataset: b\nlayers:\n" + "\n" * 96 + "  - bogus: 1\n")
    code, err = _run(["check", "--ai8x-yaml", bad, "--ai8x-checkpoint", CKPT], capsys)
    line = _one_line(err)
    assert code == 2 and ":100:" in line  # not rich's emoji
    assert plain_text("a\x1b[31mred\x1b[0m\nb") == "ared b"
    assert str(InputError("x")).endswith("(hint: check the file, option or value named)")


def test_zero_and_nan_ranges_in_the_arithmetic():
    from cnnforge.arithmetic import shift_for_max

    assert shift_for_max(0.0, 8) == 0
    with pytest.raises(ValueError, match="largest parameter"):
        shift_for_max(float("nan"), 8)
