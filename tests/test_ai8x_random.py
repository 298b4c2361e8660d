"""Random small hardware networks (skips, concatenations, element-wise ops, multi-pass,
1-8 bit weights) written as vendor YAML + checkpoint and read back: the same network, which
simulates bit for bit like the original.

``build`` and the layer helpers are shared with test_golden.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cnnforge.arithmetic import implicit_shift, weight_range
from cnnforge.emit.ai8x_checkpoint import write_checkpoint
from cnnforge.emit.ai8x_yaml import write_yaml
from cnnforge.frontend.ai8x import read_ai8x
from cnnforge.ir import INPUT, Activation, EltwiseOp, Layer, Network, Op, Pooling, PoolKind
from cnnforge.ir import Quantized as Q
from cnnforge.passes.verify import verify
from cnnforge.plan.kernel_words import processors_per_pass
from cnnforge.plan.model import Placement, Plan
from cnnforge.sim import simulate

SEMANTIC_FIELDS = (
    "op",
    "inputs",
    "out_shape",
    "in_channels",
    "out_channels",
    "kernel_size",
    "stride",
    "padding",
    "dilation",
    "output_padding",
    "groups",
    "pool",
    "eltwise",
    "pool_first",
    "flatten",
    "activation",
    "wide",
)


def packed(count: int, first: int = 0) -> int:
    return ((1 << count) - 1) << first


@dataclass
class Builder:
    """Builds a hardware network layer by layer (shapes as the importer derives them)."""

    input_shape: tuple[int, ...]
    rng: np.random.Generator
    layers: list[Layer] = field(default_factory=list)
    placements: list[Placement] = field(default_factory=list)
    chw: bool = False  # first layer reads CHW (one channel per memory instance)

    def shape(self, name: str) -> tuple[int, ...]:
        if name == INPUT:
            return self.input_shape
        return next(layer.out_shape for layer in self.layers if layer.name == name)

    def quant(self, shape: tuple[int, ...], bits: int, shift: int, bias: bool, cout: int) -> Q:
        lo, hi = weight_range(bits)
        weights = self.rng.integers(lo, hi + 1, size=shape, dtype=np.int64)
        b = self.rng.integers(lo, hi + 1, size=(cout,), dtype=np.int64) if bias else None
        return Q(weight_bits=bits, weights=weights, bias=b, output_shift=shift)

    def add(
        self, layer: Layer, *, in_first: int = 0, out_first: int = 0, gap: int = 0, offsets=(0, 0)
    ) -> str:
        """Append ``layer`` with packed processors (input operands counted once)."""
        shapes = [self.shape(n) for n in layer.inputs]
        cin = shapes[0][0] if layer.eltwise is not None else sum(s[0] for s in shapes)
        in_map = packed(processors_per_pass(cin), in_first)
        if not self.layers and len(self.input_shape) == 3 and self.chw:
            in_map = sum(1 << (4 * k) for k in range(cin))
        out_map = packed(processors_per_pass(layer.out_shape[0]), out_first)
        self.layers.append(layer)
        self.placements.append(
            Placement(layer.name, in_map, out_map, offsets[0], offsets[1], write_gap=gap)
        )
        return layer.name

    def network(self, name: str = "rand", outputs: tuple[str, ...] = ()) -> tuple[Network, Plan]:
        net = Network(name, self.input_shape, tuple(self.layers), outputs=outputs)
        fmt = "CHW" if self.chw else "HWC"
        return net, Plan("MAX78000", fmt, tuple(self.placements))


def conv(
    b: Builder,
    name: str,
    src: tuple[str, ...],
    cout: int,
    *,
    k: int = 3,
    pad: int = 1,
    pool: Pooling | None = None,
    act: Activation = Activation.RELU,
    bits: int = 8,
    shift: int = 0,
    bias: bool = True,
    eltwise: EltwiseOp | None = None,
    transpose: bool = False,
) -> Layer:
    """A conv2d / convtranspose2d layer over ``src`` (concatenated, or operands of ``eltwise``)."""
    shapes = [b.shape(n) for n in src]
    cin = shapes[0][0] if eltwise is not None else sum(s[0] for s in shapes)
    dims = pool.output_dims(shapes[0][1:]) if pool else shapes[0][1:]
    if transpose:
        out = tuple(2 * d - 2 * pad + 2 for d in dims)
        wshape, extra = (cin, cout, 3, 3), {"stride": (2, 2), "output_padding": (1, 1)}
    else:
        out = tuple(d + 2 * pad - k + 1 for d in dims)
        wshape, extra = (cout, cin, k, k), {"stride": (1, 1)}
    k = 3 if transpose else k
    op = Op.CONVTRANSPOSE2D if transpose else Op.CONV2D
    return Layer(
        name=name,
        op=op,
        inputs=src,
        out_shape=(cout, *out),
        in_channels=cin,
        out_channels=cout,
        kernel_size=(k, k),
        padding=(pad, pad),
        dilation=(1, 1),
        pool=pool,
        eltwise=eltwise,
        activation=act,
        quant=b.quant(wshape, bits, shift, bias, cout),
        **extra,
    )


def passthrough(
    b: Builder,
    name: str,
    src: tuple[str, ...],
    *,
    pool: Pooling | None = None,
    eltwise: EltwiseOp | None = None,
) -> Layer:
    shapes = [b.shape(n) for n in src]
    c = shapes[0][0] if eltwise is not None else sum(s[0] for s in shapes)
    dims = pool.output_dims(shapes[0][1:]) if pool else shapes[0][1:]
    return Layer(
        name=name,
        op=Op.PASSTHROUGH,
        inputs=src,
        out_shape=(c, *dims),
        in_channels=c,
        out_channels=c,
        kernel_size=(1, 1),
        stride=(1, 1),
        padding=(0, 0),
        dilation=(1, 1),
        pool=pool,
        eltwise=eltwise,
    )


def linear(
    b: Builder,
    name: str,
    src: str,
    cout: int,
    *,
    wide: bool = False,
    bits: int = 8,
    shift: int = 0,
    act: Activation = Activation.NONE,
) -> Layer:
    shape = b.shape(src)
    cin = math.prod(shape)
    return Layer(
        name=name,
        op=Op.LINEAR,
        inputs=(src,),
        out_shape=(cout,),
        in_channels=cin,
        out_channels=cout,
        kernel_size=(1, 1),
        stride=(1, 1),
        padding=(0, 0),
        dilation=(1, 1),
        flatten=len(shape) > 1,
        wide=wide,
        activation=Activation.NONE if wide else act,
        quant=b.quant((cout, cin), bits, shift, True, cout),
    )


def _norm(layer: Layer, name: str):
    """A field's value with equivalent spellings unified (pool dilation () == (1, 1))."""
    value = getattr(layer, name)
    if name == "pool" and value is not None:
        return (value.kind, value.size, value.stride, value.dilation_or_ones())
    return value


def semantic_differences(a: Network, b: Network) -> list[str]:
    """Differences in what the hardware computes (names, shapes, geometry, integers)."""
    diffs = [f"outputs {a.outputs} != {b.outputs}"] if a.outputs != b.outputs else []
    diffs += [f"input {a.input_shape} != {b.input_shape}"] * (a.input_shape != b.input_shape)
    for la, lb in zip(a.layers, b.layers, strict=True):
        diffs += [f"{la.name}.{f}" for f in SEMANTIC_FIELDS if _norm(la, f) != _norm(lb, f)]
        qa, qb = la.quant, lb.quant
        if (qa is None) != (qb is None) or (
            qa is not None
            and not (
                qa.weight_bits == qb.weight_bits
                and qa.output_shift == qb.output_shift
                and np.array_equal(qa.weights, qb.weights)
                and ((qa.bias is None and qb.bias is None) or np.array_equal(qa.bias, qb.bias))
            )
        ):
            diffs.append(f"{la.name}.quant")
    return diffs


@pytest.fixture(autouse=True)
def _one_thread():
    """Small tensors: intra-op threads only add contention on the shared cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# ---- the random networks --------------------------------------------------------------------

POOLS = [None, Pooling(PoolKind.MAX, (2, 2), (2, 2)), Pooling(PoolKind.AVG, (2, 2), (2, 2))]


@st.composite
def networks(draw) -> tuple[Network, Plan]:
    """2-7 layers over an input of 1-16 channels: convs, transposed convs, copies, element-wise
    ops, concatenations, an optional linear head."""
    c0 = draw(st.integers(1, 16))
    size = draw(st.sampled_from([4, 6, 8]))
    b = Builder((c0, size, size), np.random.default_rng(draw(st.integers(0, 2**16))))
    b.chw = draw(st.booleans())
    names: list[str] = []
    for i in range(draw(st.integers(2, 7))):
        names.append(_random_layer(draw, b, i, names))
    outputs = (names[-1],)
    if draw(st.booleans()) and len(names) > 2:
        outputs = (names[0], names[-1])
    if draw(st.booleans()) and math.prod(b.shape(names[-1])[1:]) <= 256:
        name = b.add(
            linear(
                b,
                "fc",
                names[-1],
                draw(st.integers(1, 20)),
                wide=draw(st.booleans()),
                bits=draw(st.sampled_from([1, 2, 4, 8])),
            )
        )
        outputs = (*outputs[:-1], name)
    return b.network(outputs=outputs)


def _random_layer(draw, b: Builder, i: int, names: list[str]) -> str:
    src = names[-1] if names else INPUT
    name = draw(st.sampled_from([f"l{i}", f"blk{i}.conv", f"Layer_{i}"]))
    shape = b.shape(src)
    kinds = ["conv", "conv", "tconv", "copy", "eltwise", "standalone", "cat"]
    kind = draw(st.sampled_from(kinds))
    same = [n for n in names if b.shape(n) == shape and n != src]
    if kind in ("eltwise", "standalone", "cat"):
        if not same:  # a skip partner of the same shape: a copy of the source
            same = [b.add(passthrough(b, f"copy{i}", (src,)), offsets=(0, 4))]
        other = draw(st.sampled_from(same))
        if kind == "cat":
            return b.add(conv(b, name, (src, other), draw(st.integers(1, 70)), k=1, pad=0))
        op = draw(st.sampled_from(list(EltwiseOp)[:4]))
        if kind == "standalone":
            return b.add(passthrough(b, name, (src, other), eltwise=op))
        return b.add(conv(b, name, (src, other), draw(st.integers(1, 40)), eltwise=op))
    pool = draw(st.sampled_from(POOLS)) if min(shape[1:]) >= 4 else None
    if kind == "copy":
        return b.add(passthrough(b, name, (src,), pool=pool), gap=draw(st.integers(0, 1)))
    bits = draw(st.sampled_from([1, 2, 4, 8]))
    lo = -15 - implicit_shift(bits)
    shift = draw(st.integers(max(lo, -4), 3))
    if kind == "tconv" and shape[1] <= 8:
        return b.add(
            conv(
                b,
                name,
                (src,),
                draw(st.integers(1, 24)),
                transpose=True,
                bits=bits,
                shift=shift,
                act=draw(st.sampled_from(list(Activation)[:3])),
            )
        )
    k = draw(st.sampled_from([1, 3]))
    return b.add(
        conv(
            b,
            name,
            (src,),
            draw(st.integers(1, 100)),
            k=k,
            pad=0 if k == 1 else 1,
            pool=pool,
            bits=bits,
            shift=shift,
            bias=draw(st.booleans()),
            act=draw(st.sampled_from(list(Activation)[:3])),
        ),
        offsets=(0, 4 * draw(st.integers(0, 3))),
    )


@settings(max_examples=120)
@given(networks())
def test_random_networks_roundtrip(tmp_path_factory, case):
    network, plan = case
    tmp = tmp_path_factory.mktemp("rt")
    write_yaml(network, plan, tmp / "n.yaml")
    write_checkpoint(network, tmp / "n.pth.tar")
    again = read_ai8x(tmp / "n.yaml", tmp / "n.pth.tar", network.input_shape)
    verify(again.network)
    assert [layer.name for layer in again.network] == [layer.name for layer in network]
    assert semantic_differences(network, again.network) == []
    assert again.plan.placements == plan.placements
    assert again.plan.data_format == plan.data_format
    x = torch.from_numpy(
        np.random.default_rng(len(network)).integers(-128, 128, size=network.input_shape)
    )
    before, after = simulate(network, x).outputs, simulate(again.network, x).outputs
    assert list(before) == list(after)
    assert all(torch.equal(before[name], after[name]) for name in before)
