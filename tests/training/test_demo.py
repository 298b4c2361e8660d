"""The demo: a brief retrain gives a loadable checkpoint; the demo flow runs end to end."""

from __future__ import annotations

import pytest

from cnnforge.api.walkthrough import run_demo
from cnnforge.training.demo import quick_train, shipped_checkpoint


@pytest.mark.slow
def test_brief_retrain_then_demo_flow(tmp_path):
    """Retrain briefly (2 epochs, QAT in the second), then evaluate, compile, self-test."""
    ckpt = quick_train(tmp_path / "train", epochs=2, lengths=(32, 16))
    assert ckpt.is_file()
    result = run_demo(tmp_path / "demo", checkpoint=ckpt, held_out=16)
    ev = result.evaluation
    assert ev.outputs_compared > 0 and ev.outputs_differing == 0  # QAT-eval == bit-exact
    assert ev.scores["qat-eval"] == ev.scores["bit-exact"]
    assert result.compile_state.selftest.passed
    assert (tmp_path / "demo" / "masks.png").is_file()
    assert (tmp_path / "demo" / "compile" / "report.html").is_file()


def test_shipped_checkpoint_is_in_the_package():
    assert shipped_checkpoint().is_file(), "src/cnnforge/models/data/qat_unet_shapes.pth missing"
