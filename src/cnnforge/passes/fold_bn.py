"""Fold BatchNorm into the conv/linear producing its input (in float64; ``divisor=4`` for the
vendor's ``bn(y) / 4``, docs/hardware/arithmetic.md R6.5); declines where inexact."""

from __future__ import annotations

import dataclasses

from cnnforge.ir import INPUT, WEIGHT_OPS, Activation, Layer, Network, Op, fold_bn_arrays


def fold_batchnorm(network: Network) -> Network:
    """Return ``network`` with every foldable BATCHNORM merged into its producer."""
    for bn in network.layers:
        if bn.op is Op.BATCHNORM and _producer_if_foldable(network, bn) is not None:
            return fold_batchnorm(_fold_one(network, bn))
    return network


def _producer_if_foldable(network: Network, bn: Layer) -> Layer | None:
    if len(bn.inputs) != 1 or bn.inputs[0] == INPUT or bn.batchnorm is None:
        return None
    producer = network.layer(bn.inputs[0])
    if producer.op not in WEIGHT_OPS or producer.weight is None or producer.quant is not None:
        return None
    if producer.activation is not Activation.NONE or producer.wide:
        return None
    if producer.name in network.outputs:
        return None
    if [c.name for c in network.consumers(producer.name)] != [bn.name]:
        return None
    return producer


def _fold_one(network: Network, bn: Layer) -> Network:
    producer = network.layer(bn.inputs[0])
    assert bn.batchnorm is not None and producer.weight is not None
    weight, bias = fold_bn_arrays(
        producer.weight,
        producer.bias,
        bn.batchnorm,
        out_axis=_out_axis(producer),
        groups=producer.groups if producer.op is Op.CONVTRANSPOSE2D else 1,
    )
    folded = dataclasses.replace(producer, weight=weight, bias=bias)
    layers = []
    for layer in network.layers:
        if layer.name == bn.name:
            continue
        if layer.name == producer.name:
            layer = folded
        elif bn.name in layer.inputs:
            inputs = tuple(producer.name if n == bn.name else n for n in layer.inputs)
            layer = dataclasses.replace(layer, inputs=inputs)
        layers.append(layer)
    outputs = tuple(producer.name if n == bn.name else n for n in network.outputs)
    return network.with_layers(layers, outputs=outputs)


def _out_axis(layer: Layer) -> int:
    """Axis of the output channels in the PyTorch weight layout."""
    return 1 if layer.op is Op.CONVTRANSPOSE2D else 0
