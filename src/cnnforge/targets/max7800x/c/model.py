"""Plain-data description of each hardware layer as the generated C runs it (prep, then main phase;
docs/hardware/arithmetic.md §2-§5); ``CLayer``'s fields are the C struct's members, in order."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cnnforge.arithmetic import accumulator_bound, right_shift
from cnnforge.errors import EmitError
from cnnforge.ir import BINARY_BITS, Activation, EltwiseOp, Layer, Network, Op, Pooling, PoolKind
from cnnforge.ranges import verify_quantized

# Codes shared with the C runtime (templates/cnn.c.j2 defines the same names).
KIND = {"conv": 0, "convt": 1, "linear": 2, "copy": 3}
ELTWISE = {None: 0, EltwiseOp.ADD: 1, EltwiseOp.SUB: 2, EltwiseOp.OR: 3, EltwiseOp.XOR: 4}
POOL = {None: 0, PoolKind.MAX: 1, PoolKind.AVG: 2}
ACT = {Activation.NONE: 0, Activation.RELU: 1, Activation.ABS: 2}
BINARY_CODE = 0  # C code of binary (+1/-1) weights in ``wbits``

#: A layer whose accumulator bound reaches this uses int64 accumulation
#: (docs/hardware/arithmetic.md R1.4).
INT32_SAFE = 1 << 30
MAX_OPERANDS = 16  # CNNK_MAX_OPERANDS in cnn_kernels.h (R4.1: 2..16 operands)


@dataclass(frozen=True)
class CLayer:
    """One layer of the C runtime's table (integers only, plus the name and array symbols)."""

    name: str
    kind: int
    n_in: int
    in_buf: tuple[int, ...]  # buffer ids of the operands (resolved to arena offsets later)
    in_ch: tuple[int, ...]  # channels per operand
    in_h: int
    in_w: int
    eltwise: int
    pool: int
    pool_first: int
    avg_round: int
    pool_kh: int
    pool_kw: int
    pool_sh: int
    pool_sw: int
    pool_dh: int
    pool_dw: int
    needs_prep: int
    prep_pad_h: int  # zero rows/columns prep puts around each plane (conv padding)
    prep_pad_w: int
    pc: int
    ph: int
    pw: int
    oc: int
    oh: int
    ow: int
    kh: int
    kw: int
    sh: int
    sw: int
    pad_h: int
    pad_w: int
    dh: int
    dw: int
    groups: int
    row_len: int  # weights per output channel (pc / groups x taps)
    shift_k: int  # 7 - total shift (docs/hardware/arithmetic.md R2.3 integer form)
    act: int
    wide: int
    acc64: int
    wbits: int  # 8, 4, 2, 1 or BINARY_CODE; 0 weights when kind is copy

    @property
    def out_bytes(self) -> int:
        """Bytes of the output tensor (int32 values when wide)."""
        return self.oc * self.oh * self.ow * (4 if self.wide else 1)

    @property
    def prep_bytes(self) -> int:
        """Bytes of the prepared (zero-padded) input, 0 when the operand is read directly."""
        hp, wp = self.ph + 2 * self.prep_pad_h, self.pw + 2 * self.prep_pad_w
        return self.pc * hp * wp if self.needs_prep else 0


def chw(shape: tuple[int, ...]) -> tuple[int, int, int]:
    """(C, H, W) view of a shape without batch: (C, L) -> (C, 1, L), (C,) -> (C, 1, 1)."""
    if len(shape) == 3:
        return shape[0], shape[1], shape[2]
    if len(shape) == 2:
        return shape[0], 1, shape[1]
    if len(shape) == 1:
        return shape[0], 1, 1
    raise EmitError(f"unsupported tensor shape {shape}")


def _pair(values: tuple[int, ...], default: int, one_d: bool) -> tuple[int, int]:
    """Geometry tuple -> (h, w); 1-D values apply to the width."""
    if not values:
        return default, default
    if one_d or len(values) == 1:
        return (default if one_d else values[0]), values[-1]
    return values[0], values[1]


def _fail(layer: Layer, what: str, hint: str | None = None) -> EmitError:
    return EmitError(
        what, where=f"layer {layer.name} ({layer.module_path or layer.name})", hint=hint
    )


def _kind(layer: Layer) -> int:
    if layer.op in (Op.CONV1D, Op.CONV2D):
        return KIND["conv"]
    if layer.op is Op.CONVTRANSPOSE2D:
        return KIND["convt"]
    if layer.op is Op.LINEAR:
        return KIND["linear"]
    if layer.op is Op.PASSTHROUGH:
        return KIND["copy"]
    raise _fail(layer, f"{layer.op.value} is not a hardware operation", "lower the network first")


def _pool_fields(layer: Layer, h: int, w: int, one_d: bool) -> dict[str, int]:
    """Pooling parameters and the pooled spatial size (docs/hardware/arithmetic.md §3)."""
    p = layer.pool
    if p is None:
        return dict(
            pool=0, pool_kh=1, pool_kw=1, pool_sh=1, pool_sw=1, pool_dh=1, pool_dw=1, ph=h, pw=w
        )
    if one_d:  # the synthesizer's pool1d ignores the dilation (R3.7, §8.9), as the simulator
        p = Pooling(p.kind, p.size, p.stride)
    f = dict(pool=POOL[p.kind])
    f["pool_kh"], f["pool_kw"] = _pair(p.size, 1, one_d)
    f["pool_sh"], f["pool_sw"] = _pair(p.stride, 1, one_d)
    f["pool_dh"], f["pool_dw"] = _pair(p.dilation_or_ones(), 1, one_d)
    dims = p.output_dims((w,) if one_d else (h, w))
    f["ph"], f["pw"] = (1, dims[0]) if one_d else dims
    if f["ph"] <= 0 or f["pw"] <= 0:
        raise _fail(layer, f"pooling window larger than its {h}x{w} input")
    return f


def _main_fields(layer: Layer, kind: int, one_d: bool) -> dict[str, int]:
    if kind in (KIND["linear"], KIND["copy"]):
        return dict(kh=1, kw=1, sh=1, sw=1, pad_h=0, pad_w=0, dh=1, dw=1, groups=1)
    f = dict(groups=max(1, layer.groups))
    f["kh"], f["kw"] = _pair(layer.kernel_size, 1, one_d)
    f["sh"], f["sw"] = _pair(layer.stride, 1, one_d)
    f["pad_h"], f["pad_w"] = _pair(layer.padding, 0, one_d)
    f["dh"], f["dw"] = _pair(layer.dilation, 1, one_d)
    return f


def expected_out_dims(f: dict[str, int], kind: int, oph: int, opw: int) -> tuple[int, int]:
    """Output spatial size by PyTorch's formulas (docs/hardware/arithmetic.md R2.5-R2.7)."""
    if kind == KIND["conv"]:
        return tuple(  # type: ignore[return-value]
            (n + 2 * p - d * (k - 1) - 1) // s + 1
            for n, p, d, k, s in (
                (f["ph"], f["pad_h"], f["dh"], f["kh"], f["sh"]),
                (f["pw"], f["pad_w"], f["dw"], f["kw"], f["sw"]),
            )
        )
    if kind == KIND["convt"]:
        return (
            (f["ph"] - 1) * f["sh"] - 2 * f["pad_h"] + f["dh"] * (f["kh"] - 1) + oph + 1,
            (f["pw"] - 1) * f["sw"] - 2 * f["pad_w"] + f["dw"] * (f["kw"] - 1) + opw + 1,
        )
    if kind == KIND["linear"]:
        return 1, 1
    return f["ph"], f["pw"]


def weight_rows(layer: Layer) -> np.ndarray:
    """Integer weights as (out_channels, weights per output channel) in the C loop order (transposed
    conv: PyTorch's (in, out/g, kh, kw) becomes (out, in/g, kh, kw))."""
    assert layer.quant is not None
    w = np.asarray(layer.quant.weights, dtype=np.int64)
    if layer.op is Op.CONVTRANSPOSE2D:
        g = max(1, layer.groups)
        cin, ocg = w.shape[0], w.shape[1]
        icg = cin // g
        w = w.reshape(g, icg, ocg, *w.shape[2:]).transpose(0, 2, 1, 3, 4)
        w = w.reshape(g * ocg, icg, *w.shape[3:])
    return w.reshape(w.shape[0], -1)


def _weight_fields(layer: Layer, kind: int, f: dict[str, int], force64: bool) -> dict[str, int]:
    if kind == KIND["copy"]:
        return dict(row_len=0, shift_k=right_shift(0), acc64=0, wbits=8)
    q = layer.quant
    if q is None:
        raise _fail(layer, "layer is not quantized", "quantize the network before emitting C")
    if f["pc"] % f["groups"] or f["oc"] % f["groups"]:
        raise _fail(
            layer, f"{f['groups']} groups do not divide {f['pc']} inputs and {f['oc']} outputs"
        )
    rows = weight_rows(layer)
    row_len = (f["pc"] // f["groups"]) * f["kh"] * f["kw"]
    if kind == KIND["linear"]:
        row_len = f["pc"] * f["ph"] * f["pw"]
    if rows.shape != (f["oc"], row_len):
        raise _fail(
            layer,
            f"weights of shape {tuple(q.weights.shape)} do not match the layer "
            f"({f['oc']} outputs x {row_len} weights each)",
        )
    for problem in verify_quantized(q, layer.wide):
        if problem.field == "shift":  # weights and bias: checked as weights.h is written
            raise _fail(
                layer,
                f"total output shift {problem.low} is outside [{problem.lo}, {problem.hi}] (R2.1)",
            )
    bound = accumulator_bound(rows, q.bias)
    if layer.wide and bound >= 1 << 31:
        raise _fail(layer, f"its 32-bit output can reach {bound}, beyond int32")
    acc64 = force64 or bound >= INT32_SAFE
    wbits = BINARY_CODE if q.weight_bits == BINARY_BITS else q.weight_bits
    if wbits not in (BINARY_CODE, 1, 2, 4, 8):
        raise _fail(layer, f"{q.weight_bits}-bit weights are not supported", "use 1, 2, 4 or 8")
    return dict(row_len=row_len, shift_k=right_shift(q.total_shift), acc64=int(acc64), wbits=wbits)


def _operands(layer: Layer, network: Network) -> tuple[tuple[int, ...], int, int, bool]:
    """Channels per operand, common H and W, and whether the data is 1-D; EmitError if the
    operands cannot be read together (docs/hardware/arithmetic.md §4)."""
    if len(layer.inputs) > MAX_OPERANDS:
        raise _fail(layer, f"{len(layer.inputs)} operands (the C runtime takes {MAX_OPERANDS})")
    if layer.split_operands:
        raise _fail(
            layer,
            f"element-wise over its input's {layer.split_operands} channel groups (`operands` "
            "without `in_sequences`) has no portable C form yet",
            "list one `in_sequences` entry per operand",
        )
    if layer.eltwise is not None and layer.eltwise not in ELTWISE:
        raise _fail(layer, f"element-wise {layer.eltwise.value} does not exist in hardware")
    if layer.activation not in ACT:
        raise _fail(layer, f"activation {layer.activation.value} does not exist in hardware")
    shapes = [chw(network.shape_of(n)) for n in layer.inputs]
    spatial = {s[1:] for s in shapes}
    if len(spatial) != 1:
        raise _fail(layer, f"operands of different sizes {sorted(spatial)}")
    if layer.eltwise is not None and len({s[0] for s in shapes}) != 1:
        raise _fail(layer, "element-wise operands have different channel counts")
    h, w = spatial.pop()
    return tuple(s[0] for s in shapes), h, w, len(network.shape_of(layer.inputs[0])) == 2


def _check_geometry(layer: Layer, f: dict[str, int], kind: int, one_d: bool) -> None:
    """EmitError unless out_shape follows from the prepared input and the layer geometry."""
    oph, opw = _pair(layer.output_padding, 0, one_d)
    if (f["oh"], f["ow"]) != expected_out_dims(f, kind, oph, opw) or (
        kind == KIND["copy"] and f["oc"] != f["pc"]
    ):
        raise _fail(
            layer,
            f"out_shape {layer.out_shape} does not follow from the input "
            f"{f['pc']}x{f['ph']}x{f['pw']} and the layer geometry",
        )


def describe_layer(
    network: Network, layer: Layer, buffer_ids: dict[str, int], *, force64: bool = False
) -> CLayer:
    """The C runtime's record of one hardware layer; EmitError if it cannot be expressed."""
    kind = _kind(layer)
    in_ch, h, w, one_d = _operands(layer, network)
    f: dict[str, int] = _pool_fields(layer, h, w, one_d)
    f["pc"] = in_ch[0] if layer.eltwise is not None else sum(in_ch)
    f.update(_main_fields(layer, kind, one_d))
    f["oc"], f["oh"], f["ow"] = chw(layer.out_shape)
    _check_geometry(layer, f, kind, one_d)
    f.update(_weight_fields(layer, kind, f, force64))
    # Conv reads a zero-padded copy of its input (no bounds checks in the kernel).
    pads = (f["pad_h"], f["pad_w"]) if kind == KIND["conv"] else (0, 0)
    needs_prep = layer.pool is not None or len(layer.inputs) > 1 or pads != (0, 0)
    # A copy computes its values itself (a wide element-wise fold stays unsaturated, R4.4).
    if kind == KIND["copy"]:
        needs_prep = False
    return CLayer(
        name=layer.name,
        kind=kind,
        n_in=len(layer.inputs),
        in_buf=tuple(buffer_ids[n] for n in layer.inputs),
        in_ch=in_ch,
        in_h=h,
        in_w=w,
        eltwise=ELTWISE[layer.eltwise],
        pool_first=int(layer.pool_first),
        avg_round=int(network.avg_pool_rounding and not one_d),  # R3.7: 1-D always truncates
        needs_prep=int(needs_prep),
        prep_pad_h=pads[0],
        prep_pad_w=pads[1],
        act=ACT[layer.activation],
        wide=int(layer.wide),
        **f,
    )


__all__ = ["KIND", "CLayer", "chw", "describe_layer", "weight_rows"]
