"""The bit-exact integer simulator of the MAX78000/MAX78002 CNN accelerator
(docs/hardware/arithmetic.md).

``simulate(network, x, device=..., all_layers=False, engine="fast") -> SimResult`` runs a
quantized hardware ``Network``; ``float_eval.run_float`` gives the float semantics of any
``Network`` (model level or hardware, unquantized).
"""

from cnnforge.sim.engine import ENGINES, SimResult, simulate

__all__ = ["ENGINES", "SimResult", "simulate"]
