"""Integer semantics of a generic accelerator, as data, and a bit-exact simulator of them over
``sim/``'s exact sums and pooling (docs/generic-target.md "Integer semantics")."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from cnnforge.arithmetic import fraction_bits, saturate_signed, shift_round_half_up
from cnnforge.errors import SimulationError
from cnnforge.ir import INPUT, Activation, EltwiseOp, Layer, Network, Op, Pooling, PoolKind
from cnnforge.sim.exact import Geometry, accumulate
from cnnforge.sim.float_eval import pool_float
from cnnforge.sim.ops import geometry
from cnnforge.targets.generic.target import GenericTarget

EXACT_FLOAT64 = 2**53


@dataclass(frozen=True)
class IntegerSemantics:
    """Widths of the target's integers (bits, two's complement)."""

    act_bits: int = 16
    weight_bits: int = 16
    guard_bits: int = 16  # accumulator = act_bits + weight_bits + guard_bits (bias width too)

    @property
    def acc_bits(self) -> int:
        return self.act_bits + self.weight_bits + self.guard_bits

    @classmethod
    def of(cls, target: GenericTarget) -> IntegerSemantics:
        return cls(act_bits=8 * target.act_bytes, weight_bits=8 * target.weight_bytes)


@dataclass(frozen=True, eq=False)
class QuantizedGeneric:
    """A BatchNorm-folded network with integer weights and a scale for every tensor."""

    network: Network
    semantics: IntegerSemantics
    frac: dict[str, int]  # tensor (layer name or INPUT) -> fractional bits
    weights: dict[str, np.ndarray]  # layer -> integer weights (float64 holding integers)
    bias: dict[str, np.ndarray]  # layer -> integer bias at the accumulator's scale
    weight_frac: dict[str, int]

    def to_int(self, x: np.ndarray) -> torch.Tensor:
        """Float input (N, C, ...) -> the target's integers."""
        t = torch.as_tensor(np.asarray(x, dtype=np.float64))
        return saturate_signed(torch.round(t * 2.0 ** self.frac[INPUT]), self.semantics.act_bits)

    def to_float(self, name: str, y: torch.Tensor) -> torch.Tensor:
        return y / 2.0 ** self.frac[name]


_EXACT_SAME_SCALE = frozenset({Op.FLATTEN, Op.PAD, Op.UPSAMPLE, Op.ACTIVATION})


def quantize_generic(
    network: Network, target: GenericTarget, calibration: np.ndarray
) -> QuantizedGeneric:
    """Integer weights and per-tensor scales for ``network`` from float ``calibration``."""
    from cnnforge.passes.fold_bn import fold_batchnorm
    from cnnforge.sim.float_eval import run_float

    sem = IntegerSemantics.of(target)
    net = fold_batchnorm(network)
    values = run_float(net, np.asarray(calibration, dtype=np.float64), all_layers=True)
    frac = {INPUT: fraction_bits(float(np.abs(calibration).max()), sem.act_bits)}
    weights, bias, wfrac = {}, {}, {}
    for layer in net.layers:
        _check_integer(layer)
        ins = [frac[n] for n in layer.inputs]
        if layer.op in _EXACT_SAME_SCALE or (layer.op is Op.POOL):
            frac[layer.name] = ins[0]
        elif layer.op is Op.CONCAT:
            frac[layer.name] = min(ins)
        else:
            frac[layer.name] = fraction_bits(float(values[layer.name].abs().max()), sem.act_bits)
        if layer.has_weights:
            w = np.asarray(layer.weight, dtype=np.float64)
            wf = fraction_bits(float(np.abs(w).max()), sem.weight_bits)
            weights[layer.name] = np.clip(np.round(w * 2.0**wf), *_range(sem.weight_bits))
            wfrac[layer.name] = wf
            b = np.zeros(layer.out_channels) if layer.bias is None else layer.bias
            acc_frac = ins[0] + wf
            bias[layer.name] = np.clip(
                np.round(np.asarray(b, np.float64) * 2.0**acc_frac), *_range(sem.acc_bits)
            )
    return QuantizedGeneric(net, sem, frac, weights, bias, wfrac)


def _range(bits: int) -> tuple[int, int]:
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


_ACTIVATIONS = frozenset(
    {Activation.NONE, Activation.RELU, Activation.RELU6, Activation.ABS, Activation.HARDTANH}
)


def _check_integer(layer: Layer) -> None:
    """Refuse, naming what, a layer these integer semantics do not define."""
    why = _no_integer_semantics(layer)
    if why:
        raise SimulationError(
            f"{layer.label()}: {why} has no integer semantics on the generic target",
            where=f"layer {layer.name}",
            hint="the generic integers run conv/linear (with input pooling and a ReLU/ReLU6/"
            "Hardtanh/Abs), pools, nearest upsampling, zero padding, add/sub, concatenation",
        )


def integer_refusals(network: Network) -> tuple[tuple[Layer, str], ...]:
    """Every layer of the folded ``network`` these semantics do not define, and what it lacks
    (listed by ``check``; ``quantize_generic`` refuses the first)."""
    from cnnforge.passes.fold_bn import fold_batchnorm

    folded = fold_batchnorm(network)
    found = ((x, _no_integer_semantics(x)) for x in folded.layers)
    return tuple((x, why) for x, why in found if why)


def _no_integer_semantics(layer: Layer) -> str | None:
    """What of ``layer`` the integer semantics lack (None: all of it is defined)."""
    op = layer.op
    if op in (Op.SOFTMAX, Op.OPAQUE, Op.BATCHNORM):
        return f"a {op.value} layer" + (" not after a conv/linear" if op is Op.BATCHNORM else "")
    if layer.activation not in _ACTIVATIONS:
        return f"the activation {layer.activation.value}"
    if op is Op.UPSAMPLE and layer.upsample_mode not in ("", "nearest"):
        return f"{layer.upsample_mode} upsampling"
    if op is Op.PAD and layer.pad_value != 0:
        return f"padding with {layer.pad_value}"
    if op is Op.ELTWISE and layer.eltwise not in (EltwiseOp.ADD, EltwiseOp.SUB):
        return f"the element-wise {layer.eltwise.value if layer.eltwise else '?'}"
    if layer.has_weights and (layer.eltwise is not None or len(layer.inputs) != 1):
        return "a weight layer with several inputs"
    if layer.pool is not None and op is not Op.POOL and not layer.has_weights:
        return f"input pooling of a {op.value} layer"
    return None


def simulate_generic(q: QuantizedGeneric, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Integer outputs (by tensor name) of every layer for integer input ``x`` (N, C, ...)."""
    values = {INPUT: x.to(torch.float64)}
    for layer in q.network.layers:
        values[layer.name] = run_layer(q, layer, [values[n] for n in layer.inputs])
    return values


def run_layer(q: QuantizedGeneric, layer: Layer, xs: list[torch.Tensor]) -> torch.Tensor:
    """One layer: its operation, then its fused activation (exact on the output's integers)."""
    return finish(q, layer, _operate(q, layer, xs))


def finish(q: QuantizedGeneric, layer: Layer, y: torch.Tensor) -> torch.Tensor:
    """A layer's fused activation on its output integers (not for an activation layer)."""
    if layer.op is not Op.ACTIVATION and layer.activation is not Activation.NONE:
        y = _activate(y, layer, q.frac[layer.name])
    return y


def _operate(q: QuantizedGeneric, layer: Layer, xs: list[torch.Tensor]) -> torch.Tensor:
    sem, f_out = q.semantics, q.frac[layer.name]
    ins = [q.frac[n] for n in layer.inputs]
    x, op = xs[0], layer.op
    if layer.has_weights:
        if layer.pool is not None:  # input pooling keeps the input's scale (exact / half up)
            x = pool(x, layer.pool, ())
        return weighted(q, layer, x)
    if op is Op.ACTIVATION:
        return _activate(x, layer, f_out)
    if op is Op.POOL:
        assert layer.pool is not None
        return pool(x, layer.pool, layer.padding)
    if op in (Op.ELTWISE, Op.CONCAT):
        parts = [
            saturate_signed(shift_round_half_up(v, f - f_out), sem.act_bits)
            for v, f in zip(xs, ins, strict=True)
        ]
        if op is Op.CONCAT:
            return torch.cat(parts, dim=1)
        y = parts[0]
        for v in parts[1:]:
            y = y + v if layer.eltwise is EltwiseOp.ADD else y - v
        return saturate_signed(y, sem.act_bits)
    if op is Op.FLATTEN:
        return x.reshape(x.shape[0], -1)
    if op is Op.UPSAMPLE:
        for axis, s in enumerate(layer.scale_factor):
            x = x.repeat_interleave(int(s), dim=2 + axis)
        return x
    if op is Op.PAD:
        return F.pad(x, layer.pad_amounts)
    raise SimulationError(f"no integer semantics for {layer.label()}", where=f"layer {layer.name}")


def weighted(
    q: QuantizedGeneric,
    layer: Layer,
    x: torch.Tensor,
    geo: Geometry | None = None,
    *,
    checked: bool = False,
) -> torch.Tensor:
    """A conv/linear layer's integers: exact sum, bias, shift rounding half up, saturation (``geo``:
    banded.py's geometry; ``checked``: the accumulator bound is already checked)."""
    if not checked:
        check_accumulator(q, layer)
    w = torch.as_tensor(q.weights[layer.name])
    b = torch.as_tensor(q.bias[layer.name])
    if layer.op is Op.LINEAR:
        acc = accumulate(Op.LINEAR, x.reshape(x.shape[0], -1), w, None, Geometry(), "float64")
    else:
        acc = accumulate(layer.op, x, w, None, geo or geometry(layer), "float64")
    acc = acc + b.reshape(1, -1, *(1,) * (acc.dim() - 2))
    shift = q.frac[layer.inputs[0]] + q.weight_frac[layer.name] - q.frac[layer.name]
    return saturate_signed(shift_round_half_up(acc, shift), q.semantics.act_bits)


def check_accumulator(q: QuantizedGeneric, layer: Layer) -> None:
    """Refuse a layer whose accumulator could reach 2**53 (float64 sums would not be exact)."""
    w = torch.as_tensor(q.weights[layer.name])
    b = torch.as_tensor(q.bias[layer.name])
    per_output = w.abs().reshape(w.shape[0] if layer.op is not Op.CONVTRANSPOSE2D else 1, -1).sum(1)
    bound = float(per_output.max()) * 2 ** (q.semantics.act_bits - 1) + float(b.abs().max())
    if bound >= EXACT_FLOAT64:
        raise SimulationError(
            f"accumulator bound {bound:.3g} reaches 2**53", where=f"layer {layer.name}"
        )


def _activate(x: torch.Tensor, layer: Layer, f: int) -> torch.Tensor:
    kind = layer.activation
    if kind is Activation.RELU:
        return x.clamp(min=0)
    if kind is Activation.ABS:
        return x.abs()
    if kind is Activation.RELU6:
        return x.clamp(0, round(6 * 2.0**f))
    if kind is Activation.HARDTANH:
        lo, hi = layer.activation_params or (-1.0, 1.0)
        return x.clamp(round(lo * 2.0**f), round(hi * 2.0**f))
    return x


def pool(x: torch.Tensor, pooling: Pooling, padding: tuple[int, ...]) -> torch.Tensor:
    """Max pooling (exact), or average pooling rounding the window sum / area half up; the
    windows are the float model's (``sim.float_eval.pool_float``: zero padding counted)."""
    if pooling.kind is PoolKind.MAX:
        return pool_float(x, pooling, padding)
    area = math.prod(pooling.size)
    total = torch.round(pool_float(x, pooling, padding) * area)  # exact: sums of integers
    return torch.floor((2 * total + area) / (2 * area))  # half up


@dataclass(frozen=True)
class Accuracy:
    """How close the target's integers come to the float model, per network output."""

    snr_db: float  # signal-to-noise ratio of the dequantized outputs (all outputs together)
    max_abs_error: float
    semantics: IntegerSemantics


def quantized_accuracy(network: Network, target: GenericTarget, seed: int = 0) -> Accuracy:
    """Quantize on one seeded uniform[-1, 1] batch of 2, compare with float on another input."""
    rng = np.random.default_rng(seed)
    calibration = rng.uniform(-1, 1, (2, *network.input_shape))
    x = rng.uniform(-1, 1, (1, *network.input_shape))
    q = quantize_generic(network, target, calibration)
    ints = simulate_generic(q, q.to_int(x))
    floats = run_float_outputs(q.network, x)
    signal = noise = worst = 0.0
    for name in q.network.outputs:
        err = q.to_float(name, ints[name]) - floats[name]
        signal += float((floats[name] ** 2).sum())
        noise += float((err**2).sum())
        worst = max(worst, float(err.abs().max()))
    snr = math.inf if noise == 0 else 10 * math.log10(signal / noise) if signal > 0 else -math.inf
    return Accuracy(snr, worst, q.semantics)


def run_float_outputs(network: Network, x: np.ndarray) -> dict[str, torch.Tensor]:
    from cnnforge.sim.float_eval import run_float

    return {k: v.double() for k, v in run_float(network, np.asarray(x, np.float64)).items()}
