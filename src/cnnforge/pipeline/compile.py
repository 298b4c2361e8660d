"""``run_recipe``: run a target's compile recipe into an output directory, atomically
(outputs.atomic_output_dir): a failed compile leaves nothing behind."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

from cnnforge.errors import InputError
from cnnforge.outputs import atomic_output_dir, check_target
from cnnforge.pipeline.state import CompileOptions, CompileState
from cnnforge.pipeline.targets import Target


def run_recipe(
    target: Target,
    options: CompileOptions,
    on_step: Callable[[str, int, int], None] | None = None,
) -> CompileState:
    """Run ``target``'s recipe (its record, resolved from ``options.device`` at the edge); the
    output directory appears only if all steps succeed. ``on_step(name, i, n)`` is called before
    each step (progress display)."""
    steps = target.compile_steps
    if steps is None:  # a target without a recipe is refused first
        raise InputError(
            f"--device {target.name} cannot be compiled",
            hint="plan it with `cnnforge plan` or `cnnforge budget`",
        )
    state = CompileState(options=options, target=target)
    check_target(options.output, directory=True, overwrite=options.overwrite)  # before the work
    with (
        _one_torch_thread(),
        atomic_output_dir(Path(options.output), overwrite=options.overwrite) as workdir,
    ):
        for i, (name, step) in enumerate(steps):
            if on_step is not None:
                on_step(name, i, len(steps))
            state = step(state, workdir)
    return state


@contextlib.contextmanager
def _one_torch_thread() -> Iterator[None]:
    """One intra-op thread while compiling: one sample's layers are too small to share out, and
    OpenMP workers spinning between layers cost ~30x the work itself on a busy machine (a
    float32 sum below 2^24 is exact in any order, so the known answer does not change)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
