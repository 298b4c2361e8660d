"""Issue 32, the promises a new user tries first, each run as the user runs it (a subprocess):
the demo runs twice, ``train -o`` keeps the manifest rule, ``--fold`` trains, check and compile
agree on HLS and generic, ``budget --accuracy`` on the QAT model, one line for a failure, no
false note, piped text unwrapped."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cnnforge.api.targets import check_for
from cnnforge.errors import CnnforgeError
from cnnforge.frontend import load_network
from cnnforge.ir import INPUT, Activation, Layer, Network, Op, Pooling, PoolKind
from cnnforge.outputs import MANIFEST
from cnnforge.targets.generic.integer import (
    IntegerSemantics,
    QuantizedGeneric,
    quantized_accuracy,
    simulate_generic,
)
from cnnforge.targets.generic.run import check_generic
from cnnforge.targets.generic.target import parse_generic
from cnnforge.targets.hls.build import find_ap_types
from cnnforge.targets.hls.device import HLS
from support.cli import one_error_line
from support.cli import run_cnnforge as cnnforge
from support.paths import TESTS
from support.plan import conv
from support.random_nets import input_shape, step_args

RANDOM = f"{TESTS / 'support' / 'random_nets.py'}:Steps"
TINY_TRAIN = ["--epochs", "1", "--train-length", "8", "--val-length", "8"]


# ---- 1. the demo runs twice ----------------------------------------------------------------


@pytest.mark.slow
def test_demo_runs_twice_in_the_same_folder(tmp_path):
    first = cnnforge("demo", "--no-run", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    second = cnnforge("demo", "--no-run", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    doc = json.loads((tmp_path / "cnnforge-demo" / MANIFEST).read_text())
    assert f"compile/{MANIFEST}" in doc["files"]  # the nested output is listed as cnnforge's


# ---- 2. train -o: the manifest rule of every writer ----------------------------------------


def test_train_refuses_a_folder_of_the_users_files(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "best.pth").write_bytes(b"the user's own weights")
    for extra in ([], ["--overwrite"]):
        line = one_error_line(cnnforge("train", "qat-unet", *TINY_TRAIN, "-o", str(mine), *extra))
        assert "already exists" in line or "did not write" in line, line
    assert (mine / "best.pth").read_bytes() == b"the user's own weights"
    assert sorted(p.name for p in mine.iterdir()) == ["best.pth"]


def test_train_refuses_the_current_directory(tmp_path):
    for extra in ([], ["--overwrite"]):
        r = cnnforge("train", "qat-unet", *TINY_TRAIN, "-o", ".", *extra, cwd=tmp_path)
        one_error_line(r)
    assert list(tmp_path.iterdir()) == []


def test_train_output_has_a_manifest_and_overwrite_resume_follow_it(tmp_path):
    out = tmp_path / "run"
    tiny = ["qat-unet", "--model-arg", "channels=4,8,8,8", "--size", "16", *TINY_TRAIN]
    assert cnnforge("train", *tiny, "-o", str(out)).returncode == 0
    doc = json.loads((out / MANIFEST).read_text())
    assert {"best.pth", "last.pth", "train.log"} <= set(doc["files"])
    assert "already exists" in one_error_line(cnnforge("train", *tiny, "-o", str(out)))
    assert cnnforge("train", *tiny, "-o", str(out), "--overwrite").returncode == 0
    resumed = cnnforge("train", *tiny[:-6], "--epochs", "2", *TINY_TRAIN[2:], "-o", str(out),
                       "--resume")  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert len((out / "train.log").read_text().splitlines()) == 2
    # and another command's --overwrite recognizes train's folder as cnnforge's
    (out / "stray.txt").write_text("mine")
    assert "stray.txt" in one_error_line(cnnforge("train", *tiny, "-o", str(out), "--overwrite"))


def test_qat_policy_file_and_best_pth_in_other_commands(tmp_path):
    """docs/training.md: the policy file (start_epoch, weight_bits, overrides) and
    "--checkpoint best.pth works in every command"."""
    policy = tmp_path / "qat_policy.yaml"
    policy.write_text("start_epoch: 1\nweight_bits: 8\noverrides: {enc1: 4}\n")
    arch = ["qat-unet", "--model-arg", "channels=4,8,8,8"]
    out = str(tmp_path / "run")
    r = cnnforge("train", *arch, "--size", "16", "--epochs", "2", "--train-length", "8",
                 "--val-length", "8", "--qat-policy", str(policy), "-o", out)  # fmt: skip
    assert r.returncode == 0, r.stderr
    best = str(tmp_path / "run" / "best.pth")
    c = cnnforge("check", *arch, "-i", "3,16,16", "--checkpoint", best, "--json", "-")
    assert c.returncode == 0, c.stderr
    assert json.loads(c.stdout)["weight_bits"]["enc1"] == 4  # the override, kept by check
    np.save(tmp_path / "x.npy", np.zeros((3, 16, 16), np.int8))
    s = cnnforge("simulate", *arch, "--checkpoint", best, "--input", str(tmp_path / "x.npy"),
                 "--output", str(tmp_path / "y.npy"))  # fmt: skip
    assert s.returncode == 0 and s.stderr == "", s.stderr  # trained weights: no note
    e = cnnforge("evaluate", *arch, "--checkpoint", best, "--size", "16", "--length", "4")
    assert e.returncode == 0, e.stderr
    assert all(mode in e.stdout for mode in ("float", "QAT-eval", "bit-exact")), e.stdout


# ---- 3. --fold, the command of docs/training.md ----------------------------------------------


@pytest.mark.slow
def test_fold_trains(tmp_path):
    """The issue's command, with the 5 classes of shapes (unet-large is built for CamVid's 4)."""
    out = str(tmp_path / "f")
    r = cnnforge("train", "unet-large", "--model-arg", "num_classes=5", "--size", "64",
                 "--fold", "4", *TINY_TRAIN, "--batch-size", "4", "-o", out)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "f" / "best.pth").is_file()


def test_fold_trains_and_evaluates_a_qat_model(tmp_path):
    """A QAT model taking a 2x2-folded input (12 channels, 20 = 5 classes x 4 outputs):
    train and evaluate fold the same way, QAT-eval == bit-exact."""
    arch = ["qat-unet", "--model-arg", "in_channels=12", "--model-arg", "classes=20",
            "--model-arg", "channels=4,8,8,8", "--fold", "2", "--size", "16"]  # fmt: skip
    r = cnnforge("train", *arch, "--epochs", "2", *TINY_TRAIN[2:], "-o", str(tmp_path / "f"))
    assert r.returncode == 0, r.stderr
    best = str(tmp_path / "f" / "best.pth")
    e = cnnforge("evaluate", *arch, "--checkpoint", best, "--length", "4")
    assert e.returncode == 0, e.stderr
    assert "QAT-eval == bit-exact" in e.stdout, e.stdout


def test_a_fold_that_does_not_divide_is_one_line(tmp_path):
    r = cnnforge("train", "qat-unet", "--fold", "2", *TINY_TRAIN, "-o", str(tmp_path / "f"))
    assert "--fold 2" in one_error_line(r)
    assert not (tmp_path / "f").exists()


# ---- 4. check = compile on HLS and generic -----------------------------------------------------


def test_check_hls_refuses_what_compile_refuses(tmp_path):
    model = tmp_path / "m.py"
    model.write_text(
        "import torch.nn as nn\n"
        "class M(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.c = nn.Conv1d(4, 8, 3, padding=1)\n"
        "        self.fc = nn.Linear(8 * 16, 10)\n"
        "    def forward(self, x):\n"
        "        return self.fc(self.c(x).flatten(1))\n"
    )
    r = cnnforge("check", f"{model}:M", "-i", "4,16", "-d", "HLS")
    assert r.returncode == 1 and "not implemented by the HLS engines" in r.stdout, r.stdout
    np.save(tmp_path / "x.npy", np.zeros((4, 16), np.int8))
    c = cnnforge("compile", f"{model}:M", "-i", "4,16", "-d", "HLS", "--ptq",
                 "--sample", str(tmp_path / "x.npy"), "-o", str(tmp_path / "out"))  # fmt: skip
    assert "not implemented by the HLS engines" in one_error_line(c)


def _compiles(args: dict, device: str, tmp_path: Path) -> bool:
    from cnnforge.api.targets import compile_model
    from cnnforge.pipeline import CompileOptions

    out = tmp_path / "c"
    sample = np.zeros(input_shape(args), np.int8)
    options = CompileOptions(output=out, model=RANDOM, device=device, ptq=True, sample=sample,
                             model_args=args, overwrite=True, report=False)  # fmt: skip
    try:
        compile_model(options)
    except CnnforgeError:
        return False
    return True


@settings(max_examples=25, deadline=None)
@given(step_args())
def test_check_and_compile_agree_on_hls(tmp_path_factory, args):
    network = load_network(RANDOM, input_shape(args), args)
    fits = check_for(network, HLS).fits
    assert fits == _compiles(args, "HLS", tmp_path_factory.mktemp("hls")), args


@settings(max_examples=25, deadline=None)
@given(step_args())
def test_check_and_budget_accuracy_agree_on_generic(args):
    network = load_network(RANDOM, input_shape(args), args)
    fits = not check_generic(network)
    try:
        quantized_accuracy(network, parse_generic("generic:act_bytes=1,weight_bytes=1"))
        runs = True
    except CnnforgeError:
        runs = False
    assert fits == runs, args


def test_check_generic_lists_what_budget_accuracy_refuses(tmp_path):
    model = tmp_path / "s.py"
    model.write_text(
        "import torch.nn as nn\n"
        "class S(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.c = nn.Conv2d(3, 4, 3)\n"
        "        self.a = nn.Sigmoid()\n"
        "    def forward(self, x):\n"
        "        return self.a(self.c(x))\n"
    )
    r = cnnforge("check", f"{model}:S", "-i", "3,8,8", "-d", "generic")
    assert r.returncode == 1 and "sigmoid" in r.stdout, r.stdout
    b = cnnforge("budget", f"{model}:S", "-i", "3,8,8", "-d", "generic", "--accuracy")
    assert "sigmoid" in one_error_line(b)
    ok = cnnforge("check", "qat-unet", "-d", "generic:onchip=64KiB")
    assert ok.returncode == 0 and "fits" in ok.stdout, ok.stdout


# ---- 5. budget --accuracy on the shipped QAT model ------------------------------------------


def test_budget_accuracy_on_qat_unet_gives_its_snr():
    r = cnnforge("budget", "qat-unet", "-d", "generic:onchip=64KiB", "--accuracy")
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if "SNR" in x)
    snr = float(line.split("SNR ")[1].split(" dB")[0])
    assert snr > 60, line  # 16-bit integers track the float model closely


# ---- 6. a failing command prints its error line alone ---------------------------------------


def test_failing_commands_print_one_line(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((3, 16, 16), np.int8))
    x = str(tmp_path / "x.npy")
    sim = cnnforge("simulate", "qat-unet", "-i", "3,32,32", "--input", x,
                   "--output", str(tmp_path / "y.npy"))  # fmt: skip
    assert "shape" in one_error_line(sim)
    one_error_line(cnnforge("compile", "qat-unet", "--sample", x, "-o", str(tmp_path / "c")))
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "f").write_text("x")
    one_error_line(cnnforge("budget", "qat-unet", "-d", "generic", "-o", str(tmp_path / "taken")))


def test_the_untrained_note_comes_after_success(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((3, 32, 32), np.int8))
    r = cnnforge("simulate", "qat-unet", "--input", str(tmp_path / "x.npy"),
                 "--output", str(tmp_path / "y.npy"))  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stderr.startswith("note: qat-unet has no --checkpoint"), r.stderr


# ---- 7. no false note for an ONNX file ------------------------------------------------------


def test_no_checkpoint_note_for_onnx(tmp_path):
    from torch import nn

    from support.onnx_export import export

    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU())
    onnx = export(model, (3, 8, 8), tmp_path / "small.onnx")
    np.save(tmp_path / "x.npy", np.zeros((3, 8, 8), np.int8))
    r = cnnforge("simulate", str(onnx), "--input", str(tmp_path / "x.npy"),
                 "--output", str(tmp_path / "y.npy"))  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "note" not in r.stderr, r.stderr


def test_every_model_command_takes_an_onnx_file(tmp_path):
    """docs/onnx.md: "Every command that compiles or analyzes a MODEL takes an .onnx file
    too"; the training commands say in one line that they need the PyTorch module."""
    from torch import nn

    from support.onnx_export import export

    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 4, 1))
    onnx = str(export(model, (3, 8, 8), tmp_path / "m.onnx"))
    np.save(tmp_path / "x.npy", np.zeros((3, 8, 8), np.int8))
    x, out = str(tmp_path / "x.npy"), tmp_path / "out"
    runs = {
        "analyze": [onnx],
        "check": [onnx],
        "quantize": [onnx, "-o", str(out / "q.pth")],
        "plan": [onnx, "-o", str(out / "plan")],
        "budget": [onnx, "-d", "generic:onchip=64KiB"],
        "simulate": [onnx, "--input", x, "--output", str(out / "y.npy")],
        "compile": [onnx, "--ptq", "--sample", x, "-o", str(out / "c")],
    }
    out.mkdir()
    for command, args in runs.items():
        r = cnnforge(command, *args)
        assert r.returncode == 0, (command, r.stderr)
    for command in ("train", "evaluate", "adapt"):
        extra = ["--checkpoint", x] if command == "evaluate" else ["-o", str(out / command)]
        line = one_error_line(cnnforge(command, onnx, *extra))
        assert "an ONNX file is a graph to compile" in line and "file.py:Name" in line, line


# ---- 8. piped text is not wrapped -------------------------------------------------------------


def test_piped_budget_and_its_text_file_are_unwrapped(tmp_path):
    device = "generic:onchip=16KiB"
    r = cnnforge("budget", "qat-unet", "-d", device, "-o", str(tmp_path / "b"))
    assert r.returncode == 0, r.stderr
    title = "qat-unet: schedule on generic:onchip=16384,"
    for text in (r.stdout, (tmp_path / "b" / "generic-plan.txt").read_text()):
        line = next(x for x in text.splitlines() if x.startswith(title))
        assert line.rstrip().endswith("inplace=1"), line  # the title on one line


def test_piped_help_is_unwrapped():
    for args in (["--help"], ["budget", "--help"], ["check", "--help"]):
        r = cnnforge(*args)
        assert r.returncode == 0, r.stderr
        assert "╭" not in r.stdout  # plain text, not panels drawn to a width
    budget_help = cnnforge("budget", "--help").stdout
    assert any("macs_per_cycle=1024,ddr_bytes_per_cycle=64,inplace=1,halo=keep|recompute]" in x
               for x in budget_help.splitlines())  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from((PoolKind.MAX, PoolKind.AVG)),
    st.sampled_from((Activation.NONE, Activation.RELU, Activation.RELU6, Activation.ABS)),
    st.sampled_from((8, 16)),
    st.integers(0, 2**31),
)
def test_generic_fused_pool_and_activation_equal_the_separate_layers(kind, act, bits, seed):
    """A weight layer's input pooling and fused activation (the QAT model's layers) compute
    what a POOL layer, the layer and an ACTIVATION layer compute, bit for bit."""
    rng = np.random.default_rng(seed)
    pool = Pooling(kind, (2, 2), (2, 2))
    fused = replace(conv("c", INPUT, 3, 4, 4, pool=pool), activation=act)
    separate = (
        Layer("p", Op.POOL, (INPUT,), (3, 4, 4), pool=pool),
        conv("c", "p", 3, 4, 4),
        Layer("a", Op.ACTIVATION, ("c",), (4, 4, 4), activation=act),
    )
    sem = IntegerSemantics(act_bits=bits, weight_bits=bits)
    w = rng.integers(-(2 ** (bits - 1)), 2 ** (bits - 1), (4, 3, 3, 3)).astype(float)
    b = rng.integers(-(2**20), 2**20, 4).astype(float)
    frac = {INPUT: 5, "p": 5, "c": 3, "a": 3}
    x = torch.as_tensor(rng.integers(-(2 ** (bits - 1)), 2 ** (bits - 1), (2, 3, 8, 8)))

    def run(layers, out):
        net = Network("n", (3, 8, 8), tuple(layers))
        q = QuantizedGeneric(net, sem, frac, {"c": w}, {"c": b}, {"c": bits - 2})
        return simulate_generic(q, x)[out]

    assert torch.equal(run([fused], "c"), run(separate, "a" if act is not Activation.NONE else "c"))


@pytest.mark.slow
@pytest.mark.skipif(
    find_ap_types() is None or shutil.which("g++") is None,
    reason="needs g++ and the ap_types headers (pip install hls4ml, or set CNNFORGE_AP_TYPES)",
)
def test_hls_compile_run_sanitize(tmp_path):
    """docs/hls-target.md §8: ``--run --sanitize`` builds the C-simulation under ASan/UBSan."""
    np.save(tmp_path / "x.npy", np.random.default_rng(0).integers(-128, 128, (3, 16, 16)))
    x, out = str(tmp_path / "x.npy"), str(tmp_path / "o")
    r = cnnforge("compile", "unet-voc", "-i", "3,16,16", "-d", "HLS", "--ptq", "--sample", x,
                 "-o", out, "--run", "--sanitize")  # fmt: skip
    assert r.returncode == 0, r.stderr
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["selftest"]["passed"] and summary["selftest"]["output"].startswith("PASS")
