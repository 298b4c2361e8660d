"""BatchNorm folding (passes/fold_bn.py): folded layers equal conv+BN in float64, and the pass
declines where folding would change the network."""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from cnnforge.ir import Activation, BatchNormParams, Layer, Network, Op, fold_bn_arrays
from cnnforge.passes.fold_bn import fold_batchnorm


def _bn_params(rng: np.random.Generator, c: int, affine: bool) -> BatchNormParams:
    return BatchNormParams(
        running_mean=rng.standard_normal(c),
        running_var=rng.uniform(0.1, 3.0, c),
        eps=float(rng.choice([1e-5, 1e-3])),
        weight=rng.standard_normal(c) if affine else None,
        bias=rng.standard_normal(c) if affine else None,
    )


def _torch_bn(params: BatchNormParams, dims: int) -> nn.Module:
    c = len(params.running_mean)
    cls = nn.BatchNorm2d if dims == 2 else nn.BatchNorm1d
    bn = cls(c, eps=params.eps, affine=params.weight is not None).double().eval()
    bn.running_mean.copy_(torch.from_numpy(params.running_mean))
    bn.running_var.copy_(torch.from_numpy(params.running_var))
    if params.weight is not None:
        bn.weight.data.copy_(torch.from_numpy(params.weight))
        bn.bias.data.copy_(torch.from_numpy(params.bias))
    return bn


def _module(kind: str, cin: int, cout: int, groups: int, bias: bool) -> tuple[nn.Module, int, int]:
    """(float64 module, out_axis, groups for fold_bn_arrays)."""
    if kind == "conv2d":
        return nn.Conv2d(cin, cout, 3, padding=1, groups=groups, bias=bias).double(), 0, 1
    if kind == "conv1d":
        return nn.Conv1d(cin, cout, 3, groups=groups, bias=bias).double(), 0, 1
    if kind == "convt":
        m = nn.ConvTranspose2d(cin, cout, 3, 2, 1, 1, groups=groups, bias=bias).double()
        return m, 1, groups
    return nn.Linear(cin, cout, bias=bias).double(), 0, 1


@settings(max_examples=120)
@given(
    kind=st.sampled_from(["conv2d", "conv1d", "convt", "linear"]),
    groups=st.sampled_from([1, 2]),
    cin_per=st.integers(1, 3),
    cout_per=st.integers(1, 3),
    bias=st.booleans(),
    affine=st.booleans(),
    divisor=st.sampled_from([1.0, 4.0]),
    seed=st.integers(0, 2**16),
)
def test_fold_arrays_match_module_then_bn(
    kind, groups, cin_per, cout_per, bias, affine, divisor, seed
) -> None:
    groups = 1 if kind == "linear" else groups
    cin, cout = cin_per * groups, cout_per * groups
    torch.manual_seed(seed)
    module, out_axis, g = _module(kind, cin, cout, groups, bias)
    rng = np.random.default_rng(seed)
    params = _bn_params(rng, cout, affine)
    bn = _torch_bn(params, 2 if kind in ("conv2d", "convt") else 1)
    shape = {"conv2d": (2, cin, 5, 5), "convt": (2, cin, 3, 3), "conv1d": (2, cin, 7)}
    x = torch.from_numpy(rng.standard_normal(shape.get(kind, (2, cin))))
    with torch.no_grad():
        expected = bn(module(x)) / divisor
        w = module.weight.numpy()
        b = None if module.bias is None else module.bias.numpy()
        wf, bf = fold_bn_arrays(w, b, params, out_axis=out_axis, groups=g, divisor=divisor)
        module.weight.copy_(torch.from_numpy(wf))
        if module.bias is None:
            module.bias = nn.Parameter(torch.from_numpy(bf))
        else:
            module.bias.copy_(torch.from_numpy(bf))
        got = module(x)
    assert wf.dtype == np.float64
    err = (got - expected).abs().max().item()
    assert err <= 1e-9 * max(1.0, expected.abs().max().item())


def _conv(name: str, inputs: tuple[str, ...], cin: int, cout: int, **kw) -> Layer:
    rng = np.random.default_rng(len(name))
    return Layer(
        name=name,
        op=Op.CONV2D,
        inputs=inputs,
        out_shape=(cout, 4, 4),
        in_channels=cin,
        out_channels=cout,
        kernel_size=(3, 3),
        stride=(1, 1),
        padding=(1, 1),
        dilation=(1, 1),
        weight=rng.standard_normal((cout, cin, 3, 3)).astype(np.float32),
        bias=rng.standard_normal(cout).astype(np.float32),
        **kw,
    )


def _bn(name: str, src: str, c: int) -> Layer:
    params = _bn_params(np.random.default_rng(7), c, True)
    return Layer(name=name, op=Op.BATCHNORM, inputs=(src,), out_shape=(c, 4, 4), batchnorm=params)


def test_fold_renames_consumers_and_outputs() -> None:
    layers = (
        _conv("c1", ("input",), 2, 3),
        _bn("bn1", "c1", 3),
        _conv("c2", ("bn1",), 3, 3),
        _bn("bn2", "c2", 3),
    )
    net = Network("n", (2, 4, 4), layers)
    folded = fold_batchnorm(net)
    assert [x.name for x in folded] == ["c1", "c2"]
    assert folded.layer("c2").inputs == ("c1",)
    assert folded.outputs == ("c2",)
    assert folded.layer("c1").weight.dtype == np.float32
    assert not np.array_equal(folded.layer("c1").weight, net.layer("c1").weight)
    assert net.layer("c1").bias is not None  # the input network is untouched
    assert len(net) == 4


def test_fold_declines_shared_producer_activation_and_non_conv() -> None:
    shared = Network(
        "n",
        (2, 4, 4),
        (_conv("c1", ("input",), 2, 3), _bn("bn1", "c1", 3), _conv("c2", ("c1",), 3, 3)),
        outputs=("bn1", "c2"),
    )
    assert [x.name for x in fold_batchnorm(shared)] == ["c1", "bn1", "c2"]
    relu = Network(
        "n",
        (2, 4, 4),
        (_conv("c1", ("input",), 2, 3, activation=Activation.RELU), _bn("bn1", "c1", 3)),
    )
    assert len(fold_batchnorm(relu)) == 2
    on_input = Network("n", (2, 4, 4), (_bn("bn1", "input", 2),))
    assert len(fold_batchnorm(on_input)) == 1
    exposed = Network(
        "n", (2, 4, 4), (_conv("c1", ("input",), 2, 3), _bn("bn1", "c1", 3)), outputs=("c1", "bn1")
    )
    assert len(fold_batchnorm(exposed)) == 2


class _BnNet(nn.Module):
    """conv(+BN) chains with a skip concatenation, a transposed conv and a linear head + BN1d."""

    def __init__(self, c: int, affine: tuple[bool, ...], bias: bool) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(2, c, 3, padding=1, bias=bias)
        self.b1 = nn.BatchNorm2d(c, affine=affine[0])
        self.c2 = nn.Conv2d(c, c, 3, padding=1, groups=c, bias=bias)
        self.b2 = nn.BatchNorm2d(c, affine=affine[1])
        self.up = nn.ConvTranspose2d(2 * c, c, 3, 2, 1, 1, bias=bias)
        self.b3 = nn.BatchNorm2d(c, affine=affine[2])
        self.fc = nn.Linear(c * 16, 3, bias=bias)
        self.b4 = nn.BatchNorm1d(3, affine=affine[3])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = torch.relu(self.b1(self.c1(x)))
        b = torch.relu(self.b2(self.c2(a)))
        u = self.b3(self.up(torch.cat([a, b], 1)))
        return self.b4(self.fc(torch.flatten(nn.functional.max_pool2d(u, 2), 1)))


@settings(max_examples=40)
@given(
    c=st.integers(1, 4),
    affine=st.tuples(*[st.booleans()] * 4),
    bias=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_folded_network_matches_unfolded(c, affine, bias, seed) -> None:
    from cnnforge.frontend.torch_fx import trace
    from cnnforge.sim.float_eval import run_float

    torch.manual_seed(seed)
    model = _BnNet(c, affine, bias)
    for bn in (model.b1, model.b2, model.b3, model.b4):
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.2, 2)
        if bn.affine:
            bn.weight.data.uniform_(-2, 2)
            bn.bias.data.uniform_(-1, 1)
    net = trace(model.eval(), (2, 4, 4))
    folded = fold_batchnorm(net)
    assert not any(x.op is Op.BATCHNORM for x in folded)
    x = torch.from_numpy(np.random.default_rng(seed).standard_normal((3, 2, 4, 4)))
    before = run_float(net, x)[net.outputs[0]].double()
    after = run_float(folded, x)[folded.outputs[0]].double()
    scale = before.abs().max().item() + 1e-12
    assert (before - after).abs().max().item() <= 1e-5 * scale
