"""The bit-exact integer simulator of the MAX78000/MAX78002 CNN accelerator
(docs/hardware/arithmetic.md), and the float semantics of any ``Network``."""

from cnnforge.sim.engine import ENGINES, SimResult, simulate

__all__ = ["ENGINES", "SimResult", "simulate"]
