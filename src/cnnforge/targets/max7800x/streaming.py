"""Streaming (FIFO) layers: the vendor's rules and each streaming layer's rollover buffer
(docs/hardware/devices.md §6-§7, docs/hardware/network-yaml.md §5 "Streaming")."""

from __future__ import annotations

from dataclasses import dataclass

from cnnforge.geometry import layer_in_channels, passes
from cnnforge.ir import INPUT, Layer, Network, Op
from cnnforge.targets.max7800x.device import Max7800xDevice, get_device
from cnnforge.targets.max7800x.masks import instances_of
from cnnforge.targets.max7800x.placement import Placement, Plan

INCREASE_START = 2  # the vendor's default `--increase-start` (MAX78000 formula)


@dataclass(frozen=True)
class StreamIssue:
    """One broken streaming rule: layer index, the YAML key it concerns, rule name, message."""

    index: int
    key: str
    rule: str
    message: str


def streaming_prefix(plan: Plan) -> int:
    """How many layers stream (they must be the first ones; 0 when none)."""
    n = 0
    while n < len(plan.placements) and plan.placements[n].streaming:
        n += 1
    return n


def _closed_overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """The vendor's ``utils.overlap``: closed ranges [start, end] touching counts as overlap."""
    return a[0] <= b[1] and b[0] <= a[1]


@dataclass(frozen=True)
class _Geometry:
    """What the rollover formulas read of one layer, as the hardware sees it."""

    dims: tuple[int, int]  # input rows, cols
    pool: tuple[int, int]
    pool_stride: tuple[int, int]
    pad: int
    kernel: tuple[int, int]
    pooled: tuple[int, int]
    operands: int
    passes: int  # input passes


def _geometry(network: Network, layer: Layer, dev: Max7800xDevice) -> _Geometry:
    dims = network.input_shapes(layer)[0][1:]
    pool = layer.pool.size if layer.pool else (1, 1)
    stride = layer.pool.stride if layer.pool else (1, 1)
    pooled = layer.pool.output_dims(dims) if layer.pool else dims
    kernel = tuple(layer.kernel_size)
    pad = layer.padding[0]
    if (
        dev.streaming_one_by_one_as_3x3
        and kernel == (1, 1)
        and layer.op in (Op.CONV2D, Op.CONVTRANSPOSE2D)
    ):
        kernel, pad = (3, 3), 1  # the vendor runs a streaming 1x1 as a padded 3x3
    operands = layer.operand_count
    channels = network.input_shapes(layer)[0][0]
    return _Geometry(
        (dims[0], dims[1]),
        (pool[0], pool[1]),
        (stride[0], stride[1]),
        pad,
        (kernel[0], kernel[1]),
        (pooled[0], pooled[1]),
        operands,
        passes(channels, dev),
    )


def rollover_words(network: Network, plan: Plan, index: int, dev: Max7800xDevice) -> int:
    """The circular buffer (32-bit words per instance) of streaming layer ``index`` (FMAX)."""
    ahead = plan.placements[index].read_ahead
    return rollover(network, index, streaming_prefix(plan), plan.data_format, dev, ahead)


def rollover(
    network: Network,
    index: int,
    streamed: int,
    data_format: str,
    dev: Max7800xDevice,
    read_ahead: bool = False,
) -> int:
    """FMAX of layer ``index`` when the first ``streamed`` layers stream (``plan``-free form);
    ``read_ahead`` (MAX78002): the layer starts a pooling stride later."""
    g = _geometry(network, network.layers[index], dev)
    big = index == 0 and data_format == "CHW"
    cols = g.dims[1]
    if not dev.streaming_new_rollover:
        if index == 0:
            start = ((g.pool[0] - 1) * cols + g.pool[1]) * g.pool[0]
        else:
            p = _geometry(network, network.layers[index - 1], dev)
            start = (p.pooled[1] + 2 * p.pad) * (p.kernel[0] - 1 + g.pool[0] - 1)
            start += p.kernel[1] - 1 + g.pool[1] + INCREASE_START
        if big and index == 0:
            val = 12  # the vendor's fixed value for CHW input
        else:
            val = start + (g.pool[0] - 1) * cols + max(1, g.pool_stride[1], g.pool[1])
        return val + (-val) % g.passes
    row_inc = max(g.pool[0], g.pool_stride[0])
    col_inc = max(g.pool[1], g.pool_stride[1])
    padded = cols + 2 * g.pad
    if index == 0:
        if g.pool_stride[0] == 1 and g.pool[0] == 1:
            start = col_inc
        else:
            start = (row_inc * padded + g.pad + 2 * col_inc) * g.operands
            start += g.pool_stride[1] if read_ahead else 0
        val = start + col_inc + (g.pool_stride[1] - 1) * padded
        return val * g.pool_stride[1] * 4 if big else val
    # The vendor's default `--debug-new-streaming` equation: a first row of `pad` (else the
    # pooling stride), and for the last streaming layer the columns its pooling skips.
    start = (g.pad or g.pool_stride[0]) * padded
    start += (row_inc * padded + g.pad + 2 * col_inc) * g.operands
    start += g.pool_stride[1] if read_ahead else 0
    if index + 1 == streamed:
        effective = cols // col_inc
        if effective * g.pool_stride[1] + g.pool[1] > cols:
            effective -= 1
        start += (0 if col_inc == 1 else cols - effective * col_inc) * g.pool_stride[1]
    val = start + (g.passes - 1) * (row_inc * cols + g.pad + col_inc) + col_inc
    return val + (-val) % g.passes


def streaming_issues(
    network: Network, plan: Plan, device: Max7800xDevice | str
) -> list[StreamIssue]:
    """Every streaming / FIFO rule ``plan`` breaks (docs/hardware/devices.md §7 "Streaming and
    FIFOs")."""
    dev = get_device(device) if isinstance(device, str) else device
    out = streaming_structure(network, plan, dev)
    if out:
        return out
    return _buffers(network, plan, dev)


def streaming_structure(network: Network, plan: Plan, dev: Max7800xDevice) -> list[StreamIssue]:
    """The rules about which layers may stream and the FIFO (no memory offsets involved)."""
    n = streaming_prefix(plan)
    chw = plan.data_format == "CHW"
    fmt = "CHW" if chw else "HWC"
    limit = dev.fifo_max_chw_channels if chw else dev.fifo_max_hwc_channels
    allowed = dev.fifo_chw_mask if chw else dev.fifo_hwc_mask
    procs0 = plan.placements[0].in_processors
    last = network.layers[max(n - 1, 0)]
    final_pad = any(last.padding) or (
        tuple(last.kernel_size) == (1, 1) and dev.streaming_one_by_one_as_3x3
    )
    rules = [  # (broken, layer index, YAML key, rule, message)
        *((p.streaming, i, "streaming", "streaming-order",
           "a streaming layer after a non-streaming one (streaming layers come first)")
          for i, p in enumerate(plan.placements) if i >= n),
        (n > dev.max_streaming_layers, n - 1, "streaming", "streaming-count",
         f"{n} streaming layers; {dev.name} has {dev.max_streaming_layers}"),
        (n > 0 and not plan.fifo, 0, "streaming", "streaming-fifo",
         "the first layer streams, which needs the FIFO (the vendor's --fifo)"),
        (plan.fifo and network.input_shape[0] > limit, 0, "processors", "fifo-channels",
         f"the FIFO carries at most {limit} {fmt} input channels, not {network.input_shape[0]}"),
        (plan.fifo and procs0 & ~allowed != 0, 0, "processors", "fifo-processors",
         f"the FIFO feeds processors {allowed:#018x} only, not {procs0:#018x}"),
        (n > 0 and dev.streaming_final_layer_needs_pad and not final_pad, n - 1, "pad",
         "streaming-final-pad", f"the final streaming layer must pad on {dev.name}"),
    ]  # fmt: skip
    later = {x for layer in network.layers[n:] for x in layer.inputs} | set(network.outputs)
    for i, layer in enumerate(network.layers[:n]):
        rules += [
            (i > 0 and layer.inputs != (network.layers[i - 1].name,), i, "in_sequences",
             "streaming-input", "a streaming layer reads the layer before it only"),
            (len(network.input_shapes(layer)[0]) != 3 or layer.op is Op.CONV1D, i, "operation",
             "streaming-2d", "cnnforge models streaming of 2-D data only"),
            (layer.flatten, i, "flatten", "streaming-flatten",
             "`flatten` is not compatible with streaming"),
            (layer.op is Op.PASSTHROUGH and not dev.streaming_passthrough_allowed, i, "operation",
             "streaming-passthrough", f"passthrough layers cannot stream on {dev.name}"),
            (i < n - 1 and layer.name in later, i, "streaming", "streaming-output",
             "only the last streaming layer's output is kept whole; this one is read later"),
        ]  # fmt: skip
    return [StreamIssue(i, key, rule, msg) for bad, i, key, rule, msg in rules if bad]


def _buffers(network: Network, plan: Plan, dev: Max7800xDevice) -> list[StreamIssue]:
    """Rollover buffers inside their instance, clear of outputs and of each other (the vendor's
    checks with its closed ranges, the vendor tool's backend "Check rollover")."""
    out: list[StreamIssue] = []
    n = streaming_prefix(plan)
    bufs: list[tuple[int, int, int]] = []  # (start, end, instances)
    for i, place in enumerate(plan.placements[:n]):
        words = 4 * rollover_words(network, plan, i, dev)
        start, end, dest = place.in_offset, place.in_offset + words, place.out_offset
        shared = place.out_processors & place.in_processors != 0
        where = f"the buffer {start:#x}-{end:#x} (rollover {words:#x} bytes)"
        rules = [
            (shared and start < dest <= end, "out_offset", "streaming-overlap",
             f"{where} reaches the layer's output at {dest:#x}"),
            (shared and dest <= start <= dest + words, "out_offset", "streaming-overlap",
             f"the output at {dest:#x} plus the rollover reaches the input buffer at {start:#x}"),
            (end >= dev.instance_bytes, "in_offset", "streaming-bounds",
             f"{where} passes the instance size {dev.instance_bytes:#x}"),
        ]  # fmt: skip
        inst = instances_of(place.in_processors, dev)
        rules += [
            (other & inst != 0 and _closed_overlap((start, end), (a, b)), "in_offset",
             "streaming-buffers", f"{where} overlaps {network.layers[j].name}'s {a:#x}-{b:#x}")
            for j, (a, b, other) in enumerate(bufs)
        ]  # fmt: skip
        out += [StreamIssue(i, key, rule, msg) for bad, key, rule, msg in rules if bad]
        bufs.append((start, end, inst))
    if n:  # the last streaming layer writes its whole output (the vendor ignores its passes)
        place, layer = plan.placements[n - 1], network.layers[n - 1]
        pixels = layer.out_shape[1] * (layer.out_shape[2] if len(layer.out_shape) > 2 else 1)
        span = (place.out_offset, place.out_offset + pixels * 4 * (4 if layer.wide else 1))
        inst = instances_of(place.out_processors, dev)
        out += [
            StreamIssue(n - 1, "out_offset", "streaming-output-overlap",
                        f"the output {span[0]:#x}-{span[1]:#x} overlaps the streaming buffer "
                        f"of layer {network.layers[j].name} ({a:#x}-{b:#x})")
            for j, (a, b, other) in enumerate(bufs)
            if other & inst and _closed_overlap(span, (a, b))
        ]  # fmt: skip
    return out


def _input_bytes(network: Network, index: int, dev: Max7800xDevice) -> int:
    """Bytes of layer ``index``'s whole input in one instance (HWC; the network input may be CHW,
    a byte per pixel, when it has few channels: docs/hardware/devices.md §2)."""
    layer = network.layers[index]
    shapes = network.input_shapes(layer)
    pixels = 1
    for d in shapes[0][1:]:
        pixels *= d
    channels = layer_in_channels(network, layer)
    operands = layer.operand_count
    need = 4 * pixels * passes(channels, dev) * operands
    if layer.inputs == (INPUT,) and channels <= dev.data_instances:
        need = min(need, pixels)
    return need


def streaming_layers(network: Network, device: Max7800xDevice | str) -> int:
    """How many leading layers must stream (0: none need to, or streaming cannot help): enough
    that every layer after them finds its whole input in one data-memory instance."""
    dev = get_device(device) if isinstance(device, str) else device
    n = 0
    for i in range(len(network.layers)):
        if _input_bytes(network, i, dev) > dev.instance_bytes:
            n = i + 1
    if n == 0 or n >= len(network.layers):
        return 0
    if trial_issues(network, n, dev):
        return 0
    return n


def trial_issues(network: Network, n: int, dev: Max7800xDevice) -> list[StreamIssue]:
    """The structural rules broken when the first ``n`` layers stream from the FIFOs (HWC)."""
    trial = Plan(
        dev,
        "HWC",
        tuple(
            Placement(x.name, dev.fifo_hwc_mask, 0, 0, 0, streaming=i < n)
            for i, x in enumerate(network.layers)
        ),
        fifo=True,
    )
    return streaming_structure(network, trial, dev)


def fifo_mask(channels: int) -> int:
    """HWC input through the four FIFOs: processors 0-3, then 16-19, 32-35, 48-51."""
    return sum(1 << (16 * (c // 4) + c % 4) for c in range(channels))


def streamed_spans(network: Network, streamed: int, dev: Max7800xDevice) -> dict[str, int]:
    """Bytes each streamed tensor needs in the planner (its reader's rollover buffer), and the
    last streaming layer's whole output: + 4 each, as the vendor compares closed ranges."""
    from cnnforge.targets.max7800x.memory import tensor_span

    names = [INPUT, *(x.name for x in network.layers)]
    spans = {names[i]: 4 * rollover(network, i, streamed, "HWC", dev) + 4 for i in range(streamed)}
    spans[names[streamed]] = tensor_span(network, names[streamed], "HWC", dev) + 4
    return spans


__all__ = [
    "INCREASE_START",
    "StreamIssue",
    "fifo_mask",
    "rollover",
    "rollover_words",
    "streamed_spans",
    "streaming_issues",
    "streaming_layers",
    "streaming_prefix",
    "streaming_structure",
    "trial_issues",
]
