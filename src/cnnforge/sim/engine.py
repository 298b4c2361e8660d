"""``simulate``: run a quantized hardware ``Network`` on an int8 batch bit-exactly, layer by
layer; every engine (``fast``, ``gemm``, ``float64``, ``int64``) gives the same integers."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from cnnforge.devices import Capabilities
from cnnforge.errors import SimulationError
from cnnforge.geometry import last_use
from cnnforge.ir import INPUT, Layer, Network
from cnnforge.sim.checks import check_input, check_network, check_shape
from cnnforge.sim.exact import float32_is_exact
from cnnforge.sim.ops import run_layer

ENGINES = ("fast", "gemm", "float64", "int64")


@dataclass(frozen=True, eq=False)
class SimResult:
    """Outputs by name (int64, batch kept as given); every layer's output when asked for."""

    outputs: dict[str, torch.Tensor]
    layers: dict[str, torch.Tensor] | None = None


def simulate(
    network: Network,
    x: torch.Tensor | np.ndarray,
    *,
    device: Capabilities | None,
    all_layers: bool = False,
    engine: str = "fast",
) -> SimResult:
    """Run ``network`` on ``x`` (int8 values) as the chip would, on ``x``'s device; ``device`` (the
    chip) refuses what it lacks. ``SimulationError`` names any layer it cannot run."""
    if engine not in ENGINES:
        raise SimulationError(f"unknown engine {engine!r}", hint=f"choose one of {ENGINES}")
    check_network(network, device)
    x64, batched = check_input(network, x)
    home = x64.device
    if engine == "int64":
        x64 = x64.cpu()  # CUDA has no int64 matrix products
    elif engine in ("fast", "gemm") and not float32_is_exact(home):
        engine = "float64"  # TF32/bf16 float32 math would break exactness (R2.3 note)
    values = {INPUT: x64 if engine == "int64" else x64.float()}
    keep = set(network.outputs)
    last = last_use(network)
    everything: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        for i, layer in enumerate(network.layers):
            y = _run(layer, [values[n] for n in layer.inputs], network, engine)
            values[layer.name] = y
            if all_layers:
                everything[layer.name] = _as_int(y, batched, home)
            for name in layer.inputs:
                if last.get(name) == i and name not in keep:
                    values.pop(name, None)
    outputs = {name: _as_int(values[name], batched, home) for name in network.outputs}
    return SimResult(outputs=outputs, layers=everything if all_layers else None)


def _run(layer: Layer, xs: list[torch.Tensor], network: Network, engine: str) -> torch.Tensor:
    params = _params(layer, engine, xs[0].device) if layer.has_weights else None
    try:
        y = run_layer(layer, xs, params, network.avg_pool_rounding, engine)
    except RuntimeError as exc:  # a geometry torch cannot run: the network is inconsistent
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SimulationError(
            f"cannot compute this layer: {first}",
            where=f"layer {layer.name}",
            hint="check the layer's shapes, kernel and padding",
        ) from None
    check_shape(layer, y)
    return y


def _params(
    layer: Layer, engine: str, on: torch.device
) -> tuple[torch.Tensor, torch.Tensor | None]:
    q = layer.quant
    assert q is not None
    dtype = torch.int64 if engine == "int64" else torch.float32
    w = torch.from_numpy(np.asarray(q.weights)).to(on, dtype)
    bias = None if q.bias is None else torch.from_numpy(np.asarray(q.bias)).to(on, dtype)
    return w, bias


def _as_int(y: torch.Tensor, batched: bool, home: torch.device) -> torch.Tensor:
    y = y.to(home, torch.int64)
    return y if batched else y[0]
