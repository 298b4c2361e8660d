"""Write portable C99 for a quantized hardware ``Network`` with a known-answer self-test, byte-
identical across runs."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import jinja2
import numpy as np

from cnnforge.c_text import (
    c_array,
    c_comment,
    c_string,
    fnv1a32,
    output_vector,
    pack_rows,
    sample_vector,
)
from cnnforge.errors import EmitError, InputError
from cnnforge.geometry import live_intervals
from cnnforge.ir import INPUT, Layer, Network
from cnnforge.ranges import verify_quantized, wide_readers
from cnnforge.targets.max7800x.c.arena import Arena, Buffer, allocate, check_arena
from cnnforge.targets.max7800x.c.host import c_doubles, host_input_step, host_steps
from cnnforge.targets.max7800x.c.model import (
    BINARY_CODE,
    KIND,
    CLayer,
    chw,
    describe_layer,
    weight_rows,
)

STATIC_FILES = ("cnn_kernels.h", "cnn_kernels.c")

#: Symbolic C names (cnn_kernels.h enums) of the coded CLayer fields, for readable tables.
C_ENUMS = {
    "kind": ("CNNK_CONV", "CNNK_CONVT", "CNNK_LINEAR", "CNNK_COPY"),
    "eltwise": ("CNNK_ELT_NONE", "CNNK_ELT_ADD", "CNNK_ELT_SUB", "CNNK_ELT_OR", "CNNK_ELT_XOR"),
    "pool": ("CNNK_POOL_NONE", "CNNK_POOL_MAX", "CNNK_POOL_AVG"),
    "act": ("CNNK_ACT_NONE", "CNNK_ACT_RELU", "CNNK_ACT_ABS"),
}
TEMPLATES = ("cnn.h", "cnn.c", "main.c", "Makefile")
#: The network's name inside a C string: no escapes, no format directives, no trigraphs.
_C_STRING_SAFE = str.maketrans({"\\": "/", "%": "%%", '"': "'", "?": "_"})


@dataclass(frozen=True)
class EmittedC:
    """What ``emit_c`` wrote: file names, arena size, MACs, the expected output checksum."""

    files: tuple[str, ...]
    arena_bytes: int
    macs: int
    output_size: int
    verify_count: int
    checksum: int


@dataclass(frozen=True)
class _Tables:
    """Everything the templates need, derived once from the network."""

    clayers: tuple[CLayer, ...]
    buffers: tuple[Buffer, ...]
    arena: Arena
    out_ids: tuple[int, ...]
    prep_ids: tuple[int | None, ...]


def _env() -> jinja2.Environment:
    loader = jinja2.FunctionLoader(_load_template)
    return jinja2.Environment(
        loader=loader, keep_trailing_newline=True, undefined=jinja2.StrictUndefined
    )


def _load_template(name: str) -> str:
    folder = resources.files("cnnforge.targets.max7800x.c")
    return folder.joinpath("templates", name).read_text("utf-8")


def _tables(network: Network, force_acc64: bool) -> _Tables:
    """Describe every layer, then place the input, outputs and prep scratch in the arena."""
    live = live_intervals(network)  # the planner's liveness (cnnforge.geometry)
    ids = {INPUT: 0}
    buffers = [Buffer(INPUT, math.prod(network.input_shape), *live[INPUT])]
    clayers, out_ids, prep_ids = [], [], []
    for i, layer in enumerate(network.layers):
        cl = describe_layer(network, layer, ids, force64=force_acc64)
        clayers.append(cl)
        prep_ids.append(len(buffers) if cl.needs_prep else None)
        if cl.needs_prep:
            buffers.append(Buffer(f"{layer.name} (prep)", cl.prep_bytes, i, i))
        ids[layer.name] = len(buffers)
        out_ids.append(len(buffers))
        buffers.append(Buffer(layer.name, cl.out_bytes, *live[layer.name]))
    _check_wide_consumers(network)
    arena = allocate(buffers)
    check_arena(buffers, arena)
    return _Tables(tuple(clayers), tuple(buffers), arena, tuple(out_ids), tuple(prep_ids))


def _check_wide_consumers(network: Network) -> None:
    for layer, name in wide_readers(network):
        raise EmitError(
            f"reads the 32-bit output of layer {name}",
            where=f"layer {layer.name}",
            hint="only a network output may be wide (output_width 32)",
        )


def _shape_text(shape: tuple[int, ...]) -> str:
    return ",".join(str(n) for n in shape)


def _layer_fields(cl: CLayer, layer: Layer, t: _Tables, index: int) -> list[tuple[str, str]]:
    offsets = t.arena.offsets
    skip = {"name", "in_buf", "in_ch", "needs_prep"}
    fields: list[tuple[str, str]] = [
        ("name", c_string(cl.name)),
        ("shape", c_string(_shape_text(layer.out_shape))),
        ("in_off", "{" + ", ".join(str(offsets[b]) for b in cl.in_buf) + "}"),
        ("in_ch", "{" + ", ".join(str(c) for c in cl.in_ch) + "}"),
        ("needs_prep", str(cl.needs_prep)),
        ("prep_off", str(offsets[t.prep_ids[index]] if t.prep_ids[index] is not None else 0)),
        ("out_off", str(offsets[t.out_ids[index]])),
    ]
    for name, value in vars(cl).items():
        if name not in skip:
            fields.append((name, C_ENUMS[name][value] if name in C_ENUMS else str(value)))
    has_w = cl.kind != KIND["copy"]
    packed = has_w and cl.wbits != 8
    fields.append(("w8", f"cnn_w_{index:03d}" if has_w and not packed else "NULL"))
    fields.append(("wpk", f"cnn_wp_{index:03d}" if packed else "NULL"))
    has_bias = has_w and layer.quant is not None and layer.quant.bias is not None
    fields.append(("bias", f"cnn_b_{index:03d}" if has_bias else "NULL"))
    return fields


def _layer_comment(layer: Layer) -> str:
    ins = ", ".join(layer.inputs)
    return c_comment(f"{layer.name}: {layer.op.value} {_shape_text(layer.out_shape)} <- {ins}")


def _weights_h(network: Network, clayers: tuple[CLayer, ...]) -> str:
    parts = [
        "/* weights.h: integer weights and bias of every layer, generated by cnnforge.\n"
        " * 8-bit rows as int8; 1/2/4-bit and binary rows packed little-endian into bytes,\n"
        " * one row (output channel) per whole number of bytes. */\n"
        "#ifndef CNN_WEIGHTS_H\n#define CNN_WEIGHTS_H\n\n#include <stdint.h>\n\n"
    ]
    for i, (cl, layer) in enumerate(zip(clayers, network.layers, strict=True)):
        if cl.kind == KIND["copy"] or layer.quant is None:
            continue
        _check_values(layer, cl.wbits)
        rows = weight_rows(layer)
        parts.append(f"/* {i}: {c_comment(layer.name)} */\n")
        if cl.wbits == 8:
            parts.append(c_array("int8_t", f"cnn_w_{i:03d}", rows))
        else:
            binary = cl.wbits == BINARY_CODE
            bits = 1 if binary else cl.wbits
            parts.append(c_array("uint8_t", f"cnn_wp_{i:03d}", pack_rows(rows, bits, binary)))
        if layer.quant.bias is not None:
            parts.append(c_array("int8_t", f"cnn_b_{i:03d}", layer.quant.bias))
    parts.append("\n#endif /* CNN_WEIGHTS_H */\n")
    return "".join(parts)


def _check_values(layer: Layer, wbits: int) -> None:
    """EmitError for weights or bias outside their range (``ranges.verify_quantized``)."""
    where = f"layer {layer.name}"
    for p in verify_quantized(layer.quant, wide=True):  # the shift: checked by emit.c.model
        if p.binary and p.lo <= p.low and p.high <= p.hi:
            raise EmitError("binary weights must be -1 or +1", where=where)
        what = (
            "bias" if p.field == "bias" else f"{1 if wbits == BINARY_CODE else wbits}-bit weights"
        )
        if not p.integral:
            raise EmitError(f"{what} are not integers", where=where)
        raise EmitError(
            f"{what} out of range [{p.lo}, {p.hi}] (min {p.low}, max {p.high})", where=where
        )


def _by_name(
    network: Network, sample_out: Mapping[str, np.ndarray] | np.ndarray
) -> Mapping[str, np.ndarray]:
    if isinstance(sample_out, Mapping):
        return sample_out
    return {network.outputs[0]: np.asarray(sample_out)}


def _macs(cl: CLayer) -> int:
    if cl.kind == KIND["conv"]:
        return cl.oc * cl.oh * cl.ow * cl.row_len
    if cl.kind == KIND["convt"]:
        return cl.ph * cl.pw * cl.oc * cl.row_len
    if cl.kind == KIND["linear"]:
        return cl.oc * cl.row_len
    return 0


def _context(network: Network, t: _Tables, api: str) -> dict[str, object]:
    wide_out = any(network.layer(n).wide for n in network.outputs if n != INPUT)
    plane = [cl.oh * cl.ow for cl in t.clayers if cl.kind == KIND["convt"] and not cl.acc64]
    packed = [cl.row_len for cl in t.clayers if cl.kind != KIND["copy"] and cl.wbits != 8]
    layers = [
        {"comment": _layer_comment(layer), "fields": _layer_fields(cl, layer, t, i)}
        for i, (cl, layer) in enumerate(zip(t.clayers, network.layers, strict=True))
    ]
    outputs = [
        {
            "name": c_comment(n),
            "offset": t.arena.offsets[t.out_ids[network.index(n)]],
            "count": math.prod(network.shape_of(n)),
            "wide": int(network.layer(n).wide),
        }
        for n in network.outputs
    ]
    buffers = [
        {"name": c_comment(b.name), "offset": off, "size": b.size, "start": b.start, "end": b.end}
        for b, off in zip(t.buffers, t.arena.offsets, strict=True)
    ]
    return {
        "p": api,
        "net_name": c_comment(network.name),
        "net_name_c": c_comment(network.name).translate(_C_STRING_SAFE),
        "in_shape_text": "x".join(str(n) for n in network.input_shape),
        "input_size": math.prod(network.input_shape),
        "outputs_text": ", ".join(
            f"{c_comment(n)} {'x'.join(map(str, network.shape_of(n)))}" for n in network.outputs
        ),
        "output_size": sum(o["count"] for o in outputs),
        "out_ctype": "int32_t" if wide_out else "int8_t",
        "num_layers": len(network.layers),
        "arena_bytes": t.arena.size,
        "macs": sum(_macs(cl) for cl in t.clayers),
        "acc_words": max([1, *plane]),
        "wbuf_bytes": max([1, *packed]),
        "wzero_bytes": max([1, *(cl.row_len for cl in t.clayers if cl.kind == KIND["conv"])]),
        "input_offset": t.arena.offsets[0],
        "buffers": buffers,
        "layers": layers,
        "outputs": outputs,
    }


def _check_network(network: Network) -> None:
    if not network.layers:
        raise EmitError("the network has no layers")
    if not network.is_hardware:
        bad = next(x for x in network.layers if not x.is_hardware)
        raise EmitError(
            f"{bad.op.value} is not a hardware layer",
            where=f"layer {bad.name}",
            hint="lower the network (passes.lower) before emitting C",
        )
    if INPUT in network.outputs:
        raise EmitError("the network input cannot be a network output")
    chw(network.input_shape)


def emit_c(
    network: Network,
    sample_in: np.ndarray,
    sample_out: Mapping[str, np.ndarray] | np.ndarray,
    out_dir: Path,
    *,
    max_verify: int | None = None,
    api: str = "cnn",
    force_acc64: bool = False,
    output_exponents: Mapping[str, int] | None = None,
) -> EmittedC:
    """Write the C project for ``network`` and its known answer into ``out_dir`` (``max_verify``:
    values compared one by one; ``api``: function prefix; ``force_acc64``: int64 kernels)."""
    _check_network(network)
    if not api.isidentifier():
        raise InputError(f"C API prefix {api!r} is not an identifier")
    sample = sample_vector(network, sample_in)
    answer = output_vector(network, sample_out)
    t = _tables(network, force_acc64)
    ctx = _context(network, t, api)
    steps, expected = host_steps(network, _by_name(network, sample_out), output_exponents)
    ctx |= {
        "host": steps,
        "host_size": expected.size,
        "host_text": ", ".join(f"{h['kind_text']} of {c_comment(str(h['name']))}" for h in steps),
    }
    host_input, raw = host_input_step(network, sample)
    ctx |= {
        "host_input": host_input,
        "input_text": f"; host input step: {sample.size} inputs agree" if host_input else "",
    }
    verify = answer.size if max_verify is None else max(0, min(max_verify, answer.size))
    checksum = fnv1a32(answer)
    texts = {name: _env().get_template(name + ".j2").render(ctx) for name in TEMPLATES}
    texts.update({name: _load_template(name) for name in STATIC_FILES})
    texts["weights.h"] = _weights_h(network, t.clayers)
    texts["sampledata.h"] = _sampledata_h(sample, raw if host_input else None)
    host_expected = expected if steps else None
    texts["sampleoutput.h"] = _sampleoutput_h(answer[:verify], verify, checksum, host_expected)
    for name, text in texts.items():
        (Path(out_dir) / name).write_text(text, "utf-8")
    macs = int(str(ctx["macs"]))
    return EmittedC(tuple(sorted(texts)), t.arena.size, macs, answer.size, verify, checksum)


def _sampledata_h(sample: np.ndarray, raw: np.ndarray | None) -> str:
    """The sample; ``raw``: the model's input before the host step, for cnn_host_input's check."""
    body = c_array("int8_t", "cnn_sample_input", sample)
    if raw is not None:
        body += "\n" + c_doubles("cnn_sample_raw", raw)
    return (
        "/* sampledata.h: the known-answer test's input (int8 CHW), generated by cnnforge. */\n"
        "#ifndef CNN_SAMPLEDATA_H\n#define CNN_SAMPLEDATA_H\n\n#include <stdint.h>\n\n"
        + body
        + "\n#endif /* CNN_SAMPLEDATA_H */\n"
    )


def _sampleoutput_h(
    values: np.ndarray, count: int, checksum: int, host_expected: np.ndarray | None
) -> str:
    """The known answer; ``host_expected``: the host steps' results, for the self-test."""
    body = c_array("cnn_output_t", "cnn_sample_output", values)
    if host_expected is not None:
        body += "\n" + c_doubles("cnn_host_expected", host_expected)
    return (
        "/* sampleoutput.h: the simulator's answer for sampledata.h, generated by cnnforge.\n"
        " * The first CNN_VERIFY_COUNT outputs are compared one by one; CNN_OUTPUT_CHECKSUM\n"
        " * covers all of them. */\n"
        '#ifndef CNN_SAMPLEOUTPUT_H\n#define CNN_SAMPLEOUTPUT_H\n\n#include "cnn.h"\n\n'
        f"#define CNN_VERIFY_COUNT {count}L\n#define CNN_OUTPUT_CHECKSUM 0x{checksum:08x}UL\n\n"
        + body
        + "\n#endif /* CNN_SAMPLEOUTPUT_H */\n"
    )
