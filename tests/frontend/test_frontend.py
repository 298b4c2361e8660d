"""PyTorch frontend: model loading, checkpoints, torch.fx tracing to the model-level conventions."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from cnnforge.analysis import analyze_network
from cnnforge.errors import InputError, ModelError
from cnnforge.frontend import load_network
from cnnforge.frontend.torch_fx import load_model, trace
from cnnforge.ir import INPUT, Activation, EltwiseOp, Network, Op, PoolKind
from cnnforge.models import build_model, model_names
from cnnforge.sim.float_eval import run_float
from cnnforge.targets.max7800x.device import MAX78000


class AllOps(nn.Module):
    """Every supported module and function once (2-D)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3, padding=1, groups=2, dilation=1)
        self.dil = nn.Conv2d(8, 8, 3, padding="same", dilation=2, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.act6 = nn.ReLU6()
        self.ht = nn.Hardtanh(-2.0, 3.0)
        self.leaky = nn.LeakyReLU(0.25)
        self.sig = nn.Sigmoid()
        self.tanh = nn.Tanh()
        self.pool = nn.MaxPool2d(2)
        self.avg = nn.AvgPool2d(3, stride=1, padding=1)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.convt = nn.ConvTranspose2d(8, 4, 3, padding=1)
        self.drop = nn.Dropout(0.3)
        self.ident = nn.Identity()
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.flat = nn.Flatten()
        self.fc = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.bn(self.dil(self.conv(x)))
        y = self.tanh(self.sig(self.leaky(self.ht(self.act6(y)))))
        p = self.pool(y)
        y = self.avg(p) + p
        y = torch.abs(y - F.max_pool2d(y, 1))
        y = self.drop(self.ident(self.up(y) * F.interpolate(y, scale_factor=2)))
        z = torch.cat((F.relu(self.convt(y)), torch.relu(x)), dim=1)
        z = self.gap(F.avg_pool2d(z, 2)).contiguous()
        h = self.flat(z) + z.view(z.size(0), -1) + z.flatten(1)
        return self.fc(F.dropout(h, 0.1)).reshape(1, -1)


def test_all_ops_follow_the_conventions_table() -> None:
    net = trace(AllOps(), (4, 8, 8))
    by = {layer.name: layer for layer in net}
    conv = by["conv"]
    assert (conv.op, conv.groups, conv.kernel_size, conv.padding) == (Op.CONV2D, 2, (3, 3), (1, 1))
    assert conv.weight.shape == (8, 2, 3, 3) and conv.weight.dtype == np.float32
    assert by["dil"].padding == (2, 2) and by["dil"].dilation == (2, 2) and by["dil"].bias is None
    assert by["bn"].op is Op.BATCHNORM and by["bn"].batchnorm.running_var.shape == (8,)
    assert [by[n].activation for n in ("act6", "ht", "leaky", "sig", "tanh", "abs_1")] == [
        Activation.RELU6,
        Activation.HARDTANH,
        Activation.LEAKYRELU,
        Activation.SIGMOID,
        Activation.TANH,
        Activation.ABS,
    ]
    assert by["ht"].activation_params == (-2.0, 3.0) and by["leaky"].activation_params == (0.25,)
    assert by["pool"].pool.kind is PoolKind.MAX and by["pool"].pool.size == (2, 2)
    assert by["avg"].padding == (1, 1) and by["avg"].pool.stride == (1, 1)
    assert by["gap"].pool.size == (4, 4) and by["gap"].out_shape == (8, 1, 1)
    assert by["add"].eltwise is EltwiseOp.ADD and by["add"].inputs == ("avg", "pool")
    assert by["sub"].eltwise is EltwiseOp.SUB and by["mul"].eltwise is EltwiseOp.MUL
    assert by["up"].scale_factor == (2, 2) and by["interpolate"].upsample_mode == "nearest"
    assert by["convt"].weight.shape == (8, 4, 3, 3) and by["convt"].output_padding == (0, 0)
    assert by["cat"].op is Op.CONCAT and by["cat"].inputs == ("relu", "relu_1")
    assert by["relu_1"].inputs == (INPUT,)
    assert {by[n].op for n in ("flat", "view", "flatten")} == {Op.FLATTEN}
    assert by["fc"].op is Op.LINEAR and by["fc"].in_channels == 8 and net.outputs == ("fc",)
    # Dropout, Identity, contiguous and same-shape reshape leave no layer behind.
    assert not {"drop", "ident", "dropout", "contiguous", "reshape"} & set(by)


def test_weights_are_copies_of_the_parameters() -> None:
    model = AllOps()
    net = trace(model, (4, 8, 8))
    np.testing.assert_array_equal(net.layer("fc").weight, model.fc.weight.detach().numpy())
    with torch.no_grad():
        model.fc.weight.add_(1.0)
    assert not np.array_equal(net.layer("fc").weight, model.fc.weight.detach().numpy())


def test_unet_voc_trace_matches_the_seed() -> None:
    net = load_network("unet-voc", (3, 64, 64))
    assert len(net) == 67 and net.outputs == ("outconv",)
    assert net.layer("outconv").out_shape == (21, 64, 64)
    cats = [layer for layer in net if layer.op is Op.CONCAT]
    assert [c.inputs for c in cats] == [
        ("upconv4", "enc4.5"),
        ("upconv3", "enc3.5"),
        ("upconv2", "enc2.5"),
        ("upconv1", "enc1.5"),
    ]
    up = net.layer("upconv4")
    assert (up.kernel_size, up.stride, up.bias) == ((2, 2), (2, 2), None)
    assert Network.from_json(net.to_json()).to_json() == net.to_json()


def test_unet_large_follows_the_vendor_layers() -> None:
    net = load_network("unet-large", (48, 88, 88))
    convs = [layer for layer in net if layer.has_weights]
    assert [c.module_path.split(".")[0] for c in convs] == [
        "prep0", "prep1", "prep2", "enc1", "enc2", "enc3", "bneck", "upconv3", "dec3",
        "upconv2", "dec2", "upconv1", "dec1", "dec0", "conv_p1", "conv_p2", "conv_p3", "conv",
    ]  # fmt: skip
    up = net.layer("upconv3")
    assert (up.kernel_size, up.stride, up.padding, up.output_padding) == (
        (3, 3),
        (2, 2),
        (1, 1),
        (1, 1),
    )
    assert up.weight.shape == (112, 56, 3, 3)
    assert net.layer("enc2.1").weight.shape == (28, 8, 3, 3)
    assert net.layer("dec1.0").in_channels == 16 and net.layer("conv.0").out_channels == 64
    assert net.layer("enc1.1").batchnorm.weight is None  # NoAffine, as the vendor's
    assert net.layers[-1].op is Op.BATCHNORM and net.layers[-1].out_shape == (64, 88, 88)


def test_conv1d_network() -> None:
    model = nn.Sequential(
        nn.Conv1d(2, 6, 5, padding=2),
        nn.BatchNorm1d(6),
        nn.ReLU(),
        nn.MaxPool1d(2),
        nn.Conv1d(6, 4, 3, dilation=2),
        nn.AdaptiveAvgPool1d(1),
        nn.Flatten(),
        nn.Linear(4, 3),
    )
    net = trace(model, (2, 32))
    assert [layer.op for layer in net][:2] == [Op.CONV1D, Op.BATCHNORM]
    assert net.layer("4").out_shape == (4, 12) and net.layer("4").dilation == (2,)
    assert net.layer("5").pool.size == (12,) and net.layers[-1].out_shape == (3,)


@given(
    c_in=st.integers(1, 4),
    c_out=st.integers(1, 4),
    k=st.integers(1, 4),
    stride=st.integers(1, 3),
    pad=st.integers(0, 2),
    dil=st.integers(1, 2),
    size=st.integers(8, 12),
    transposed=st.booleans(),
)
def test_traced_geometry_equals_the_module(c_in, c_out, k, stride, pad, dil, size, transposed):
    """Every traced conv has the module's geometry, weights and PyTorch's output shape."""
    if transposed:
        module = nn.ConvTranspose2d(c_in, c_out, k, stride, pad, output_padding=stride - 1,
                                    dilation=dil)  # fmt: skip
    else:
        module = nn.Conv2d(c_in, c_out, k, stride, pad, dilation=dil)
    layer = trace(module, (c_in, size, size)).layers[0]
    expected = module(torch.zeros(1, c_in, size, size)).shape[1:]
    assert layer.out_shape == tuple(expected)
    assert (layer.stride, layer.padding, layer.dilation) == ((stride,) * 2, (pad,) * 2, (dil,) * 2)
    np.testing.assert_array_equal(layer.weight, module.weight.detach().numpy())
    np.testing.assert_array_equal(layer.bias, module.bias.detach().numpy())


def test_shared_module_calls_get_unique_names() -> None:
    class Shared(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.relu = nn.ReLU()
            self.conv = nn.Conv2d(2, 2, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.relu(self.conv(self.relu(x)))

    names = [layer.name for layer in trace(Shared(), (2, 4, 4))]
    assert names == ["relu", "conv", "relu_1"]


class Leaf(nn.Module):
    """A stand-in for a cnnforge.nn QAT module: traced as a leaf, mapped by cnnforge_layer."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 5, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x) if x.sum() > -1e30 else x  # data-dependent: untraceable inside

    def cnnforge_layer(self, name, inputs, in_shapes, out_shape):
        from cnnforge.ir import Layer

        assert in_shapes == ((3, 4, 4),)
        return Layer(name, Op.CONV2D, inputs, out_shape, in_channels=3, out_channels=5)


def test_modules_with_cnnforge_layer_are_leaves() -> None:
    model = nn.Sequential(Leaf(), nn.ReLU())
    net = trace(model, (3, 4, 4))
    assert [layer.name for layer in net] == ["0", "1"]
    assert net.layers[0].module_path == "0" and net.layers[0].out_shape == (5, 4, 4)


# ---- loading ----------------------------------------------------------------------------------

MODEL_FILE = """
import torch
from torch import nn

class Small(nn.Module):
    def __init__(self, width=4):
        super().__init__()
        self.conv = nn.Conv2d(3, width, 3, padding=1)
        self.bn = nn.BatchNorm2d(width)

    def forward(self, x):
        return self.bn(self.conv(x))

def make_small(width=2):
    return Small(width)

class Branchy(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x
        return -x
"""


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    path = tmp_path / "my_models.py"
    path.write_text(textwrap.dedent(MODEL_FILE))
    return path


def test_load_class_and_factory_from_a_file(model_file: Path) -> None:
    assert load_model(f"{model_file}:Small", {"width": 6}).conv.out_channels == 6
    assert load_model(f"{model_file}:make_small", {}).conv.out_channels == 2
    net = load_network(f"{model_file}:Small", (3, 8, 8))
    assert net.name == "Small" and len(net) == 2


def test_load_from_a_package_and_by_short_name() -> None:
    assert type(load_model("cnnforge.models.unet:UNetVOC")).__name__ == "UNetVOC"
    assert type(load_model("unet-large", {"num_classes": 2})).__name__ == "UNetLarge"
    assert {"unet-voc", "unet-large"} <= set(model_names())
    assert build_model("unet-voc").outconv.out_channels == 21


@pytest.mark.parametrize("wrap", ["bare", "state_dict", "ddp"])
def test_checkpoint_forms(model_file: Path, tmp_path: Path, wrap: str) -> None:
    source = load_model(f"{model_file}:Small")
    with torch.no_grad():
        source.conv.weight.fill_(0.5)
    state = source.state_dict()
    if wrap == "ddp":
        state = {f"module.{k}": v for k, v in state.items()}
    obj = {"state_dict": state, "epoch": 3} if wrap == "state_dict" else state
    torch.save(obj, tmp_path / "ck.pth")
    model = load_model(f"{model_file}:Small", {}, tmp_path / "ck.pth")
    assert float(model.conv.weight.detach().min()) == 0.5


def test_mismatched_checkpoint_names_keys(model_file: Path, tmp_path: Path) -> None:
    state = load_model(f"{model_file}:Small", {"width": 5}).state_dict()
    state["extra.weight"] = torch.zeros(1)
    del state["bn.bias"]
    torch.save(state, tmp_path / "bad.pth")
    with pytest.raises(ModelError) as err:
        load_model(f"{model_file}:Small", {}, tmp_path / "bad.pth")
    text = str(err.value)
    assert "bad.pth" in text and "missing: bn.bias" in text and "unexpected: extra.weight" in text
    assert "conv.weight (5, 3, 3, 3) vs model (4, 3, 3, 3)" in text


def test_pickled_objects_are_refused(model_file: Path, tmp_path: Path) -> None:
    torch.save({"state_dict": {}, "fn": Path("x")}, tmp_path / "obj.pth")
    with pytest.raises(ModelError, match="weights-only"):
        load_model(f"{model_file}:Small", {}, tmp_path / "obj.pth")


@pytest.mark.parametrize(
    ("spec", "error", "text"),
    [
        ("no/such/file.py:Net", InputError, "no such model file"),
        ("unet-nothing", InputError, "unknown model name 'unet-nothing'"),
        ("cnnforge.nothing_here:Net", InputError, "cannot import module"),
        ("cnnforge.models.unet:Missing", InputError, "has no class or function 'Missing'"),
        ("model.py", InputError, "does not name a class"),
    ],
)
def test_bad_model_specs(spec: str, error: type, text: str) -> None:
    with pytest.raises(error, match=text):
        load_model(spec)


def test_bad_constructor_arguments(model_file: Path) -> None:
    with pytest.raises(ModelError, match="depth=3"):
        load_model(f"{model_file}:Small", {"depth": 3})


def test_untraceable_model_names_the_line(model_file: Path) -> None:
    with pytest.raises(ModelError) as err:
        load_network(f"{model_file}:Branchy", (3, 8, 8))
    line = textwrap.dedent(MODEL_FILE).splitlines().index("        if x.sum() > 0:") + 1
    assert f"{model_file}:{line}" in str(err.value) and "control flow" in str(err.value)


def test_wrong_input_shape_names_the_module() -> None:
    with pytest.raises(InputError) as err:
        load_network("unet-voc", (4, 64, 64))
    assert err.value.where == "enc1.0" and "input-shape" in str(err.value)


@pytest.mark.parametrize(
    ("model", "text"),
    [
        (nn.Sequential(nn.Conv2d(2, 2, 1), nn.GELU()), "nn.GELU"),
        (nn.Sequential(nn.Conv2d(2, 2, 1, padding_mode="reflect")), "nn.Conv2d: padding_mode"),
        (nn.Sequential(nn.MaxPool2d(3, ceil_mode=True)), "nn.MaxPool2d: pooling with ceil_mode"),
        (nn.Sequential(nn.Conv2d(2, 2, 1), nn.GroupNorm(1, 2)), "nn.GroupNorm"),
    ],
)
def test_unsupported_modules_are_opaque_rows_with_their_params(model: nn.Module, text: str) -> None:
    net = trace(model, (2, 8, 8))
    opaque = [layer for layer in net if layer.op is Op.OPAQUE]
    assert len(opaque) == 1 and opaque[0].opaque_kind.startswith(text)
    assert analyze_network(net, device=MAX78000).totals.params == sum(
        p.numel() for p in model.parameters()
    )


def test_unsupported_functions_are_opaque_rows() -> None:
    class Scaled(nn.Module):  # a constant varying over space: not a per-channel scale
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("mask", torch.rand(1, 1, 4, 4))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * self.mask

    class Sliced(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x[:, :1]

    scaled = trace(Scaled(), (2, 4, 4)).layers
    assert [(la.op, la.opaque_kind.split(":")[0]) for la in scaled] == [(Op.OPAQUE, "operator.mul")]
    sliced = trace(Sliced(), (2, 4, 4)).layers
    assert [(la.op, la.opaque_kind, la.out_shape) for la in sliced] == [
        (Op.OPAQUE, "operator.getitem", (1, 4, 4))
    ]


def test_pad_and_softmax_map_to_their_ops() -> None:
    class Head(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.pad = nn.ZeroPad2d((1, 0, 2, 0))
            self.soft = nn.Softmax(dim=1)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            y = F.pad(self.pad(x), [0, 1, 0, 1], value=0.5)
            return self.soft(y), F.log_softmax(y, dim=-1), y.argmax(1)

    net = trace(Head(), (3, 4, 4))
    assert [(la.op, la.label(), la.out_shape) for la in net] == [
        (Op.PAD, "pad", (3, 6, 5)),
        (Op.PAD, "pad", (3, 7, 6)),
        (Op.SOFTMAX, "softmax", (3, 7, 6)),
        (Op.SOFTMAX, "log_softmax", (3, 7, 6)),
        (Op.SOFTMAX, "argmax", (7, 6)),
    ]
    assert net.layers[0].pad_amounts == (1, 0, 2, 0) and net.layers[1].pad_value == 0.5
    assert [la.axis for la in net.layers[2:]] == [0, 2, 0]
    x = torch.randn(3, 4, 4)
    got = run_float(net, x)
    for name, want in zip(net.outputs, Head()(x[None]), strict=True):
        torch.testing.assert_close(got[name], want[0].to(got[name].dtype))


def test_cnnforge_nn_modules_trace_to_hardware_layers() -> None:
    from cnnforge import nn as qnn

    class Qat(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = qnn.Conv2d(3, 8, 3, padding=1, activation="relu")
            self.b = qnn.Conv2d(8, 8, 3, padding=1, pool="max", pool_stride=2, activation="relu")
            self.add = qnn.Add()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b = self.b(self.a(x))
            return self.add(b, torch.relu(b))

    net = trace(Qat(), (3, 16, 16))
    assert [(layer.name, layer.op) for layer in net] == [
        ("a", Op.CONV2D),
        ("b", Op.CONV2D),
        ("relu", Op.ACTIVATION),
        ("add", Op.PASSTHROUGH),
    ]
    assert net.layer("b").pool.size == (2, 2) and net.layer("b").out_shape == (8, 8, 8)
    assert net.layer("add").inputs == ("b", "relu") and net.layer("add").module_path == "add"


def test_shapes_fall_back_to_a_real_forward_when_meta_fails() -> None:
    class NeedsValues(Leaf):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            scale = float(self.conv.weight.abs().max().item())  # impossible on the meta device
            return self.conv(x) * (scale / scale)

    net = trace(nn.Sequential(NeedsValues(), nn.ReLU()), (3, 4, 4))
    assert [layer.out_shape for layer in net] == [(5, 4, 4), (5, 4, 4)]


def test_optional_forward_arguments_are_traced_at_their_defaults() -> None:
    class Masked(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(2, 2, 1)

        def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
            if mask is not None:
                x = x * mask
            return self.conv(x)

    assert [layer.name for layer in trace(Masked(), (2, 4, 4))] == ["conv"]


def test_modules_returning_tuples_are_refused() -> None:
    class Recurrent(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = nn.LSTM(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.lstm(x)[0]

    with pytest.raises(ModelError, match="lstm: module LSTM is not supported"):
        trace(Recurrent(), (4, 4))


def test_mean_over_space_is_global_average_pooling() -> None:
    class Gap(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.mean(x.mean(dim=(2, 3), keepdim=True), (-1, -2), keepdim=True)

    net = trace(Gap(), (3, 4, 6))
    assert [layer.pool.size for layer in net] == [(4, 6), (1, 1)]

    class Bad(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.mean((2, 3))

    (bad,) = trace(Bad(), (3, 4, 4)).layers
    assert bad.op is Op.OPAQUE and "keepdim=True" in bad.opaque_kind


def test_model_files_may_import_their_siblings(tmp_path: Path) -> None:
    (tmp_path / "blocks_for_cnnforge_test.py").write_text(
        "from torch import nn\n\ndef block():\n    return nn.Conv2d(1, 2, 3)\n"
    )
    (tmp_path / "net.py").write_text(
        "from torch import nn\nfrom blocks_for_cnnforge_test import block\n\n"
        "def make():\n    return nn.Sequential(block(), nn.ReLU())\n"
    )
    assert len(load_network(f"{tmp_path / 'net.py'}:make", (1, 5, 5))) == 2


def test_errors_in_model_files_name_the_line(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("import torch\n\nraise ValueError('oops')\n")
    with pytest.raises(ModelError, match=r"broken.py:3: importing the model file failed"):
        load_model(f"{tmp_path / 'broken.py'}:Net")


def test_a_tensor_used_twice_is_an_input_twice() -> None:
    class Twice(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.cat((x, x), 1) + torch.cat((x, x), 1)

    net = trace(Twice(), (3, 4, 4))
    assert net.layers[0].inputs == (INPUT, INPUT) and net.layers[0].out_shape == (6, 4, 4)
    assert net.layers[0].in_channels == 6
    assert net.layers[2].inputs == ("cat", "cat_1")
