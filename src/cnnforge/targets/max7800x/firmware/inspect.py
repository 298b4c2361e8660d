"""A firmware folder explained: its set-up read (interpret.py), its state decoded (decode.py),
one row per hardware layer, the contradictions between layers, the first difference of two."""

from __future__ import annotations

from dataclasses import asdict, fields
from pathlib import Path

from cnnforge.targets.max7800x.device import MAX78000, MAX78002
from cnnforge.targets.max7800x.firmware.decode import DecodedLayer, decode_state
from cnnforge.targets.max7800x.firmware.hostrun import StateImage
from cnnforge.targets.max7800x.firmware.interpret import read_setup
from cnnforge.targets.max7800x.firmware.recover import with_emulated_passes
from cnnforge.targets.max7800x.firmware.regmap import MAPS

# The register each decoded field is read from (docs/firmware.md: the table read both ways).
FIELD_REGISTER = {
    "op": "post", "in_map": "ena", "out_base": "wptr_base", "out_span": "lctl2",
    "in_offset": "rptr_base", "out_offset": "wptr_base", "in_dims": "rows",
    "padding": "rows", "kernel": "lctl", "pool": "pool_rows", "pool_dilation": "pool_rows",
    "pool_stride": "stride", "pool_avg": "lctl", "stride": "stride", "relu": "lctl",
    "abs": "post", "wide": "lctl", "chw": "lctl", "weight_bits": "post",
    "output_shift": "post", "in_expand": "lctl2", "out_expand": "lctl2", "write_gap": "lctl2",
    "flatten": "post", "flatten_prod": "post", "kernel_start": "mcnt", "kernel_field": "mcnt",
    "kernel_end": "mcnt", "tptr": "tptr", "timeslots": "oned", "bias_quadrant": "post",
    "bias_offset": "post", "bias": "post", "kernels": "mcnt", "streaming": "rollover",
    "fifo": "ctl",
}  # fmt: skip
COLUMNS = ("layer", "op", "processors", "in", "out", "dims", "kernel", "slots", "pool",
           "stride", "pad", "act", "shift", "bits", "bias", "flags")  # fmt: skip


def detect_device(folder: Path) -> str:
    """The part a folder's cnn.c addresses: the MAX78002's registers start at 0x51000000."""
    text = (folder / "cnn.c").read_text(encoding="utf-8", errors="replace").lower()
    high = "0x511" in text or "0x518" in text or "0x514" in text
    return MAX78002.name if high else MAX78000.name


def read_folder(folder: Path, device: str | None) -> tuple[str, StateImage, list[DecodedLayer]]:
    """(device, the set-up's state, its layers) of a firmware folder; nothing of it runs."""
    dev = device or detect_device(folder)
    image, records = read_setup(folder, dev)
    layers = decode_state(dict(image.state.tolist()), dev, records, dict(image.start.tolist()))
    return dev, image, with_emulated_passes(layers, dev)


def register_of(dev: str, layer: DecodedLayer, name: str) -> int:
    rmap = MAPS[dev]
    if name == "mcnt" and "mcnt" not in rmap.layer_index:
        name = "mcnt2"
    q = (layer.in_map & -layer.in_map).bit_length() - 1
    if name == "ctl":  # the quadrant control (FIFO input)
        return rmap.ctl(max(q, 0) // 16, 0)
    return rmap.layer(max(q, 0) // 16, layer.index, name)


def rows(layers: list[DecodedLayer]) -> list[list[str]]:
    """The table, one row per layer, starting with the layer number."""
    out = []
    for ly in layers:
        named = (("flatten", ly.flatten), ("chw", ly.chw), ("32-bit out", ly.wide),
                 ("avg pool", ly.pool_avg), ("streaming", ly.streaming),
                 ("fifo input", ly.fifo), (f"{ly.eltwise} of {ly.operands}", ly.operands > 1),
                 ("depthwise", ly.depthwise), ("broadcast", ly.broadcast))  # fmt: skip
        flags = [n for n, on in named if on]
        k = "x".join(map(str, ly.kernel)) if ly.kernel != (0, 0) else "2D"
        out.append([
            str(ly.index), ly.op, f"{ly.processors} 0x{ly.in_map:016x}",
            f"0x{ly.in_offset:04x}", f"0x{ly.out_offset:04x}@{ly.out_base}+{ly.out_span}",
            "x".join(map(str, ly.in_dims)), k,
            f"{ly.kernel_start}+{len(next(iter(ly.kernels.values()), b'')) // 9}",
            "x".join(map(str, ly.pool)) + (f"/{ly.pool_stride[0]}" if ly.pool != (1, 1) else ""),
            str(ly.stride[0]), str(ly.padding[0]),
            "relu" if ly.relu else ("abs" if ly.abs else "none"), str(ly.output_shift),
            str(ly.weight_bits), _bias_cell(ly), ",".join(flags),
        ])  # fmt: skip
    return out


def _bias_cell(ly: DecodedLayer) -> str:
    """Where the bias lies: quadrant@first entry (a depthwise layer: one per quadrant's slice)."""
    if ly.bias_quadrant is not None:
        return f"q{ly.bias_quadrant}@{ly.bias_offset}"
    return " ".join(f"q{q}@{first}" for q, first in ly.slices) or "-"


def contradictions(dev: str, image: StateImage, layers: list[DecodedLayer]) -> list[str]:
    """Layers reading memory no layer (or the input) wrote, named with the register."""
    out = []
    rmap = MAPS[dev]
    inputs = {int(a) for a in image.input[:, 0]} | {int(a) for a in image.state[:, 0]}
    for ly in layers:
        if ly.index == 0:
            p = (ly.in_map & -ly.in_map).bit_length() - 1
            if (
                image.input.size
                and not any(
                    rmap.sram(max(p, 0), ly.in_offset)
                    <= a
                    < rmap.sram(max(p, 0), 0) + rmap.instance_stride
                    for a in inputs
                )
                and not (image.fifo.size)
            ):
                out.append(
                    f"layer 0 reads 0x{ly.in_offset:04x} (register "
                    f"0x{register_of(dev, ly, 'rptr_base'):08x}), where the sample input is not"
                )
            continue
        if not any(src.out_offset == ly.in_offset for src in layers[: ly.index]) and not any(
            src.out_offset == ly.in_offset for src in layers[ly.index :]
        ):
            out.append(
                f"layer {ly.index} reads offset 0x{ly.in_offset:04x} (register "
                f"0x{register_of(dev, ly, 'rptr_base'):08x}), which no layer writes"
            )
    return out


def first_difference(dev: str, a: list[DecodedLayer], b: list[DecodedLayer]) -> str | None:
    """In words: the first layer and register where two decoded networks differ."""
    if len(a) != len(b):
        return f"{len(a)} layers vs {len(b)} (register 0x{MAPS[dev].ctl(0, 2):08x})"
    for x, y in zip(a, b, strict=True):
        for f in fields(DecodedLayer):
            u, v = getattr(x, f.name), getattr(y, f.name)
            if u != v:
                reg = register_of(dev, x, FIELD_REGISTER.get(f.name, "post"))
                name = f.name.replace("_", " ")
                if f.name in ("kernels", "bias"):
                    return f"layer {x.index}: {name} differ (register 0x{reg:08x})"
                return f"layer {x.index}: {name} {_show(u)} vs {_show(v)} (register 0x{reg:08x})"
    return None


def _show(v: object) -> str:
    return f"0x{v:x}" if isinstance(v, int) and not isinstance(v, bool) and v > 255 else str(v)


def as_dict(dev: str, layers: list[DecodedLayer]) -> dict:
    """JSON-ready: every field, weights as the kernel bytes (signed) per processor, bias."""
    out = []
    for ly in layers:
        d = asdict(ly)
        d["kernels"] = {
            str(p): [b - 256 if b > 127 else b for b in raw] for p, raw in ly.kernels.items()
        }
        d["in_map"] = f"0x{ly.in_map:016x}"
        out.append(d)
    return {"device": dev, "layers": out}
