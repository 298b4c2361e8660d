"""The shipped plain-torch models: sizes, shapes and agreement with the vendor's U-Net."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from cnnforge.errors import InputError
from cnnforge.models import build_model, default_input_shape, model_names
from cnnforge.models.unet import UNetLarge, UNetVOC


def n_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def test_unet_voc_is_the_seed_model() -> None:
    model = UNetVOC().eval()
    assert n_params(model) == 486_613
    with torch.no_grad():
        assert model(torch.zeros(2, 3, 64, 64)).shape == (2, 21, 64, 64)


def test_unet_large_output_and_size() -> None:
    model = UNetLarge().eval()
    with torch.no_grad():
        assert model(torch.zeros(1, 48, 88, 88)).shape == (1, 64, 88, 88)
    # The vendor's fakept checkpoint: 282,220 parameters = ours + the 56x56 passthrough copy
    # (docs/hardware/checkpoint-format.md §6.2); BatchNorm has no affine parameters (NoAffine).
    assert n_params(model) + 56 * 56 == 282_220


def test_unet_large_weight_shapes_match_the_vendor_checkpoint(ai8x_data: Path) -> None:
    """Every vendor weight/bias has the shape of our layer of the same name."""
    path = ai8x_data / "trained" / "ai85-camvid-unet-large-q.pth.tar"
    with torch.serialization.safe_globals([torch.optim.Adam]):
        ckpt = torch.load(path, map_location="cpu", weights_only=True)["state_dict"]
    ours = UNetLarge().state_dict()
    vendor = {k: v for k, v in ckpt.items() if k.endswith((".op.weight", ".op.bias"))}
    assert len(vendor) == 36
    for key, value in vendor.items():
        layer, kind = key.split(".")[0], key.rsplit(".", 1)[1]
        index = "0" if layer.startswith(("conv", "prep", "enc1", "dec")) else "1"
        name = f"{layer}.{kind}" if layer.startswith("upconv") else f"{layer}.{index}.{kind}"
        assert ours[name].shape == value.shape, key


def test_registry() -> None:
    assert set(model_names()) >= {"unet-voc", "unet-large"}
    assert default_input_shape("unet-large") == (48, 88, 88)
    assert isinstance(build_model("unet-voc", out_channels=5), UNetVOC)
    with pytest.raises(InputError, match="unknown model name"):
        build_model("resnet-9000")
