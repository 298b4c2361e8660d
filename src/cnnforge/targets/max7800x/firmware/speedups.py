"""The MAX78002's speed-ups (docs/firmware.md "calcx4, read-ahead"): what they change in the
kernel memory and the layer registers. The results are the same.

calcx4 (YAML `calcx4`, the vendor's --calcx4): four output channels computed at once, each from its
own quarter of the kernel memory. The layer's output channels are reordered (0, 4, 8, ... first),
its kernels placed as usual (``kernels.py``: a calcx4 layer after one without searches from the
bottom and takes 4 x the column it finds), then column ``start + i`` goes to quarter ``i // n`` at
``start / 4 + i % n`` (``n``: a quarter's share, from the layer's kernel count as the vendor counts
it). The registers name the first column in that layout, the output-channel count / 4, the bias
entry / 4 (its bias starts at a multiple of 4), post-processing bit 29; the first layer's kernel
length is / 4 too. Read-ahead (YAML `readahead`, --read-ahead): layer control bit 17 and the passes
- 1 at bit 26 (/ 4 with tcalc); a streaming layer starts a pooling stride later. tcalc (YAML
`tcalc`; by default on with read-ahead over several passes): post-processing bit 31, the pass
counter in 4s (the streaming pass count rounds up to 4). Learned from the vendor tool's kernel
packer, register writer (write_kern), bias allocator and backend; checked word for word against its
firmware.
"""

from __future__ import annotations

import numpy as np

from cnnforge.targets.max7800x.firmware.facts import LayerFacts
from cnnforge.targets.max7800x.firmware.regmap import RegisterMap, get, put

Values = list[tuple[str, int, str]]


def calcx4_order(w: np.ndarray) -> np.ndarray:
    """The weights with output channel ``4 i + j`` moved to place ``j x out / 4 + i``."""
    out = w.shape[0]
    return w.reshape(out // 4, 4, -1).transpose(1, 0, 2).reshape(w.shape)


def quarter_columns(f: LayerFacts) -> int:
    """Columns of the layer per quarter: a quarter of the vendor's kernel count (for kernels
    smaller than 3x3 that count is not the column count; the vendor uses it as it is)."""
    count = f.in_expand * f.out_channels * 9 * f.quant // (f.ksize * 8)
    return (count + 3) // 4


def quarter_index(column: int, rmap: RegisterMap) -> int:
    """The first-column field of a calcx4 layer: ``column``'s place in the quartered memory."""
    small, large = rmap.kernel_columns_small, rmap.kernel_columns_large
    if column < small:
        return (column % 4) * (small // 4) + column // 4
    column -= small
    return (column % 4) * ((large - small) // 4) + column // 4 + small


def physical_columns(
    owner: np.ndarray, offs: dict[int, int], quarters: dict[int, int], cols: np.ndarray,
    rmap: RegisterMap,
) -> np.ndarray:  # fmt: skip
    """Where the columns ``cols`` of one processor (owned per ``owner``) are written: their own
    place, a calcx4 layer's in its quarters. Two columns on one place: NotImplementedError."""
    place = cols.copy()
    small, large = rmap.kernel_columns_small, rmap.kernel_columns_large
    for i, col in enumerate(cols.tolist()):
        layer = int(owner[col])
        if layer not in quarters:
            continue
        start = offs[layer]
        quarter, rest = divmod(col - start, quarters[layer])
        if quarter >= 4:
            raise NotImplementedError(
                f"calcx4 in layer {layer}: its kernel columns do not fit the four quarters "
                "(output processors not from a multiple of 4, or gaps)"
            )
        if col < small:
            place[i] = quarter * (small // 4) + rest + start // 4
        else:
            place[i] = quarter * ((large - small) // 4) + rest + small + start // 4
    if np.unique(place).size != place.size:
        layers = sorted({int(owner[c]) for c in cols if int(owner[c]) in quarters})
        raise NotImplementedError(
            f"calcx4 in layer {layers[0]}: its kernel columns fall on columns already written "
            "(the vendor's calcx4 layout of kernels smaller than 3x3)"
        )
    return place


def speedup_values(f: LayerFacts, values: Values, quant: int, rmap: RegisterMap) -> Values:
    """Layer ``f``'s register ``values`` (one quadrant's) with its speed-ups."""
    if not (f.calcx4 or f.read_ahead or f.tcalc):
        return values
    own = {name: value for name, value, _ in values}
    out = []
    for name, value, meaning in values:
        if f.calcx4 and f.has_weights and name in ("mcnt1", "mcnt2"):
            first = quarter_index(own["mcnt2"] // 8, rmap) * 8
            length = own["mcnt1"] - own["mcnt2"]
            if f.index == 0:  # the vendor quarters the first layer's length
                length = (length + quant + 3) // 4 - quant
            value = first + length if name == "mcnt1" else first
        elif f.calcx4 and f.has_weights and f.groups == 1 and name == "ochan":
            value //= 4
        elif name == "lctl" and f.read_ahead:
            count = (f.in_expand - 1) // 4 if f.tcalc else f.in_expand - 1
            value |= put("read_ahead", 1) | put("read_ahead_passes", count)
        elif name == "post":
            value = _post(f, value)
        out.append((name, value, meaning))
    return out


def _post(f: LayerFacts, value: int) -> int:
    """Post-processing: calcx4 (its bias entry / 4), tcalc."""
    if f.calcx4:
        value |= put("calcx4", 1)
        if f.groups == 1 and get(value, "bias_enable"):  # this quadrant holds its bias
            entry = get(value, "bias_offset")
            value = value & ~put("bias_offset", 0x7FF) | put("bias_offset", entry // 4)
    if f.tcalc:
        value |= put("tcalc", 1)
    return value
