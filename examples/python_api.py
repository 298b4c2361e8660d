"""The Python API walk-through (docs/python-api.md): a U-Net defined in this script, analyzed,
checked, compiled for the MAX78000 and simulated bit-exactly, then compared with the eager model.

    python examples/python_api.py [OUTPUT_DIR]
"""

import sys

import numpy as np
import torch
from torch import nn

import cnnforge


class TinyUNet(nn.Module):
    """Two levels, one skip connection: the shape of the flagship, small enough to run anywhere."""

    def __init__(self, classes: int = 3) -> None:
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.down = nn.MaxPool2d(2)
        self.mid = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.up = nn.ConvTranspose2d(16, 8, 3, stride=2, padding=1, output_padding=1)
        self.dec = nn.Sequential(nn.Conv2d(16, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.head = nn.Conv2d(8, classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skip = self.enc(x)
        y = self.up(self.mid(self.down(skip)))
        return self.head(self.dec(torch.cat([y, skip], dim=1)))


def main(output_dir: str) -> None:
    torch.manual_seed(0)
    model = TinyUNet().eval()
    shape = (3, 32, 32)

    analysis = cnnforge.analyze(model, shape)
    print(analysis)
    assert analysis.totals.params == sum(p.numel() for p in model.parameters())

    verdict = cnnforge.check(model, "MAX78000", shape)
    print(verdict)
    assert verdict.fits, verdict.violations

    rng = np.random.default_rng(0)
    images = rng.uniform(-1, 1, size=(8, *shape)).astype(np.float32)  # model units
    compiled = cnnforge.compile(
        model, device="MAX78000", input_shape=shape, ptq=True,
        sample=images[0], calibration=images, output_dir=output_dir, overwrite=True,
    )  # fmt: skip
    print(compiled)
    print("C self-test:", compiled.run())

    out = compiled.simulate(images[0])  # int64, the accelerator's output values
    same = cnnforge.simulate(compiled.output_dir / "network.pth", images[0])
    assert np.array_equal(out, same)

    with torch.no_grad():
        eager = model(torch.from_numpy(images[:1]))[0].numpy()
    corr = np.corrcoef(out.ravel(), eager.ravel())[0, 1]  # v means v * 2^e / 128: same shape
    print(f"bit-exact output vs eager: correlation {corr:.4f}")
    agree = (out.argmax(0) == eager.argmax(0)).mean()
    print(f"arg-max agrees on {100 * agree:.1f}% of pixels")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tinyunet-out")
