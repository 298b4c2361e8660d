"""Portable C99 emitter: layer table + shared integer kernels + known-answer self-test.

``emit_c`` writes the project, ``build.build_and_run`` compiles it with the host ``cc`` and runs
the self-test, ``probe.read_layer_outputs`` reads per-layer dumps (``--probe``) for ``diff``.
"""

from cnnforge.targets.max7800x.c.emitter import EmittedC, emit_c

__all__ = ["EmittedC", "emit_c"]
