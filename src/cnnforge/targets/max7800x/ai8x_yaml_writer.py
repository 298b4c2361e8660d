"""Write a placed hardware ``Network`` as the vendor's network YAML, every placement value explicit
(docs/hardware/network-yaml.md §3-§5); weights go into the checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import yaml

from cnnforge.errors import EmitError
from cnnforge.ir import BINARY_BITS, INPUT, Activation, Layer, Network, Op
from cnnforge.outputs import atomic_output_file
from cnnforge.targets.max7800x.placement import Placement, Plan
from cnnforge.targets.max7800x.wordsim import in_place_layers
from cnnforge.version import __version__

RESERVED_NAMES = frozenset({"stop", "input"})
_ACTIVATE = {Activation.NONE: "None", Activation.RELU: "ReLU", Activation.ABS: "Abs"}


class _Mask(int):
    """A processor mask, written as ``0x`` and 16 hex digits."""


class _Offset(int):
    """A data-memory byte offset, written as ``0x`` and 4 hex digits like the vendor's files."""


class _Flow(list):
    """A short list written in flow style: ``[8, 7]``."""


class _Dumper(yaml.SafeDumper):
    """Safe dumper: hex masks and offsets, no aliases, lists in flow style."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


_INT = "tag:yaml.org,2002:int"
_Dumper.add_representer(_Mask, lambda d, v: d.represent_scalar(_INT, f"0x{int(v):016x}"))
_Dumper.add_representer(_Offset, lambda d, v: d.represent_scalar(_INT, f"0x{int(v):04x}"))
_Dumper.add_representer(
    _Flow, lambda d, v: d.represent_sequence("tag:yaml.org,2002:seq", v, flow_style=True)
)


def yaml_text(
    network: Network, plan: Plan, *, arch: str | None = None, dataset: str | None = None
) -> str:
    """The vendor YAML for ``network`` placed by ``plan``, as text (deterministic)."""
    _check(network, plan)
    head = {"arch": arch or network.name, "dataset": dataset or network.name}
    # an imported pair's snoop registers travel on (the firmware writes them)
    snoop = [f"snoop: [{', '.join(f'0x{v:08x}' for v in plan.snoop)}]"] if plan.snoop else []
    lines = [
        f"# {_comment(network.name)}: network description for ai8x-synthesis, written by cnnforge "
        f"{__version__} for {plan.device.name}",
        "# Weights, bias and output shifts are in the matching checkpoint.",
        *_flag_comments(network, plan),
        *(["# Run ai8x-synthesis with --fifo (streaming layers, plan/streaming.py)."] * plan.fifo),
        "",
        _dump(head).rstrip("\n"),
        *snoop,
        "",
        "layers:",
    ]
    index = {layer.name: i for i, layer in enumerate(network.layers)}
    for i, (layer, place) in enumerate(zip(network.layers, plan.placements, strict=True)):
        entry = layer_dict(network, plan, i, layer, place, index)
        lines.append(f"  # Layer {i}: {_comment(layer.name)} ({_summary(network, layer)})")
        body = _dump(entry).rstrip("\n").splitlines()
        lines.extend(("  - " if k == 0 else "    ") + line for k, line in enumerate(body))
    return "\n".join(lines) + "\n"


def _comment(text: str) -> str:
    """``text`` inside a YAML comment: printable ASCII only (a newline would end the comment)."""
    return "".join(ch if 32 <= ord(ch) < 127 else "?" for ch in text)[:80]


def _flag_comments(network: Network, plan: Plan) -> list[str]:
    """Vendor command-line flags the network's semantics need (the YAML cannot carry them)."""
    lines = []
    if network.avg_pool_rounding:
        rounding = "docs/hardware/arithmetic.md R3.6"
        lines.append(f"# Run ai8x-synthesis with --avg-pool-rounding ({rounding}).")
    in_place = in_place_layers(network, plan)
    if in_place:
        lines += [
            "# Run ai8x-synthesis with --overlap-data: layers "
            + ", ".join(_comment(name) for name in in_place)
            + " write over",
            "# their own dying input (proven safe in raster order, plan/inplace.py). Without the",
            "# flag the vendor tool reports 'overwriting input' and computes a different result;",
            "# `cnnforge plan/compile --no-in-place` plans without overlap (needs no flag) where",
            "# such a plan fits.",
        ]
    return lines


def write_yaml(
    network: Network,
    plan: Plan,
    path: Path | str,
    *,
    arch: str | None = None,
    dataset: str | None = None,
) -> Path:
    """Write the vendor YAML to ``path`` atomically (``arch`` defaults to ``network.name``)."""
    text = yaml_text(network, plan, arch=arch, dataset=dataset)
    with atomic_output_file(Path(path)) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def _dump(data: Any) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=1000)


def _summary(network: Network, layer: Layer) -> str:
    ins = " x ".join(str(n) for n in network.input_shapes(layer)[0])
    outs = " x ".join(str(n) for n in layer.out_shape)
    return f"{_operation(layer)}, {ins} -> {outs}"


def _check(network: Network, plan: Plan) -> None:
    """What the vendor format cannot express is an ``EmitError`` here, not a broken file."""
    if len(plan.placements) != len(network.layers):
        raise EmitError(
            f"the plan has {len(plan.placements)} placements for {len(network.layers)} layers"
        )
    for layer, place in zip(network.layers, plan.placements, strict=True):
        where = f"layer {layer.name}"
        if place.layer != layer.name:
            raise EmitError(f"the plan places {place.layer!r} here", where=where)
        if not layer.is_hardware or (layer.has_weights and layer.quant is None):
            raise EmitError(
                "only quantized hardware layers can be written as vendor YAML",
                where=where,
                hint="lower and quantize the network first",
            )
        if layer.name.lower() in RESERVED_NAMES:
            raise EmitError(f"the name {layer.name!r} is reserved in the vendor YAML", where=where)
        if layer.is_concat and len({s[0] for s in network.input_shapes(layer)}) != 1:
            raise EmitError(
                "the vendor tool requires equal channel counts in a concatenation "
                f"({[s[0] for s in network.input_shapes(layer)]})",
                where=where,
                hint="docs/hardware/network-yaml.md §5: concatenated parts must have the same "
                "channel count",
            )


def _operation(layer: Layer) -> str:
    if layer.op is Op.PASSTHROUGH:
        return layer.eltwise.value if layer.eltwise is not None else "none"
    return {Op.LINEAR: "linear"}.get(layer.op, layer.op.value)


def _kernel(layer: Layer) -> Any:
    if layer.op is Op.CONV1D:
        return layer.kernel_size[0]
    return "x".join(str(k) for k in layer.kernel_size)


def layer_dict(
    network: Network, plan: Plan, i: int, layer: Layer, place: Placement, index: dict[str, int]
) -> dict[str, Any]:
    """The YAML mapping of one layer, keys in a fixed order."""
    d: dict[str, Any] = {"name": layer.name}
    d["processors"] = _Mask(place.in_processors)
    d["output_processors"] = _Mask(place.out_processors)
    d["in_offset"] = _Offset(place.in_offset)
    d["out_offset"] = _Offset(place.out_offset)
    if place.write_gap:
        d["write_gap"] = place.write_gap
    previous = (INPUT,) if i == 0 else (network.layers[i - 1].name,)
    if layer.inputs != previous:
        d["in_sequences"] = _Flow(-1 if n == INPUT else index[n] for n in layer.inputs)
    if i == 0:
        d["data_format"] = plan.data_format
    if place.streaming:
        d["streaming"] = True
    for key, on in (("calcx4", place.calcx4), ("readahead", place.read_ahead)):
        if on:
            d[key] = True
    if place.tcalc is not None:
        d["tcalc"] = place.tcalc
    d["operation"] = _operation(layer)
    d.update(_geometry(layer))
    d.update(_pooling(layer))
    if layer.eltwise is not None:
        if layer.op is not Op.PASSTHROUGH:
            d["eltwise"] = layer.eltwise.value
        d["operands"] = len(layer.inputs)
        if not layer.pool_first:
            d["pool_first"] = False
    if layer.op is not Op.PASSTHROUGH:
        d["activate"] = _ACTIVATE[layer.activation]
    if layer.wide:
        d["output_width"] = 32
    quantization = _quantization(layer)
    if quantization is not None:
        d["quantization"] = quantization
    if place.bias_quadrant is not None and layer.quant is not None and layer.quant.bias is not None:
        d["bias_group"] = place.bias_quadrant
    # The vendor takes the final layer as the output unless another layer says `output`; then
    # only the layers that say so (the vendor tool): with several outputs every one says so.
    if layer.name in network.outputs and (i != len(network.layers) - 1 or len(network.outputs) > 1):
        d["output"] = True
    return d


def _geometry(layer: Layer) -> dict[str, Any]:
    if layer.op in (Op.CONV2D, Op.CONV1D, Op.CONVTRANSPOSE2D):
        d: dict[str, Any] = {"kernel_size": _kernel(layer), "pad": layer.padding[0]}
        if layer.groups > 1:
            d["conv_groups"] = layer.groups
        if layer.op is Op.CONV1D and layer.dilation and layer.dilation[0] != 1:
            d["dilation"] = layer.dilation[0]
        return d
    if layer.op is Op.LINEAR and layer.flatten:
        return {"flatten": True}
    return {}


def _pooling(layer: Layer) -> dict[str, Any]:
    pool = layer.pool
    if pool is None:
        return {}
    size = pool.size[0] if len(set(pool.size)) == 1 else _Flow(pool.size)
    d: dict[str, Any] = {f"{pool.kind.value}_pool": size, "pool_stride": pool.stride[0]}
    if any(x != 1 for x in pool.dilation_or_ones()):
        d["pool_dilation"] = _Flow(pool.dilation)
    return d


def _quantization(layer: Layer) -> Any:
    """`quantization` where the vendor's inference from the weights would differ (§5 step 9)."""
    q = layer.quant
    if q is None:
        return None
    if q.weight_bits == BINARY_BITS:
        return "binary"
    w = np.asarray(q.weights)
    if not np.any(w) or np.all(np.abs(w) == 1):
        return q.weight_bits
    return None
