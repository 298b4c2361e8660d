"""End to end on U-Nets as users write them: ``compile --ptq --run`` prints PASS and the
compiled known answer tracks the eager float model (correlation >= 0.99, seeded weights).

PadUNet (tests/support/unet_styles.py): F.pad after size arithmetic, unequal concatenations,
BN + ReLU, softmax at the output; MONAI BasicUNet (small, BN + ReLU) and UNet (channels 8, 16,
32, 32, BN + ReLU). Small inputs keep each under a few seconds.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cnnforge.cli import main
from support import unet_styles, zoo_models
from support.e2e import compile_tracking_eager

STYLES = Path(unet_styles.__file__)

CASES = (
    (unet_styles, "PadUNet", (3, 16, 16), ("drop-zero-pad", "concat-pad-channels", "host-softmax")),
    (unet_styles, "monai_basic_unet_bn_relu", (1, 16, 16), ("drop-zero-pad", "fold-batchnorm")),
    (zoo_models, "monai_unet_bn_relu", (1, 16, 16), ("stride-to-pool", "fold-batchnorm")),
)


@pytest.mark.parametrize(("module", "name", "shape", "rules"), CASES, ids=[c[1] for c in CASES])
def test_compile_ptq_run_tracks_eager(module, name, shape, rules, tmp_path):
    sample = np.random.default_rng(0).integers(-128, 128, shape)
    state, corr = compile_tracking_eager(module, name, shape, sample, tmp_path / "out")
    assert state.selftest.passed and state.selftest.output.startswith("PASS")
    assert set(rules) <= {r.rule for r in state.rewrites}
    assert corr >= 0.99, f"{name}: correlation {corr:.4f}"


def test_cli_compile_prints_pass(tmp_path, capsys):
    """The command a user types, on the U-Net with pads, unequal concatenations and softmax."""
    sample = tmp_path / "x.npy"
    np.save(sample, np.random.default_rng(1).integers(-128, 128, (3, 16, 16)).astype(np.int8))
    args = ["compile", f"{STYLES}:PadUNet", "--device", "MAX78000", "--ptq", "--sample"]
    with pytest.raises(SystemExit) as exc:
        main([*args, str(sample), "-o", str(tmp_path / "out"), "--run", "--no-report"])
    out = capsys.readouterr().out
    assert exc.value.code in (0, None), out
    assert "PASS" in out and "softmax" in out
