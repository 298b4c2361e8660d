"""Hand-built vendor (ai8x) networks with their placements, and their comparison."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from cnnforge.arithmetic import weight_range
from cnnforge.ir import INPUT, Activation, EltwiseOp, Layer, Network, Op, Pooling
from cnnforge.ir import Quantized as Q
from cnnforge.targets.max7800x.ai8x import read_ai8x
from cnnforge.targets.max7800x.ai8x_checkpoint_writer import write_checkpoint
from cnnforge.targets.max7800x.ai8x_yaml_writer import write_yaml
from cnnforge.targets.max7800x.device import MAX78000
from cnnforge.targets.max7800x.kernel_words import processors_per_pass
from cnnforge.targets.max7800x.placement import Placement, Plan

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
        in_map = packed(processors_per_pass(cin, device=MAX78000), in_first)
        if not self.layers and len(self.input_shape) == 3 and self.chw:
            in_map = sum(1 << (4 * k) for k in range(cin))
        out_map = packed(processors_per_pass(layer.out_shape[0], device=MAX78000), out_first)
        self.layers.append(layer)
        self.placements.append(
            Placement(layer.name, in_map, out_map, offsets[0], offsets[1], write_gap=gap)
        )
        return layer.name

    def network(self, name: str = "rand", outputs: tuple[str, ...] = ()) -> tuple[Network, Plan]:
        net = Network(name, self.input_shape, tuple(self.layers), outputs=outputs)
        fmt = "CHW" if self.chw else "HWC"
        return net, Plan(MAX78000, fmt, tuple(self.placements))


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


def roundtrip(model, tmp_path: Path, sample_shape):
    """Write ``model`` (an imported vendor model) as YAML + checkpoint and read it back."""
    yaml_path, ckpt_path = tmp_path / "net.yaml", tmp_path / "net.pth.tar"
    write_yaml(model.network, model.plan, yaml_path, arch=model.arch, dataset=model.dataset)
    write_checkpoint(
        model.network, ckpt_path, arch=model.arch, epoch=model.epoch, modules=dict(model.modules)
    )
    return read_ai8x(
        yaml_path, ckpt_path, sample_shape, overlap_data=model.plan.allow_overlap, device="MAX78000"
    )
