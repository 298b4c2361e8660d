"""IR invariants of a ``Network``, checked after every pass in tests (STYLE.md "verify").

``verify`` raises ``InputError`` naming the layer and the broken invariant: unique names,
references only to earlier layers (topological order), existing outputs, positive shapes,
weights shaped like the layer's geometry, output shapes that follow from the inputs for hardware
layers, equal operand shapes for element-wise layers, hardware activations on hardware layers.
It checks consistency only; device limits are ``passes.check``'s job.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cnnforge.errors import InputError
from cnnforge.ir import HARDWARE_ACTIVATIONS, INPUT, Layer, Network, Op
from cnnforge.passes.geometry import expected_out_shape

if TYPE_CHECKING:
    from cnnforge.devices import Device


def _fail(layer: Layer, what: str) -> None:
    where = f"layer {layer.name}" + (f" ({layer.module_path})" if layer.module_path else "")
    raise InputError(f"IR invariant broken: {what}", where=where)


def _check_references(network: Network) -> None:
    seen = {INPUT}
    for layer in network.layers:
        if not layer.name or layer.name in seen:
            _fail(layer, "layer names must be unique, non-empty and not 'input'")
        if not layer.inputs:
            _fail(layer, "a layer needs at least one input")
        for name in layer.inputs:
            if name not in seen:
                _fail(layer, f"input {name!r} is not an earlier layer")
        seen.add(layer.name)
    for name in network.outputs:
        if name not in seen or name == INPUT:
            raise InputError(f"IR invariant broken: output {name!r} is not a layer")


def _weight_shape(layer: Layer) -> tuple[int, ...]:
    if layer.op is Op.LINEAR:
        return (layer.out_channels, layer.in_channels)
    if layer.op is Op.CONVTRANSPOSE2D:
        return (layer.in_channels, layer.out_channels // layer.groups, *layer.kernel_size)
    return (layer.out_channels, layer.in_channels // layer.groups, *layer.kernel_size)


def _check_params(layer: Layer) -> None:
    if not layer.has_weights:
        return
    if layer.weight is None and layer.quant is None:
        _fail(layer, "a weight layer without weights")
    expected = _weight_shape(layer)
    for name, array in (("weight", layer.weight), ("quant.weights", _qweights(layer))):
        if array is not None and tuple(array.shape) != expected:
            _fail(layer, f"{name} has shape {list(array.shape)}, expected {list(expected)}")
    if layer.bias is not None and tuple(layer.bias.shape) != (layer.out_channels,):
        _fail(layer, f"bias has shape {list(layer.bias.shape)}, expected [{layer.out_channels}]")


def _qweights(layer: Layer):
    return layer.quant.weights if layer.quant is not None else None


def _check_shapes(network: Network, layer: Layer) -> None:
    if not layer.out_shape or any(n <= 0 for n in layer.out_shape):
        _fail(layer, f"output shape {list(layer.out_shape)} is not positive")
    shapes = network.input_shapes(layer)
    if layer.eltwise is not None and len(set(shapes)) != 1:
        _fail(layer, f"element-wise operands of different shapes {[list(s) for s in shapes]}")
    if len({s[1:] for s in shapes}) != 1 and layer.op is not Op.OPAQUE:
        _fail(layer, f"inputs of different sizes {[list(s) for s in shapes]}")
    if not layer.is_hardware:
        return
    if layer.activation not in HARDWARE_ACTIVATIONS:
        _fail(layer, f"hardware layer with activation {layer.activation.value}")
    expected = expected_out_shape(network, layer)
    if expected is not None and tuple(layer.out_shape) != expected:
        _fail(layer, f"output shape {list(layer.out_shape)}, expected {list(expected)}")


def verify(network: Network, device: Device | None = None) -> None:
    """Raise ``InputError`` unless ``network`` satisfies the IR invariants (module docstring)."""
    del device  # device limits are checked by passes.check, not here
    if not network.input_shape or any(n <= 0 for n in network.input_shape):
        raise InputError(f"IR invariant broken: input shape {list(network.input_shape)}")
    _check_references(network)
    for layer in network.layers:
        _check_params(layer)
        _check_shapes(network, layer)
