"""The table of every target cnnforge compiles or plans for, and the one place ``--device`` is
resolved: the API and the CLI look a name up here once and hand the record down.

Each target package builds its own entry (``targets/<name>/entry.py``); adding a target adds
its package and one line of ``TARGETS`` (docs/internal-apis.md, "How to add a target").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from cnnforge.devices import Capabilities
from cnnforge.errors import InputError
from cnnforge.ir import Network
from cnnforge.passes.check import CheckReport, check_report
from cnnforge.pipeline.compile import run_recipe
from cnnforge.pipeline.state import CompileOptions, CompileState
from cnnforge.pipeline.targets import Target
from cnnforge.targets.generic import entry as generic
from cnnforge.targets.hls import entry as hls
from cnnforge.targets.max7800x import entry as max7800x

#: The targets, MAX7800x first; ``cnnforge --device`` accepts each name.
TARGETS: tuple[Target, ...] = (
    *max7800x.TARGETS,
    hls.TARGET,
    generic.TARGET,
)

def target_names() -> str:
    """The ``--device`` names, for help and error hints."""
    return ", ".join(t.name + ("[:KEY=VALUE,...]" if t.parse else "") for t in TARGETS)


def get_target(device: str | Target | object) -> Target:
    """The resolved record of ``--device``: a name (case-insensitive; a parametrised target's
    ``NAME:params``), a record (returned as it is) or a device record (its entry); a one-line
    InputError listing the names otherwise."""
    if isinstance(device, Target):
        return device
    text = device if isinstance(device, str) else str(getattr(device, "name", device))
    for target in TARGETS:
        if target.matches(text):
            if isinstance(device, str):
                return target.resolve(text)
            return dataclasses.replace(target, device=device)  # this very record
    raise InputError(f"unknown device {text!r}", hint=f"choose one of {target_names()}")


def device_for(device: str | Target | Capabilities, command: str) -> Capabilities:
    """The device record ``command`` works on: the accelerators with a hardware layer model
    (MAX7800x, HLS); a budget target (generic) is planned on the float model by ``budget``."""
    target = get_target(device)
    if isinstance(target.device, Capabilities):
        return target.device
    raise InputError(
        f"--device {target.name} has no `cnnforge {command}`",
        hint="`cnnforge budget MODEL -d generic:...` plans it: unsupported layers, memory, DDR "
        "transfers",
    )


def check_for(
    network: Network,
    device: str | Target | Capabilities,
    weight_bits: int | str | dict[str, int] | None = None,
) -> CheckReport:
    """``cnnforge check`` on ``device``: lower, check every limit, and place the network with
    the target's own rules, the ones its compile recipe's "lower and check" step runs, so exit
    0 of check and a successful compile are one promise."""
    target = get_target(device)
    return check_report(network, device_for(target, "check"), weight_bits, rules=target.rules)


def compile_model(
    options: CompileOptions, on_step: Callable[[str, int, int], None] | None = None
) -> CompileState:
    """Run the recipe of ``options.device``'s target (resolved here, once); the output
    directory appears only if all steps succeed (pipeline.compile.run_recipe)."""
    return run_recipe(get_target(options.device), options, on_step)
