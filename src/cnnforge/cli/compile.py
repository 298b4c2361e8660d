"""``cnnforge compile``: model (or vendor pair) -> vendor files + portable C + report, verified."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from cnnforge import targets
from cnnforge.cli.app import app
from cnnforge.cli.common import console, parse_model_args, parse_shape, parse_weight_bits
from cnnforge.targets.max7800x.device import DEFAULT_DEVICE, DEVICE_NAMES


@app.command("compile")
def compile_command(
    model: str = typer.Argument(
        None, help="path/to/file.py:Name, package.module:Name or a short name (unet-voc)."
    ),
    output: Path = typer.Option(..., "--output", "-o", help="Output directory to create."),
    device: str = typer.Option(
        DEFAULT_DEVICE,
        "--device",
        "-d",
        help=f"{DEVICE_NAMES} or HLS (FPGA, HLS C++): a target of pipeline.targets.",
    ),
    checkpoint: Path = typer.Option(
        None, "--checkpoint", help="QAT state_dict or cnnforge quantized checkpoint."
    ),
    ptq: bool = typer.Option(False, "--ptq", help="Quantize float weights post-training."),
    sample: Path = typer.Option(
        None,
        "--sample",
        help="C,H,W .npy for the known answer: int8 values, or floats in model-input units "
        "(x_int = clip(round(128 x), -128, 127)).",
    ),
    calibration: Path = typer.Option(
        None,
        "--calibration",
        help="N,C,H,W .npy (int8 or floats, as --sample) that calibrates --ptq's activation "
        "scales; default: the sample alone. The report names what calibrated it.",
    ),
    input_shape: str = typer.Option(None, "--input-shape", "-i", help="C,H,W (or C,L)."),
    model_arg: list[str] = typer.Option(None, "--model-arg", help="Constructor key=value."),
    weight_bits: str = typer.Option(
        None, "--weight-bits", help="8, 4, 2, 1 or auto (HLS: 1-8); default 8 (HLS: 5)."
    ),
    ai8x_yaml: Path = typer.Option(None, "--ai8x-yaml", help="Vendor network YAML."),
    ai8x_checkpoint: Path = typer.Option(None, "--ai8x-checkpoint", help="Vendor -q checkpoint."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing -o directory."),
    run: bool = typer.Option(False, "--run", help="Build the C with cc and run its self-test."),
    probe: bool = typer.Option(False, "--probe", help="Also dump every C layer into probe/."),
    sanitize: bool = typer.Option(
        False, "--sanitize", help="With --run: build with AddressSanitizer and UBSan."
    ),
    max_verify: int = typer.Option(
        None, "--max-verify", min=0, help="Compare only N outputs one by one (checksum: all)."
    ),
    report: bool = typer.Option(True, "--report/--no-report", help="Write report.html."),
    cpu: bool = typer.Option(
        False, "--cpu", help="Simulate the known answer on the CPU even where a GPU is present."
    ),
    no_in_place: bool = typer.Option(
        False,
        "--no-in-place",
        help="Keep every live tensor apart: no layer writes over its own dying input, so the "
        "vendor tool needs no --overlap-data (may not fit where the in-place plan does).",
    ),
    **target_values: Any,
) -> None:
    """Model -> vendor YAML + checkpoint, portable C with a known-answer self-test (the
    simulator's output on --sample), report.html; --run builds and runs the C."""
    from cnnforge.api import compile as compile_model

    target_args = _target_options(device, target_values, in_place=not no_in_place)
    compiled = compile_model(
        model, device=device, input_shape=parse_shape(input_shape) if input_shape else None,
        ptq=ptq, checkpoint=checkpoint, sample=sample, calibration=calibration,
        output_dir=output, overwrite=overwrite, run=run,
        weight_bits=None if weight_bits is None else _weight_bits(weight_bits, device),
        model_args=parse_model_args(model_arg), ai8x_yaml=ai8x_yaml,
        ai8x_checkpoint=ai8x_checkpoint, report=report, in_place=not no_in_place, probe=probe,
        sanitize=sanitize, max_verify=max_verify, cpu=cpu, progress=console.is_terminal,
        **target_args,
    )  # fmt: skip
    _print_summary(compiled.summary, output)


def declare_target_options() -> None:
    """Give ``compile_command`` the options the targets declare (``targets.declared_options``,
    before ``--no-in-place``): the typer command and its ``--help`` are read from its signature."""
    compile_command.__dict__.pop("__signature__", None)
    shared = list(inspect.signature(compile_command, eval_str=True).parameters.values())
    own = [
        inspect.Parameter(
            o.name,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            annotation=o.kind,
            default=typer.Option(o.default, o.flag, metavar=o.metavar, help=o.help),
        )
        for declared in targets.declared_options()
        for o in declared.options
    ]
    *before, no_in_place, _values = shared  # _values: **target_values, which takes them
    signature = inspect.Signature([*before, *own, no_in_place])
    compile_command.__signature__ = signature  # type: ignore[attr-defined]
    compile_command.__annotations__.update({p.name: p.annotation for p in own})


def _target_options(device: str, values: dict[str, Any], in_place: bool) -> dict[str, Any]:
    """``cnnforge.compile``'s target keyword arguments from the values of the targets' own
    options (each target's reader checks its own); an option given for a target that does not
    take it is refused, naming those that do."""
    from cnnforge.api.targets import TARGETS, get_target
    from cnnforge.errors import InputError

    args: dict[str, Any] = {}
    asked: list[str] = []
    for declared in targets.declared_options():
        read, given = declared.read({o.name: values[o.name] for o in declared.options}, in_place)
        args.update(read)
        asked += given
    refused = [f for f in asked if f not in get_target(device).option_flags]
    if refused:  # the targets whose records take the option, named in the message
        takers = [t.name for t in TARGETS if refused[0] in t.option_flags]
        raise InputError(
            f"{refused[0]} is for {'/'.join(takers)}, not for --device {device}",
            where=refused[0],
            hint=f"drop {refused[0]}, or compile for --device {' or '.join(takers)}",
        )
    return args


def _weight_bits(text: str, device: str) -> int | str:
    from cnnforge.api.targets import device_for

    return parse_weight_bits(text, widths=device_for(device, "compile").weight_bits)


#: Which folder is which: the portable C runs anywhere, the firmware only on the part.
_FOLDERS = (
    ("c/", "c/ portable C, runs anywhere (--run runs it on this host)"),
    ("firmware/", "firmware/ the MSDK project, runs on the {device} (docs/firmware.md)"),
    ("ai8x/", "ai8x/ the vendor tool's YAML + checkpoint"),
)


def _folders(files: list[str], device: str) -> str:
    found = [text for folder, text in _FOLDERS if any(f.startswith(folder) for f in files)]
    return "; ".join(found).format(device=device) or "-"


def _print_summary(facts: dict, output: Path) -> None:
    table = Table(title=f"cnnforge compile -> {output}", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    table.add_row("network", f"{facts['network']} on {facts['device']}, {facts['layers']} layers")
    if facts["macs"] is not None:  # an emitted project with a self-test (a toy target: none)
        table.add_row("MACs", f"{facts['macs']:,}")
        table.add_row("C arena", f"{facts['c_arena_bytes']:,} bytes")
        known = f"{facts['outputs']:,} outputs, checksum {facts['checksum']}"
        table.add_row("known answer", known)
    table.add_row(
        "files", ", ".join(facts["files"][:8]) + (" ..." if len(facts["files"]) > 8 else "")
    )
    table.add_row("folders", _folders(facts["files"], facts["device"]))
    run = facts["selftest"]
    table.add_row("self-test", "not run (pass --run)" if run is None else run["output"])
    if facts.get("latency"):
        table.add_row("latency", facts["latency"]["text"])
    if facts.get("flash"):
        table.add_row("firmware flash", facts["flash"]["text"])
    for note in facts["notes"]:
        table.add_row("note", note)
    console.print(table)


declare_target_options()
