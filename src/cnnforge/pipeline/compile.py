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
    target: Target, options: CompileOptions, on_step: Callable[[str, int, int], None] | None = None
) -> CompileState:
    """Run ``target``'s recipe; the output directory appears only if all steps succeed.
    ``on_step(name, i, n)`` is called before each step."""
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
    """One intra-op thread while compiling: OpenMP workers spinning between tiny layers cost ~30x
    the work on a busy machine (sums below 2^24 are exact in any order)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
