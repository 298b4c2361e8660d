"""The record a target plugs in with: what ``--device NAME`` means and what each command runs.

Each target package builds its ``Target`` (``targets/<name>/entry.py``) and the table of every
target (api/targets.py) lists them: the API and the CLI resolve ``--device`` there once and hand
the record down. The shared stages ask the record (its checker ``rules``, its ``compile_steps``,
``plans``, ``read_pair``, ``check_float``) and never import a target or branch on its name
(docs/internal-apis.md, "How to add a target").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal

from cnnforge.errors import InputError
from cnnforge.passes.target_rules import NO_RULES, TargetRules
from cnnforge.pipeline.state import Steps
from cnnforge.target_options import TargetOptions

if TYPE_CHECKING:
    from cnnforge.ir import Network
    from cnnforge.passes.check_rules import Violation
    from cnnforge.pipeline.state import PlanRequest

#: What ``cnnforge plan`` does for a target: run its planner and writer ("place"), plan the
#: on-chip budget of the float model as ``cnnforge budget`` does ("budget"), or refuse ("none").
PlanKind = Literal["place", "budget", "none"]
#: A target's output writer for ``cnnforge plan -o DIR``: (result, device, dir, overwrite).
Writer = Callable[[Any, Any, Path, bool], Any]
#: A target's check of a float MODEL it plans without hardware layers (generic):
#: (model, --device text, input shape, model args, checkpoint) -> (device, network, violations).
FloatCheck = Callable[..., "tuple[Any, Network, tuple[Violation, ...]]"]
#: A target's vendor-pair reader: (the source, a pipeline.sources.ModelSource; the input shape;
#: the device record) -> the network.
PairReader = Callable[[Any, "tuple[int, ...] | None", Any], "Network"]

@dataclass(frozen=True)
class Target:
    """One target: what ``--device NAME`` resolves to and what each command runs for it."""

    name: str  # the --device name (case-insensitive); ``parse`` targets match NAME[:params]
    description: str
    semantics: ModuleType  # the module of the integer rules its bit-exact simulation follows
    device: Any  # its device record (a Capabilities; None: ``parse`` reads it from --device text)
    parse: Callable[[str], Any] | None = None  # parametrised: --device text -> record
    aliases: tuple[str, ...] = ()
    # the checker's hooks: its memories, --weight-bits auto, the placement its compile recipe
    # runs (`cnnforge check` runs the same: passes/check_plan.py)
    rules: TargetRules = NO_RULES
    compile_steps: Steps | None = None  # `cnnforge compile` (None: it cannot be compiled)
    # `cnnforge plan`'s planner and output writer (None: plan refuses); ``plans`` says which flow
    planner: Callable[[PlanRequest, Any], Any] | None = None
    write: Writer | None = None
    plans: PlanKind = "none"
    report: tuple[str, ...] = ()  # the report files its recipe writes
    read_pair: PairReader | None = None  # reads the vendor pair (--ai8x-yaml) for this device
    options: TargetOptions | None = None  # its own `compile` options (the CLI lists them)
    check_float: FloatCheck | None = None  # `cnnforge check` on the float model (no layers)

    def matches(self, text: str) -> bool:
        """True when ``--device text`` names this target."""
        key = text.strip().upper()
        if self.parse is not None:
            key = key.split(":", 1)[0]
        return key in {self.name.upper(), *(a.upper() for a in self.aliases)}

    @property
    def option_flags(self) -> frozenset[str]:
        """The `compile` flags only this target (and those sharing its options) takes."""
        own = self.options.options if self.options else ()
        return frozenset(o.flag.split("/")[0] for o in own if o.only_its_own)

    def resolve(self, text: str) -> Target:
        """This record with the device ``text`` names (a parametrised target reads its
        parameters from the text)."""
        if self.parse is not None:
            return dataclasses.replace(self, device=self.parse(text))
        if self.device is None:  # a table entry needs one of the two
            raise InputError(f"--device {self.name} has no device data")
        return self
