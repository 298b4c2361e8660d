"""``cnnforge simulate``: run a quantized network bit-exactly on int8 input from a .npy file.

The network comes from exactly one source (pipeline.sources.model_source): a vendor pair
(``--ai8x-yaml`` + ``--ai8x-checkpoint``) or else ``resolve_network``: a cnnforge quantized
checkpoint (``--network``, or ``--checkpoint`` when it is one), or MODEL (+ float or QAT
``--checkpoint``) quantized on the fly.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from cnnforge.api.running import batched
from cnnforge.cli.app import app
from cnnforge.cli.common import (
    ai8x_checkpoint_option,
    console,
    parse_bits_option,
    parse_model_args,
    parse_shape,
    read_input_array,
)
from cnnforge.errors import InputError
from cnnforge.outputs import atomic_outputs
from cnnforge.targets.max7800x.device import DEFAULT_DEVICE, DEVICE_NAMES

if TYPE_CHECKING:
    import numpy as np

    from cnnforge.devices import Capabilities
    from cnnforge.ir import Network
    from cnnforge.pipeline.targets import Target


def resolve_network(
    model: str | None,
    input_shape: tuple[int, ...] | None,
    checkpoint: Path | None,
    network_path: Path | None,
    *,
    model_args: dict[str, object],
    target: Target,
    weight_bits: int | dict[str, int],
    clip: str,
) -> Network:
    """The quantized network to simulate, from exactly one source (see the module docstring)."""
    from cnnforge.api.targets import device_for
    from cnnforge.pipeline.quantized import quantized_checkpoint, quantized_from_source
    from cnnforge.pipeline.sources import model_source

    source = model_source(
        model, checkpoint, network_path, hint="give MODEL [--checkpoint], or --network q.pth"
    )
    saved = quantized_checkpoint(source) is not None
    if not saved and input_shape is None:
        raise InputError("MODEL needs --input-shape", hint="e.g. --input-shape 3,64,64")
    dev = device_for(target, "simulate")
    return quantized_from_source(
        source, input_shape, model_args, dev, weight_bits, rules=target.rules, clip=clip
    ).network


def _file_name(layer: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", layer) + ".npy"


@app.command("simulate")
def simulate(
    model: str = typer.Argument(
        None, help="MODEL (file.py:Name, package.module:Name or a short name); omit with --network."
    ),
    input_path: Path = typer.Option(
        None,
        "--input",
        help="int8 or float .npy: C,H,W or N,C,H,W (--firmware: default its sample).",
    ),
    output: Path = typer.Option(None, "--output", help=".npy for the output (.npz if several)."),
    firmware: Path = typer.Option(
        None, "--firmware", help="MAX7800x firmware folder: decode it and simulate its network."
    ),
    network_path: Path = typer.Option(None, "--network", help="cnnforge quantized checkpoint."),
    ai8x_yaml: Path = typer.Option(
        None, "--ai8x-yaml", help="Vendor network YAML (with --ai8x-checkpoint), instead of MODEL."
    ),
    ai8x_checkpoint: Path = ai8x_checkpoint_option(),
    checkpoint: Path = typer.Option(
        None, "--checkpoint", help="With MODEL: float/QAT state_dict, or a quantized checkpoint."
    ),
    input_shape: str = typer.Option(
        None, "--input-shape", "-i", help="With MODEL: C,H,W (default: from --input)."
    ),
    model_arg: list[str] = typer.Option(None, "--model-arg", help="Constructor key=value."),
    layers_dir: Path = typer.Option(None, "--layers", help="Directory: one .npy per layer."),
    device: str = typer.Option(None, "--device", "-d", help=f"{DEVICE_NAMES} or HLS."),
    weight_bits: list[str] = typer.Option(None, "--weight-bits", help="PTQ width (MODEL only)."),
    clip: str = typer.Option("max", "--clip", help="PTQ clipping (MODEL only)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace existing outputs."),
    cpu: bool = typer.Option(
        False, "--cpu", help="Simulate on the CPU even where a CUDA GPU is present."
    ),
) -> None:
    """Simulate bit-exactly (on a CUDA GPU where one is present, else the CPU: the same
    numbers); write the output (and every layer's output with --layers)."""
    from cnnforge.api.targets import device_for, get_target
    from cnnforge.pipeline.sources import VENDOR, model_source, pair_network

    if firmware is not None:
        simulate_firmware(firmware, input_path, output, device, overwrite)
        return
    if input_path is None or output is None:
        raise InputError("--input and --output are required (or --firmware FOLDER)")
    data = read_input_array(input_path)
    shape = parse_shape(input_shape) if input_shape else _shape_from_data(data)
    source = model_source(model, checkpoint, network_path, ai8x_yaml, ai8x_checkpoint)
    target = get_target(device or DEFAULT_DEVICE)
    dev = device_for(target, "simulate")
    network = pair_network(source, shape, target) if source.kind == VENDOR else None
    network = network or resolve_network(
        model,
        shape if model else None,
        checkpoint,
        network_path,
        model_args=parse_model_args(model_arg),
        target=target,
        weight_bits=parse_bits_option(weight_bits),
        clip=clip,
    )
    batched(data, network, "--input", str(input_path))  # the CLI's message for a wrong shape
    first = _run_and_write(network, dev, input_path, (output, layers_dir), overwrite, cpu)
    console.print(
        f"{network.name}: {len(network)} layers, output {first.shape} -> {output}", highlight=False
    )


def _run_and_write(
    network: Network,
    dev: Capabilities,
    input_path: Path,
    outputs_to: tuple[Path, Path | None],
    overwrite: bool,
    cpu: bool,
) -> np.ndarray:
    """Simulate the file at ``input_path`` (its floats go through the network's host input
    step) and write the output (and every layer's to a folder): both or neither; the first
    output."""
    from cnnforge.api.running import run_network_full

    output, layers_dir = outputs_to
    with atomic_outputs() as staged:  # both outputs or neither
        out_file = staged.file(output, overwrite)
        out_layers = None if layers_dir is None else staged.directory(layers_dir, overwrite)
        outputs, layers = run_network_full(
            network, input_path, dev, all_layers=layers_dir is not None, cpu=cpu
        )
        write_outputs(outputs, out_file)
        if out_layers is not None:
            _write_layers(layers, out_layers)
    return next(iter(outputs.values()))


def _write_layers(layers: dict[str, np.ndarray], folder: Path) -> None:
    """Every layer's output as a numbered .npy, and order.txt naming them in the network's
    order."""
    import numpy as np

    from cnnforge.targets.max7800x.c.probe import ORDER

    lines = []
    for i, (name, value) in enumerate(layers.items()):
        fname = f"{i:03d}_{_file_name(name)}"
        np.save(folder / fname, value)
        lines.append(f"{fname} {name}\n")
    (folder / ORDER).write_text("".join(lines), encoding="utf-8")


def simulate_firmware(
    folder: Path,
    input_path: Path | None,
    output: Path | None,
    device: str | None,
    overwrite: bool,
) -> None:
    """``simulate --firmware``: the folder's network, decoded; without ``--input`` its own
    sample, checked against its own known answer (exit 1 when a word differs)."""
    from cnnforge.targets.max7800x.firmware.selftest import run_self_test
    from cnnforge.targets.max7800x.firmware_read import read_firmware

    decoded = read_firmware(folder, device)
    network = decoded.network
    x = None
    if input_path is not None:
        x = read_input_array(input_path)
        batched(x, network, "--input", str(input_path))
    try:
        outputs, test = run_self_test(decoded, x)
    except NotImplementedError as exc:
        raise InputError(f"{folder}: {exc} is not simulated yet") from None
    if output is not None:
        with atomic_outputs() as staged:
            write_outputs(outputs, staged.file(output, overwrite))
    first = next(iter(outputs.values()))
    where = f" -> {output}" if output is not None else ""
    console.print(
        f"{folder}: {decoded.device}, {len(decoded.layers)} layers decoded, "
        f"{'its sample' if x is None else input_path} -> output {tuple(first.shape)}{where}",
        highlight=False,
        markup=False,
    )
    if test is not None and not _known_answer_passes(test):
        raise typer.Exit(1)


def _known_answer_passes(test: Any) -> bool:
    """Print the folder's known-answer verdict (a firmware.selftest record); False on FAIL."""
    if not test.checked:  # written with --no-kat: no sampleoutput.h, no table
        console.print("known answer: none in the folder (no sampleoutput.h table; written with "
                      "--no-kat?), nothing to check", highlight=False, markup=False)  # fmt: skip
        return True
    if test.passed:
        console.print(f"known answer (sampleoutput.h): PASS, {test.checked} words equal",
                      highlight=False)  # fmt: skip
        return True
    console.print(
        f"known answer (sampleoutput.h): FAIL, {test.failed} of {test.checked} words differ"
        + (f"; first {test.first}" if test.first else ""),
        highlight=False,
        markup=False,
    )
    return False


def _shape_from_data(data: np.ndarray) -> tuple[int, ...]:
    """Input shape without batch: C,H,W from 3-D or 4-D data, C,L from 2-D data."""
    return tuple(data.shape[1:]) if data.ndim == 4 else tuple(data.shape)


def write_outputs(outputs: dict[str, np.ndarray], path: Path) -> None:
    """One output -> .npy; several -> an .npz keyed by layer name (``path`` is written as is)."""
    import numpy as np

    with open(path, "wb") as fh:
        if len(outputs) == 1:
            np.save(fh, next(iter(outputs.values())))
        else:
            np.savez(fh, **outputs)
