"""``cnnforge check`` runs the target's planner, so exit 0 promises that ``plan`` and ``compile``
place the network; a ``PlanError`` becomes a ``Violation``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cnnforge.errors import CnnforgeError, DeviceLimitError, EmitError, PlanError
from cnnforge.ir import Network
from cnnforge.passes.check_rules import NETWORK, Violation
from cnnforge.passes.target_rules import Placer

if TYPE_CHECKING:
    from cnnforge.devices import Capabilities


def _as_compiled(network: Network, device: Capabilities, bits: dict[str, int]) -> Network:
    """``network`` with integer weights of the chosen widths, as compile would quantize it."""
    if network.is_quantized:
        return network
    from cnnforge.quant.ptq import quantize_network

    try:
        return quantize_network(network, bits or 8, device=device)
    except CnnforgeError:  # e.g. binary widths: PTQ cannot make them; plan the 8-bit form
        return network


def placement_violations(
    network: Network, device: Capabilities, bits: dict[str, int], placer: Placer | None
) -> tuple[Violation, ...]:
    """The target's planner's verdict on ``network`` as violations; ``placer`` is what the compile
    recipe calls (None: no placement beyond the per-layer rules)."""
    if placer is None:
        return ()
    try:
        placer(_as_compiled(network, device, bits), device)
    except (PlanError, DeviceLimitError, EmitError) as exc:
        where = exc.where or f"network {network.name}"
        hint = exc.hint or "reduce channels or resolution, or use a larger device"
        return (Violation(NETWORK, where, "placement", exc.what, "a placement", hint),)
    return ()
