"""HLS C++ for a quantized network: top function, engines, ROMs, register map, known-answer
testbench and Makefile (docs/hls-target.md)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import jinja2
import numpy as np

from cnnforge.arithmetic import right_shift
from cnnforge.c_text import c_array, c_comment, fnv1a32, output_vector, sample_vector
from cnnforge.errors import DeviceLimitError, InputError
from cnnforge.geometry import main_input_shape
from cnnforge.ir import INPUT, Activation, EltwiseOp, Layer, Network, Op, Pooling, PoolKind
from cnnforge.targets.hls.buffer_plan import HlsPlan, LayerPlan, plan_hls
from cnnforge.targets.hls.device import HLS, HlsTarget
from cnnforge.targets.hls.regmap import regmap_markdown

TEMPLATES = Path(__file__).parent / "templates"
ENGINES_HEADER = "cnnforge_hls.h"
ACT = {Activation.NONE: "ACT_NONE", Activation.RELU: "ACT_RELU", Activation.ABS: "ACT_ABS"}
ELT = {EltwiseOp.ADD: "+", EltwiseOp.SUB: "-", EltwiseOp.OR: "|", EltwiseOp.XOR: "^"}


@dataclass(frozen=True)
class EmittedHls:
    """What ``emit_hls`` wrote (field names as emit.c's ``EmittedC`` for the summary)."""

    files: tuple[str, ...]
    top: str
    arena_bytes: int  # activation RAM: ping + pong + skip stores
    macs: int
    output_size: int
    verify_count: int
    checksum: int
    plan: HlsPlan


def emit_hls(
    network: Network,
    sample_in: np.ndarray,
    sample_out,
    out_dir: Path,
    target: HlsTarget = HLS,
    *,
    ns: str = "cnnforge_net",
) -> EmittedHls:
    """Write the HLS project for ``network`` into the existing ``out_dir``; ``ns`` names the
    C++ namespace of everything network-specific (several networks link into one program)."""
    if not ns.isidentifier():
        raise InputError(f"C++ namespace {ns!r} is not an identifier")
    plan = plan_hls(network, target)
    sample = sample_vector(network, sample_in)
    answer = output_vector(network, sample_out)
    top = "cnnforge_top"
    ctx = _context(network, plan, target, ns, top)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), trim_blocks=True,
                             lstrip_blocks=True, keep_trailing_newline=True,
                             undefined=jinja2.StrictUndefined)  # fmt: skip
    checksum = fnv1a32(answer)
    rendered = {f"{top}.h": "top.h", f"{top}.cpp": "top.cpp", "regmap.h": "regmap.h"}
    rendered |= {"tb.cpp": "tb.cpp", "Makefile": "Makefile"}
    texts = {
        **{out: env.get_template(f"{name}.j2").render(ctx) for out, name in rendered.items()},
        ENGINES_HEADER: (TEMPLATES / ENGINES_HEADER).read_text("utf-8"),
        "sample.h": _sample_h(ns, sample, answer, checksum),
        "regmap.md": regmap_markdown(network, plan, target),
    }
    if network.host_input is not None:  # passes/host_input.py: the host driver's job
        texts["regmap.md"] += (
            f"\nThe input is prepared on the host: {network.host_input.describe()}, then "
            "int8 = clip(round(128 * value), -128, 127); SAMPLE_INPUT is already prepared.\n"
        )
    for name, text in texts.items():
        (Path(out_dir) / name).write_text(text, "utf-8")
    ram = sum(plan.buffers.values())
    macs = sum(x.macs for x in plan.layers)
    files = tuple(sorted(texts))
    return EmittedHls(files, top, ram, macs, answer.size, answer.size, checksum, plan)


def c_name(index: int, name: str) -> str:
    """A C identifier for layer ``index`` (unique by the index, readable by the name)."""
    return f"l{index}_" + re.sub(r"\W", "_", name.encode("ascii", "replace").decode())[:40]


def _context(network: Network, plan: HlsPlan, target: HlsTarget, ns: str, top: str) -> dict:
    names = {INPUT: "input", **{x.name: c_name(i, x.name) for i, x in enumerate(network.layers)}}
    tensors = []
    for tensor, buffer in plan.tensor_buffer.items():
        _, h, w = network.shape_of(tensor)
        comment = c_comment(f"{tensor} {network.shape_of(tensor)}")
        tensors.append({"type": "T_" + names[tensor], "buffer": buffer, "h": h, "w": w,
                        "comment": comment})  # fmt: skip
    layers, roms = [], []
    for lp in plan.layers:
        layers.append(_layer(network, lp, names[lp.layer.name], names, target))
        roms.append(_roms(lp.layer, names[lp.layer.name]))
    geometry = [_geometry(network, lp) for lp in plan.layers]
    bits = sorted({x.quant.weight_bits for x in network.layers if x.quant is not None})
    outputs = [
        {"buffer": plan.tensor_buffer[n], "size": int(np.prod(network.shape_of(n)))}
        for n in network.outputs
    ]
    return {
        "ns": ns,
        "top": top,
        "guard": ns.upper(),
        "target": target,
        "net_comment": c_comment(network.name),
        "wbits_comment": "/".join(map(str, bits)) or "-",
        "buffers": list(plan.buffers.items()),
        "tensors": tensors,
        "roms": "".join(roms),
        "layers": layers,
        "geometry": geometry,
        "input_buffer": plan.tensor_buffer[INPUT],
        "input_size": int(np.prod(network.input_shape)),
        "input_shape": "x".join(map(str, network.input_shape)),
        "outputs": outputs,
        "output_size": sum(o["size"] for o in outputs),
        "outputs_comment": c_comment(
            ", ".join(f"{n} {'x'.join(map(str, network.shape_of(n)))}" for n in network.outputs)
        ),
    }


def _roms(layer: Layer, name: str) -> str:
    q = layer.quant
    if q is None:
        return ""
    text = c_array(f"rom_of<{q.weight_bits}>::type", f"W_{name}", q.weights)
    if q.bias is not None:
        text += c_array("rom_of<8>::type", f"B_{name}", q.bias)
    return text


def _geometry(network: Network, lp: LayerPlan) -> dict:
    layer = lp.layer
    c_out, oh, ow = layer.out_shape
    c_in = sum(network.shape_of(n)[0] for n in layer.inputs)
    if layer.eltwise is not None:
        c_in = network.shape_of(layer.inputs[0])[0]
    k = layer.kernel_size[0] if layer.has_weights else 0
    pad = layer.padding[0] if layer.has_weights and layer.padding else 0
    return {
        "height_width": f"0x{(oh << 16) | ow:08X}u",
        "kernel_padding": f"0x{(k << 16) | pad:08X}u",
        "channels": f"0x{(c_in << 16) | c_out:08X}u",
        "comment": c_comment(f"{layer.name}: {oh}x{ow}, k{k} p{pad}, {c_in}->{c_out}"),
    }


def _layer(network: Network, lp: LayerPlan, name: str, names: dict, target: HlsTarget) -> dict:
    layer = lp.layer
    reader, in_type = _reader(network, layer, name, names)
    c_out, oh, ow = layer.out_shape
    out = lp.buffer
    if layer.op is Op.PASSTHROUGH:
        call = f"copy_engine<{in_type}, {c_out}, {oh}, {ow}>({out});"
    else:
        call = _weight_call(network, lp, name, in_type, target)
    what = f"{layer.name} ({layer.module_path or layer.op.value}): {lp.engine} engine -> {out}"
    return {"fn": "run_" + name, "comment": c_comment(what), "reader": reader, "call": call}


def _weight_call(network: Network, lp: LayerPlan, name: str, in_type: str, t: HlsTarget) -> str:
    layer, q = lp.layer, lp.layer.quant
    assert q is not None
    c_out, oh, ow = layer.out_shape
    kh, kw = layer.kernel_size
    ph, pw = layer.padding or (0, 0)
    if kh != kw or ph != pw:
        raise DeviceLimitError(
            f"kernel {layer.kernel_size} / padding {layer.padding} are not square",
            where=f"layer {layer.name}",
            hint="the HLS engines take K x K kernels with equal padding (hls-target.md §3)",
        )
    c_in, h, w = _input_dims(network, layer)
    sk = right_shift(q.total_shift)
    bias = "nullptr" if q.bias is None else f"B_{name}"
    common = f"{t.macs_per_cycle}, {lp.acc_bits}, {sk}, {ACT[layer.activation]}, {q.weight_bits}"
    if layer.op is Op.CONV2D:
        args = f"{in_type}, {c_in}, {h}, {w}, {c_out}, {kh}, {ph}, {common}"
        return f"conv2d_engine<{args}>(W_{name}, {bias}, {lp.buffer});"
    s = layer.stride[0]
    args = f"{in_type}, {c_in}, {h}, {w}, {c_out}, {oh}, {ow}, {kh}, {s}, {ph}, {common}"
    return f"transconv_engine<{args}>(W_{name}, {bias}, {lp.buffer});"


def _input_dims(network: Network, layer: Layer) -> tuple[int, int, int]:
    c, h, w = main_input_shape(network, layer)
    return c, h, w


def _pool_type(src: str, pool: Pooling, rounding: bool) -> str:
    (kh, kw), (sh, sw) = pool.size, pool.stride
    dh, dw = pool.dilation_or_ones()
    avg = "true" if pool.kind is PoolKind.AVG else "false"
    rnd = "true" if rounding else "false"
    return f"Pool<{src}, {kh}, {kw}, {sh}, {sw}, {dh}, {dw}, {avg}, {rnd}>"


def _reader(network: Network, layer: Layer, name: str, names: dict) -> tuple[str, str]:
    """C++ declarations of the layer's input view and the name of its type (H7, H8)."""
    rounding = network.avg_pool_rounding
    operands = ["T_" + names[n] for n in layer.inputs]
    if layer.pool is not None and layer.pool_first:
        operands = [_pool_type(x, layer.pool, rounding) for x in operands]
    decls = []
    if layer.eltwise is not None:
        op = ELT[layer.eltwise]
        body = "".join(f"        v = v {op} {x}::at(c, y, x).to_int();\n" for x in operands[1:])
        decls.append(
            f"struct Elt_{name} {{\n    static act_t at(int c, int y, int x) {{\n"
            f"        long long v = {operands[0]}::at(c, y, x).to_int();\n{body}"
            "        return saturate_activate<ACT_NONE>(v);\n    }\n};\n"
        )
        combined = f"Elt_{name}"
    elif len(operands) > 1:
        lines, offset = [], 0
        for tensor, x in zip(layer.inputs, operands, strict=True):
            channels = network.shape_of(tensor)[0]
            lines.append(
                f"        if (c < {offset + channels}) return {x}::at(c - {offset}, y, x);\n"
            )
            offset += channels
        lines[-1] = f"        return {operands[-1]}::at(c - {offset - channels}, y, x);\n"
        decls.append(
            f"struct Cat_{name} {{\n    static act_t at(int c, int y, int x) {{\n"
            + "".join(lines)
            + "    }\n};\n"
        )
        combined = f"Cat_{name}"
    else:
        combined = operands[0]
    if layer.pool is not None and not layer.pool_first:
        combined = _pool_type(combined, layer.pool, rounding)
    decls.append(f"typedef {combined} In_{name};")
    return "".join(decls), f"In_{name}"


def _sample_h(ns: str, sample: np.ndarray, answer: np.ndarray, checksum: int) -> str:
    return (
        "// sample.h: the known-answer test's input (int8 CHW) and the simulator's outputs,\n"
        f"// generated by cnnforge.\n#ifndef {ns.upper()}_SAMPLE_H\n"
        f"#define {ns.upper()}_SAMPLE_H\n\n"
        f"namespace {ns} {{\n\n"
        + c_array("signed char", "SAMPLE_INPUT", sample)
        + c_array("signed char", "SAMPLE_OUTPUT", answer)
        + f"const unsigned long OUTPUT_CHECKSUM = 0x{checksum:08x}UL;\n\n}}  // namespace {ns}\n\n"
        f"#endif  // {ns.upper()}_SAMPLE_H\n"
    )
