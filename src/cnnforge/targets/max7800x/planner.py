"""The automatic planner: a hardware ``Network`` + a device -> (``Network``, ``Plan``).

The recipe, each step a plain function of the previous results:

1. ``form_groups``: decide for the whole graph which tensors are read together (concatenation
   by adjacency, interleaving for element-wise operands and wide concatenations) and insert
   passthrough copies where a tensor cannot be produced in place (plan/groups.py);
2. ``live_intervals``: when each tensor is live (cnnforge.geometry);
3. ``choose_data_format`` and ``assign_masks``: input layout and processor masks
   (plan/masks.py);
4. ``assign_offsets``: data-memory offsets without overlap of live data (plan/memory.py);
5. ``assign_kernels`` / ``assign_bias``: kernel columns and bias groups (plan/kernels.py);
6. the vendor latency model per layer (plan/latency.py).

Every plan it returns passes ``plan.validate.validate_plan`` (tests check this on random
networks); when no plan fits, the ``PlanError`` names the resource, the layer and the shortfall.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from cnnforge.errors import PlanError
from cnnforge.geometry import layer_in_geometry, live_intervals
from cnnforge.ir import INPUT, Layer, Network, Op
from cnnforge.targets.max7800x.device import Max7800xDevice, get_device
from cnnforge.targets.max7800x.groups import Group, GroupKind, form_groups, identity_conv
from cnnforge.targets.max7800x.kernels import (
    KernelSlot,
    assign_bias,
    assign_kernels,
    kernels_per_processor,
)
from cnnforge.targets.max7800x.latency import START_CYCLES, layer_cycles, layer_inputs
from cnnforge.targets.max7800x.masks import (
    assign_masks,
    choose_data_format,
    instances_of,
    make_unit,
)
from cnnforge.targets.max7800x.memory import assign_offsets, tensor_span
from cnnforge.targets.max7800x.placement import Placement, Plan
from cnnforge.targets.max7800x.streaming import (
    fifo_mask,
    streamed_spans,
    streaming_layers,
    trial_issues,
)
from cnnforge.targets.max7800x.validate import passthrough_masks_ok


def plan_network(
    network: Network, device: Max7800xDevice | str, *, in_place: bool = True, fifo: bool = False
) -> tuple[Network, Plan]:
    """Place ``network`` (hardware layers, quantized or not) on ``device``.

    Returns the network with any inserted copy layers and its ``Plan``. ``in_place``: layers
    may overwrite their own dying input where plan/inplace.py proves it safe (the vendor tool
    then needs ``--overlap-data``, as for its own U-Net); False keeps every live tensor apart.
    ``fifo`` (the vendor's ``--fifo``): the input arrives through the FIFOs, so at least the
    first layer streams; a ``PlanError`` when it cannot.
    """
    dev = get_device(device)
    _require_hardware(network)
    network, groups = form_groups(network, dev)
    if len(network.layers) > dev.max_layers:
        raise PlanError(
            f"{len(network.layers)} hardware layers (with copies) exceed the {dev.max_layers} "
            f"of {dev.name}",
            where=f"network {network.name}",
            hint="merge layers, or use a device with more layers (MAX78002)",
        )
    live = live_intervals(network)
    streamed, spans = _streaming(network, dev, fifo)
    data_format = "HWC" if streamed else choose_data_format(network, dev)
    # Streamed tensors sit in rollover buffers that all live while the streaming layers run.
    names = [INPUT, *(x.name for x in network.layers)][:streamed]
    live.update({name: (live[INPUT][0], streamed - 1) for name in names})
    network, layer_masks, offsets, kernels, bias = _best_attempt(
        network, groups, live, dev, data_format, in_place, spans
    )
    placements = _placements(network, groups, layer_masks, offsets, kernels, bias, dev)
    for i in range(streamed):
        p = dataclasses.replace(placements[i], streaming=True)
        placements[i] = dataclasses.replace(
            p, cycles=placed_cycles(network, network.layers[i], p, dev)
        )
    notes = (
        f"input data format {data_format}",
        *streaming_notes(network, streamed, fifo and not streaming_layers(network, dev)),
        *_in_place_notes(network, placements, data_format, dev, streamed),
        *_shared_kernel_notes(placements),
    )
    plan = Plan(dev, data_format, tuple(placements), notes=notes, fifo=streamed > 0)
    return network, plan


def _streaming(network: Network, device: Max7800xDevice, fifo: bool) -> tuple[int, dict[str, int]]:
    """Leading layers that must stream through the FIFO (with ``fifo``: at least the first),
    and their inputs' buffer sizes."""
    streamed = streaming_layers(network, device)
    if fifo and not streamed:
        issues = trial_issues(network, 1, device) if len(network.layers) > 1 else []
        if issues or len(network.layers) < 2:
            why = issues[0].message if issues else "a single layer has nothing to stream into"
            raise PlanError(
                f"--fifo: the first layer cannot stream: {why}",
                where=f"layer {network.layers[0].name}",
                hint="drop --fifo (the input is then loaded into data memory before the start)",
            )
        streamed = 1
    return streamed, streamed_spans(network, streamed, device) if streamed else {}


def streaming_notes(network: Network, streamed: int, asked: bool = False) -> tuple[str, ...]:
    """The plan note (and ``check`` line) saying which layers stream, and the vendor flag
    (``asked``: --fifo made them stream)."""
    if not streamed:
        return ()
    names = ", ".join(x.name for x in network.layers[:streamed])
    why = "--fifo" if asked else "their inputs do not fit one pass of data memory"
    return (
        f"layers {names} stream ({why}): the input arrives through the FIFO; the vendor tool "
        "needs --fifo for this plan",
    )


def _placements(
    network: Network,
    groups: tuple[Group, ...],
    layer_masks: dict[str, tuple[int, int]],
    offsets: dict[str, int],
    kernels: dict[str, KernelSlot],
    bias: dict[str, tuple[int, int]],
    dev: Max7800xDevice,
) -> list[Placement]:
    """Every layer's ``Placement`` (with its cycle estimate) from the chosen attempt."""
    gaps = {p: g.gap for g in groups for p in g.parts}
    placements = []
    for layer in network.layers:
        in_mask, out_mask = layer_masks[layer.name]
        slot = kernels.get(layer.name)
        quadrant, entry = bias.get(layer.name, (None, None))
        place = Placement(
            layer=layer.name,
            in_processors=in_mask,
            out_processors=out_mask,
            in_offset=offsets[layer.inputs[0]],  # part 0 of an interleave sits at the base
            out_offset=offsets[layer.name],
            write_gap=gaps[layer.name],
            kernel_start=slot.start if slot else None,
            kernel_words=slot.words if slot else 0,
            bias_quadrant=quadrant,
            bias_offset=entry,
        )
        placements.append(
            dataclasses.replace(place, cycles=placed_cycles(network, layer, place, dev))
        )
    return placements


#: Tie-break policies of the mask assignment tried in turn; the lowest data-memory top wins.
MASK_POLICIES = ("low", "long-high", "high")


def _best_attempt(network, groups, live, dev, data_format, in_place, spans) -> tuple:
    """The lowest-topped placement over the mask policies: (network, masks, offsets, kernels,
    bias); the first policy's PlanError when none places."""
    results, errors = [], []
    for policy in MASK_POLICIES:
        try:
            results.append(
                _attempt(network, groups, live, dev, data_format, policy, in_place, spans)
            )
        except PlanError as exc:
            errors.append(exc)
    if not results:
        raise errors[0]
    return min(results, key=lambda r: r[0])[1:]


def _attempt(network, groups, live, dev, data_format, policy, in_place, spans) -> tuple:
    """One full placement with one mask policy: (top, network, masks, offsets, kernels, bias)."""
    masks = assign_masks(network, groups, live, dev, data_format, policy)
    if INPUT in spans:  # the FIFOs feed their own processors (docs/hardware/devices.md §1)
        masks = {**masks, INPUT: fifo_mask(network.input_shape[0])}
    units = [make_unit(network, g, live, dev) for g in groups]
    offsets = assign_offsets(network, units, masks, live, dev, data_format, in_place, spans)
    layer_masks = {x.name: (_in_mask(x, masks, groups), masks[x.name]) for x in network.layers}
    network = _fix_copies(network, layer_masks, dev)
    kernels = assign_kernels(network, layer_masks, dev)
    bias = assign_bias(network, layer_masks, dev)
    top = max(offsets[n] + spans.get(n, tensor_span(network, n, data_format, dev)) for n in offsets)
    return top, network, layer_masks, offsets, kernels, bias


def _fix_copies(
    network: Network, layer_masks: dict[str, tuple[int, int]], dev: Max7800xDevice
) -> Network:
    """Passthroughs (copies or the user's pooling/element-wise layers) whose processors a
    passthrough cannot map become 1x1 identity convolutions: exact, and free to move data."""
    quantized = any(x.quant is not None for x in network.layers)
    layers = [
        identity_conv(x, quantized)
        if x.op is Op.PASSTHROUGH and not passthrough_masks_ok(*layer_masks[x.name], dev)
        else x
        for x in network.layers
    ]
    return network.with_layers(layers)


def _in_place_notes(
    network: Network,
    placements: list[Placement],
    data_format: str,
    dev: Max7800xDevice,
    streamed: int = 0,
) -> tuple[str, ...]:
    """A note naming the layers that write over their own input (vendor: --overlap-data);
    the first ``streamed`` layers read rollover buffers and are not judged here."""
    at = {p.layer: p for p in placements}
    names = []
    for layer, p in list(zip(network.layers, placements, strict=True))[streamed:]:
        src = layer.inputs[0]
        if src == INPUT:
            mask, offset = p.in_processors, p.in_offset
        else:
            mask, offset = at[src].out_processors, at[src].out_offset
        if not instances_of(p.out_processors, dev) & instances_of(mask, dev):
            continue
        end_in = offset + tensor_span(network, src, data_format, dev)
        end_out = p.out_offset + tensor_span(network, layer.name, data_format, dev)
        if p.out_offset < end_in and offset < end_out:
            names.append(layer.name)
    if not names:
        return ()
    return (
        f"layers {', '.join(names)} overwrite their own input in place (proven safe, "
        "plan/inplace.py); the vendor tool needs --overlap-data for this plan",
    )


def _shared_kernel_notes(placements: list[Placement]) -> tuple[str, ...]:
    """Layers sharing kernel columns (identical weights): the vendor YAML does not say so."""
    first: dict[tuple[int, int], str] = {}
    notes = []
    for p in placements:
        if p.kernel_start is None:
            continue
        key = (p.kernel_start, p.in_processors)
        if key in first:
            notes.append(
                f"layer {p.layer} shares the kernel columns of {first[key]} (identical "
                "weights); the vendor tool allocates them twice"
            )
        else:
            first[key] = p.layer
    return tuple(notes)


def _require_hardware(network: Network) -> None:
    for layer in network.layers:
        if layer.op is Op.CONV1D and _emulated_dilation(layer):
            raise PlanError(
                "dilated Conv1d emulated on 2-D hardware ((k-1)*d >= 9) is not planned yet "
                "(its output needs extra room before out_offset)",
                where=f"layer {layer.name} ({layer.module_path or layer.name})",
                hint="use a dilation with (kernel - 1) * dilation < 9",
            )
        if not layer.is_hardware:
            raise PlanError(
                f"model-level {layer.label()} layer left in the network",
                where=f"layer {layer.name} ({layer.module_path or layer.name})",
                hint="lower the network to hardware layers first (passes.lower)",
            )


def _emulated_dilation(layer: Layer) -> bool:
    d = layer.dilation[0] if layer.dilation else 1
    return d > 1 and (layer.kernel_size[0] - 1) * d >= 9


def _group_of(name: str, groups) -> Any:
    return next(g for g in groups if name in g.parts)


def _in_mask(layer: Layer, masks: dict[str, int], groups) -> int:
    """The processors a layer reads: its input, the union of adjacent parts, or one part."""
    group = _group_of(layer.inputs[0], groups)
    if len(layer.inputs) == 1 or group.kind is GroupKind.INTERLEAVED:
        return masks[layer.inputs[0]]
    mask = 0
    for name in layer.inputs:
        mask |= masks[name]
    return mask


def placed_cycles(network: Network, layer: Layer, place: Placement, dev: Max7800xDevice) -> int:
    """Estimated cycles of a placed layer by the vendor model (docs/hardware/devices.md §5)."""
    geo = layer_in_geometry(network, layer, dev)
    shape = network.input_shapes(layer)[0]
    kc = kernels_per_processor(network, layer, place.out_processors, dev)
    words = 1
    if layer.op is Op.PASSTHROUGH:
        per_quadrant = max(
            (place.out_processors >> (dev.processors_per_quadrant * q) & 0xFFFF).bit_count()
            for q in range(dev.quadrants)
        )
        words = -(-per_quadrant * (4 if layer.wide else 1) // 4)
    m = geo.passes
    if layer.op is Op.PASSTHROUGH and layer.pool is not None and geo.passes > 1:
        m = 2 * geo.passes - 1  # §5: a pooling passthrough with several passes
    v = layer_inputs(layer, (geo.channels, *shape[1:]), m, kc, words, place.kernel_start or 0)
    return layer_cycles(dataclasses.replace(v, streaming=place.streaming))


def plan_cycles(plan: Plan) -> int:
    """Network cycles: the start cycle plus every layer's estimate (docs/hardware/devices.md §5)."""
    return START_CYCLES + sum(p.cycles or 0 for p in plan.placements)


__all__ = ["placed_cycles", "plan_cycles", "plan_network", "streaming_notes"]
