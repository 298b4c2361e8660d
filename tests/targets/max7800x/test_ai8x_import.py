"""Importing the vendor's YAML + checkpoint pairs (targets/max7800x/ai8x.py) and rejecting bad
input."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from cnnforge.errors import ConfigError
from cnnforge.ir import INPUT, Op
from cnnforge.targets.max7800x.ai8x import load_ai8x, read_ai8x
from cnnforge.targets.max7800x.device import MAX78000
from cnnforge.targets.max7800x.kernel_words import processors_per_pass

PAIRS = {
    "mnist": ("mnist-chw-ai85.yaml", "ai85-mnist-qat8-q.pth.tar"),
    "unet": ("camvid-unet-large.yaml", "ai85-camvid-unet-large-q.pth.tar"),
    "fakept": ("camvid-unet-large-fakept.yaml", "ai85-camvid-unet-large-fakept-q.pth.tar"),
}


def pair(ai8x: Path, key: str) -> tuple[Path, Path]:
    yaml_name, ckpt_name = PAIRS[key]
    return ai8x / "networks" / yaml_name, ai8x / "trained" / ckpt_name


def test_processors_per_pass_rule():
    # docs/hardware/network-yaml.md §4: 48 -> 48, 112 -> 56 (2 passes), 100 -> 52, 64 -> 64, 65 ->
    # 36
    counts = (1, 48, 64, 65, 100, 112, 128, 1024)
    assert [processors_per_pass(c, MAX78000) for c in counts] == [
        1, 48, 64, 36, 52, 56, 64, 64,
    ]  # fmt: skip


def test_mnist_import(ai8x_data):
    net, plan = load_ai8x(*pair(ai8x_data, "mnist"), device="MAX78000")
    assert net.name == "ai85net5" and net.input_shape == (1, 28, 28)
    assert [layer.out_shape for layer in net] == [
        (60, 28, 28), (60, 16, 16), (56, 8, 8), (12, 4, 4), (10,),
    ]  # fmt: skip
    fc = net.layers[-1]
    assert fc.op is Op.LINEAR and fc.flatten and fc.wide and fc.in_channels == 192
    assert fc.quant.bias.min() == -35 and fc.quant.bias.max() == 31  # floor(-4417 / 128)
    assert [layer.quant.output_shift for layer in net] == [-1, -2, -2, -1, 0]
    assert plan.data_format == "CHW" and plan.device.name == "MAX78000"
    assert [p.out_processors for p in plan.placements] == [
        0xFFFFFFFFFFFFFFF0, 0xFFFFFFFFFFFFFFF0, 0x0FFFFFFFFFFFFFF0, 0xFFF, 0x3FF,
    ]  # fmt: skip
    assert [p.in_offset for p in plan.placements] == [0, 0x2000, 0, 0x2000, 0]
    assert [p.out_offset for p in plan.placements] == [0x2000, 0, 0x2000, 0, 0x1000]


@pytest.mark.parametrize("key", ["unet", "fakept"])
def test_unet_import(ai8x_data, key):
    net, plan = load_ai8x(*pair(ai8x_data, key), device="MAX78000")
    assert len(net) == 19 and net.input_shape == (48, 48, 48)
    pt = net.layers[7]
    assert pt.op is (Op.PASSTHROUGH if key == "unet" else Op.CONV2D)
    assert pt.inputs == ("layer5",) and pt.out_shape == (56, 12, 12)
    assert net.layers[8].inputs == ("layer6",) and net.layers[8].op is Op.CONVTRANSPOSE2D
    assert net.layers[9].inputs == ("layer8", "layer7") and net.layers[9].in_channels == 112
    assert net.layers[11].inputs == ("layer10", "layer4")
    assert net.layers[13].inputs == ("layer12", "layer3")
    assert net.layers[0].inputs == (INPUT,) and net.layers[-1].out_shape == (64, 48, 48)
    p7, p8 = plan.placements[7], plan.placements[8]
    assert (p7.in_offset, p7.out_offset, p7.write_gap) == (0x5000, 0x4004, 1)
    assert (p8.in_offset, p8.out_offset, p8.write_gap) == (0x6000, 0x4000, 1)
    assert plan.placements[14].in_offset == 0x0700  # default: previous layer's out_offset
    prep0 = net.layers[0].quant
    assert (prep0.bias.min(), prep0.bias.max()) == (-28, 27)


def test_modules_and_explicit_shape(ai8x_data):
    model = read_ai8x(
        *pair(ai8x_data, "fakept"), input_shape=(48, 88, 88), overlap_data=True, device="MAX78000"
    )
    assert model.network.layers[6].out_shape == (112, 11, 11)
    assert dict(model.modules)["layer7"] == "pt" and model.epoch == 73
    assert model.plan.allow_overlap and model.dataset == "CamVid_s352_c3_reduced"


def test_float_weights_mean_the_same(ai8x_data):
    net, _ = load_ai8x(*pair(ai8x_data, "mnist"), device="MAX78000")
    conv = net.layers[0]
    scale = 2.0 ** (conv.quant.output_shift + 1 - 8)
    assert np.array_equal(conv.weight, (conv.quant.weights * scale).astype(np.float32))


# ---- bad input -------------------------------------------------------------------------------


def sub(old: str, new: str, count: int = -1):
    """A YAML edit: replace ``old`` by ``new``."""
    return lambda text: text.replace(old, new, count)


def _copy(ai8x: Path, tmp: Path, key: str, edit=None) -> tuple[Path, Path]:
    yaml_path, ckpt = pair(ai8x, key)
    text = yaml_path.read_text()
    if edit is not None:
        text = edit(text)
    out = tmp / yaml_path.name
    out.write_text(text)
    shutil.copy(ai8x / "samples" / "sample_mnist.npy", tmp / "sample_mnist.npy")
    return out, ckpt


def _error(ai8x, tmp, key, edit, shape=None) -> str:
    yaml_path, ckpt = _copy(ai8x, tmp, key, edit)
    with pytest.raises(ConfigError) as info:
        load_ai8x(yaml_path, ckpt, shape, device="MAX78000")
    text = info.value.one_line()
    assert "\n" not in text
    return text


UNET_SHAPE = (48, 48, 48)


def test_syntax_error_has_line(ai8x_data, tmp_path):
    msg = _error(ai8x_data, tmp_path, "mnist", sub("pad: 2", "pad: [2"))
    assert "mnist-chw-ai85.yaml:" in msg and "syntax" in msg


def test_duplicate_key(ai8x_data, tmp_path):
    msg = _error(ai8x_data, tmp_path, "mnist", sub("pad: 2", "pad: 2\n    pad: 1"))
    assert "duplicate key 'pad'" in msg and "mnist-chw-ai85.yaml:18" in msg


def test_unknown_layer_key(ai8x_data, tmp_path):
    msg = _error(ai8x_data, tmp_path, "mnist", sub("pad: 2", "kernel: 3"))
    assert "unknown key 'kernel'" in msg and "layer 1" in msg and ".yaml:17" in msg


def test_unknown_global_key(ai8x_data, tmp_path):
    msg = _error(ai8x_data, tmp_path, "mnist", sub("arch:", "input_shape: 3\narch:"))
    assert "unknown global key 'input_shape'" in msg and ".yaml:4" in msg


def test_bad_value(ai8x_data, tmp_path):
    msg = _error(ai8x_data, tmp_path, "mnist", sub("op: mlp", "op: conv3d"))
    assert "unknown value 'conv3d' for `op`" in msg or "for `operation`" in msg


def test_yaml_has_more_layers_than_checkpoint(ai8x_data, tmp_path):
    extra = "\n  - op: conv2d\n    processors: 0x3ff\n    pad: 0\n    kernel_size: 1x1\n"
    msg = _error(ai8x_data, tmp_path, "mnist", lambda t: t + extra)
    assert "the YAML has 6 layers with weights but the checkpoint has 5" in msg
    assert "layer 5" in msg


def test_yaml_has_fewer_layers_than_checkpoint(ai8x_data, tmp_path):

    def cut(text: str) -> str:
        return text[: text.index("  - op: mlp")]

    msg = _error(ai8x_data, tmp_path, "mnist", cut)
    assert "has 4 layers with weights but the checkpoint has 5" in msg and "fc.op.weight" in msg


def test_kernel_shape_mismatch(ai8x_data, tmp_path):
    msg = _error(ai8x_data, tmp_path, "mnist", sub("pad: 2", "pad: 0\n    kernel_size: 1x1"))
    assert "`kernel_size` 1x1 does not match" in msg and "(3x3)" in msg and "layer 1" in msg


def test_plain_yaml_with_fakept_checkpoint(ai8x_data, tmp_path):
    yaml_path, _ = pair(ai8x_data, "unet")
    _, ckpt = pair(ai8x_data, "fakept")
    with pytest.raises(ConfigError, match="layers with weights but the checkpoint has 19"):
        load_ai8x(yaml_path, ckpt, UNET_SHAPE, device="MAX78000")


def test_processors_do_not_match_channels(ai8x_data, tmp_path):
    edit = sub("    processors: 0xfffffffffffffff0\n", "    processors: 0xffffffffffffffff\n", 1)
    msg = _error(ai8x_data, tmp_path, "mnist", edit)
    assert "layer 0: 60 output channels" in msg and "has 64" in msg


def test_input_processors_do_not_match(ai8x_data, tmp_path):
    edit = sub("processors: 0x0000000000000001", "processors: 0x3")
    msg = _error(ai8x_data, tmp_path, "mnist", edit)
    assert "layer 0: 1 input channels" in msg and "has 2" in msg


def test_chw_one_channel_per_instance(tmp_path):
    import torch

    state = {"c.op.weight": torch.ones(4, 3, 3, 3), "c.output_shift": torch.zeros(1)}
    torch.save({"state_dict": state, "arch": "x", "epoch": 1}, tmp_path / "c.pth.tar")
    text = "arch: x\ndataset: d\nlayers:\n  - processors: 0x7\n    data_format: CHW\n"
    (tmp_path / "c.yaml").write_text(text)
    with pytest.raises(ConfigError, match=r"c\.yaml:4: layer 0: CHW input, but several channels"):
        load_ai8x(tmp_path / "c.yaml", tmp_path / "c.pth.tar", (3, 8, 8), device="MAX78000")
    (tmp_path / "c.yaml").write_text(text.replace("0x7", "0x111"))
    _, plan = load_ai8x(tmp_path / "c.yaml", tmp_path / "c.pth.tar", (3, 8, 8), device="MAX78000")
    assert plan.data_format == "CHW" and plan.placements[0].out_processors == 0xF


def test_arch_mismatch(ai8x_data, tmp_path):
    msg = _error(ai8x_data, tmp_path, "mnist", sub("ai85net5", "ai85net6"))
    assert "does not match the checkpoint's arch 'ai85net5'" in msg


def test_passthrough_with_activation(ai8x_data, tmp_path):
    edit = sub("operation: None\n", "operation: None\n    activate: ReLU\n")
    msg = _error(ai8x_data, tmp_path, "unet", edit, UNET_SHAPE)
    assert "layer 7: a passthrough layer cannot have an activation" in msg


def test_missing_sample_needs_shape(ai8x_data, tmp_path):
    yaml_path, ckpt = pair(ai8x_data, "mnist")
    copy = tmp_path / "x.yaml"
    copy.write_text(yaml_path.read_text())
    with pytest.raises(ConfigError, match="--input-shape"):
        load_ai8x(copy, ckpt, device="MAX78000")
    net, _ = load_ai8x(copy, ckpt, (1, 28, 28), device="MAX78000")
    assert net.input_shape == (1, 28, 28)


def test_float_checkpoint_is_refused(tmp_path, ai8x_data):
    import torch

    state = {"conv.op.weight": torch.full((4, 1, 3, 3), 0.25), "conv.output_shift": torch.zeros(1)}
    ckpt = tmp_path / "f.pth.tar"
    torch.save({"state_dict": state, "arch": "x", "epoch": 1}, ckpt)
    yaml_path = tmp_path / "f.yaml"
    yaml_path.write_text("arch: x\ndataset: d\nlayers:\n  - processors: 1\n    out_offset: 0\n")
    with pytest.raises(ConfigError, match="not a quantized"):
        load_ai8x(yaml_path, ckpt, (1, 8, 8), device="MAX78000")


def test_foreign_global_is_refused(tmp_path):
    import fractions

    import torch

    ckpt = tmp_path / "g.pth.tar"
    torch.save({"state_dict": {}, "odd": fractions.Fraction(1, 3)}, ckpt)
    yaml_path = tmp_path / "g.yaml"
    yaml_path.write_text("arch: x\ndataset: d\nlayers:\n  - processors: 1\n")
    with pytest.raises(ConfigError, match="Fraction"):
        load_ai8x(yaml_path, ckpt, (1, 8, 8), device="MAX78000")


def test_imported_networks_pass_the_ir_verifier(ai8x_data):
    from cnnforge.passes.verify import verify

    for key in PAIRS:
        verify(
            load_ai8x(
                *pair(ai8x_data, key), UNET_SHAPE if key != "mnist" else None, device="MAX78000"
            )[0]
        )


def test_string_masks_and_output_map(ai8x_data, tmp_path):
    edit = sub("processors: 0xfffffffffffffff0\n    op: conv2d\n  - max_pool", "processors: "
               "'0xffff.ffff.ffff.fff0'\n    op: conv2d\n  - max_pool", 1)  # fmt: skip
    yaml_path, ckpt = _copy(ai8x_data, tmp_path, "mnist", edit)
    yaml_path.write_text(yaml_path.read_text().replace("layers:", "output_map: 0x3ff0\nlayers:"))
    _, plan = load_ai8x(yaml_path, ckpt, device="MAX78000")
    assert plan.placements[1].in_processors == 0xFFFFFFFFFFFFFFF0
    assert plan.placements[-1].out_processors == 0x3FF0


def test_sequence_reorders_layers(tmp_path):
    import torch

    state = {
        "a.op.weight": torch.ones(4, 2, 1, 1),
        "b.op.weight": torch.ones(2, 4, 1, 1),
    }
    torch.save({"state_dict": state, "arch": "x", "epoch": 1}, tmp_path / "s.pth.tar")
    text = (
        "arch: x\ndataset: d\nlayers:\n"
        "  - {sequence: 5, name: b, processors: 0xf, kernel_size: 1x1, pad: 0, out_offset: 0}\n"
        "  - {sequence: 2, name: a, processors: 0x3, kernel_size: 1x1, pad: 0, out_offset: 0}\n"
    )
    (tmp_path / "s.yaml").write_text(text)
    net, _ = load_ai8x(tmp_path / "s.yaml", tmp_path / "s.pth.tar", (2, 4, 4), device="MAX78000")
    assert [layer.name for layer in net] == ["a", "b"] and net.layers[1].inputs == ("a",)
    (tmp_path / "s.yaml").write_text(text.replace("sequence: 2", "sequence: 5"))
    with pytest.raises(ConfigError, match=r"s\.yaml:5: layer 1: sequence 5 was already"):
        load_ai8x(tmp_path / "s.yaml", tmp_path / "s.pth.tar", (2, 4, 4), device="MAX78000")


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "op: mlp",
            "op: mlp\n    next_sequence: 0",
            "`next_sequence` 0 changes the execution order",
        ),
        ("pad: 2", "pad: 2\n    operands: 2", "`operands` without an element-wise operation"),
        ("pad: 2", "pad: 2\n    dilation: 2", "without dilation"),
        ("pad: 2", "pad: 2\n    streaming: true", "a streaming layer after a non-streaming one"),
        ("pad: 2", "pad: 2\n    in_sequences: [3]", "entry 3 is not an earlier layer"),
        ("pad: 2", "pad: 2\n    output_shift: 20", "= 20 is outside [-15, 15]"),
        ("pad: 2", "pad: 2\n    quantization: 4", "outside the 4-bit range"),
        ("activate: ReLU", "activate: Sigmoid", "unknown value 'Sigmoid' for `activate`"),
        ("out_offset: 0\n", "out_offset: 0x2002\n", "`out_offset` 0x2002 is not a multiple of 4"),
        ("pad: 2", "pad: 2\n    operation: conv2d", "`op` given twice"),
        ("pad: 2", "pad: 3", "pad 3 must be smaller than the kernel"),
        (
            "max_pool: 2\n    pool_stride: 2\n    pad: 2",
            "pad: 2",
            "takes 192 input channels, but the layer's input has 588",
        ),
        ("avg_pool: 2\n", "avg_pool: 2\n    max_pool: 2\n", "both `max_pool` and `avg_pool`"),
        ("op: mlp", "op: mlp\n    name: input", "the name 'input' is reserved"),
        ("output_width: 32", "output_width: 32\n    output_processors: 0x3", "has 2"),
        ("op: mlp", "op: conv2d", "conv2d needs 2-D data and 4-D weights"),
    ],
)
def test_bad_layer_values(ai8x_data, tmp_path, old, new, message):
    assert message in _error(ai8x_data, tmp_path, "mnist", sub(old, new, 1))


def test_bad_checkpoints(ai8x_data, tmp_path):
    import torch

    yaml_path, _ = pair(ai8x_data, "mnist")
    broken = tmp_path / "broken.pth.tar"
    broken.write_bytes(b"not a zip file")
    with pytest.raises(ConfigError, match=r"not a PyTorch checkpoint|cannot load"):
        load_ai8x(yaml_path, broken, device="MAX78000")
    with pytest.raises(ConfigError, match="checkpoint file not found"):
        load_ai8x(yaml_path, tmp_path / "missing.pth.tar", device="MAX78000")
    for key in ("c.bn.weight", "c.bn.running_mean"):  # affine and NoAffine batch norm
        state = {"c.op.weight": torch.ones(4, 1, 3, 3), key: torch.ones(4)}
        torch.save({"state_dict": state}, tmp_path / "bn.pth.tar")
        with pytest.raises(ConfigError, match=f"`{key}` is a batch-norm"):
            load_ai8x(yaml_path, tmp_path / "bn.pth.tar", device="MAX78000")
    state = {"c.op.weight": torch.ones(4, 1, 3, 3), "c.op.bias": torch.full((4,), 128.0 * 200)}
    torch.save({"state_dict": state}, tmp_path / "bias.pth.tar")
    (tmp_path / "b.yaml").write_text("arch: x\ndataset: d\nlayers:\n  - processors: 1\n")
    with pytest.raises(ConfigError, match=r"bias 200\.\.200 does not fit"):
        load_ai8x(tmp_path / "b.yaml", tmp_path / "bias.pth.tar", (1, 4, 4), device="MAX78000")
    torch.save({"weights": state}, tmp_path / "nostate.pth.tar")
    with pytest.raises(ConfigError, match="no `state_dict`"):
        load_ai8x(tmp_path / "b.yaml", tmp_path / "nostate.pth.tar", (1, 4, 4), device="MAX78000")


def test_network_for_cli_sources(ai8x_data):
    from cnnforge.api.targets import get_target
    from cnnforge.errors import InputError
    from cnnforge.pipeline.sources import network_for_cli

    max78000 = get_target("MAX78000")
    yaml_path, ckpt = pair(ai8x_data, "mnist")
    assert network_for_cli("unet-voc", (3, 64, 64), None, None, max78000) is None
    assert network_for_cli(None, None, yaml_path, ckpt, max78000).name == "ai85net5"
    for args, message in [
        ((None, None, None, None), "no network given"),
        (("m", None, None, None), "MODEL needs --input-shape"),
        ((None, None, yaml_path, None), "must be given together"),
        (("m", None, yaml_path, ckpt), "not both"),
    ]:
        with pytest.raises(InputError, match=message):
            network_for_cli(*args, max78000)


def test_in_sequences_by_name_and_input(tmp_path):
    import torch

    state = {"a.op.weight": torch.ones(4, 4, 1, 1), "b.op.weight": torch.ones(2, 8, 3, 3)}
    torch.save({"state_dict": state, "arch": "x", "epoch": 1}, tmp_path / "n.pth.tar")
    (tmp_path / "n.yaml").write_text(
        "arch: X\ndataset: d\nlayers:\n"
        "  - {name: a, processors: 0xf, output_processors: 0xf0, kernel_size: 1x1, pad: 0,"
        " out_offset: 0, output: true}\n"
        "  - {name: b, processors: 0xff, in_sequences: [input, a], out_offset: 0x100}\n"
    )
    model = read_ai8x(tmp_path / "n.yaml", tmp_path / "n.pth.tar", (4, 5, 5), device="MAX78000")
    a, b = model.network.layers
    assert b.inputs == (INPUT, "a") and b.in_channels == 8 and b.out_shape == (2, 5, 5)
    assert model.network.outputs == ("a", "b") and model.plan.placements[1].out_processors == 0x3
    assert a.module_path.endswith("n.yaml:4") and b.module_path.endswith("n.yaml:5")
    assert "layer 1 (b): `out_offset` defaults to 0" not in model.plan.notes
    assert model.plan.placements[1].in_offset == 0  # default: out_offset of the layer before


def test_python_tags_and_non_mappings_are_refused(tmp_path, ai8x_data):
    _, ckpt = pair(ai8x_data, "mnist")
    cases = {
        "arch: !!python/object/apply:os.system ['true']\ndataset: d\nlayers: []\n": "c.yaml:1",
        "- just\n- a list\n": "must be a mapping",
        "": "must be a mapping",
        "arch: x\ndataset: d\nlayers: []\n": "`layers` must be a non-empty list",
        "arch: x\nlayers: [{processors: 1}]\n": "missing required key(s): `dataset`",
    }
    for text, message in cases.items():
        (tmp_path / "c.yaml").write_text(text)
        with pytest.raises(ConfigError) as info:
            load_ai8x(tmp_path / "c.yaml", ckpt, (1, 28, 28), device="MAX78000")
        assert message in str(info.value)
