"""IR invariants of a ``Network`` (``verify``) and the numeric gate that a pass computes what its
input computed (``verify_equivalent``), checked after every pass in tests."""

from __future__ import annotations

from cnnforge.errors import InputError, ModelError
from cnnforge.ir import HARDWARE_ACTIVATIONS, INPUT, Layer, Network, Op
from cnnforge.passes.geometry import expected_out_shape


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
    _check_split(layer, shapes)
    if len({s[1:] for s in shapes}) != 1 and layer.op is not Op.OPAQUE:
        _fail(layer, f"inputs of different sizes {[list(s) for s in shapes]}")
    if not layer.is_hardware:
        return
    if layer.activation not in HARDWARE_ACTIVATIONS:
        _fail(layer, f"hardware layer with activation {layer.activation.value}")
    expected = expected_out_shape(network, layer)
    if expected is not None and tuple(layer.out_shape) != expected:
        _fail(layer, f"output shape {list(layer.out_shape)}, expected {list(expected)}")


def _check_split(layer: Layer, shapes: tuple[tuple[int, ...], ...]) -> None:
    """An element-wise layer over one input's channel groups (``split_operands``)."""
    k = layer.split_operands
    if k == 0:
        return
    if layer.eltwise is None or len(shapes) != 1 or k < 2:
        _fail(layer, f"split_operands {k} needs an element-wise op over one input")
    if shapes[0][0] % k:
        _fail(layer, f"{shapes[0][0]} input channels do not split into {k} operands")


def verify(network: Network) -> None:
    """Raise ``InputError`` naming the layer unless names are unique, references earlier, shapes
    and weights consistent; device limits are passes.check's."""
    if not network.input_shape or any(n <= 0 for n in network.input_shape):
        raise InputError(f"IR invariant broken: input shape {list(network.input_shape)}")
    _check_references(network)
    for layer in network.layers:
        _check_params(layer)
        _check_shapes(network, layer)


def verify_equivalent(before: Network, after: Network, step: str) -> None:
    """ModelError unless ``after`` computes ``before``'s outputs on a seeded input; skipped for
    OPAQUE layers or layers without float weights."""
    import torch

    from cnnforge.sim.float_eval import CHECK_SEED, float_difference, run_float

    if any(x.op is Op.OPAQUE for x in (*before.layers, *after.layers)):
        return
    generator = torch.Generator().manual_seed(CHECK_SEED)
    x = torch.randn((1, *before.input_shape), generator=generator)
    try:
        want = run_float(before, x)
    except Exception:  # e.g. quantized layers without float weights: nothing to compare
        return
    try:
        got = run_float(after, x)
    except Exception as exc:
        text = str(exc).strip().splitlines()
        raise ModelError(
            f"{step} left a network whose float evaluation fails: "
            f"{text[0] if text else type(exc).__name__}",
            hint="this is a cnnforge bug: please report it with the model",
        ) from None
    for index, (old, new) in enumerate(zip(before.outputs, after.outputs, strict=True)):
        what = float_difference(got[new], want[old])
        if what is not None:
            layer = after.layer(new)
            raise ModelError(
                f"{step} changed what the network computes at output {index}: {what}",
                where=f"layer {new}" + (f" ({layer.module_path})" if layer.module_path else ""),
                hint="this is a cnnforge bug: please report it with the model",
            )
