"""The vendor's latency model: estimated CNN clock cycles per layer (docs/hardware/devices.md §5;
streaming costs 1.18x, measured on boards, docs/firmware.md "Latency")."""

from __future__ import annotations

from dataclasses import dataclass

from cnnforge.ir import Layer, Op

START_CYCLES = 1  # docs/hardware/devices.md §5: network cycles = 1 (start) + sum over layers
# A streaming layer's cycles in percent of the same layer's without streaming. Board figures
# (docs/firmware.md, "Latency"): the two streaming layers of cats-dogs (--fifo) and of faceid
# take 1.20 and 1.16 times their non-streaming cycles (the vendor's model guesses 1.5; the
# layers do not overlap to less than their sum). 118 splits the two: -1.6 % and +1.2 %.
STREAMING_PERCENT = 118


@dataclass(frozen=True)
class LatencyInputs:
    """The variables of docs/hardware/devices.md §5 for one layer."""

    passes: int  # M
    operands: int = 1  # N
    pool: tuple[int, int] = (1, 1)  # (pr, pc)
    pooled: tuple[int, int] = (1, 1)  # (PR, PC)
    pad: tuple[int, int] = (0, 0)  # hardware (rp, cp)
    kernel: tuple[int, int] = (1, 1)  # (kr, kc)
    out_cols: int = 1  # OC
    out_channels: int = 1  # Co: kernel count per input processor / M
    passthrough: bool = False  # P
    words_per_pixel: int = 1  # S (passthrough)
    flatten: bool = False  # F
    pool_first: bool = True
    pre_on_multi: bool = True  # MAX78000: the "Pre" term of pool-last layers
    kernel_start: int = 0  # first kernel column (Pre term)
    streaming: bool = False


def layer_cycles(v: LatencyInputs) -> int:
    """Estimated cycles of one layer by the formulas of docs/hardware/devices.md §5."""
    m_passes, n = v.passes, v.operands
    pr, pc = v.pool
    rows, cols = v.pooled
    rp, cp = v.pad
    kr, kc = v.kernel
    if v.pool_first:
        ip, idd, m, pre = 2 * m_passes * n, m_passes * n * (pr * pc + 1), 1, 0
    else:
        ip, idd, m = 2 * m_passes, m_passes * (n * pr * pc + 1), m_passes
        pre = 0
        if v.pre_on_multi and (m_passes > 1 or n > 1):
            pre = (
                (rows + 2 * rp - kc + 1) * cp + (cols + 2 * cp - kr + 1) * rp - rp * cp
            ) * v.kernel_start
    if v.passthrough:
        total = rows * cols * (idd + m_passes * v.words_per_pixel)
    else:
        total = _conv_cycles(v, ip, idd, m, pre)
    if v.streaming:
        total = (STREAMING_PERCENT * total + 50) // 100
    return total


def _conv_cycles(v: LatencyInputs, ip: int, idd: int, m: int, pre: int) -> int:
    rows, cols = v.pooled
    rp, cp = v.pad
    kr, kc = v.kernel
    oc, co, mp = v.out_cols, v.out_channels, v.passes
    col_pad = 2 * cp * (ip + 1)
    top_pad_row = col_pad + m * cols * (ip + 1)
    row_no_conv = col_pad + m * cols * (idd + 1)
    row_conv = cp * (ip + 1) + m * (kc - 1 - cp) * (idd + 1) + m * (oc - cp) * idd + cp * ip
    bot_pad_row = cp * (ip + 1) + m * (kc - 1 - cp) * (ip + 1) + m * (oc - cp) * ip + cp * ip
    out_row = mp * oc * co + (co if co == 1 and mp == 1 else 0)
    return (
        int(v.flatten)
        + pre
        + rp * top_pad_row
        + (kr - 1 - rp) * row_no_conv
        + (row_conv + out_row) * (rows - (kr - 1 - rp))
        + rp * (bot_pad_row + out_row)
    )


def layer_inputs(
    layer: Layer,
    in_shape: tuple[int, ...],
    in_passes: int,
    kernels_per_processor: int,
    out_words_per_pixel: int = 1,
    kernel_start: int = 0,
    pre_on_multi: bool = True,
) -> LatencyInputs:
    """The model's variables for ``layer`` reading ``in_shape`` (C, dims...) before pooling (kc per
    input processor, docs/hardware/devices.md §3; S for passthrough layers)."""
    dims = tuple(in_shape[1:]) or (1,)
    pool = tuple(layer.pool.size) if layer.pool is not None else (1,) * len(dims)
    pooled = layer.pool.output_dims(dims) if layer.pool is not None else dims
    pool2 = (pool[0], pool[1] if len(pool) > 1 else 1)
    rows, cols = pooled[0], pooled[1] if len(pooled) > 1 else 1
    pad, kernel, out_cols = _geometry(layer, cols)
    if layer.op is Op.CONVTRANSPOSE2D:
        rows, cols = 2 * rows, 2 * cols
    if layer.op is Op.CONV1D:
        pool2, cols = (pool2[0], 1), 1
    kernels = max(1, kernels_per_processor)
    co = kernels // max(1, in_passes * (rows * cols if layer.flatten else 1))
    return LatencyInputs(
        passes=in_passes,
        operands=layer.operand_count,
        pool=pool2,
        pooled=(rows, cols),
        pad=pad,
        kernel=kernel,
        out_cols=cols if layer.flatten else out_cols,
        out_channels=max(1, co),
        passthrough=layer.op is Op.PASSTHROUGH,
        words_per_pixel=out_words_per_pixel,
        flatten=layer.flatten,
        pool_first=layer.pool_first,
        pre_on_multi=pre_on_multi,
        kernel_start=kernel_start,
    )


def _geometry(layer: Layer, cols: int) -> tuple[tuple[int, int], tuple[int, int], int]:
    """Hardware (pad, kernel, output columns) of the main op (docs/hardware/devices.md §5
    definitions)."""
    if layer.op is Op.CONV2D:
        k = layer.kernel_size
        p = layer.padding
        return (p[0], p[-1]), (k[0], k[-1]), cols + 2 * p[-1] - k[-1] + 1
    if layer.op is Op.CONVTRANSPOSE2D:
        k = layer.kernel_size
        hw = (k[0] - 1 - layer.padding[0], k[-1] - 1 - layer.padding[-1])
        return hw, (k[0], k[-1]), 2 * cols
    if layer.op is Op.CONV1D:
        return (layer.padding[0], 0), (layer.kernel_size[0], 1), 1
    return (0, 0), (1, 1), cols
