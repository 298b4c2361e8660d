"""Portable C99 emitter (layer table, shared integer kernels, known-answer self-test), its build and
run on the host ``cc``, and per-layer probe dumps for ``diff``."""

from cnnforge.targets.max7800x.c.emitter import EmittedC, emit_c

__all__ = ["EmittedC", "emit_c"]
