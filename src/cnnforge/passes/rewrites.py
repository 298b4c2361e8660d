"""The ``Rewrite`` record every pass returns (shown by ``cnnforge check``), and the graph edits the
passes share, which keep a ``Network`` ordered and its references consistent."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from cnnforge.ir import Layer, Network, Op


@dataclass(frozen=True)
class Rewrite:
    """One change a pass made: ``rule`` applied to ``layer`` (``module_path`` for messages)."""

    layer: str
    module_path: str
    rule: str
    detail: str

    def to_dict(self) -> dict[str, str]:
        return dataclasses.asdict(self)


#: A rule looks at one layer and returns the edited network and a record, or None to decline.
Rule = Callable[[Network, Layer], "tuple[Network, Rewrite] | None"]


def apply_rules(network: Network, rules: Iterable[Rule]) -> tuple[Network, tuple[Rewrite, ...]]:
    """Apply ``rules`` in model order until none applies (each rule must shrink or settle)."""
    rules = tuple(rules)
    log: list[Rewrite] = []
    changed = True
    while changed:
        changed = False
        for layer in network.layers:
            for rule in rules:
                result = rule(network, layer)
                if result is not None:
                    network, record = result
                    log.append(record)
                    changed = True
                    break
            if changed:
                break
    return network, tuple(log)


def record(layer: Layer, rule: str, detail: str) -> Rewrite:
    """A ``Rewrite`` for ``layer`` (its module path, or its name when the path is unknown)."""
    return Rewrite(layer.name, layer.module_path or layer.name, rule, detail)


def sole_consumer(network: Network, name: str) -> Layer | None:
    """The only layer reading ``name`` (once), if ``name`` is not also a network output."""
    if name in network.outputs:
        return None
    users = network.consumers(name)
    if len(users) != 1 or users[0].inputs.count(name) != 1:
        return None
    return users[0]


def _rename_refs(layer: Layer, old: str, new: str) -> Layer:
    if old not in layer.inputs:
        return layer
    inputs = tuple(new if n == old else n for n in layer.inputs)
    return dataclasses.replace(layer, inputs=inputs)


def replace_layer(network: Network, layer: Layer) -> Network:
    """``network`` with the layer of the same name replaced by ``layer``."""
    layers = [layer if old.name == layer.name else old for old in network.layers]
    return network.with_layers(layers)


def redirect(network: Network, old: str, new: str, skip: str = "") -> Network:
    """Layers (all but ``skip``) and network outputs that read ``old`` read ``new`` instead."""
    layers = [x if x.name == skip else _rename_refs(x, old, new) for x in network.layers]
    outputs = tuple(new if n == old else n for n in network.outputs)
    return network.with_layers(layers, outputs=outputs)


def remove_layer(network: Network, name: str, redirect_to: str) -> Network:
    """Drop layer ``name``; whatever read it (layers, network outputs) reads ``redirect_to``."""
    network = network.with_layers(x for x in network.layers if x.name != name)
    return redirect(network, name, redirect_to)


def absorb_into_consumer(network: Network, producer: Layer, consumer: Layer) -> Network:
    """Remove ``producer`` (whose sole reader is ``consumer``) and put the edited ``consumer`` in
    its place, keeping the order topological."""
    layers = [consumer if x.name == consumer.name else x for x in network.layers]
    return network.with_layers(x for x in layers if x.name != producer.name)


def absorb_into_producer(network: Network, layer: Layer, producer: Layer) -> Network:
    """Remove ``layer``, whose effect ``producer`` (edited, same name) now carries itself."""
    return remove_layer(replace_layer(network, producer), layer.name, producer.name)


def insert_after(network: Network, anchor: str, new: Layer, readers: Iterable[str]) -> Network:
    """Insert ``new`` right after ``anchor``; the layers in ``readers`` (and outputs) that read
    ``anchor`` read ``new`` instead."""
    readers = set(readers)
    layers: list[Layer] = []
    for x in network.layers:
        layers.append(_rename_refs(x, anchor, new.name) if x.name in readers else x)
        if x.name == anchor:
            layers.append(new)
    outputs = tuple(new.name if n == anchor else n for n in network.outputs)
    return network.with_layers(layers, outputs=outputs)


def passthrough_geometry(channels: int, ndim: int) -> dict[str, object]:
    """The fields of a passthrough layer: in = out channels, 1x1 "kernel", stride 1, no pad."""
    return dict(
        op=Op.PASSTHROUGH,
        in_channels=channels,
        out_channels=channels,
        kernel_size=(1,) * ndim,
        stride=(1,) * ndim,
        padding=(0,) * ndim,
        dilation=(1,) * ndim,
    )


def unique_name(network: Network, base: str) -> str:
    """``base``, or ``base_2``, ``base_3``... whichever no layer of ``network`` uses yet."""
    names = {x.name for x in network.layers}
    if base not in names:
        return base
    i = 2
    while f"{base}_{i}" in names:
        i += 1
    return f"{base}_{i}"
