"""The HLS plan: ping-pong activation RAMs and shared skip stores per tensor (docs/hls-target.md
§6), accumulator widths, and the resource estimate (§7)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from cnnforge.arithmetic import accumulator_bits
from cnnforge.errors import DeviceLimitError, EmitError
from cnnforge.geometry import BEFORE_FIRST, live_intervals
from cnnforge.ir import INPUT, Activation, Layer, Network, Op, PoolKind
from cnnforge.targets.hls.device import HlsTarget

PINGPONG = ("ping", "pong")
ENGINES = {Op.CONV2D: "conv2d", Op.CONVTRANSPOSE2D: "transconv", Op.PASSTHROUGH: "copy"}


@dataclass(frozen=True)
class LayerPlan:
    """One layer's engine, output buffer and estimate (docs/hls-target.md §7)."""

    layer: Layer
    engine: str  # conv2d, transconv or copy
    buffer: str  # where its output lives
    acc_bits: int  # 0 for copies
    macs: int
    cycles: int
    rom_bits: int
    line_buffer_bits: int
    pool_comparators: int


@dataclass(frozen=True)
class HlsPlan:
    """Buffers and per-layer plans of a network on an HLS target."""

    target: HlsTarget
    layers: tuple[LayerPlan, ...]
    buffers: dict[str, int]  # buffer -> elements (int8 each)
    tensor_buffer: dict[str, str]  # tensor (INPUT or a layer) -> buffer
    io_cycles: int  # AXI-Stream in and out, one value per cycle


def plan_hls(network: Network, target: HlsTarget) -> HlsPlan:
    """Assign buffers and estimate resources; DeviceLimitError for layers the engines lack."""
    for layer in network.layers:
        _check_layer(network, layer, target)
    tensor_buffer, buffers = _buffers(network)
    layers = tuple(_layer_plan(network, x, tensor_buffer[x.name], target) for x in network.layers)
    outputs = sum(math.prod(network.shape_of(n)) for n in network.outputs)
    io = math.prod(network.input_shape) + outputs
    return HlsPlan(target, layers, buffers, tensor_buffer, io)


def _check_layer(network: Network, layer: Layer, target: HlsTarget) -> None:
    def refuse(what: str) -> DeviceLimitError:
        return DeviceLimitError(
            f"{what} is not implemented by the HLS engines",
            where=f"layer {layer.name} ({layer.module_path or layer.name})",
            hint="see docs/hls-target.md §3 for what the HLS target runs",
        )

    if not target.supports_op(layer.op) or len(layer.out_shape) != 3:
        raise refuse(f"{layer.op.value} on shape {layer.out_shape}")
    if layer.wide:
        raise refuse("a 32-bit (wide) output")
    if layer.groups != 1:
        raise refuse(f"groups={layer.groups}")
    if layer.op is Op.CONV2D and any(s != 1 for s in layer.stride or (1,)):
        raise refuse(f"conv2d stride {layer.stride}")
    if any(d != 1 for d in layer.dilation or (1,)):
        raise refuse(f"dilation {layer.dilation}")
    if layer.activation not in (Activation.NONE, Activation.RELU, Activation.ABS):
        raise refuse(f"activation {layer.activation.value}")
    if layer.quant is not None and layer.quant.weight_bits not in target.weight_bits:
        raise refuse(f"{layer.quant.weight_bits}-bit weights")
    pool = layer.pool
    if pool is not None and pool.kind is PoolKind.AVG and pool.dilation_or_ones() != (1, 1):
        raise refuse("average pooling with dilation")
    if any(len(network.shape_of(n)) != 3 for n in layer.inputs):
        raise refuse("a 1-D or flattened input")


def _buffers(network: Network) -> tuple[dict[str, str], dict[str, int]]:
    """Tensor -> buffer, and buffer sizes (elements); see the module docstring."""
    n = len(network.layers)
    live = live_intervals(network)
    order = [INPUT, *(x.name for x in network.layers)]
    tensor_buffer: dict[str, str] = {}
    sizes: dict[str, int] = {b: 0 for b in PINGPONG}
    stores: list[list] = []  # [name, elements, last use]
    for name in order:
        first, last = live[name]
        elements = math.prod(network.shape_of(name))
        is_output = name in network.outputs
        short = last <= first + 1 and not is_output
        final = is_output and first == n - 1 and not network.consumers(name)
        if short or final:
            buf = PINGPONG[first % 2]  # the input (first = -1) goes to pong
            sizes[buf] = max(sizes[buf], elements)
        else:
            free = [s for s in stores if s[2] < first]
            if free:
                store = min(free, key=lambda s: (abs(s[1] - elements), s[0]))
            else:
                store = [f"skip{len(stores)}", 0, BEFORE_FIRST - 1]
                stores.append(store)
            store[1] = max(store[1], elements)
            store[2] = last
            buf = store[0]
        tensor_buffer[name] = buf
    sizes.update({s[0]: s[1] for s in stores})
    return tensor_buffer, {b: e for b, e in sizes.items() if e}


def _layer_plan(network: Network, layer: Layer, buffer: str, target: HlsTarget) -> LayerPlan:
    c_out, oh, ow = layer.out_shape
    engine = ENGINES[layer.op]
    p, ii = target.macs_per_cycle, target.initiation_interval
    comparators = 0 if layer.pool is None else math.prod(layer.pool.size) - 1
    if layer.op is Op.PASSTHROUGH:
        return LayerPlan(layer, engine, buffer, 0, 0, c_out * oh * ow * ii, 0, 0, comparators)
    q = layer.quant
    if q is None:
        raise EmitError("the HLS emitter needs a quantized network", where=f"layer {layer.name}")
    weights = q.weights if layer.op is Op.CONV2D else q.weights.swapaxes(0, 1)
    acc = accumulator_bits(weights, q.bias)
    if acc > target.accumulator_bits_max:
        raise DeviceLimitError(
            f"accumulator needs {acc} bits (at most {target.accumulator_bits_max})",
            where=f"layer {layer.name}",
            hint="use fewer input channels or narrower weights",
        )
    c_in = weights.shape[1]
    k = math.prod(layer.kernel_size)
    taps = c_in * k
    macs = c_out * oh * ow * taps
    if layer.op is Op.CONVTRANSPOSE2D:  # only the taps the stride does not skip (R2.7)
        _, h, w = network.input_shapes(layer)[0]
        if layer.pool is not None:
            h, w = layer.pool.output_dims((h, w))
        k_h, k_w = layer.kernel_size
        s, pad = layer.stride[0], layer.padding[0] if layer.padding else 0
        macs = (
            c_out
            * c_in
            * _transposed_taps(oh, h, k_h, s, pad)
            * _transposed_taps(ow, w, k_w, s, pad)
        )
    rom = q.weights.size * q.weight_bits + (0 if q.bias is None else q.bias.size * 8)
    line = 0
    cycles = oh * ow * c_out * math.ceil(taps / p) * ii
    if layer.op is Op.CONV2D:
        kh = layer.kernel_size[0]
        wp = ow + layer.kernel_size[1] - 1  # padded input width of a stride-1 conv
        hp = oh + kh - 1
        line = kh * wp * c_in * 8
        cycles += hp * wp * c_in * ii  # filling the line buffer, one value per cycle
    return LayerPlan(layer, engine, buffer, acc, macs, cycles, rom, line, comparators)


def _transposed_taps(out: int, size: int, k: int, stride: int, pad: int) -> int:
    """Pairs (output index, kernel tap) of one axis that read an input element (R2.7)."""
    return sum(
        1
        for o in range(out)
        for t in range(k)
        if (o + pad - t) >= 0 and (o + pad - t) % stride == 0 and (o + pad - t) // stride < size
    )
