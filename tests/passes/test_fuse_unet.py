"""lower_to_hardware on the flagship U-Nets: the expected hardware layers, the reported rewrites,
and float outputs equal to the PyTorch model's (docs/hardware/unet.md §1.1, issue #4)."""

from __future__ import annotations

import pytest
import torch

from cnnforge.frontend.torch_fx import trace
from cnnforge.ir import Op
from cnnforge.models.unet import UNetLarge, UNetVOC
from cnnforge.passes.lower import LOWERING_STEPS, lower_to_hardware
from cnnforge.passes.verify import verify
from cnnforge.sim.float_eval import run_float
from support.fuse_reference import run


def _randomize_bn(model: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    gen = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=gen) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
            if m.affine:
                m.weight.data.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
                m.bias.data.copy_(torch.randn(m.num_features, generator=gen) * 0.1)
    return model.eval()


@pytest.fixture(scope="module")
def unet_voc():
    torch.manual_seed(0)
    model = _randomize_bn(UNetVOC())
    return model, trace(model, (3, 64, 64))


def test_unet_voc_lowers_to_23_layers_with_the_reported_rewrites(unet_voc) -> None:
    _, net = unet_voc
    lowered = lower_to_hardware(net, verify_steps=True, device=None)
    hw = lowered.network
    verify(hw)
    assert hw.is_hardware and len(hw) == 23  # docs/hardware/unet.md §1 "hardware layers"
    rules = [r.rule for r in lowered.rewrites]
    assert rules.count("fold-batchnorm") == 18
    assert rules.count("fuse-pool") == 4
    assert rules.count("convtranspose-k2") == 4
    assert rules.count("fuse-concat") == 4
    ups = [x for x in hw if x.op is Op.CONVTRANSPOSE2D]
    assert [x.module_path for x in ups] == ["upconv4", "upconv3", "upconv2", "upconv1"]
    assert all(x.kernel_size == (3, 3) and x.padding == (1, 1) for x in ups)
    assert hw.layer("dec4.0").inputs == ("upconv4", "enc4.3")
    assert hw.layer("enc2.0").pool is not None
    assert [name for name, _ in LOWERING_STEPS] == ["fold batchnorm", "fuse", "legalize"]


def test_unet_voc_lowered_float_equals_the_model(unet_voc) -> None:
    model, net = unet_voc
    hw = lower_to_hardware(net, device=None).network
    x = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        expected = model.double()(x.double())
    model.float()
    (got,) = run(hw, x).values()
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    (sim_float,) = run_float(hw, x.double()).values()  # the simulator's float semantics agree
    torch.testing.assert_close(sim_float, expected, rtol=1e-5, atol=1e-6)


def test_unet_large_lowers_and_matches() -> None:
    torch.manual_seed(1)
    model = _randomize_bn(UNetLarge())
    net = trace(model, (48, 24, 24))  # same layers as 88x88, smaller for speed
    lowered = lower_to_hardware(net, device=None)
    hw = lowered.network
    verify(hw)
    assert hw.is_hardware
    x = torch.randn(1, 48, 24, 24, generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        expected = model.double()(x.double())
    (got,) = run(hw, x).values()
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
