"""HLS C++ for an FPGA target (docs/hls-target.md): plan, emitter, C-simulation, report."""

from cnnforge.emit.hls.emitter import EmittedHls, emit_hls

__all__ = ["EmittedHls", "emit_hls"]
