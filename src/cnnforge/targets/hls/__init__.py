"""The HLS C++ FPGA target (docs/hls-target.md): device record, buffer plan, emitter, report."""
