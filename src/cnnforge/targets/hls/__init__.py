"""The HLS C++ FPGA target (docs/hls-target.md): its device record in ``device.py``."""
