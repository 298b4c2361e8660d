"""Every target cnnforge compiles or plans for, one package each: ``max7800x`` (MAX78000 and
MAX78002), ``hls`` (an FPGA overlay from HLS C++) and ``generic`` (an on-chip budget + DDR).

A target package owns its planner, writers and reports; what a target provides is the
``Target`` record of ``pipeline/targets.py`` (docs/internal-apis.md, "How to add a target").
"""
