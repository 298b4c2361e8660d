"""The firmware decoder's check (tests/targets/max7800x/test_firmware_decode.py and
test_firmware_inspect.py): decoded layers against the facts the writer wrote them from."""

from __future__ import annotations

from cnnforge.ir import Op
from cnnforge.targets.max7800x.firmware import bias, kernels
from cnnforge.targets.max7800x.firmware.decode import DecodedLayer
from cnnforge.targets.max7800x.firmware.facts import LayerFacts
from cnnforge.targets.max7800x.firmware.regmap import MAPS

OPS = {Op.CONV2D: "conv2d", Op.LINEAR: "conv2d", Op.CONV1D: "conv1d",
       Op.CONVTRANSPOSE2D: "convtranspose2d", Op.PASSTHROUGH: "passthrough"}  # fmt: skip


def _ffs(x: int) -> int:
    return (x & -x).bit_length() - 1


def differences(
    got: list[DecodedLayer], facts: list[LayerFacts], device: str, exact: bool = True
) -> list[str]:
    """Every field where the decoded layers differ from the facts the writer wrote them from
    (``exact`` False: a layer's kernel bytes need only start the written ones, a state alone
    loses the columns the next loader record overwrote on the host)."""
    rmap = MAPS[device]
    kl, bl = kernels.layout(facts, rmap), bias.layout(facts, rmap)
    out = [f"{len(got)} layers != {len(facts)}"] if len(got) != len(facts) else []
    for d, f in zip(got, facts, strict=False):
        conv = f.op is not Op.PASSTHROUGH
        want: dict[str, object] = {
            "op": OPS[f.op], "in_map": f.in_map, "in_offset": f.in_offset,
            "out_offset": f.out_offset, "padding": f.padding, "pool": f.pool,
            "relu": f.relu, "abs": f.abs, "wide": f.wide, "chw": f.chw,
            "output_shift": f.output_shift, "out_expand": f.out_expand,
            "pool_avg": f.pool_avg and f.pool != (1, 1), "flatten": f.flatten and
            f.in_expand * f.pooled[0] * f.pooled[1] > 16, "streaming": f.streaming,
            "operands": f.operands, "eltwise": f.eltwise,
            "pool_first": f.pool_first or f.pool == (1, 1),
        }  # fmt: skip
        if not f.flatten and f.op is not Op.CONVTRANSPOSE2D:
            want["in_dims"] = f.in_dims
            want["in_expand"] = f.in_expand
        if f.pool_stride[0] > 1:
            want["pool_stride"] = f.pool_stride
        elif f.op is not Op.CONVTRANSPOSE2D:
            want["stride"] = f.stride
        if rmap.cnt_inc_offs is not None:
            want["pool_dilation"] = f.pool_dilation
        if conv:
            want |= {
                "weight_bits": f.quant,
                "out_base": _ffs(f.out_map) & ~3,
                "out_span": f.out_map.bit_length() - (_ffs(f.out_map) & ~3),
                "write_gap": f.write_gap,
            }
            if rmap.cprime_max_offs is not None or f.kernel == (1, 1) or f.op is Op.CONV1D:
                want["kernel"] = f.kernel
        if f.has_weights:
            offs, n = kl.offs[f.index], kl.length[f.index]
            want["kernel_start"] = offs
            written = {
                p: kl.data[p, offs : offs + n].tobytes() for p in range(64) if f.in_map >> p & 1
            }
            if not exact:
                written = {p: b[: len(d.kernels.get(p, b""))] for p, b in written.items()}
            want["kernels"] = written
        place = bl.place.get(f.index)
        if place is not None:
            q, start = place
            start += bias.stream_skip(f.index, f.streaming, rmap)
            vals = bl.values[q][start : start + d.out_span * d.out_expand]
            want["bias_quadrant"] = q
            want["bias"] = [v - 256 if v > 127 else v for v in vals]
        for key, value in want.items():
            if getattr(d, key) != value:
                out.append(f"layer {f.index} {key}: {getattr(d, key)!r} != {value!r}"[:300])
    return out
