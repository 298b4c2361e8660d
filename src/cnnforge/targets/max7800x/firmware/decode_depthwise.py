"""A depthwise layer's bias read back: per input quadrant a slice from the entry its post register
names (x 4 broadcasting), channels placed by the writer's own layout (depthwise_bias.py)."""

from __future__ import annotations

from cnnforge.targets.max7800x.depthwise_bias import DepthwiseBiasError, depthwise_bias
from cnnforge.targets.max7800x.device import get_device
from cnnforge.targets.max7800x.firmware.regmap import RegisterMap


class DepthwiseReadError(ValueError):
    """The slices the registers name cannot hold the layer's bias (the message says why)."""


def channel_bias(
    state: dict[int, int],
    rmap: RegisterMap,
    in_map: int,
    out_map: int,
    channels: int,
    slices: tuple[tuple[int, int], ...],
) -> list[int]:
    """The signed bias of each of the layer's ``channels`` (0 where no entry holds one)."""
    fill = [0] * 4
    for q, first in slices:
        fill[q] = first
    try:
        layout = depthwise_bias(in_map, out_map, channels, fill, get_device(rmap.device))
    except DepthwiseBiasError as exc:
        raise DepthwiseReadError(str(exc)) from None
    out = [0] * channels
    for q, (start, held) in layout.entries.items():
        for i, channel in enumerate(held):
            if channel is not None:
                value = state.get(rmap.bias(q, start + i), 0) & 0xFF
                out[channel] = value - 256 if value > 127 else value
    return out
