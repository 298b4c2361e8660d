"""cnnforge adapt: the table (docs/adapt.md is tested against it), each replacement on small
random models, width narrowing, an end-to-end run on shapes that compiles and passes its C
self-test, bad input (one line, exit 2) and an interrupted run that resumes."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch
from torch import nn

from cnnforge.adaptation.surgery import refusals, replace_ops, set_module
from cnnforge.adaptation.table import ROWS, markdown_table
from cnnforge.adaptation.width import hidden_width, narrow
from support.cli import run_cli
from support.paths import REPO

ROOT = REPO
MODELS = ROOT / "tests" / "support" / "adapt_models.py"
TINY = [
    "--epochs",
    "1",
    "--qat-epochs",
    "1",
    "--train-length",
    "32",
    "--val-length",
    "16",
    "--size",
    "16",
    "--allow-untrained",
]


def test_doc_shows_the_table() -> None:
    assert markdown_table() in (ROOT / "docs" / "adapt.md").read_text()


@pytest.mark.parametrize(
    ("module", "exact"),
    [
        (nn.LeakyReLU(0.0), True),
        (nn.PReLU(init=0.0), True),
        (nn.ReLU6(), True),
        (nn.Hardtanh(), False),
        (nn.Hardtanh(0.0, 1.0), True),
        (nn.Dropout(0.3), True),
        (nn.LeakyReLU(0.2), False),
        (nn.SiLU(), False),
        (nn.GELU(), False),
        (nn.Mish(), False),
        (nn.Hardswish(), False),
        (nn.ELU(), False),
    ],
)
def test_replacement_rows(module: nn.Module, exact: bool) -> None:
    """Every exact row computes the same outputs (in the hardware range); others are marked."""
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), module, nn.Conv2d(8, 4, 1))
    adapted, reps = replace_ops(model)
    assert len(reps) == 1 and reps[0].exact is exact
    x = torch.rand(2, 3, 8, 8) - 0.5
    model.eval(), adapted.eval()
    if exact:
        with torch.no_grad():
            y = model[0](x).clamp(max=1.0)  # the output saturation the clamp rows rely on
            torch.testing.assert_close(adapted[2](adapted[1](y)), model[2](model[1](y)))


@pytest.mark.parametrize(
    "norm",
    [
        nn.InstanceNorm2d(8),
        nn.GroupNorm(2, 8),
        nn.GroupNorm(1, 8),
        nn.InstanceNorm2d(8, affine=True),
    ],
)
def test_norms_become_batchnorm(norm: nn.Module) -> None:
    adapted, reps = replace_ops(nn.Sequential(nn.Conv2d(3, 8, 3), norm))
    assert isinstance(adapted[1], nn.BatchNorm2d) and reps[0].row == "norm"


def test_bilinear_becomes_nearest() -> None:
    adapted, _ = replace_ops(nn.Sequential(nn.Upsample(scale_factor=2, mode="bilinear")))
    assert adapted[0].mode == "nearest" and adapted[0].scale_factor == 2


def test_refusals_named_all_at_once() -> None:
    from support.adapt_models import Gated

    names = {c for _, c, _ in refusals(Gated())}
    assert names == {"Sigmoid", "Tanh"}


def test_every_row_has_a_reason() -> None:
    assert all(r.why and r.replacement and r.exact for r in ROWS)


@pytest.mark.parametrize("multiplier", [0.75, 0.5, 0.25])
def test_width_keeps_inputs_outputs_and_concatenations(multiplier: float) -> None:
    from support.adapt_models import TinyNormUNet

    adapted, _ = replace_ops(TinyNormUNet())
    student, kept = narrow(adapted, multiplier, (3, 16, 16))
    out = student.eval()(torch.zeros(1, 3, 16, 16))
    assert out.shape == (1, 5, 16, 16)
    assert student.enc[0].out_channels == hidden_width(16, multiplier)
    assert student.dec[0].in_channels == hidden_width(32, multiplier) + hidden_width(16, multiplier)
    assert kept["head"] == tuple(range(5))


def test_adapt_end_to_end_compiles_and_passes(tmp_path: Path, capsys) -> None:
    """With a data-loading worker; the first line says where it trains (no GPU here)."""
    out = tmp_path / "out"
    args = ["adapt", f"{MODELS}:TinyNormUNet", "-o", str(out), *TINY, "--workers", "1"]
    code, stdout, _ = run_cli(args, capsys)
    assert code == 0, stdout
    assert stdout.splitlines()[0] == f"adapting on the CPU, {torch.get_num_threads()} threads"
    for row in ("original float", "adapted float", "QAT-eval", "bit-exact"):
        assert row in stdout
    doc = json.loads((out / "adapt.json").read_text())
    assert {r["row"] for r in doc["replacements"]} == {"norm", "activation", "upsample", "dropout"}
    assert doc["width"] == 4.0 and doc["scores"]["bit-exact"]["miou"] >= 0  # widened: room
    assert doc["width_tries"][0]["width"] == 4.0 and "width 4, hidden layers at most" in stdout
    size = doc["size"]  # the result as compiled: parameters, weight bytes, predicted latency
    assert size["params"] > size["original_params"] and size["cycles"] > 0
    assert f"size: {size['params']:,} parameters" in stdout
    assert doc["epochs"] == {"distill": 1, "qat": 1}
    compiles_and_passes(out, tmp_path / "c", capsys)
    args = [
        "evaluate", f"{out / 'adapted.py'}:Adapted", "--checkpoint", str(out / "adapted.pth"),
        "--size", "16", "--length", "16",
    ]  # fmt: skip
    code, stdout, _ = run_cli(args, capsys)
    bit_exact = 100 * doc["scores"]["bit-exact"]["miou"]
    assert code == 0 and f"{bit_exact:.2f}" in stdout  # the same images, the same score
    assert stdout.startswith("evaluating on the CPU")


def compiles_and_passes(out: Path, build: Path, capsys) -> None:
    """compile OUT/adapted.py:Adapted with OUT/adapted.pth and its sample: self-test PASS."""
    args = [
        "compile", f"{out / 'adapted.py'}:Adapted", "--checkpoint", str(out / "adapted.pth"),
        "--sample", str(out / "sample.npy"), "-o", str(build), "--run", "--no-report",
    ]  # fmt: skip
    code, stdout, _ = run_cli(args, capsys)
    assert code == 0 and "PASS" in stdout


class _Stop(Exception):
    pass


def _stop(record) -> None:
    raise _Stop


def test_resume_continues_the_same_run(tmp_path: Path, capsys) -> None:
    """A run stopped after its first epoch, resumed, ends with the uninterrupted run's weights."""
    from cnnforge.adaptation.run import adapt_model
    from cnnforge.api.targets import get_target
    from cnnforge.training.loop import TrainConfig
    from cnnforge.training.run import DataSpec

    two = [a if a != "1" else "2" for a in TINY]
    assert (
        run_cli(["adapt", f"{MODELS}:TinyNormUNet", "-o", str(tmp_path / "a"), *two], capsys)[0]
        == 0
    )
    with pytest.raises(_Stop):
        adapt_model(
            f"{MODELS}:TinyNormUNet", {}, None, target=get_target("MAX78000"),
            data=DataSpec("shapes", None, 16, 32, 16, 0), out=tmp_path / "b",
            config=TrainConfig(epochs=2, batch_size=32, lr=3e-3, seed=0), on_epoch=_stop,
            allow_untrained=True,
        )  # fmt: skip
    assert not (tmp_path / "b" / "adapted.py").exists()
    args = ["adapt", f"{MODELS}:TinyNormUNet", "-o", str(tmp_path / "b"), *two, "--resume"]
    code, stdout, _ = run_cli(args, capsys)
    assert code == 0 and "epoch 1 (float)" in stdout and "epoch 0 (float)" not in stdout
    a = torch.load(tmp_path / "a" / "adapted.pth", weights_only=True)
    b = torch.load(tmp_path / "b" / "adapted.pth", weights_only=True)
    assert all(torch.equal(a[k], b[k]) for k in a)


def _bad(args: list[str], capsys) -> str:
    code, out, err = run_cli(["adapt", *args, *TINY], capsys)
    assert code == 2
    lines = [ln for ln in (out + err).splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in out + err
    out = Path(args[args.index("-o") + 1])
    if out.name == "out":  # a refused run leaves nothing: no OUT, no staging or lock beside it
        assert not list(out.parent.glob("*out*")), list(out.parent.iterdir())
    return lines[0]


def test_bad_input_run_exists(tmp_path: Path, capsys) -> None:
    (tmp_path / "run").mkdir()
    line = _bad([f"{MODELS}:TinyNormUNet", "-o", str(tmp_path)], capsys)
    assert "--resume" in line and "--overwrite" in line


@pytest.mark.parametrize(
    ("flags", "needle"),
    [(["--gpus", "7"], "no CUDA device 7"), (["--cpu", "--gpus", "0"], "--cpu and --gpus"),
     (["--workers", "-2"], "--workers -2")],
)  # fmt: skip
def test_bad_input_compute_device(flags: list[str], needle: str, tmp_path: Path, capsys) -> None:
    line = _bad([f"{MODELS}:TinyNormUNet", "-o", str(tmp_path / "a"), *flags], capsys)
    assert needle in line
    assert not (tmp_path / "a").exists()


@pytest.mark.parametrize("width", ["abc", "0", "8.5"])
def test_bad_input_width(width: str, tmp_path: Path, capsys) -> None:
    line = _bad([f"{MODELS}:TinyNormUNet", "--width", width, "-o", str(tmp_path / "out")], capsys)
    assert "--width" in line


def test_bad_input_classes(tmp_path: Path, capsys) -> None:
    out = str(tmp_path / "out")
    line = _bad([f"{MODELS}:TinyNormUNet", "--model-arg", "classes=3", "-o", out], capsys)
    assert "classes" in line


def test_bad_input_checkpoint(tmp_path: Path, capsys) -> None:
    ckpt = tmp_path / "wrong.pth"
    torch.save({"conv.weight": torch.zeros(1)}, ckpt)
    out = str(tmp_path / "out")
    line = _bad([f"{MODELS}:TinyNormUNet", "--checkpoint", str(ckpt), "-o", out], capsys)
    assert "wrong.pth" in line or "state_dict" in line or "checkpoint" in line


def test_bad_input_no_replacement(tmp_path: Path, capsys) -> None:
    line = _bad([f"{MODELS}:Gated", "-o", str(tmp_path / "out")], capsys)
    assert "Sigmoid" in line and "Tanh" in line


def test_width_follows_export_when_fx_cannot() -> None:
    from support.adapt_models import Residual

    student, kept = narrow(Residual(), 0.5, (3, 16, 16))
    assert student.stem[0].out_channels == 8 and student.body[0].in_channels == 8
    assert student.body[0].out_channels == 8 and kept["head"] == tuple(range(5))
    assert student.eval()(torch.zeros(1, 3, 16, 16)).shape == (1, 5, 16, 16)


def test_bad_input_what_no_width_fixes(tmp_path: Path, capsys) -> None:
    line = _bad([f"{MODELS}:PreActivation", "-o", str(tmp_path / "out")], capsys)
    assert "norm" in line and "BatchNorm folds only" in line


def test_benchmark_smoke(tmp_path: Path, capsys) -> None:
    """benchmarks/adapt.py --smoke: MONAI's UNet and AttentionUnet (its gates opened) adapted,
    SegResNet (pre-activation norms) refused by name after the depth cut."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("adapt_bench", ROOT / "benchmarks" / "adapt.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    models = "UNet,AttentionUnet,SegResNet"
    rows = bench.main(["--smoke", "--models", models, "--work", str(tmp_path)])
    assert rows[0]["model"] == "UNet" and 0 <= rows[0]["scores"]["bit-exact"] <= 1
    assert rows[0]["width"] >= 1 and rows[0]["size"]["params"] > rows[0]["size"]["original_params"]
    assert 0 <= rows[1]["scores"]["bit-exact"] <= 1
    assert "norm1" in rows[2]["error"]
    assert "refused" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("layer", "row", "convs"),
    [
        (nn.Conv2d(3, 8, 7, stride=2, padding=3), "kernel", 3),
        (nn.Conv2d(3, 8, 5, padding=2), "kernel", 2),
        (nn.Conv2d(3, 8, 3, padding=2, dilation=2), "dilation", 2),
        (nn.Conv2d(3, 8, 3, padding=3, dilation=3), "dilation", 3),
        (nn.MaxPool2d(3, stride=2, padding=1), "pool-padding", 0),
        (nn.AvgPool2d(3, stride=2, padding=1), "pool-padding", 0),
    ],
)
def test_kernel_stride_dilation_rows(layer: nn.Module, row: str, convs: int) -> None:
    """Each such layer becomes 3x3 convs or an unpadded pool with the same output shape; none
    of these rows is exact, and the check then passes the layer."""
    from cnnforge.adaptation.fit import check_fits
    from cnnforge.api.targets import get_target

    model = nn.Sequential(nn.Conv2d(3, 3, 1), layer, nn.Conv2d(layer_out(layer), 4, 1)).eval()
    adapted, reps = replace_ops(model)
    assert [(r.row, r.exact) for r in reps] == [(row, False)]
    x = torch.rand(1, 3, 16, 16)
    assert adapted(x).shape == model(x).shape
    assert sum(isinstance(m, nn.Conv2d) for m in adapted[1].modules()) == convs
    assert check_fits(adapted, (3, 16, 16), get_target("MAX78000")).fits


def layer_out(layer: nn.Module) -> int:
    return getattr(layer, "out_channels", 3)


def test_not_same_padding_is_left_to_check() -> None:
    """A 7x7 without 'same' padding has no stacked form: no row, check names it."""
    _, reps = replace_ops(nn.Sequential(nn.Conv2d(3, 8, 7, padding=1)))
    assert reps == []


def test_resnet_stem_adapts_compiles_and_passes(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    code, stdout, _ = run_cli(["adapt", f"{MODELS}:ResNetStem", "-o", str(out), *TINY], capsys)
    assert code == 0, stdout
    rows = [r["row"] for r in json.loads((out / "adapt.json").read_text())["replacements"]]
    assert sorted(rows) == ["dilation", "kernel", "kernel", "pool-padding"]
    compiles_and_passes(out, tmp_path / "c", capsys)


def test_depth_cut_removes_repeats_until_the_layers_fit() -> None:
    """More than 32 layers: the last repeats of the longest stage go first, until check's
    layer count passes; each cut is a replacement (row depth) and the rest still runs."""
    from cnnforge.adaptation.depth import too_deep
    from cnnforge.adaptation.fit import check_fits, preflight
    from cnnforge.api.targets import get_target
    from support.adapt_models import Block, Deep

    target = get_target("MAX78000")
    model = Deep().eval()
    assert too_deep(model, (3, 16, 16), target)
    adapted, reps = preflight(model, (3, 16, 16), target)
    cuts = [r.path for r in reps if r.row == "depth"]
    assert cuts and cuts[0] == "stage2.11" and all(r.exact is False for r in reps)
    assert "stage1.0" not in cuts and "stage2.0" not in cuts
    assert check_fits(adapted, (3, 16, 16), target).fits
    put_back = copy.deepcopy(adapted)
    set_module(put_back, cuts[-1], Block(16 if cuts[-1].startswith("stage1") else 32))
    assert too_deep(put_back, (3, 16, 16), target)  # no more cut than needed
    assert adapted(torch.zeros(1, 3, 16, 16)).shape == (1, 5, 16, 16)


def test_sigmoid_gate_opens() -> None:
    """x * sigmoid(...) inside a module becomes x, the gate's branch gone; the rest of the
    network computes what it did with the gate held at 1."""
    from cnnforge.adaptation.gates import open_gates
    from support.adapt_models import TinyAttentionUNet

    model = TinyAttentionUNet().eval()
    opened, reps = open_gates(model)
    assert [(r.path, r.row, r.exact) for r in reps] == [("attention", "gate", False)]
    assert refusals(opened) == [] and refusals(model) != []
    assert not any(isinstance(m, nn.Conv2d) for m in opened.attention.modules())
    x = torch.rand(2, 3, 16, 16)
    held_open = copy.deepcopy(model)
    held_open.attention.psi[2] = nn.Identity()
    with torch.no_grad():
        nn.init.zeros_(held_open.attention.psi[0].weight)
        nn.init.zeros_(held_open.attention.psi[0].bias)
        held_open.attention.psi[1] = nn.Identity()
        held_open.attention.psi[0].bias += 1.0  # the gate at 1
        torch.testing.assert_close(opened(x), held_open(x))


def test_attention_unet_adapts_compiles_and_passes(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    code, stdout, _ = run_cli(
        ["adapt", f"{MODELS}:TinyAttentionUNet", "-o", str(out), *TINY], capsys
    )
    assert code == 0, stdout
    rows = [r["row"] for r in json.loads((out / "adapt.json").read_text())["replacements"]]
    assert rows == ["gate"]
    compiles_and_passes(out, tmp_path / "c", capsys)


def test_depth_cut_is_printed_and_compiles(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    code, stdout, _ = run_cli(["adapt", f"{MODELS}:Deep", "-o", str(out), *TINY], capsys)
    assert code == 0, stdout
    assert "depth: 14 repeated blocks cut (stage2.11, stage2.10," in stdout
    compiles_and_passes(out, tmp_path / "c", capsys)


def test_the_width_search_checks_each_shape_once(monkeypatch) -> None:
    """A try shaped as one checked before (width 1 without a cap: preflight's model; the wide
    tries all capped at 64) reuses its report; the search ends as it does alone."""
    import cnnforge.adaptation.fit as fit
    from cnnforge.api.targets import get_target

    target, shape = get_target("MAX78000"), (3, 16, 16)
    wide = nn.Sequential(
        nn.Conv2d(3, 192, 3, padding=1), nn.ReLU(), nn.Conv2d(192, 192, 3, padding=1), nn.ReLU(),
        nn.Conv2d(192, 5, 1),
    )  # fmt: skip
    calls = []
    check = fit.check_fits
    monkeypatch.setattr(fit, "check_fits", lambda *a: calls.append(a[0]) or check(*a))
    for width in ("1", "auto"):
        adapted = replace_ops(copy.deepcopy(wide).eval())[0]
        alone = fit.choose_width(adapted, shape, target, width, workers=1)  # checks counted here
        calls.clear()
        checked = fit.Checked()
        adapted, _ = fit.preflight(wide.eval(), shape, target, checked)
        _, w, cap, tries, _ = fit.choose_width(adapted, shape, target, width, checked, workers=1)
        assert tries == alone[3] and (w, cap) == alone[1:3] and len(tries) > 1
        unchanged = [t for t in tries if t["width"] == 1 and t["cap"] is None]
        shapes = [fit._shapes(c) for c in calls]  # one check per shape: a repeat reuses it
        assert calls[0] is adapted and len(set(shapes)) == len(calls)
        assert len(calls) <= len(tries) + 1 - len(unchanged)
    assert tries[0]["width"] == fit.WIDTHS[0] and not unchanged  # auto: widest first


def test_the_plateau_rule_drops_the_rate_then_stops() -> None:
    """No gain in validation mIoU: the rate x 0.3 after each PATIENCE + 1 epochs without one,
    three times; the fourth plateau sets it at its floor, and PATIENCE epochs more without a
    gain end the run (docs/adapt.md, Recovery: at least 20 epochs)."""
    from cnnforge.adaptation import recover

    optimizer = torch.optim.Adam([nn.Parameter(torch.zeros(1))], lr=1.0)
    schedule = recover.PlateauSchedule(optimizer)
    rates: list[float] = []
    while not schedule.finished():
        schedule.step(0.5)
        rates.append(optimizer.param_groups[0]["lr"])
        assert len(rates) < 100
    drops = sorted(set(rates), reverse=True)
    assert drops == pytest.approx([1.0, 0.3, 0.09, 0.027, 0.027 * 0.999])
    bad = recover.PATIENCE + 1  # epochs without a gain before each drop
    assert len(rates) == 1 + bad * (recover.PLATEAU_DROPS + 1) + recover.PATIENCE == 20


@pytest.mark.parametrize("flag", [[], ["--no-plateau"]])
def test_no_plateau_runs_exactly_the_given_epochs(
    flag: list[str], tmp_path: Path, capsys, monkeypatch
) -> None:
    """A plateau reached after the first epoch ends each phase there; --no-plateau runs
    exactly --epochs and --qat-epochs (benchmarks/gpu.py's timings need the same run)."""
    from cnnforge.adaptation import recover

    monkeypatch.setattr(recover.PlateauSchedule, "finished", lambda self: self.last_epoch >= 1)
    out = tmp_path / "out"
    fixed = [*TINY, "--epochs", "3", "--qat-epochs", "2", *flag]
    code, stdout, _ = run_cli(["adapt", f"{MODELS}:TinyNormUNet", "-o", str(out), *fixed], capsys)
    assert code == 0, stdout
    doc = json.loads((out / "adapt.json").read_text())
    if flag:
        assert doc["epochs"] == {"distill": 3, "qat": 2} and doc["plateau"] is False
        assert "epochs: 3 distilling, 2 quantization-aware (as given: no plateau rule)" in stdout
    else:
        assert doc["epochs"] == {"distill": 1, "qat": 1} and doc["plateau"] is True
        assert "(each to its plateau or cap)" in stdout
