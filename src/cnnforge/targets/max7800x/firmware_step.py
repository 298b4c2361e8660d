"""The compile step that writes the MAX7800x firmware (OUT/firmware/, an MSDK project); with
``--run`` its set-up state is checked word for word against the plan and its flash bytes counted."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from cnnforge.errors import EmitError, InputError
from cnnforge.pipeline.state import CompileState
from cnnforge.targets.max7800x.state import keep, own

if TYPE_CHECKING:
    from cnnforge.targets.max7800x.firmware.firmware import Firmware

FIRMWARE_DIR = "firmware"


def step_firmware(state: CompileState, workdir: Path) -> CompileState:
    """Write OUT/firmware/ (and with --run, check its set-up on the host)."""
    o = state.options
    if o.firmware is False:
        return state
    from cnnforge.targets.max7800x.firmware.firmware import build_firmware
    from cnnforge.targets.max7800x.firmware.options import FirmwareOptions, OptionRefused
    from cnnforge.targets.max7800x.firmware.writer import write_folder

    options = o.firmware_options or FirmwareOptions()
    asked = o.firmware is True or options != FirmwareOptions()
    try:
        fw = build_firmware(
            state.network, own(state).plan, state.sample, state.answer, options
        )
    except OptionRefused as exc:
        hint = "drop the option (docs/firmware.md)"
        raise InputError(str(exc), where="compile", hint=hint) from exc
    except NotImplementedError as exc:
        if not asked:
            note = f"firmware/ not written: the writer does not cover {exc} yet (docs/firmware.md)"
            return state.with_(notes=(*state.notes, note))
        raise EmitError(
            f"the firmware writer does not cover this network yet: {exc}",
            where="--firmware",
            hint="compile with --no-firmware and run the vendor tool on ai8x/ (docs/firmware.md "
            "lists what the writer covers)",
        ) from exc
    from cnnforge.targets.max7800x.firmware.flash import flash_bytes

    folder = workdir / FIRMWARE_DIR
    written = write_folder(fw, folder)
    state = state.with_(notes=(*state.notes, *fw.notes))  # --mlator: layers unloaded plainly
    if o.run:
        _check_on_host(fw, folder)
    # The code is built for the Cortex-M4 only with --run (it takes a compiler's time).
    state = keep(state, flash=flash_bytes(fw, folder, measure=state.options.run))
    return state.wrote(*(f"{FIRMWARE_DIR}/{p.name}" for p in written))


def _check_on_host(fw: Firmware, folder: Path) -> None:
    """The set-up's state on the host equals the plan's (firmware.expected_image), and so does
    the stream load_input writes into the FIFOs (firmware.fifo_stream)."""
    from cnnforge.targets.max7800x.firmware.firmware import expected_image, fifo_stream, owner_of
    from cnnforge.targets.max7800x.firmware.hostrun import HostRunError, run_setup

    try:
        image = run_setup(folder, fw.device)
    except HostRunError as exc:
        raise EmitError(str(exc), where=f"{FIRMWARE_DIR}/cnn.c") from exc
    state, added = expected_image(fw)
    for part, mine, theirs in (
        ("state", dict(image.state.tolist()), state),
        ("input", dict(image.input.tolist()), added),
    ):
        for addr in sorted(set(mine) | set(theirs)):
            if mine.get(addr, 0) != theirs.get(addr, 0):
                raise EmitError(
                    f"the firmware's set-up leaves 0x{mine.get(addr, 0):08x} at 0x{addr:08x} "
                    f"({owner_of(fw, addr)}), the plan says 0x{theirs.get(addr, 0):08x} ({part})",
                    where=f"{FIRMWARE_DIR}/cnn.c",
                )
    wanted = fifo_stream(fw).tolist()
    for i, (got, want) in enumerate(zip(image.fifo.tolist(), wanted, strict=False)):
        if got != want:
            raise EmitError(
                f"FIFO write {i} of load_input is 0x{got[1]:08x} to 0x{got[0]:08x}, the plan "
                f"says 0x{want[1]:08x} to 0x{want[0]:08x}",
                where=f"{FIRMWARE_DIR}/main.c",
            )
    if len(image.fifo) != len(wanted):
        raise EmitError(
            f"load_input writes the FIFOs {len(image.fifo)} times, the plan says {len(wanted)}",
            where=f"{FIRMWARE_DIR}/main.c",
        )
