"""Shape arithmetic of one layer for the verifier, legalizer and checker: PyTorch padding, pooling
per docs/hardware/arithmetic.md R3.2/R3.3 (partial windows dropped)."""

from __future__ import annotations

from cnnforge.geometry import has_bias, layer_in_channels, main_input_shape
from cnnforge.ir import Layer, Network, Op


def pooled_dims(network: Network, layer: Layer) -> tuple[int, ...]:
    """Spatial size the layer's main op sees: its first input, after the layer's pooling."""
    return main_input_shape(network, layer)[1:]


def input_channels(network: Network, layer: Layer) -> int:
    """Channels entering the main op: one operand's (element-wise) or the sum (concatenation)."""
    return layer_in_channels(network, layer)


def conv_out_dims(layer: Layer, dims: tuple[int, ...]) -> tuple[int, ...]:
    """Output size of a (transposed) convolution on ``dims`` (PyTorch formulas)."""
    dil = layer.dilation or (1,) * len(dims)
    geo = zip(dims, layer.kernel_size, layer.stride, layer.padding, dil, strict=True)
    if layer.op is Op.CONVTRANSPOSE2D:
        opad = layer.output_padding or (0,) * len(dims)
        return tuple(
            (n - 1) * s - 2 * p + d * (k - 1) + o + 1
            for (n, k, s, p, d), o in zip(geo, opad, strict=True)
        )
    return tuple((n + 2 * p - d * (k - 1) - 1) // s + 1 for n, k, s, p, d in geo)


def expected_out_shape(network: Network, layer: Layer) -> tuple[int, ...] | None:
    """The output shape a hardware layer must have, or None for model-level layers."""
    if layer.op is Op.LINEAR:
        return (layer.out_channels,)
    dims = pooled_dims(network, layer)
    if layer.op is Op.PASSTHROUGH:
        return (input_channels(network, layer), *dims)
    if layer.op in (Op.CONV1D, Op.CONV2D, Op.CONVTRANSPOSE2D):
        return (layer.out_channels, *conv_out_dims(layer, dims))
    return None


__all__ = ["conv_out_dims", "expected_out_shape", "has_bias", "input_channels", "pooled_dims"]
