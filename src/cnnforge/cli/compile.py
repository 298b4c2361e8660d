"""``cnnforge compile``: model (or vendor pair) -> vendor files + portable C + report, verified."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from cnnforge.cli.app import app
from cnnforge.cli.common import console, parse_model_args, parse_shape, parse_weight_bits
from cnnforge.targets.max7800x.device import DEFAULT_DEVICE, DEVICE_NAMES

if TYPE_CHECKING:
    from cnnforge.targets.max7800x.firmware.options import FirmwareOptions


def _vendor_flag(flag: str, text: str, metavar: str | None = None) -> Any:
    """The typer option of one of the vendor's firmware code-generation options: a switch, off
    unless given, or (with a ``metavar``) a value, None unless given."""
    default = False if metavar is None else None
    return typer.Option(default, flag, metavar=metavar, help=f"Firmware (vendor option): {text}")


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
    firmware: bool = typer.Option(
        None,
        "--firmware/--no-firmware",
        help="MAX78000/MAX78002: firmware/, the MSDK project (cnn.c, weights.h, main.c, ...) "
        "with the vendor tool's API, runs on the part (c/ runs anywhere); with --run its set-up "
        "is checked on the host. Default: written where the writer covers the network (else a "
        "note); --firmware: or fail; --no-firmware: not. See docs/firmware.md.",
    ),
    softmax: bool = _vendor_flag(
        "--softmax",
        "main.c unloads the 32-bit outputs and prints their softmax per class (softmax.c).",
    ),
    overlap_data: bool = typer.Option(
        False,
        "--overlap-data",
        help="Vendor option: a layer may write its output over its own "
        "dying input (cnnforge plans so by default; the opposite of --no-in-place).",
    ),
    mlator: bool = _vendor_flag(
        "--mlator",
        "cnn_unload reads an 8-bit output channel by channel through the mlator register "
        "(out_buf: channel-major bytes, 4 pixels a word), with the vendor's register writes; an "
        "output layer where the vendor's two mlator sequences disagree (or it ignores --mlator: "
        "32-bit, frame not a multiple of 4) is unloaded plainly, with a note. With --no-unload: "
        "no change.",
    ),
    no_unload: bool = _vendor_flag("--no-unload", "no cnn_unload (unless --softmax)."),
    new_kernel_loader: bool = _vendor_flag(
        "--new-kernel-loader",
        "load the kernels from weights.h's records. Always so (the vendor's default); accepted "
        "for its command lines.",
    ),
    zero_sram: bool = _vendor_flag(
        "--zero-sram",
        "cnn_init zeroes the data, kernel, TRAM and bias memories by BIST; all-zero kernel "
        "columns are then not loaded.",
    ),
    boost: str = _vendor_flag(
        "--boost",
        "main.c turns the boost circuit's GPIO on while the accelerator runs, e.g. 2.5.",
        metavar="PORT.PIN",
    ),
    no_kat: bool = _vendor_flag(
        "--no-kat", "main.c without the known-answer check (no sampleoutput.h)."
    ),
    max_checklines: int = _vendor_flag(
        "--max-checklines",
        "check only the first N output words of the known answer.",
        metavar="N",
    ),
    riscv: bool = _vendor_flag(
        "--riscv",
        "the RISC-V layout of the vendor's mnist-riscv: main.c boots the RISC-V core, "
        "main_riscv.c runs the self-test there.",
    ),
    calcx4: bool = _vendor_flag(
        "--calcx4",
        "MAX78002: four output channels at once (a vendor pair: every layer; a model: every "
        "3x3 Conv2d that can take it). Same results, faster.",
    ),
    read_ahead: bool = _vendor_flag(
        "--read-ahead",
        "MAX78002: layers read their next input ahead (a vendor pair: every layer; a model: "
        "every weight layer whose input and output lie in different memories). Same results.",
    ),
    fifo: bool = typer.Option(
        False,
        "--fifo",
        help="MAX78000/MAX78002 (the vendor's --fifo): the input arrives through the FIFOs, the "
        "first layer streams; an error when it cannot.",
    ),
    no_in_place: bool = typer.Option(
        False,
        "--no-in-place",
        help="Keep every live tensor apart: no layer writes over its own dying input, so the "
        "vendor tool needs no --overlap-data (may not fit where the in-place plan does).",
    ),
) -> None:
    """Model -> vendor YAML + checkpoint, portable C with a known-answer self-test (the
    simulator's output on --sample), report.html; --run builds and runs the C."""
    from cnnforge.api import compile as compile_model

    options = _firmware_options(
        softmax=softmax, overlap_data=overlap_data, mlator=mlator, unload=not no_unload,
        new_kernel_loader=True, zero_sram=zero_sram, boost=boost, kat=not no_kat,
        max_checklines=max_checklines, riscv=riscv, calcx4=calcx4, read_ahead=read_ahead,
    )  # fmt: skip
    del new_kernel_loader  # the only loader cnnforge writes
    _check_firmware_options(device, firmware, options, in_place=not no_in_place, fifo=fifo)

    def run_compile(on_step: Any) -> Any:
        return compile_model(
            model, device=device, input_shape=parse_shape(input_shape) if input_shape else None,
            ptq=ptq, checkpoint=checkpoint, sample=sample, calibration=calibration,
            output_dir=output, overwrite=overwrite, run=run,
            weight_bits=None if weight_bits is None else _weight_bits(weight_bits, device),
            model_args=parse_model_args(model_arg), ai8x_yaml=ai8x_yaml,
            ai8x_checkpoint=ai8x_checkpoint, report=report, in_place=not no_in_place,
            firmware=firmware, firmware_options=options, fifo=fifo, probe=probe, sanitize=sanitize,
            max_verify=max_verify, cpu=cpu,
            on_step=on_step,
        )  # fmt: skip

    _print_summary(_with_progress(run_compile).summary, output)


def _firmware_options(boost: str | None, **flags: Any) -> FirmwareOptions:
    """The vendor's code-generation options as one record (``--boost``'s port.pin parsed)."""
    from cnnforge.errors import InputError
    from cnnforge.targets.max7800x.firmware.options import FirmwareOptions, parse_boost

    try:
        pin = None if boost is None else parse_boost(boost)
    except ValueError as exc:
        raise InputError(str(exc), where="--boost", hint="give port.pin, e.g. --boost 2.5") from exc
    return FirmwareOptions(boost=pin, **flags)


def _check_firmware_options(
    device: str,
    firmware: bool | None,
    options: FirmwareOptions,
    in_place: bool,
    fifo: bool = False,
) -> None:
    """The firmware and its options (and --fifo) are for the targets whose records take them
    (``Target.option_flags``), not with --no-firmware (but for those the plan holds:
    --overlap-data, --calcx4, --read-ahead); --overlap-data contradicts --no-in-place."""
    from cnnforge.api.targets import TARGETS, get_target
    from cnnforge.errors import InputError
    from cnnforge.targets.max7800x.firmware.options import FirmwareOptions

    given = [f for f in options.flags() if f.startswith("--")]
    if options.overlap_data and not in_place:
        raise InputError(
            "--overlap-data lets a layer write over its own input, --no-in-place forbids it",
            where="--overlap-data",
            hint="drop one of the two",
        )
    plan_options = ("--overlap-data", "--calcx4", "--read-ahead")  # the YAML says them too
    code_options = [f for f in given if f not in plan_options]
    kept = FirmwareOptions(
        overlap_data=options.overlap_data, calcx4=options.calcx4, read_ahead=options.read_ahead
    )
    if firmware is False and options != kept:
        raise InputError(
            f"{code_options[0]} is an option of the firmware, and --no-firmware writes none",
            where=code_options[0],
            hint=f"drop {code_options[0]} or --no-firmware",
        )
    asked = ["--firmware"] if firmware else []
    asked += (["--fifo"] if fifo else []) + [f for f in given if f != "--overlap-data"]
    refused = [f for f in asked if f not in get_target(device).option_flags]
    if refused:  # the targets whose records take the option, named in the message
        takers = [t.name for t in TARGETS if refused[0] in t.option_flags]
        raise InputError(
            f"{refused[0]} is for {'/'.join(takers)}, not for --device {device}",
            where=refused[0],
            hint=f"drop {refused[0]}, or compile for --device {' or '.join(takers)}",
        )


def _with_progress(run_compile: Any) -> Any:
    """Run the compile with a transient progress line naming the current step (on a terminal
    only: piped, a progress display leaves a blank line even when the command fails)."""
    if not console.is_terminal:
        return run_compile(lambda *_: None)
    columns = (TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("compile", total=None)

        def on_step(name: str, index: int, total: int) -> None:
            progress.update(
                task, description=f"[{index + 1}/{total}] {name}", total=total, completed=index
            )

        return run_compile(on_step)


def _weight_bits(text: str, device: str) -> int | str:
    from cnnforge.api.targets import device_for

    return parse_weight_bits(text, widths=device_for(device, "compile").weight_bits)


def _folders(files: list[str], device: str) -> str:
    """Which folder is which: the portable C runs anywhere, the firmware only on the part."""
    out = []
    if any(f.startswith("c/") for f in files):
        out.append("c/ portable C, runs anywhere (--run runs it on this host)")
    if any(f.startswith("firmware/") for f in files):
        out.append(f"firmware/ the MSDK project, runs on the {device} (docs/firmware.md)")
    if any(f.startswith("ai8x/") for f in files):
        out.append("ai8x/ the vendor tool's YAML + checkpoint")
    return "; ".join(out) or "-"


def _print_summary(facts: dict, output: Path) -> None:
    table = Table(title=f"cnnforge compile -> {output}", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    table.add_row("network", f"{facts['network']} on {facts['device']}, {facts['layers']} layers")
    table.add_row("MACs", f"{facts['macs']:,}")
    table.add_row("C arena", f"{facts['c_arena_bytes']:,} bytes")
    table.add_row("known answer", f"{facts['outputs']:,} outputs, checksum {facts['checksum']}")
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
