"""Model references as users have them: files inside packages, packages in the current folder."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cnnforge.frontend.loading import load_model

PARTS = """
from torch import nn


class DoubleConv(nn.Sequential):
    def __init__(self, c_in, c_out):
        super().__init__(nn.Conv2d(c_in, c_out, 3, padding=1), nn.ReLU())
"""

MODEL = """
from torch import nn

from .parts import *  # the common package layout


class UNetish(nn.Module):
    def __init__(self, width=4):
        super().__init__()
        self.a = DoubleConv(3, width)
        self.b = DoubleConv(width, 2)

    def forward(self, x):
        return self.b(self.a(x))
"""


def _package(root: Path, name: str) -> Path:
    """``root/name/{__init__,parts,model}.py`` with a nested ``sub`` package importing ``..``."""
    pkg = root / name
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "parts.py").write_text(PARTS)
    (pkg / "model.py").write_text(MODEL)
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "deep.py").write_text("from ..model import UNetish as Deep\n")
    return pkg


def test_a_file_inside_a_package_imports_as_part_of_it(tmp_path: Path) -> None:
    pkg = _package(tmp_path, "refpkg_a")
    model = load_model(f"{pkg / 'model.py'}:UNetish", {"width": 5})
    assert model.a[0].out_channels == 5
    deep = load_model(f"{pkg / 'sub' / 'deep.py'}:Deep")
    assert type(deep).__name__ == "UNetish"


def test_a_same_named_package_elsewhere_does_not_shadow_the_users(tmp_path: Path) -> None:
    first = _package(tmp_path / "one", "refpkg_b")
    second = _package(tmp_path / "two", "refpkg_b")
    (second / "parts.py").write_text(PARTS.replace("c_out, 3, padding=1", "c_out, 1"))
    assert load_model(f"{first / 'model.py'}:UNetish").a[0].kernel_size == (3, 3)
    assert load_model(f"{second / 'model.py'}:UNetish").a[0].kernel_size == (1, 1)


def test_a_package_in_the_current_folder_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _package(tmp_path, "refpkg_c")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    assert type(load_model("refpkg_c.model:UNetish")).__name__ == "UNetish"
    assert str(tmp_path) not in sys.path  # the current folder is searched, not left behind
