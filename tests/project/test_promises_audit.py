"""Issue 42, the docs audit: promises of README.md and docs/ that did not hold, each run as the
user runs it (a subprocess, or the API as a script calls it): the Python API's names and
one-line results, the untrained note, compile's sample for the vendor tool, one name per option,
train's lr column, check pointing at adapt, progress only on a terminal, adapt's whole table."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from rich.console import Console
from torch import nn

import cnnforge
from support.cli import one_error_line
from support.cli import run_cnnforge as run
from support.paths import REPO, TESTS

ADAPT_MODELS = f"{TESTS / 'support' / 'adapt_models.py'}"
TINY_TRAIN = ["--epochs", "1", "--train-length", "8", "--val-length", "8"]
TINY_ADAPT = ["--epochs", "1", "--qat-epochs", "1", "--train-length", "32", "--val-length", "16",
              "--size", "16"]  # fmt: skip


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c2(torch.relu(self.c1(x)))


SHAPE = (3, 16, 16)


# ---- docs/python-api.md: every function it shows exists; every command has one -------------


def test_every_function_the_api_page_shows_exists() -> None:
    text = (REPO / "docs" / "python-api.md").read_text()
    shown = set(re.findall(r"cnnforge\.([a-z_]+)\(", text))
    assert shown and all(callable(getattr(cnnforge, name, None)) for name in shown), shown
    commands = {"analyze", "check", "quantize", "simulate", "plan", "compile", "inspect",
                "adapt", "budget", "diff", "train", "evaluate", "demo"}  # fmt: skip
    readme = (REPO / "README.md").read_text()
    assert commands == set(re.findall(r"^\| `cnnforge ([a-z]+)", readme, re.M))
    assert all(name in cnnforge.__all__ and getattr(cnnforge, name).__doc__ for name in commands)


def _one_line(result: object) -> str:
    text = repr(result)
    assert "\n" not in text and len(text) < 240, text
    assert "<table>" in result._repr_html_()  # type: ignore[attr-defined]
    return text


def test_every_result_has_a_one_line_repr_and_a_table(tmp_path: Path) -> None:
    """docs/python-api.md: "every result shows as a table; repr() gives a one-line summary"."""
    x = np.random.default_rng(0).uniform(-1, 1, SHAPE).astype(np.float32)
    assert _one_line(cnnforge.analyze(_Net(), SHAPE)).startswith("Analysis(")
    assert _one_line(cnnforge.check(_Net(), "MAX78000", SHAPE)).startswith("CheckResult(")
    assert _one_line(cnnforge.quantize(_Net(), SHAPE, calibration=x[None]))
    planned = cnnforge.plan(_Net(), "MAX78000", SHAPE)
    assert _one_line(planned).startswith("Planned(_Net on MAX78000: 2 layers")
    assert len(planned.plan.placements) == 2  # the plan's own attributes answer as before
    c = cnnforge.compile(_Net(), input_shape=SHAPE, ptq=True, sample=x, output_dir=tmp_path / "c")
    assert _one_line(c).startswith("Compiled(")
    assert _one_line(cnnforge.budget(_Net(), "generic:onchip=16KiB", SHAPE))
    inspected = cnnforge.inspect(tmp_path / "c" / "firmware")
    assert _one_line(inspected) == f"Inspection({tmp_path / 'c' / 'firmware'}: MAX78000, 2 layers)"
    same = cnnforge.diff(tmp_path / "c" / "firmware", tmp_path / "c" / "firmware")
    assert same.equal and _one_line(same).endswith("equal)")
    history = cnnforge.train("qat-unet", tmp_path / "t", size=16, epochs=1, train_length=8,
                             val_length=8, model_args={"channels": (4, 8, 8, 8)})  # fmt: skip
    assert _one_line(history).startswith("History(1 epochs") and history[0].epoch == 0
    scored = cnnforge.evaluate("qat-unet", tmp_path / "t" / "best.pth", size=16, val_length=4,
                               model_args={"channels": (4, 8, 8, 8)})  # fmt: skip
    assert _one_line(scored).startswith("Evaluated(4 images") and "bit-exact" in scored.scores


def test_adapt_inspect_diff_are_functions_as_the_commands(tmp_path: Path) -> None:
    """cnnforge.adapt writes what `cnnforge adapt` writes; cnnforge.diff and .inspect agree
    with the commands on a compiled firmware folder."""
    with pytest.warns(cnnforge.errors.Note):  # an untrained teacher, allowed: said so
        a = cnnforge.adapt(f"{ADAPT_MODELS}:TinyNormUNet", tmp_path / "a", size=16, epochs=1,
                           qat_epochs=1, train_length=32, val_length=16, width="1",
                           allow_untrained=True)  # fmt: skip
    assert _one_line(a).startswith("Adaptation(") and a.width == 1.0
    assert json.loads((tmp_path / "a" / "adapt.json").read_text()) == json.loads(
        json.dumps(a.to_dict())
    )
    with pytest.raises(cnnforge.errors.InputError, match="untrained teacher"):
        cnnforge.adapt(f"{ADAPT_MODELS}:TinyNormUNet", tmp_path / "b")


# ---- no silent random weights ----------------------------------------------------------------


def test_every_command_on_untrained_weights_says_so(tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.zeros((3, 32, 32), np.int8))
    x = str(tmp_path / "x.npy")
    build = ["-o", str(tmp_path / "c"), "--run", "--no-firmware", "--no-report"]
    runs = {
        "compile": ["qat-unet", "--ptq", "--sample", x, *build],
        "plan": ["qat-unet", "-o", str(tmp_path / "p")],
        "quantize": ["qat-unet", "-o", str(tmp_path / "q.pth")],
        "simulate": ["qat-unet", "--input", x, "--output", str(tmp_path / "y.npy")],
        "budget": ["qat-unet", "-d", "generic:onchip=64KiB", "--accuracy"],
    }
    for command, args in runs.items():
        r = run(command, *args)
        assert r.returncode == 0, (command, r.stderr)
        assert r.stderr.startswith("note: qat-unet has no --checkpoint: untrained"), (command, r)
        assert "note:" not in r.stdout  # the note is its own line on stderr
        assert command != "compile" or "PASS" in r.stdout  # after the verdict, not instead


def test_adapt_refuses_an_untrained_teacher(tmp_path: Path) -> None:
    r = run("adapt", f"{ADAPT_MODELS}:TinyNormUNet", "-o", str(tmp_path / "a"), *TINY_ADAPT)
    assert "--allow-untrained" in one_error_line(r)
    assert not (tmp_path / "a").exists()


# ---- compile's sample is what the vendor tool reads ------------------------------------------


def test_compile_sample_is_int64_and_cnnforge_reads_it(tmp_path: Path) -> None:
    """The vendor tool refuses a sample that is not int64 ("is of type int8, rather than
    int64"); cnnforge's own readers take it as the known answer's input."""
    np.save(tmp_path / "x.npy", np.random.default_rng(0).integers(-128, 128, SHAPE, np.int8))
    models = tmp_path / "m.py"
    models.write_text("from torch import nn\nNet = lambda: nn.Sequential(nn.Conv2d(3, 4, 3, "
                      "padding=1), nn.ReLU())\n")  # fmt: skip
    out = tmp_path / "c"
    r = run("compile", f"{models}:Net", "-i", "3,16,16", "--ptq", "--sample",
            str(tmp_path / "x.npy"), "-o", str(out), "--no-report")  # fmt: skip
    assert r.returncode == 0, r.stderr
    sample = np.load(out / "sample_input.npy")
    assert sample.dtype.type is np.dtype("int64").type  # the vendor tool's own test
    assert np.array_equal(sample, np.load(tmp_path / "x.npy"))
    s = run("simulate", "--network", str(out / "network.pth"), "--input",
            str(out / "sample_input.npy"), "--output", str(tmp_path / "y.npy"))  # fmt: skip
    assert s.returncode == 0, s.stderr
    known = next(iter(np.load(out / "sample_output.npz").values()))
    assert np.array_equal(np.load(tmp_path / "y.npy"), known)


# ---- one name per option ---------------------------------------------------------------------


def test_one_name_per_option_old_names_still_work(tmp_path: Path) -> None:
    arch = ["qat-unet", "--model-arg", "channels=4,8,8,8", "--size", "16"]
    out = str(tmp_path / "t")
    assert run("train", *arch, *TINY_TRAIN, "--output", out).returncode == 0
    assert run("train", *arch, *TINY_TRAIN, "--out", str(tmp_path / "old")).returncode == 0
    best = str(tmp_path / "t" / "best.pth")
    new = run("evaluate", *arch, "--checkpoint", best, "--val-length", "4")
    old = run("evaluate", *arch, "--checkpoint", best, "--length", "4")
    assert new.returncode == old.returncode == 0 and new.stdout == old.stdout
    assert "segmentation on 4 images" in new.stdout
    both = run("evaluate", *arch, "--checkpoint", best, "--val-length", "4", "--length", "8")
    assert "--length and --val-length are one option" in one_error_line(both)
    for command, old_name in (
        ("train", "--out "),
        ("evaluate", "--length"),
        ("budget", "--length"),
    ):
        assert old_name not in run(command, "--help").stdout  # hidden: one name in the help


# ---- train's lr column: the rate the epoch used ----------------------------------------------


def test_train_lr_column_is_the_epochs_own_rate(tmp_path: Path) -> None:
    arch = ["qat-unet", "--model-arg", "channels=4,8,8,8", "--size", "16", "--no-qat"]
    r = run("train", *arch, "--epochs", "2", *TINY_TRAIN[2:], "--lr", "0.01", "-o",
            str(tmp_path / "t"))  # fmt: skip
    assert r.returncode == 0, r.stderr
    rows = [line.split() for line in r.stdout.splitlines() if line.strip()[:1].isdigit()]
    rates = [row[6] for row in rows]  # epoch phase train-loss val-loss pixel-acc mIoU lr ...
    assert rates == ["1.00e-02", "5.00e-03"]  # cosine over 2 epochs: the first trains at lr
    log = [json.loads(x) for x in (tmp_path / "t" / "train.log").read_text().splitlines()]
    assert [round(x["lr"], 6) for x in log] == [0.01, 0.005]


# ---- check names adapt where adapt would help ------------------------------------------------


def test_check_names_adapt_for_the_swaps_it_makes(tmp_path: Path) -> None:
    r = run("check", f"{ADAPT_MODELS}:TinyNormUNet", "-i", "3,16,16")
    assert r.returncode == 1, r.stderr
    assert "`cnnforge adapt` does it (docs/adapt.md)" in r.stdout  # on the rows adapt swaps
    assert "are swaps `cnnforge adapt` makes: cnnforge adapt MODEL --checkpoint" in r.stdout
    plain = run("check", "unet-voc")  # kernel memory: nothing adapt swaps
    assert "cnnforge adapt" not in plain.stdout


# ---- progress inside an epoch: on a terminal only --------------------------------------------


def test_progress_inside_epochs_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    from cnnforge.cli import common

    with common.batch_progress() as on_batch:  # the tests' output is no terminal
        assert on_batch is None
    screen = io.StringIO()
    monkeypatch.setattr(
        common, "console", Console(file=screen, force_terminal=True, width=80)
    )  # fmt: skip
    with common.batch_progress() as on_batch:
        assert on_batch is not None
        on_batch(3, 8)
    assert "3/8" in screen.getvalue()


def test_piped_train_shows_no_progress_bar(tmp_path: Path) -> None:
    arch = ["qat-unet", "--model-arg", "channels=4,8,8,8", "--size", "16", "--no-qat"]
    r = run("train", *arch, *TINY_TRAIN, "-o", str(tmp_path / "t"))
    assert r.returncode == 0 and "━" not in r.stdout + r.stderr and "batches" not in r.stdout


# ---- adapt's table: no column cut -------------------------------------------------------------


@pytest.mark.parametrize("width", [80, 120])
def test_adapt_table_cuts_no_column(width: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each replacement's "was" and "now" are whole in the table at 80 and 120 columns."""
    from cnnforge.adaptation.fit import preflight
    from cnnforge.adaptation.run import AdaptResult
    from cnnforge.api.targets import get_target
    from cnnforge.cli import adapt as cli_adapt
    from support.adapt_models import TinyNormUNet

    _, reps = preflight(TinyNormUNet(), (3, 16, 16), get_target("MAX78000"))
    assert all(r.before.endswith(")") and r.after.endswith(")") for r in reps)
    assert "BatchNorm2d(16)" in {r.after for r in reps}  # short, whole: no statistics flags
    screen = io.StringIO()
    monkeypatch.setattr(cli_adapt, "console", Console(file=screen, width=width))
    result = AdaptResult(reps, 1.0, None, [], scores={}, size={})
    cli_adapt._print_result(result, "MAX78000", 16, Path("out"))
    body = [line for line in screen.getvalue().splitlines() if line.startswith("│")]
    body = (
        body[: next(i for i, x in enumerate(body) if "original float" in x)]
        if any("original float" in x for x in body)
        else body
    )  # the replacements table only
    columns = ["".join(line.split("│")[j].strip() for line in body) for j in (2, 3)]
    for r in reps:  # folded, never cut: a column's lines joined hold every cell whole
        assert re.sub(r"\s+", "", r.before) in columns[0].replace(" ", ""), r.before
        assert re.sub(r"\s+", "", r.after) in columns[1].replace(" ", ""), r.after
    assert "…" not in screen.getvalue()
