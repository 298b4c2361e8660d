"""What the MAX7800x compile steps keep beside the shared compile state: one record, the
compile state's ``target_state``."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cnnforge.pipeline.state import CompileState

if TYPE_CHECKING:
    from cnnforge.targets.max7800x.firmware.flash import FlashBytes
    from cnnforge.targets.max7800x.metrics import Latency
    from cnnforge.targets.max7800x.placement import Plan


@dataclass(frozen=True)
class Max7800xState:
    """What the MAX7800x steps keep beside the shared compile state."""

    imported: Any = None  # a vendor pair (ai8x.Ai8xModel; the writers never import the reader)
    plan: Plan | None = None  # the placement (the vendor pair's own, or the planner's)
    flash: FlashBytes | None = None  # the firmware's flash bytes of weights and code
    latency: Latency | None = None  # the predicted inference time

    def summary_facts(self) -> dict[str, Any]:
        """The summary's MAX7800x facts."""
        return {
            "flash": None if self.flash is None else self.flash.to_dict(),
            "latency": None if self.latency is None else self.latency.to_dict(),
        }


def own(state: CompileState) -> Max7800xState:
    """The MAX7800x part of ``state`` (empty before the first step that keeps anything)."""
    return state.target_state if state.target_state is not None else Max7800xState()


def keep(state: CompileState, **changes: Any) -> CompileState:
    """``state`` with its MAX7800x part changed."""
    return state.with_(target_state=dataclasses.replace(own(state), **changes))
