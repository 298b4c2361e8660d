"""Which tensors must be laid out together (adjacent or interleaved, docs/hardware/devices.md §2,
§6), and the passthrough copies inserted when they cannot be (docs/hardware/unet.md §2)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from cnnforge.arithmetic import IDENTITY_SHIFT, IDENTITY_WEIGHT
from cnnforge.errors import PlanError
from cnnforge.geometry import passes, processors_per_pass
from cnnforge.ir import INPUT, Layer, Network, Op, Quantized
from cnnforge.targets.max7800x.device import Max7800xDevice

COPY_TAG = "copy"  # module_path prefix of the passthrough copies the planner inserts


class GroupKind(StrEnum):
    SINGLE = "single"
    ADJACENT = "adjacent"
    INTERLEAVED = "interleaved"


@dataclass(frozen=True)
class Group:
    """Tensors laid out together: ``parts`` in processor (adjacent) or word (interleaved) order."""

    kind: GroupKind
    parts: tuple[str, ...]
    consumer: str = ""  # the multi-input layer that needs this layout

    @property
    def gap(self) -> int:
        """``write_gap`` of every part (docs/hardware/devices.md §2)."""
        return len(self.parts) - 1 if self.kind is GroupKind.INTERLEAVED else 0


def group_kind(network: Network, layer: Layer, device: Max7800xDevice) -> GroupKind:
    """How ``layer`` reads its inputs: parts of one pass in all sit side by side
    (docs/hardware/devices.md §2 "Concatenation"), more are interleaved word by word."""
    if len(layer.inputs) == 1:
        return GroupKind.SINGLE
    if layer.eltwise is not None:
        return GroupKind.INTERLEAVED
    total = sum(s[0] for s in network.input_shapes(layer))
    return GroupKind.ADJACENT if total <= device.pass_channels else GroupKind.INTERLEAVED


def is_copy(layer: Layer) -> bool:
    """True for a copy inserted by the planner (passthrough, or identity 1x1 convolution)."""
    return layer.module_path.startswith(f"{COPY_TAG} of ")


def form_groups(network: Network, device: Max7800xDevice) -> tuple[Network, tuple[Group, ...]]:
    """Insert the copies the layout needs and group every tensor (see the module docstring)."""
    claimed: dict[str, int] = {}
    groups: list[Group] = []
    layers: list[Layer] = []
    names = {layer.name for layer in network.layers} | {INPUT}
    for layer in network.layers:
        kind = group_kind(network, layer, device)
        if kind is GroupKind.SINGLE:
            layers.append(layer)
            continue
        _check_interleave(network, layer, kind, device)
        parts: list[str] = []
        for name in layer.inputs:
            if _must_copy(network, kind, name, claimed, parts):
                copy = _copy_layer(network, name, layer, names)
                names.add(copy.name)
                layers.append(copy)
                name = copy.name
            claimed[name] = len(groups)
            parts.append(name)
        groups.append(Group(kind, tuple(parts), layer.name))
        layers.append(dataclasses.replace(layer, inputs=tuple(parts)))
    out = network.with_layers(layers)
    singles = [Group(GroupKind.SINGLE, (n,)) for n in (INPUT, *(x.name for x in out.layers))]
    return out, tuple(groups) + tuple(g for g in singles if g.parts[0] not in claimed)


def _must_copy(
    network: Network,
    kind: GroupKind,
    name: str,
    claimed: dict[str, int],
    parts: list[str],
) -> bool:
    if name == INPUT or name in claimed or name in parts:
        return True
    if kind is GroupKind.ADJACENT:
        return False
    readers = [x for x in network.layers if name in x.inputs]
    producer = network.layer(name)
    return len(readers) > 1 or name in network.outputs or producer.wide


def _check_interleave(
    network: Network, layer: Layer, kind: GroupKind, device: Max7800xDevice
) -> None:
    """Interleaved parts must each fill whole single passes on the same processors; adjacent
    parts start on instance boundaries and must fit one pass with their holes."""
    width, align = device.pass_channels, device.processors_per_instance
    if kind is GroupKind.ADJACENT:
        channels = [s[0] for s in network.input_shapes(layer)]
        need = sum(c + (-c % align) for c in channels[:-1]) + channels[-1]
        if need > width:
            raise PlanError(
                f"a concatenation of {channels} channels needs {need} processors with the parts "
                f"aligned to memory instances, which exceed {width}",
                where=f"layer {layer.name} ({layer.module_path or layer.name})",
                hint=f"use multiples of {align} channels for every part but the last",
            )
    if kind is not GroupKind.INTERLEAVED or layer.eltwise is not None:
        return
    channels = [s[0] for s in network.input_shapes(layer)]
    total = sum(channels)
    if len(set(channels)) == 1 and (
        passes(total, device) == len(channels) and processors_per_pass(total, device) == channels[0]
    ):
        return
    raise PlanError(
        f"a concatenation of {channels} channels (above {width} in all) must be "
        "interleaved word by word, which needs equal parts that each fill one pass",
        where=f"layer {layer.name} ({layer.module_path or layer.name})",
        hint=(
            "concatenate parts of equal channel counts "
            f"(a multiple of {align}, at most {width} each)"
        ),
    )


def identity_conv(copy: Layer, quantized: bool) -> Layer:
    """The copy as a 1x1 identity convolution (the vendor's "fakept" form), which unlike a
    passthrough may move channels to any processors."""
    c = copy.out_shape[0]
    one_d = len(copy.out_shape) == 2
    shape = (c, c, 1) if one_d else (c, c, 1, 1)
    eye = np.eye(c).reshape(shape)
    quant = Quantized(8, (IDENTITY_WEIGHT * eye).astype(np.int64), None, IDENTITY_SHIFT)
    return dataclasses.replace(
        copy,
        op=Op.CONV1D if one_d else Op.CONV2D,
        weight=eye.astype(np.float32),
        quant=quant if quantized else None,
    )


def _copy_layer(network: Network, name: str, consumer: Layer, taken: set[str]) -> Layer:
    """A passthrough copy of ``name`` for ``consumer`` (no activation, shift 0, 8-bit)."""
    shape = network.shape_of(name)
    base = f"{consumer.name}_{'in' if name == INPUT else name}_copy".replace(".", "_")
    new, k = base, 1
    while new in taken:
        k += 1
        new = f"{base}{k}"
    ones = (1,) * (len(shape) - 1)
    return Layer(
        name=new,
        op=Op.PASSTHROUGH,
        inputs=(name,),
        out_shape=shape,
        module_path=f"{COPY_TAG} of {name} for {consumer.name}",
        in_channels=shape[0],
        out_channels=shape[0],
        kernel_size=ones,
        stride=ones,
        padding=(0,) * len(ones),
        dilation=ones,
    )
