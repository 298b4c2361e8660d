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
import torch

from cnnforge.cli import main
from cnnforge.emit.c.host import output_unit_of
from cnnforge.pipeline import CompileOptions, compile_model
from cnnforge.sim.float_eval import host_reduce_float
from support import unet_styles, zoo_models

STYLES = Path(unet_styles.__file__)

CASES = (
    (unet_styles, "PadUNet", (3, 16, 16), ("drop-zero-pad", "concat-pad-channels", "host-softmax")),
    (unet_styles, "monai_basic_unet_bn_relu", (1, 16, 16), ("drop-zero-pad", "fold-batchnorm")),
    (zoo_models, "monai_unet_bn_relu", (1, 16, 16), ("stride-to-pool", "fold-batchnorm")),
)


def _eager(module, name: str, sample: np.ndarray) -> torch.Tensor:
    torch.manual_seed(0)  # the untrained weights compile sees (pipeline.step_load)
    model = getattr(module, name)().eval()
    with torch.no_grad():
        return model(torch.from_numpy(sample[None].astype(np.float32) / 128.0))[0].double()


@pytest.mark.parametrize(("module", "name", "shape", "rules"), CASES, ids=[c[1] for c in CASES])
def test_compile_ptq_run_tracks_eager(module, name, shape, rules, tmp_path):
    sample = np.random.default_rng(0).integers(-128, 128, shape)
    options = CompileOptions(
        output=tmp_path / "out",
        model=f"{module.__file__}:{name}",
        ptq=True,
        sample=sample,
        input_shape=shape,
        run=True,
        report=False,
    )
    state = compile_model(options)
    assert state.selftest.passed and state.selftest.output.startswith("PASS")
    assert set(rules) <= {r.rule for r in state.rewrites}
    net = state.network
    out = net.outputs[0]
    kind = (net.host_reduce or ("",))[0]
    unit = output_unit_of(net, out, state.output_exponents.get(out, 0))
    got = host_reduce_float(kind, torch.from_numpy(state.answer[out] * unit)[None])[0]
    corr = np.corrcoef(got.numpy().ravel(), _eager(module, name, sample).numpy().ravel())[0, 1]
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
