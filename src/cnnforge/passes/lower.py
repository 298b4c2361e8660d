"""From a model-level network to hardware layers: fold BatchNorm -> fuse -> legalize, as named
``LOWERING_STEPS`` whose every change is a ``Rewrite`` that ``cnnforge check`` shows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cnnforge.ir import Network, Op
from cnnforge.passes.fuse import fuse_with_log
from cnnforge.passes.legalize import legalize_with_log
from cnnforge.passes.rewrites import Rewrite
from cnnforge.passes.verify import verify, verify_equivalent

if TYPE_CHECKING:
    from cnnforge.devices import Capabilities

Step = Callable[[Network, "Capabilities | None"], "tuple[Network, tuple[Rewrite, ...]]"]


@dataclass(frozen=True)
class Lowered:
    """The lowered network and every rewrite made on the way, in order."""

    network: Network
    rewrites: tuple[Rewrite, ...]


def fold_batchnorm_step(network: Network, device: Capabilities | None) -> tuple[Network, tuple]:
    """Fold every BatchNorm into the layer before it (passes/fold_bn.py), logging each fold."""
    del device
    before = [x for x in network.layers if x.op is Op.BATCHNORM]
    if not before:
        return network, ()
    from cnnforge.passes.fold_bn import fold_batchnorm

    folded = fold_batchnorm(network)
    left = {x.name for x in folded.layers if x.op is Op.BATCHNORM}
    by_name = {x.name: x for x in network.layers}
    records = []
    for bn in before:
        if bn.name in left:
            continue
        target = by_name.get(bn.inputs[0])
        layer = target.name if target is not None else bn.name
        path = (target.module_path if target is not None else "") or bn.module_path or layer
        what = "constant scale/shift" if bn.batchnorm and bn.batchnorm.eps == 0 else "BatchNorm"
        detail = f"{what} {bn.module_path or bn.name} folded into the weights and bias"
        records.append(Rewrite(layer, path, "fold-batchnorm", detail))
    from cnnforge.passes.fold_constants import fold_constants
    from cnnforge.passes.host_input import move_input_normalization

    folded, constants = fold_constants(folded)
    folded, host = move_input_normalization(folded)
    return folded, (*records, *constants, *host)


def fuse_step(network: Network, device: Capabilities | None) -> tuple[Network, tuple]:
    """Fuse pooling, activations, element-wise ops, concatenation and flatten (passes/fuse.py)."""
    return fuse_with_log(network, device)


def legalize_step(network: Network, device: Capabilities | None) -> tuple[Network, tuple]:
    """Apply the exact legal rewrites (passes/legalize.py); they are the same on every device."""
    del device
    return legalize_with_log(network)


#: The lowering recipe, in order.
LOWERING_STEPS: tuple[tuple[str, Step], ...] = (
    ("fold batchnorm", fold_batchnorm_step),
    ("fuse", fuse_step),
    ("legalize", legalize_step),
)


def lower_to_hardware(
    network: Network, device: Capabilities | None, *, verify_steps: bool = True
) -> Lowered:
    """Run ``LOWERING_STEPS`` (device None: device-neutral fusions only), with ``verify_steps``
    checking the invariants and float equivalence around every step."""
    log: list[Rewrite] = []
    if verify_steps:
        verify(network)
    for name, step in LOWERING_STEPS:
        before = network
        network, records = step(network, device)
        log.extend(records)
        if verify_steps and network is not before:
            verify(network)
            verify_equivalent(before, network, name)
    return Lowered(network, tuple(log))
