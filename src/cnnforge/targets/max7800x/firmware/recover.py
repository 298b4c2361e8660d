"""Decoded layers back to a vendor pair (YAML + checkpoint) and so to cnnforge's network and plan:
the data flow from the placement, weights by kernels.layout on index tags (docs/firmware.md)."""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from cnnforge.errors import ConfigError
from cnnforge.ir import BINARY_BITS, Layer, Network, Op, Quantized
from cnnforge.owners import scratch_dir
from cnnforge.targets.max7800x.ai8x_checkpoint_writer import layer_state
from cnnforge.targets.max7800x.device import get_device
from cnnforge.targets.max7800x.firmware import kernels
from cnnforge.targets.max7800x.firmware.decode import DecodedLayer, DecodeError, packed_outputs
from cnnforge.targets.max7800x.firmware.facts import LayerFacts, network_facts
from cnnforge.targets.max7800x.firmware.regmap import MAPS
from cnnforge.targets.max7800x.firmware.speedups import physical_columns
from cnnforge.targets.max7800x.placement import Plan

# The vendor-pair reader (targets.max7800x.ai8x.load_ai8x, handed in by firmware_read.py):
# (yaml, checkpoint, input shape, device=...) -> (network, plan).
PairReader = Callable[..., tuple[Network, Plan]]

INPUT = -1
_ACT = {(True, False): "ReLU", (False, True): "Abs", (False, False): "None"}


def _ffs(x: int) -> int:
    return (x & -x).bit_length() - 1


def _span(ly: DecodedLayer) -> int:
    """The processors a layer may write: its output span; broadcasting depthwise: those it reads;
    a passthrough or other depthwise layer: those it reads, packed (decode.packed_outputs)."""
    if ly.broadcast:
        return ly.in_map
    if ly.op == "passthrough" or ly.depthwise:
        return packed_outputs(ly)
    return ((1 << ly.out_span) - 1) << ly.out_base


@dataclasses.dataclass
class Flow:
    """The data flow the placement implies: per layer its sources, output map and channels."""

    sources: list[list[int]]  # per layer: earlier layers (INPUT: the network input), in order
    out_maps: list[int]
    channels: list[int]  # output channels
    in_channels: list[int]
    flatten: list[bool]
    ops: list[str] = dataclasses.field(default_factory=list)  # the YAML operation of each layer


def _writes(ly: DecodedLayer, offset: int, stride: int | None) -> bool:
    """Whether a layer writes (one of its passes) at byte ``offset`` (``stride``: with that
    many bytes between pixels, as a multi-pass reader reads them)."""
    step = 4 * (4 if ly.wide else 1) * (ly.write_gap + 1)
    if stride is not None and step * ly.out_expand != stride and step != stride:
        return False
    return any(ly.out_offset + step * j == offset for j in range(ly.out_expand))


def _sources(
    layers: list[DecodedLayer], spans: list[int], ly: DecodedLayer, passes: int, strict: bool
) -> list[int]:
    """The earlier layers ``ly`` reads (per pass and processor the latest writer; INPUT: none);
    element-wise operands lie word-interleaved at ``in_offset + 4 (e x operands + k)``."""
    found: list[int] = []
    k_all = ly.operands
    for k in range(k_all):
        mine: list[int] = []
        for e in range(passes):
            offset = ly.in_offset + 4 * (e * k_all + k)
            for p in range(64):
                if ly.in_map >> p & 1:
                    src = _writer(layers, spans, ly, p, offset, 4 * passes * k_all, strict)
                    if src not in mine:
                        mine.append(src)
        found += mine[:1] if k_all > 1 else [s for s in mine if s not in found]
    return found or [INPUT]


def _writer(
    layers: list[DecodedLayer],
    spans: list[int],
    ly: DecodedLayer,
    p: int,
    offset: int,
    stride: int,
    strict: bool,
) -> int:
    """The latest layer before ``ly`` that writes byte ``offset`` of processor ``p`` (with
    pixels ``stride`` bytes apart when ``strict``); INPUT: none."""
    if ly.index == 0:
        return INPUT
    for s in range(ly.index - 1, -1, -1):
        if spans[s] >> p & 1 and _writes(layers[s], offset, stride if strict else None):
            return s
    return INPUT


def data_flow(layers: list[DecodedLayer]) -> Flow:
    """Sources, output processors and channel counts of every layer (see the module docstring)."""
    n = len(layers)
    spans = [_span(ly) for ly in layers]
    sources: list[list[int]] = []
    for ly in layers:
        found = _sources(layers, spans, ly, ly.in_expand, strict=True)
        if (INPUT in found and ly.index > 0) or ly.flatten:  # flatten: passes x pixels, one read
            found = _sources(layers, spans, ly, 1, strict=False)
        sources.append(found)
    out_maps = []
    for i in range(n):
        readers = [ly.in_map for j, ly in enumerate(layers) if i in sources[j]]
        used = 0
        for m in readers:
            used |= m & spans[i]
        out_maps.append(used or spans[i])
    channels: list[int] = []
    in_channels: list[int] = []
    flatten: list[bool] = []
    for i, ly in enumerate(layers):
        cin = 0
        for s in sources[i][:1] if ly.operands > 1 else sources[i]:  # operands: one's channels
            if s == INPUT:
                cin += ly.in_map.bit_count() * (1 if _flattens_input(ly) else ly.in_expand)
            else:
                cin += channels[s] if s < i else out_maps[s].bit_count()
        passes = max(1, -(-cin // 64))
        flat = ly.flatten or (ly.op != "passthrough" and ly.in_expand > passes)
        in_channels.append(cin)
        flatten.append(flat)
        if ly.op == "passthrough" or ly.depthwise:  # a depthwise layer: one output per input
            channels.append(cin)
        else:
            channels.append(_out_channels(layers, ly, out_maps[i]))
    ops = _operations(layers, sources, flatten)
    return Flow(sources, out_maps, channels, in_channels, flatten, ops)


def _operations(
    layers: list[DecodedLayer], sources: list[list[int]], flatten: list[bool]
) -> list[str]:
    """Each layer's YAML operation: a 1x1 convolution's registers are the same for images, 1-D data
    and vectors, so the rank of the data it reads says conv2d, conv1d or linear."""
    ranks: list[int] = []
    ops: list[str] = []
    for i, ly in enumerate(layers):
        first = 1 if layers[0].op == "conv1d" else 2
        rank = max(first if s == INPUT else ranks[s] for s in sources[i])
        op = ly.op
        if flatten[i]:
            op = "linear"
        elif ly.op == "conv2d" and ly.kernel == (1, 1) and rank < 2:
            op = "conv1d" if rank == 1 and ly.in_dims[0] > 1 else "linear"
        ops.append(op)
        ranks.append(0 if op == "linear" else 1 if op == "conv1d" else rank)
    return ops


def _out_channels(layers: list[DecodedLayer], ly: DecodedLayer, out_map: int) -> int:
    """Output channels: processors x passes, unless passes round processors up to whole
    instances; then the next bias in its quadrant tells (bias.py: lead + channels entries)."""
    most = out_map.bit_count() * ly.out_expand
    if ly.out_expand == 1 or ly.bias_quadrant is None:
        return most
    after = [o.bias_offset for o in layers
             if o.bias_quadrant == ly.bias_quadrant and o.bias_offset > ly.bias_offset]  # fmt: skip
    if not after:
        return most
    lead = (_ffs(out_map) % 4) * ly.out_expand
    n = min(after) - ly.bias_offset - lead
    per = -(-n // ly.out_expand)
    fits = min((per + 3) & ~3, 64) == out_map.bit_count() and n > 64 * (ly.out_expand - 1)
    return n if fits and n <= most else most


def _pool(ly: DecodedLayer) -> dict[str, Any]:
    if ly.pool == (1, 1):  # a stride without pooling: a 1x1 pooling of that stride
        return {"max_pool": 1, "pool_stride": ly.pool_stride[0]} if ly.pool_stride[0] > 1 else {}
    one = ly.pool[0] == ly.pool[1] or ly.op == "conv1d"
    size: Any = ly.pool[0] if one else list(ly.pool)
    stride = ly.pool_stride[0] if ly.pool_stride != (1, 1) else ly.pool[0]
    d: dict[str, Any] = {("avg_pool" if ly.pool_avg else "max_pool"): size, "pool_stride": stride}
    if ly.pool_stride == (1, 1) and ly.stride[0] == 1:
        d["pool_stride"] = 1
    if ly.pool_dilation != (1, 1):
        d["pool_dilation"] = list(ly.pool_dilation)
    return d


def _kernel(ly: DecodedLayer) -> tuple[int, int]:
    return ly.kernel if ly.kernel != (0, 0) else (3, 3)


def pins_bias(layers: list[DecodedLayer], flow: Flow, flatten_first: bool) -> bool:
    """Whether the YAML names bias quadrants (``bias_group``): when each quadrant's offsets follow
    layer order (flatten first if ``flatten_first``); else the vendor's allocation remakes them."""
    for q in {ly.bias_quadrant for ly in layers} - {None}:
        mine = sorted(
            (ly for ly in layers if ly.bias_quadrant == q),
            key=lambda ly: (not (flatten_first and flow.flatten[ly.index]), ly.index),
        )
        offsets = [ly.bias_offset for ly in mine]
        if offsets != sorted(offsets):
            return False
    return True


def yaml_layer(
    ly: DecodedLayer, flow: Flow, data_format: str, pin_bias: bool = False
) -> dict[str, Any]:
    """One layer of the decoded network as a vendor YAML mapping (``pin_bias``: pins_bias)."""
    i = ly.index
    d: dict[str, Any] = {"name": f"l{i}", "processors": ly.in_map,
                         "output_processors": flow.out_maps[i],
                         "in_offset": ly.in_offset, "out_offset": ly.out_offset}  # fmt: skip
    if ly.write_gap:
        d["write_gap"] = ly.write_gap
    src = flow.sources[i]
    if src != ([INPUT] if i == 0 else [i - 1]) and not (i == 0 and set(src) == {INPUT}):
        d["in_sequences"] = src
    if i == 0:
        d["data_format"] = data_format
    conv = ly.op != "passthrough"
    op = flow.ops[i]
    if flow.flatten[i]:
        d["operation"] = "linear"
        d["flatten"] = True
    elif ly.operands > 1 and not conv:
        d["operation"] = ly.eltwise
    else:
        d["operation"] = op
    if ly.operands > 1:
        if conv:
            d["eltwise"] = ly.eltwise
        d["operands"] = ly.operands
        if not ly.pool_first:
            d["pool_first"] = False
    if conv and not flow.flatten[i] and op != "linear":
        d.update(_kernel_keys(ly, op))
    if ly.depthwise:
        d["conv_groups"] = flow.in_channels[i]
    d.update(_pool(ly))
    if conv:
        d["activate"] = _ACT[ly.relu, ly.abs]
        d["quantization"] = "binary" if ly.binary else ly.weight_bits
    if pin_bias and ly.bias_quadrant is not None:
        d["bias_group"] = ly.bias_quadrant
    flags = (("output_width", ly.wide, 32), ("streaming", ly.streaming, True),
             ("calcx4", ly.calcx4, True), ("readahead", ly.read_ahead, True))  # fmt: skip
    d.update({key: value for key, on, value in flags if on})
    if ly.tcalc != (ly.read_ahead and ly.in_expand > 1):  # its default (facts.py)
        d["tcalc"] = ly.tcalc
    return d


def _kernel_keys(ly: DecodedLayer, op: str) -> dict[str, Any]:
    """A convolution's kernel_size, pad and stride as the YAML spells them for ``op``."""
    k = _kernel(ly)
    if op == "conv1d":
        d: dict[str, Any] = {"kernel_size": k[0], "pad": ly.padding[0]}
    elif ly.op == "convtranspose2d":
        d = {"kernel_size": f"{k[0]}x{k[1]}", "pad": k[0] - 1 - ly.padding[0]}
    else:
        d = {"kernel_size": f"{k[0]}x{k[1]}", "pad": ly.padding[0]}
    if ly.stride[0] != 1 and ly.op != "convtranspose2d":
        d["stride"] = ly.stride[0]
    return d


def _flattens_input(ly: DecodedLayer) -> bool:
    """Whether a layer flattens the network input: its flatten bit, or more passes than its channels
    need (few pixels leave the bit clear; a multi-pass input has > 64 x (passes - 1) channels)."""
    n = ly.in_map.bit_count()
    more = ly.in_expand > 1 and n * ly.in_expand <= 64 * (ly.in_expand - 1)
    return ly.flatten or (ly.op != "passthrough" and more)


def input_shape(ly: DecodedLayer, flow: Flow) -> tuple[int, ...]:
    """The network input: channels, then rows (and columns); a flattening first layer's pixels as
    one column; a first element-wise layer's operands as channel groups."""
    c = flow.in_channels[0] * ly.operands
    if flow.flatten[0] and flow.sources[0] == [INPUT]:
        return (c, _in_pixels(ly, flow), 1)
    if ly.op == "conv1d":
        return (c, ly.in_dims[0])
    if ly.op == "convtranspose2d":  # its rows/columns registers count stride x size
        return (c, ly.in_dims[0] // 2, ly.in_dims[1] // 2)
    return (c, *ly.in_dims)


def weight_shape(ly: DecodedLayer, flow: Flow, in_pixels: int) -> tuple[int, ...]:
    """The PyTorch layout of a layer's weights (what the checkpoint stores)."""
    i = ly.index
    out, cin = flow.channels[i], flow.in_channels[i]
    if flow.flatten[i]:
        return (out, cin * in_pixels)
    if flow.ops[i] == "linear":
        return (out, cin)
    k = _kernel(ly)
    if ly.op == "convtranspose2d":  # PyTorch: (in, out / groups, ...)
        return (cin, 1 if ly.depthwise else out, *k)
    cin = 1 if ly.depthwise else cin  # one kernel per channel
    if flow.ops[i] == "conv1d":
        return (out, cin, k[0])
    return (out, cin, *k)


def _checkpoint(
    layers: list[DecodedLayer], weights: dict[int, np.ndarray], bias: dict[int, np.ndarray]
) -> dict[str, Any]:
    state: OrderedDict[str, torch.Tensor] = OrderedDict()
    for ly in layers:
        if ly.index not in weights:
            continue
        bits = BINARY_BITS if ly.binary else ly.weight_bits
        q = Quantized(bits, weights[ly.index], bias.get(ly.index), ly.output_shift)
        layer = Layer(name=f"l{ly.index}", op=Op.CONV2D, wide=ly.wide, quant=q)
        state.update(layer_state(layer, f"l{ly.index}"))
    return {"arch": "decoded", "epoch": 1000, "state_dict": state, "extras": {}}


def _read(
    read: PairReader,
    layers: list[DecodedLayer],
    text: str,
    ckpt: dict[str, Any],
    shape: tuple[int, ...],
    device: str,
    tmp: Path,
    fifo: bool,
) -> tuple[Network, Plan]:
    (tmp / "decoded.yaml").write_text(text, encoding="utf-8")
    torch.save(ckpt, tmp / "decoded.pth.tar")
    try:
        return read(tmp / "decoded.yaml", tmp / "decoded.pth.tar", shape, device=device, fifo=fifo)
    except ConfigError as exc:  # name the registers, not the temporary YAML
        raise _register_error(exc, text, layers, device) from None


def _register_error(
    exc: ConfigError, text: str, layers: list[DecodedLayer], device: str
) -> DecodeError:
    """The reader's refusal of the decoded YAML, named by the layer's control register (the
    layer whose mapping holds the YAML line it names)."""
    line = int(m.group(1)) if (m := re.search(r":(\d+)$", exc.where or "")) else 0
    layer = 0
    for number, row in enumerate(text.splitlines()[:line], start=1):
        if (hit := re.match(r"- name: l(\d+)$", row)) and number <= line:
            layer = int(hit.group(1))
    what = re.sub(r"^layer \d+ \(l\d+\): ", "", exc.what)
    in_map = layers[layer].in_map if layer < len(layers) else 0
    addr = MAPS[device].layer(max(_ffs(in_map), 0) // 16, layer, "lctl")
    return DecodeError(
        f"register 0x{addr:08x}: layer {layer}: the network its registers configure is "
        f"refused: {what}"
    )


def pair_text(layers: list[DecodedLayer], flow: Flow, data_format: str, flatten_first: bool) -> str:
    """The decoded network as vendor YAML text (cnnforge's own reading of it)."""
    pin = pins_bias(layers, flow, flatten_first)
    doc = {"arch": "decoded", "dataset": "decoded",
           "layers": [yaml_layer(ly, flow, data_format, pin) for ly in layers]}  # fmt: skip
    return yaml.safe_dump(doc, sort_keys=False)


def with_emulated_passes(layers: list[DecodedLayer], device: str) -> list[DecodedLayer]:
    """``layers`` with the passes put back of the MAX78000's element-wise layers run as one pass of
    passes x rows (eltwise.py ``emulated``); their operands' producers say how many."""
    if not get_device(device).eltwise_multipass_plain_only:
        return layers
    spans = [_span(ly) for ly in layers]
    out = list(layers)
    for ly in layers:
        if ly.operands < 2 or ly.op != "passthrough" or ly.in_expand != 1 or ly.index == 0:
            continue
        found = _sources(layers, spans, ly, 1, strict=False)
        passes = {layers[s].out_expand for s in found if s != INPUT}
        e = passes.pop() if len(passes) == 1 and INPUT not in found else 1
        if e > 1 and ly.in_dims[0] % e == 0:
            rows = (ly.in_dims[0] // e, ly.in_dims[1])
            out[ly.index] = dataclasses.replace(ly, in_expand=e, out_expand=e, in_dims=rows)
    return out


def without_pool_resets(layers: list[DecodedLayer], device: str) -> list[DecodedLayer]:
    """``layers`` without the MAX78002's average-pool reset passthroughs (eltwise.py
    ``avgpool_reset``; no part of the network), the others renumbered."""
    if not MAPS[device].avgpool_reset_after_eltwise:
        return layers
    drop = {
        ly.index
        for ly, nxt in itertools.pairwise(layers[1:])
        if ly.op == "passthrough" and ly.in_map == 1 and ly.in_dims == (1, 1)
        and layers[ly.index - 1].operands > 1 and nxt.pool_avg
        and (nxt.in_offset, nxt.out_offset) == (ly.in_offset, ly.out_offset)
    }  # fmt: skip
    kept = [ly for ly in layers if ly.index not in drop]
    return [dataclasses.replace(ly, index=k) for k, ly in enumerate(kept)]


def recover(
    layers: list[DecodedLayer], device: str, read: PairReader, data_format: str = "HWC"
) -> tuple[Network, Plan]:
    """The network and plan a firmware's decoded layers configure (see the module docstring)."""
    if not layers:
        raise DecodeError("no layers")
    layers = without_pool_resets(layers, device)
    flow = data_flow(layers)
    _check_unwritten_reads(layers, flow, device)
    text = pair_text(layers, flow, data_format, MAPS[device].flatten_bias_first)
    shape = input_shape(layers[0], flow)
    fifo = layers[0].fifo  # the vendor's --fifo (a flag, not a YAML key)
    with scratch_dir("decoded") as name:
        tmp = Path(name)
        zeros = {  # binary layers hold +1 (their weights are -1 or +1)
            ly.index: np.full(weight_shape(ly, flow, _in_pixels(ly, flow)), int(ly.binary))
            for ly in layers
            if ly.op != "passthrough"
        }
        zero_ckpt = _checkpoint(layers, zeros, {})
        network, plan = _read(read, layers, text, zero_ckpt, shape, device, tmp, fifo)
        facts = network_facts(network, plan)
        weights = recovered_weights(layers, facts, MAPS[device], network)
        bias = {
            ly.index: _bias(ly, facts[ly.index])
            for ly in layers
            if (ly.bias_quadrant is not None or ly.channel_bias) and ly.index in weights
        }
        ckpt = _checkpoint(layers, weights, bias)
        return _read(read, layers, text, ckpt, shape, device, tmp, fifo)


def _check_unwritten_reads(layers: list[DecodedLayer], flow: Flow, device: str) -> None:
    """Refuse a later layer reading memory no layer writes, away from the network input: data
    the firmware itself keeps there (the vendor's rolling `data_buffer`), not in the folder."""
    first = layers[0]
    for ly in layers[1:]:
        if flow.sources[ly.index] != [INPUT]:
            continue
        if ly.in_offset != first.in_offset or ly.in_map & ~first.in_map:
            addr = MAPS[device].layer(max(_ffs(ly.in_map), 0) // 16, ly.index, "rptr_base")
            raise DecodeError(
                f"register 0x{addr:08x}: layer {ly.index} reads offset 0x{ly.in_offset:04x} on "
                f"processors 0x{ly.in_map:016x}, which no layer writes and the input does not "
                "fill (a data buffer the firmware keeps, the vendor's `data_buffer`): not read back"
            )


def _in_pixels(ly: DecodedLayer, flow: Flow) -> int:
    """Pixels entering a flatten layer: its registers hold passes x pixels (lctl2, post)."""
    product = ly.flatten_prod + 1 if ly.flatten else ly.in_expand
    passes = max(1, -(-flow.in_channels[ly.index] // 64))
    return max(1, product // passes)


def _bias(ly: DecodedLayer, f: LayerFacts) -> np.ndarray:
    if ly.channel_bias is not None:  # a depthwise layer's, per channel
        return np.array(ly.channel_bias[: f.out_channels], np.int64)
    lead = _ffs(f.out_map) % 4 * f.out_expand
    vals = ly.bias[lead : lead + f.out_channels]
    return np.array(vals + [0] * (f.out_channels - len(vals)), np.int64)


def shared_kernels(layers: list[DecodedLayer]) -> dict[int, int]:
    """{layer: the earlier layer whose kernel columns it reads}: the same processors, first
    column and kernel-count fields (the vendor's deduplicated kernels, dedup.py)."""
    out: dict[int, int] = {}
    seen: dict[tuple, int] = {}
    for ly in layers:
        if ly.op == "passthrough":
            continue
        key = (ly.in_map, ly.kernel_start, ly.kernel_field, ly.kernel_end, ly.weight_bits)
        if key in seen:
            out[ly.index] = seen[key]
        else:
            seen[key] = ly.index
    return out


def _tagged(f: LayerFacts, r: int) -> LayerFacts:
    """``f`` with each weight replaced by bits ``r * quant`` on of its index + 1."""
    shape = np.shape(f.weights)
    tags = (np.arange(int(np.prod(shape))).reshape(shape) + 1) >> (r * f.quant)
    # binary weights are packed as 1-bit fields: tagged as such (not clipped to -1/+1)
    return dataclasses.replace(f, weights=tags & ((1 << f.quant) - 1), weight_bits=f.quant)


def recovered_weights(
    layers: list[DecodedLayer], facts: list[LayerFacts], rmap, network: Network
) -> dict[int, np.ndarray]:
    """Each weight layer's integer weights (PyTorch layout), from its decoded kernel bytes."""
    todo = [f for f in facts if f.has_weights]
    if not todo:
        return {}
    bits = min(f.quant for f in todo)
    most = max(int(np.asarray(f.weights).size) for f in todo)
    rounds = -(-(most + 1).bit_length() // bits)
    shared = shared_kernels(layers)  # the tags of two layers can be equal: not dedup.py's
    index = np.zeros((64, max(rmap.kernel_columns_large, rmap.kernel_columns_small), 9, 8),
                     np.int64)  # fmt: skip
    kl = None
    for r in range(rounds):
        tagged = [_tagged(f, r) if f.has_weights else f for f in facts]
        kl = kernels.layout(tagged, rmap, shared)
        for j in range(8):
            index[..., j] |= ((kl.data.astype(np.int64) >> j) & 1) << r
    assert kl is not None
    out = {}
    for f in todo:
        ly = layers[f.index]
        q = f.quant
        flat = np.zeros(np.asarray(f.weights).size, np.int64)
        offs = kl.offs[f.index]
        raws = _calcx4_columns(ly, kl, offs, rmap) if ly.calcx4 else ly.kernels
        for p, raw in raws.items():
            cols = len(raw) // 9
            data = np.frombuffer(raw[: 9 * cols], np.uint8).reshape(cols, 9).astype(np.int64)
            tags = index[p, offs : offs + cols]  # (cols, 9, 8 bits) of tag bits by round
            for fld in range(8 // q):
                tag = np.zeros(tags.shape[:2], np.int64)
                for b in range(q):
                    bit = fld * q + b
                    t = tags[..., bit]  # bit r of round r: tag bits r*q + b
                    for r in range(rounds):
                        tag |= ((t >> r) & 1) << (r * q + b)
                val = (data >> (fld * q)) & ((1 << q) - 1)
                val = np.where(val >= 1 << (q - 1), val - (1 << q), val)
                hit = (tag > 0) & (tag <= flat.size)
                flat[tag[hit] - 1] = val[hit]
        w = flat.reshape(np.shape(f.weights))
        if ly.binary:  # a set bit is -1, a clear one +1 (kernels.py)
            w = np.where(w < 0, -1, 1)
        if f.op is Op.CONVTRANSPOSE2D:  # facts: (out, in, kh, kw) flipped; PyTorch: (in, out)
            w = np.flip(w.swapaxes(0, 1), axis=(2, 3))
        shape = np.shape(network.layer(f.name).quant.weights)
        out[f.index] = np.ascontiguousarray(w).reshape(shape)
    return out


def _calcx4_columns(ly: DecodedLayer, kl, offs: int, rmap) -> dict[int, bytes]:
    """A calcx4 layer's columns per processor in the layout's order: column ``offs + i`` read
    where the writer loads it (speedups.physical_columns), zeros where nothing is loaded."""
    out = {}
    logical = np.arange(offs, offs + kl.length[ly.index])
    for p, loaded in ly.physical.items():
        place = physical_columns(kl.owner[p], kl.offs, kl.quarters, logical, rmap)
        out[p] = b"".join(loaded.get(int(c), bytes(9)) for c in place.tolist())
    return out
