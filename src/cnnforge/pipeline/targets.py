"""Every target cnnforge compiles or plans for, as one table of records.

A ``Target`` says in one place what a ``--device`` name means: its device data (or how to read
a parametrised one), its integer semantics, its planner for ``cnnforge plan``, its compile
recipe and the report files it writes. ``get_target``/``resolve_device`` look names up here;
the pipeline asks the record and never branches on a target (``plans`` says what ``cnnforge
plan`` does for it, ``write`` is its plan writer). Adding a target adds an entry
below and a package (targets/<name>/ for its data, pipeline/<name>.py for its steps).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Literal

from cnnforge import arithmetic
from cnnforge.devices import Capabilities
from cnnforge.errors import InputError
from cnnforge.ir import Network
from cnnforge.passes.target_rules import NO_RULES, TargetRules
from cnnforge.pipeline import hls, plan, steps
from cnnforge.pipeline.plan import PlanRequest, PlanResult
from cnnforge.pipeline.state import REPORT, SUMMARY, Steps
from cnnforge.targets.generic import integer as generic_integer
from cnnforge.targets.generic import run as generic
from cnnforge.targets.generic.target import GenericTarget, parse_generic
from cnnforge.targets.hls.device import HLS
from cnnforge.targets.max7800x.device import DEVICES, Max7800xDevice
from cnnforge.targets.max7800x.rules import RULES

if TYPE_CHECKING:
    from cnnforge.passes.check import CheckReport

#: What ``--device`` resolves to: a target's ``Capabilities`` record (MAX7800x, HLS) or a
#: parametrised generic target.
TargetDevice = Capabilities | GenericTarget

#: What ``cnnforge plan`` does for a target: run its planner and writer ("place"), plan the
#: on-chip budget of the float model as ``cnnforge budget`` does ("budget"), or refuse ("none").
PlanKind = Literal["place", "budget", "none"]
#: A target's output writer for ``cnnforge plan -o DIR``: (result, device, dir, overwrite).
Writer = Callable[[PlanResult, Capabilities, Path, bool], PlanResult]


@dataclass(frozen=True)
class Target:
    """One target: what ``--device NAME`` resolves to and what each command runs for it."""

    name: str  # the --device name (case-insensitive); ``parse`` targets match NAME[:params]
    description: str
    semantics: ModuleType  # the module of the integer rules its bit-exact simulation follows
    device: Capabilities | None  # fixed device data (None: ``parse`` reads it from --device text)
    parse: Callable[[str], GenericTarget] | None = None  # parametrised: --device text -> record
    aliases: tuple[str, ...] = ()
    compile_steps: Steps | None = None  # `cnnforge compile` (None: it cannot be compiled)
    # `cnnforge plan`'s planner and output writer (None: plan refuses); ``plans`` says which flow
    planner: Callable[[PlanRequest, Capabilities], PlanResult] | None = None
    write: Writer | None = None
    plans: PlanKind = "none"
    report: tuple[str, ...] = ()  # the report files its recipe writes
    # the checker's hooks: its memories, --weight-bits auto, the placement its compile recipe
    # runs (`cnnforge check` runs the same: passes/check_plan.py)
    rules: TargetRules = NO_RULES

    def matches(self, text: str) -> bool:
        """True when ``--device text`` names this target."""
        key = text.strip().upper()
        if self.parse is not None:
            key = key.split(":", 1)[0]
        return key in {self.name.upper(), *(a.upper() for a in self.aliases)}

    def resolve(self, text: str) -> TargetDevice:
        """The device record ``text`` names (a parametrised target reads its parameters)."""
        if self.parse is not None:
            return self.parse(text)
        if self.device is None:  # a table entry needs one of the two
            raise InputError(f"--device {self.name} has no device data")
        return self.device


def _max7800x(device: Max7800xDevice) -> Target:
    """A MAX7800x part: the vendor's integer rules, the shared compile recipe and planner."""
    return Target(
        device.name,
        f"Analog Devices {device.name} CNN accelerator",
        arithmetic,  # the vendor's integer rules
        device=device,
        aliases=(device.die,),
        compile_steps=steps.STEPS,
        planner=plan.plan_request,
        write=plan.write_outputs,
        plans="place",
        report=(REPORT, SUMMARY),
        rules=RULES,
    )


#: The targets, MAX7800x first; ``cnnforge --device`` accepts each name.
TARGETS: tuple[Target, ...] = (
    *(_max7800x(device) for device in DEVICES),
    Target(
        "HLS",
        "FPGA overlay from HLS C++ (docs/hls-target.md)",
        arithmetic,  # A8 activations, W1-8 weights (docs/hls-target.md §2)
        device=HLS,
        compile_steps=hls.STEPS,
        rules=hls.RULES,
        report=(hls.REPORT, hls.RESOURCES, SUMMARY),
    ),
    Target(
        "generic",
        "generic accelerator: on-chip budget + DDR (generic:onchip=3MiB,...)",
        generic_integer,  # saturating fixed point
        device=None,
        parse=parse_generic,
        planner=None,  # planned on the float model: targets.generic.run.plan_budget
        plans="budget",
        report=generic.FILES,
    ),
)


def target_names() -> str:
    """The ``--device`` names, for help and error hints."""
    return ", ".join(t.name + ("[:KEY=VALUE,...]" if t.parse else "") for t in TARGETS)


def get_target(name: str) -> Target:
    """The target ``--device name`` names; a one-line InputError listing them otherwise."""
    for target in TARGETS:
        if target.matches(str(name)):
            return target
    raise InputError(f"unknown device {name!r}", hint=f"choose one of {target_names()}")


def resolve_device(name: str | TargetDevice) -> TargetDevice:
    """The device record of ``--device name`` (a record is returned as it is)."""
    if not isinstance(name, str):
        return name
    return get_target(name).resolve(name)


def device_for(name: str | TargetDevice, command: str) -> Capabilities:
    """The device record ``command`` works on: the accelerators with a hardware layer model
    (MAX7800x, HLS); a budget target (generic) is planned on the float model by ``budget``."""
    device = resolve_device(name)
    if isinstance(device, Capabilities):
        return device
    raise InputError(
        f"--device {target_of(device).name} has no `cnnforge {command}`",
        hint="`cnnforge budget MODEL -d generic:...` plans it: unsupported layers, memory, DDR "
        "transfers",
    )


def target_of(device: str | TargetDevice) -> Target:
    """The table entry of a device record (or of a ``--device`` name)."""
    return get_target(device if isinstance(device, str) else device.name)


def check_for(
    network: Network, device: Capabilities, weight_bits: int | str | dict[str, int] | None = None
) -> CheckReport:
    """``cnnforge check`` on ``device``: lower, check every limit, and place the network with
    the target's own planner, the one its compile recipe's "lower and check" step runs
    (steps.lower_and_check), so exit 0 of check and a successful compile are one promise."""
    from cnnforge.passes.check import check_report

    return check_report(network, device, weight_bits, rules=target_of(device).rules)


def steps_for(device: str | TargetDevice) -> Steps:
    """The compile recipe of ``device``'s target (InputError if it cannot be compiled)."""
    target = target_of(device)
    if target.compile_steps is None:
        raise InputError(
            f"--device {target.name} cannot be compiled",
            hint="plan it with `cnnforge plan` or `cnnforge budget`",
        )
    return target.compile_steps
