"""The ``cnnforge demo`` sequence, offline: shipped checkpoint (or ``--train``) -> float /
QAT-eval / bit-exact mIoU on a held-out split -> ``compile`` for MAX78000 with the C self-test ->
masks figure + README (the pieces live in training/demo.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cnnforge.api.targets import compile_model
from cnnforge.outputs import atomic_output_dir
from cnnforge.pipeline.state import CompileOptions, CompileState
from cnnforge.targets.max7800x.device import MAX78000
from cnnforge.training.demo import (
    HELD_OUT,
    MODEL,
    SIZE,
    masks_figure,
    readme_text,
    shipped_checkpoint,
)
from cnnforge.training.evaluate import Evaluation


@dataclass(frozen=True)
class DemoResult:
    """What the demo measured and compiled, and where it wrote it."""

    evaluation: Evaluation
    compile_state: CompileState
    output: Path
    checkpoint: Path


def run_demo(
    output: Path,
    *,
    checkpoint: Path | None = None,
    overwrite: bool = False,
    run_c: bool = True,
    held_out: int = HELD_OUT,
    on_step=None,
) -> DemoResult:
    """Evaluate three ways, compile for MAX78000 with the C self-test, write masks + report."""
    from cnnforge.frontend.torch_fx import load_model
    from cnnforge.training.datasets import SHAPES_CLASSES, ShapesDataset
    from cnnforge.training.evaluate import evaluate_three_ways

    checkpoint = checkpoint or shipped_checkpoint()
    model = load_model(MODEL, {}, checkpoint)
    test_set = ShapesDataset("test", held_out, SIZE)
    evaluation = evaluate_three_ways(model, test_set, len(SHAPES_CLASSES))
    sample = test_set[0][0].numpy().astype(np.int64)
    with atomic_output_dir(Path(output), overwrite=overwrite) as work:
        np.save(work / "sample.npy", sample)
        state = compile_model(
            CompileOptions(
                output=work / "compile", model=MODEL, device=MAX78000.name, checkpoint=checkpoint,
                sample=work / "sample.npy", input_shape=(3, SIZE, SIZE), run=run_c,
            ),
            on_step=on_step,
        )  # fmt: skip
        masks_figure(model, test_set, work / "masks.png")
        (work / "README.md").write_text(readme_text(evaluation, checkpoint))
    return DemoResult(evaluation, state, Path(output), checkpoint)
