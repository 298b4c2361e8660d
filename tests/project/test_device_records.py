"""The device records: shared stages read the target-neutral ``Capabilities``; each target's own
record adds its memories and registers (devices.py; targets/max7800x/device.py,
targets/hls/device.py).

- No module of a shared stage (analysis, frontend, passes, quant, sim) reads a field or method
  that only the MAX7800x record has; their ``device`` parameters name no MAX7800x record.
- HLS's record has no MAX7800x field (no placeholders pretending to be a MAX part).
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import cnnforge
from cnnforge.devices import Capabilities
from cnnforge.targets.hls.device import HlsTarget
from cnnforge.targets.max7800x.device import Max7800xDevice

PACKAGE = Path(cnnforge.__file__).parent
SHARED_STAGES = ("analysis", "frontend", "passes", "quant", "sim")

#: Names that receive a device record in the sources (``device.x``, ``dev.x``, ``ctx.device.x``,
#: the ``d`` of the checker's ``lambda d: ...`` hints).
RECEIVERS = {"device", "dev", "d", "caps"}


def _names(cls: type) -> set[str]:
    fields = {f.name for f in dataclasses.fields(cls)}
    return fields | {n for n in vars(cls) if not n.startswith("__")}


def _max_only() -> set[str]:
    return _names(Max7800xDevice) - _names(Capabilities) - set(dir(Capabilities))


def _receiver(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _shared_modules() -> list[tuple[str, ast.Module]]:
    out = []
    for stage in SHARED_STAGES:
        for path in sorted((PACKAGE / stage).rglob("*.py")):
            rel = path.relative_to(PACKAGE).as_posix()
            out.append((rel, ast.parse(path.read_text(), str(path))))
    return out


def test_the_split_is_real() -> None:
    max_only = _max_only()
    memories = {"processors", "quadrants", "instance_bytes", "kernel_words", "data_base_addr",
                "bias_entries_per_quadrant", "fifo_hwc_mask", "cnn_clock_mhz"}  # fmt: skip
    assert memories <= max_only
    assert {"max_layers", "weight_bits", "supports_op", "passes", "conv2d_kernels"}.isdisjoint(
        max_only
    )


def test_shared_stages_read_no_max7800x_field() -> None:
    max_only = _max_only()
    reads = [
        f"{rel}:{node.lineno}: {ast.unparse(node)}"
        for rel, tree in _shared_modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr in max_only
        and _receiver(node.value) in RECEIVERS
    ]
    assert not reads, f"shared stages read MAX7800x-only fields (use Capabilities): {reads}"


def test_shared_stages_take_the_capabilities_record() -> None:
    wrong = []
    for rel, tree in _shared_modules():
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for arg in [*node.args.args, *node.args.kwonlyargs]:
                if arg.arg in ("device", "dev") and arg.annotation is not None:
                    text = ast.unparse(arg.annotation)  # a record, or a name (str) for messages
                    if re.search(r"\bMax7800xDevice\b|\bDevice\b", text):
                        wrong.append(f"{rel}:{node.lineno}: {node.name}({arg.arg}: {text})")
    assert not wrong, f"shared-stage device parameters not typed Capabilities: {wrong}"


def test_hls_record_has_no_max7800x_fields() -> None:
    assert issubclass(HlsTarget, Capabilities) and not issubclass(HlsTarget, Max7800xDevice)
    extra = {f.name for f in dataclasses.fields(HlsTarget)} & _max_only()
    assert not extra, f"HLS's record carries MAX7800x fields: {sorted(extra)}"


def test_part_names_are_written_once_in_the_device_table() -> None:
    """No string literal "MAX78000"/"MAX78002" outside the MAX7800x device table: code names a
    part through its record (``MAX78000.name``), so a renamed or added part is one edit."""
    from cnnforge.targets.max7800x.device import DEVICES

    names = {d.name for d in DEVICES}
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "targets" / "max7800x" / "device.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in names:
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert not found, found


def test_no_device_parameter_defaults_to_none() -> None:
    """Below the CLI a device is a required argument (None, where a stage has a device-neutral
    behaviour, is passed on purpose, never defaulted). A ``torch.device`` (where the work runs,
    cnnforge.compute) is another thing: None there means "choose one"."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            a = node.args
            pos = [*a.posonlyargs, *a.args]
            pairs = list(zip(pos[len(pos) - len(a.defaults) :], a.defaults, strict=True))
            pairs += [(k, d) for k, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d]
            for arg, default in pairs:
                none = isinstance(default, ast.Constant) and default.value is None
                kind = "" if arg.annotation is None else ast.unparse(arg.annotation)
                compute = "torch.device" in kind
                if arg.arg in {"device", "dev"} and none and not compute:
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}")
    assert not found, found
