"""A firmware folder read back into cnnforge's network and plan (the decoder, then the vendor-pair
reader); bad input is a one-line InputError."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from cnnforge.errors import InputError
from cnnforge.targets.max7800x.ai8x import load_ai8x
from cnnforge.targets.max7800x.device import DEVICE_NAMES, DEVICES
from cnnforge.targets.max7800x.firmware import selftest
from cnnforge.targets.max7800x.firmware.hostrun import StateImage

_READ = functools.partial(load_ai8x, overlap_data=True)


def read_firmware(folder: Path, device: str | None) -> selftest.Decoded:
    """Read, decode and recover ``folder`` (nothing of it is compiled or run)."""
    from cnnforge.targets.max7800x.firmware.decode import DecodeError
    from cnnforge.targets.max7800x.firmware.interpret import FirmwareError

    check_folder(folder, device)
    try:
        return selftest.read_network(folder, device, _READ)
    except (FirmwareError, DecodeError) as exc:
        raise InputError(str(exc)) from None


def decode_firmware_image(
    image: StateImage, records: list[tuple[int, list[int]]] | None = None
) -> selftest.Decoded:
    """Decode and recover a firmware's set-up state (a stored state image; ``records``: its
    kernel loader's records, None: the state alone)."""
    return selftest.decode_image(image, records, _READ)


def read_layers(folder: Path, device: str | None) -> tuple[str, Any, list]:
    """``(device, state image, decoded layers)`` of ``folder`` (``inspect``'s reading)."""
    from cnnforge.targets.max7800x.firmware.decode import DecodeError
    from cnnforge.targets.max7800x.firmware.inspect import read_folder
    from cnnforge.targets.max7800x.firmware.interpret import FirmwareError

    check_folder(folder, device)
    try:
        return read_folder(folder, device)
    except (FirmwareError, DecodeError) as exc:
        raise InputError(str(exc)) from None


def check_folder(folder: Path, device: str | None) -> None:
    """A firmware folder (it has cnn.c) and a known part, else InputError."""
    if not (Path(folder) / "cnn.c").is_file():
        raise InputError(f"{folder}: no cnn.c (not a firmware folder)")
    if device not in (None, *(d.name for d in DEVICES)):
        raise InputError(f"--device {device}: one of {DEVICE_NAMES}")
    from cnnforge.targets.max7800x.firmware.inspect import detect_device

    found = detect_device(Path(folder))
    if device is not None and device != found:
        raise InputError(
            f"{folder}: this is {found} firmware (cnn.c addresses the {found}'s registers), "
            f"not {device}",
            hint=f"leave --device out, or give --device {found}",
        )
