"""report.html: self-contained, every section present, deterministic, for both model sources."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from cnnforge.api.targets import compile_model
from cnnforge.pipeline import CompileOptions, summary
from cnnforge.targets.max7800x.compile_report import write_report

SEG = """
import torch
from torch import nn


class Seg(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1)
        self.head = nn.Conv2d(16, 5, 1)

    def forward(self, x):
        a = torch.relu(self.c1(x))
        b = torch.relu(self.c2(nn.functional.max_pool2d(a, 2)))
        b = nn.functional.interpolate(b, scale_factor=2)
        return self.head(torch.cat([a, b], 1))
"""

SECTIONS = (
    "Summary",
    "Analysis",
    "Device check",
    "Rewrites",
    "Plan",
    "Data memory map",
    "Kernel map",
    "Processor utilization",
    "Cycle estimate per layer",
    "Float vs quantized on the sample",
)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    (root / "seg.py").write_text(SEG)
    x = np.random.default_rng(3).integers(-128, 128, (3, 16, 16))
    options = CompileOptions(
        output=root / "out", model=f"{root / 'seg.py'}:Seg", ptq=True, sample=x, device="MAX78000"
    )
    return compile_model(options), root / "out"


def test_report_is_self_contained_with_every_section(compiled) -> None:
    _, out = compiled
    html = (out / "report.html").read_text()
    for title in SECTIONS:
        assert f">{title}<" in html, title
    assert not re.search(r"""(src|href)=["']?(https?:|//|file:)""", html)
    assert "<script" not in html
    images = re.findall(r'src="data:image/svg\+xml;base64,[A-Za-z0-9+/=]+"', html)
    assert len(images) >= 5  # memory map, kernel map, utilization, cycles, masks
    assert "argmax agreement" in html and "c1" in html
    assert "rewrite" in html.lower()


def test_report_is_deterministic(compiled, tmp_path: Path) -> None:
    state, out = compiled
    write_report(state, tmp_path / "again.html", summary(state))
    assert (tmp_path / "again.html").read_bytes() == (out / "report.html").read_bytes()


def test_vendor_report_without_float_model(ai8x_data: Path, tmp_path: Path) -> None:
    options = CompileOptions(
        output=tmp_path / "mnist",
        ai8x_yaml=ai8x_data / "networks" / "mnist-chw-ai85.yaml",
        ai8x_checkpoint=ai8x_data / "trained" / "ai85-mnist-qat8-q.pth.tar", device="MAX78000"
    )
    compile_model(options)
    html = (tmp_path / "mnist" / "report.html").read_text()
    assert "No float model to compare with" in html
    assert ">Data memory map<" in html and "ai85net5" in html
