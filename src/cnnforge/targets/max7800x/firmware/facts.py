"""What the firmware needs of each hardware layer, in the register fields' terms (docs/firmware.md),
from cnnforge's Network + Plan only (no vendor file)."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

import numpy as np

from cnnforge.geometry import layer_in_channels
from cnnforge.ir import Activation, Layer, Network, Op, PoolKind
from cnnforge.targets.max7800x.device import get_device
from cnnforge.targets.max7800x.placement import Placement, Plan
from cnnforge.targets.max7800x.streaming import rollover_words


@dataclass(frozen=True)
class LayerFacts:
    """One hardware layer as the register fields see it."""

    index: int
    name: str
    op: Op
    in_map: int  # input processors (64-bit mask)
    out_map: int  # output processors
    in_offset: int
    out_offset: int
    write_gap: int
    in_channels: int  # channels of one operand (the input mask carries these)
    out_channels: int
    in_dims: tuple[int, int]  # (rows, cols) entering the layer, before pooling
    pooled: tuple[int, int]  # after pooling
    pool: tuple[int, int]  # pool size (1, 1) without pooling
    pool_stride: tuple[int, int]
    pool_dilation: tuple[int, int]
    pool_avg: bool
    kernel: tuple[int, int]  # (1, 1) for linear and passthrough
    padding: tuple[int, int]  # as the hardware pads (transposed: kernel - 1 - padding)
    output_padding: tuple[int, int]
    stride: tuple[int, int]
    operands: int
    eltwise: str  # "" without an element-wise operation
    groups: int
    flatten: bool
    relu: bool
    abs: bool
    wide: bool  # 32-bit output
    weight_bits: int  # 8 / 4 / 2 / 1 / -1 (binary); 8 for passthrough
    output_shift: int
    weights: np.ndarray | None  # integer weights, PyTorch layout
    bias: np.ndarray | None  # int8 bias-memory values
    bias_quadrant: int | None  # the plan's (YAML `bias_group`) choice, None: any used quadrant
    chw: bool  # CHW ("big data") input: the first layer of a CHW plan
    streaming: bool
    rollover: int = 0  # streaming: the circular input buffer in words (streaming.rollover_words)
    pool_first: bool = True  # element-wise with pooling: pool each operand, then combine
    # MAX78002 speed-ups (placement.py): four output channels at once, read-ahead, and the
    # pass counter in steps of 4 (resolved: by default with read-ahead over several passes)
    calcx4: bool = False
    read_ahead: bool = False
    tcalc_set: bool | None = None

    @functools.cached_property
    def in_expand(self) -> int:
        """Input passes: ceil(channels / 64) (docs/hardware/devices.md §2)."""
        return max(1, math.ceil(self.in_channels / 64))

    @functools.cached_property
    def in_expand_thresh(self) -> int:
        """Input channels per pass, rounded up to whole instances of 4 when there are passes."""
        return _per_pass(self.in_channels, self.in_expand)

    @functools.cached_property
    def out_expand(self) -> int:
        return max(1, math.ceil(self.out_channels / 64))

    @functools.cached_property
    def out_expand_thresh(self) -> int:
        return _per_pass(self.out_channels, self.out_expand)

    @property
    def tcalc(self) -> bool:
        """The pass counter counts in 4s: as the plan says, else with read-ahead and passes."""
        if self.tcalc_set is not None:
            return self.tcalc_set
        return self.read_ahead and self.in_expand > 1

    @property
    def has_weights(self) -> bool:
        return self.op is not Op.PASSTHROUGH and self.weights is not None

    @property
    def ksize(self) -> int:
        return self.kernel[0] * self.kernel[1]

    @property
    def quant(self) -> int:
        """Bits per weight as the kernel packing counts them (binary weights take 1)."""
        return abs(self.weight_bits) if self.has_weights else 8


def _per_pass(channels: int, passes: int) -> int:
    per = math.ceil(channels / passes)
    return min((per + 3) & ~3, 64) if channels > 64 else per


def _pair(values: tuple[int, ...], default: int) -> tuple[int, int]:
    if not values:
        return (default, default)
    return (values[0], values[1] if len(values) > 1 else default)


def layer_facts(
    network: Network, layer: Layer, place: Placement, index: int, chw: bool
) -> LayerFacts:
    """The facts of one hardware layer."""
    dims = (*network.input_shapes(layer)[0][1:], 1, 1)  # 1-D and vector data: 1s after
    in_dims = (int(dims[0]), int(dims[1]))
    pool, pool_stride, pool_dilation, pooled = _pooling(layer, in_dims)
    q, weights, kernel = layer.quant, _weights(layer), _kernel(layer)
    bias = None if q is None or q.bias is None else np.asarray(q.bias).astype(np.int64)
    return LayerFacts(
        index=index,
        name=layer.name,
        op=layer.op,
        in_map=place.in_processors,
        out_map=place.out_processors,
        in_offset=place.in_offset,
        out_offset=place.out_offset,
        write_gap=place.write_gap,
        in_channels=layer_in_channels(network, layer),
        out_channels=layer.out_shape[0],
        in_dims=in_dims,
        pooled=pooled,
        pool=pool,
        pool_stride=pool_stride,
        pool_dilation=pool_dilation,
        pool_avg=layer.pool is not None and layer.pool.kind is PoolKind.AVG,
        kernel=kernel,
        padding=_hw_padding(layer, kernel),
        output_padding=_pair(layer.output_padding, 0),
        stride=_pair(layer.stride, 1),
        operands=layer.operand_count,
        eltwise=layer.eltwise.value if layer.eltwise is not None else "",
        groups=layer.groups,
        flatten=layer.flatten,
        relu=layer.activation is Activation.RELU,
        abs=layer.activation is Activation.ABS,
        wide=layer.wide,
        weight_bits=q.weight_bits if q is not None and weights is not None else 8,
        output_shift=q.output_shift if q is not None else 0,
        weights=weights,
        bias=bias if bias is not None and np.any(bias != 0) else None,
        bias_quadrant=place.bias_quadrant,
        chw=chw and index == 0,
        streaming=place.streaming,
        pool_first=layer.pool_first,
        calcx4=place.calcx4,
        read_ahead=place.read_ahead,
        tcalc_set=place.tcalc,
    )


def _kernel(layer: Layer) -> tuple[int, int]:
    """Kernel rows x columns as the hardware runs it (Conv1d: k x 1; 1x1 for the rest)."""
    if layer.op is Op.CONV1D:
        return (layer.kernel_size[0], 1)
    if layer.op in (Op.CONV2D, Op.CONVTRANSPOSE2D):
        return _pair(layer.kernel_size, 1)
    return (1, 1)


def _weights(layer: Layer) -> np.ndarray | None:
    """The layer's weights as (out, in, kh, kw) (a transposed convolution's flipped back)."""
    q = layer.quant
    weights = None if q is None or layer.op is Op.PASSTHROUGH else np.asarray(q.weights)
    if weights is not None and layer.op is Op.CONVTRANSPOSE2D:  # (in, out, kh, kw), flipped
        weights = np.flip(weights, axis=(2, 3)).swapaxes(0, 1)
    return weights


def _pooling(layer: Layer, in_dims: tuple[int, int]) -> tuple[tuple[int, int], ...]:
    """(size, stride, dilation, pooled dims) of a layer's pooling ((1, 1)s and ``in_dims``
    without one)."""
    if layer.pool is None:
        return (1, 1), (1, 1), (1, 1), in_dims
    pooled = _pair(tuple(layer.pool.output_dims(in_dims[: len(layer.pool.size)])), 1)
    return (_pair(layer.pool.size, 1), _pair(layer.pool.stride, 1),
            _pair(layer.pool.dilation_or_ones(), 1), pooled)  # fmt: skip


def _hw_padding(layer: Layer, kernel: tuple[int, int]) -> tuple[int, int]:
    if layer.op is Op.LINEAR:
        return (0, 0)
    pad = _pair(layer.padding, 0)
    if layer.op is Op.CONVTRANSPOSE2D:
        return (kernel[0] - 1 - pad[0], kernel[1] - 1 - pad[1])
    return pad


def network_facts(network: Network, plan: Plan) -> list[LayerFacts]:
    """The facts of every hardware layer, in plan order."""
    chw = plan.data_format == "CHW"
    facts = [
        layer_facts(network, network.layer(p.layer), p, i, chw)
        for i, p in enumerate(plan.placements)
    ]
    facts = [
        replace(f, rollover=rollover_words(network, plan, f.index, get_device(plan.device)))
        if f.streaming
        else f
        for f in facts
    ]
    facts = [_stretched(f, network.layer(f.name)) for f in facts]
    return as_3x3(facts) if get_device(plan.device).streaming_one_by_one_as_3x3 else facts


def _stretched(f: LayerFacts, layer: Layer) -> LayerFacts:
    """A dilated Conv1d as an undilated one whose kernel has ``dilation - 1`` zeros between taps
    (the same output; the vendor's backend does so while it fits a column's 9 taps)."""
    d = layer.dilation[0] if layer.op is Op.CONV1D and layer.dilation else 1
    if d == 1 or f.weights is None:
        return f
    k = f.kernel[0]
    if (k - 1) * d >= 9:  # the vendor runs these on the 2-D hardware (not written yet)
        raise NotImplementedError(
            f"layer {f.name}: a Conv1d of kernel {k} and dilation {d} (longer than 9 taps)"
        )
    w = np.zeros((*f.weights.shape[:2], (k - 1) * d + 1), f.weights.dtype)
    w[:, :, ::d] = f.weights
    return replace(f, kernel=((k - 1) * d + 1, 1), weights=w)


def as_3x3(facts: list[LayerFacts]) -> list[LayerFacts]:
    """A 1x1 convolution that streams or follows one runs on the 3x3 hardware: its kernel centred,
    padded by 1 (the same output; for the devices whose streaming needs it)."""
    out = []
    for f in facts:
        after = f.index > 0 and facts[f.index - 1].streaming
        one = f.kernel == (1, 1) and f.op in (Op.CONV2D, Op.CONVTRANSPOSE2D)
        if one and (f.streaming or after) and f.weights is not None:
            w = np.zeros((*f.weights.shape[:2], 3, 3), f.weights.dtype)
            w[:, :, 1, 1] = f.weights[:, :, 0, 0]
            f = replace(f, kernel=(3, 3), padding=(1, 1), weights=w)
        out.append(f)
    return out
