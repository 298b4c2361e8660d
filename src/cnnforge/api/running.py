"""Running a quantized network on an array: the one path of ``cnnforge.simulate`` and the
results' ``.simulate`` (numpy or torch in, numpy out, batch axis as given)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cnnforge.errors import InputError

if TYPE_CHECKING:
    import numpy as np

    from cnnforge.devices import Capabilities
    from cnnforge.ir import Network


def run_network(
    network: Network, x: Any, device: Capabilities, all_layers: bool = False, cpu: bool = False
) -> Any:
    """The bit-exact output of ``network`` on ``x`` (C,H,W or N,C,H,W; int8 values or floats
    in model units, which go through the network's host input normalization, if any, before
    x 128): one int64 array, or a dict by layer name for several outputs or
    ``all_layers``. Simulated on a CUDA GPU where one is present (``cpu``: on the CPU); the
    numbers are the same either way (sim/exact.py)."""
    outputs, layers = run_network_full(network, x, device, all_layers, cpu)
    if all_layers:
        return layers
    return next(iter(outputs.values())) if len(outputs) == 1 else outputs


def run_network_full(
    network: Network, x: Any, device: Capabilities, all_layers: bool = False, cpu: bool = False
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """``(outputs, layers)`` by name, batch axis as given (``layers`` empty unless asked): what
    ``cnnforge simulate`` writes and ``cnnforge.simulate`` returns."""
    import numpy as np
    import torch

    from cnnforge.compute import choose_device
    from cnnforge.samples import load_input_array, with_host_input
    from cnnforge.sim import simulate

    read = load_input_array(array_of(x), "x")  # floats: the host normalizes them first
    data = with_host_input(read, network.host_input, len(network.input_shape)).values
    batch, added = batched(data, network, "x")
    on = choose_device(cpu=cpu)
    result = simulate(network, torch.from_numpy(batch).to(on), all_layers=all_layers, device=device)

    def unbatch(value: Any) -> np.ndarray:
        array = np.asarray(value.cpu().numpy(), dtype=np.int64)
        return array[0] if added else array

    outputs = {k: unbatch(v) for k, v in result.outputs.items()}
    layers = {k: unbatch(v) for k, v in result.layers.items()} if all_layers else {}
    return outputs, layers


def batched(
    data: np.ndarray, network: Network, name: str, where: str | None = None
) -> tuple[np.ndarray, bool]:
    """(N, ...) input and whether a batch axis was added; InputError naming ``name`` (and
    ``where``) when the shape is not the network's."""
    shape = tuple(network.input_shape)
    if len(shape) == 2 and data.ndim >= 3 and data.shape[-1] == 1 and data.shape[-3:-1] == shape:
        data = data[..., 0]  # 1-D data as the vendor's samples hold it: C x L x 1
    if data.shape == shape:
        return data[None], True
    if data.shape[1:] == shape:
        return data, False
    raise InputError(
        f"{name} has shape {tuple(data.shape)}, the network takes {shape}",
        where=where,
        hint="give C,H,W or N,C,H,W",
    )


def array_of(value: Any) -> Any:
    """numpy arrays, torch tensors (as numpy) and paths as they are; None stays None."""
    from pathlib import Path

    if value is None or isinstance(value, str | Path):
        return value
    if hasattr(value, "detach"):  # a torch tensor
        return value.detach().cpu().numpy()
    import numpy as np

    return np.asarray(value)
