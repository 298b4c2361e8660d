"""The commands that read MAX7800x firmware folders and layer outputs, as functions:
``cnnforge.inspect`` and ``cnnforge.diff`` (same style as api/functions.py: what the command
computes, returned; bad input raises the CLI's one-line error)."""

from __future__ import annotations

from pathlib import Path

from cnnforge.api.results import Difference, Inspection
from cnnforge.errors import InputError


def inspect(folder: str | Path, device: str = "auto") -> Inspection:
    """The network a firmware folder sets up, layer by layer, read from its files and never
    compiled or run (``cnnforge inspect``); ``.contradictions`` lists what disagrees in it.
    ``device``: MAX78000 or MAX78002, or ``auto``: the part its cnn.c addresses.

    >>> i = cnnforge.inspect("build/firmware")
    >>> i.device, len(i.layers), i.to_dict()["layers"][0]
    """
    from cnnforge.targets.max7800x.firmware.inspect import contradictions
    from cnnforge.targets.max7800x.firmware_read import read_layers

    path = Path(folder)
    dev, image, layers = read_layers(path, None if device == "auto" else device)
    return Inspection((dev, image, layers), path, tuple(contradictions(dev, image, layers)))


def diff(a: str | Path, b: str | Path, *, tolerance: float = 0.0) -> Difference:
    """Compare two sets of layer outputs (C probe folders, ``.npz`` archives, folders of
    ``.npy``) layer by layer in the network's order, or two firmware folders register for
    register (``cnnforge diff``); ``.equal`` and the first divergence.

    >>> d = cnnforge.diff("build/probe", "sim_layers.npz")
    >>> d.equal, d.comparison.first_divergence
    """
    path_a, path_b = Path(a), Path(b)
    firmware = [(path_a / "cnn.c").is_file(), (path_b / "cnn.c").is_file()]
    if any(firmware) and not all(firmware):  # one firmware folder: the other must be one too
        other, folder = (path_b, path_a) if firmware[0] else (path_a, path_b)
        what = "no such folder" if not other.exists() else "no cnn.c (not a firmware folder)"
        raise InputError(
            f"{other}: {what}", hint=f"{folder} is a firmware folder: compare it with another"
        )
    if all(firmware):
        from cnnforge.targets.max7800x.firmware.inspect import first_difference
        from cnnforge.targets.max7800x.firmware_read import read_layers

        dev_a, _, layers_a = read_layers(path_a, None)
        dev_b, _, layers_b = read_layers(path_b, None)
        first = first_difference(dev_a, layers_a, layers_b) if dev_a == dev_b else None
        return Difference(path_a, path_b, first=first, devices=(dev_a, dev_b), layers=len(layers_a))
    from cnnforge.targets.max7800x.c.probe import (
        compare,
        find_network,
        network_pairs,
        read_layer_outputs,
    )

    pairs = network_pairs(find_network(path_a), find_network(path_b))
    result = compare(read_layer_outputs(path_a), read_layer_outputs(path_b), tolerance, pairs)
    return Difference(path_a, path_b, comparison=result)
