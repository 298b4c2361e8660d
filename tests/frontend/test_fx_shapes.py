"""Shape formulas of the fx shape propagation (frontend/fx_shapes.py) equal torch's own shapes;
where torch refuses the call, the formula gives None so that torch's error is the one shown."""

from __future__ import annotations

import operator
import subprocess
import sys

import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from cnnforge.frontend.fx_shapes import function_shape, module_shape


def _torch_shape(fn, *args, **kwargs) -> tuple[int, ...] | None:
    try:
        with torch.no_grad():
            return tuple(fn(*args, **kwargs).shape)
    except (RuntimeError, ValueError, IndexError, TypeError):
        return None


def _agrees(formula: tuple[int, ...] | None, real: tuple[int, ...] | None) -> None:
    assert formula is None or formula == real, (formula, real)


@settings(max_examples=60, deadline=None)
@given(
    dims=st.sampled_from([1, 2]),
    transposed=st.booleans(),
    c_in=st.integers(1, 4),
    x_channels=st.integers(1, 4),
    size=st.integers(1, 9),
    k=st.integers(1, 4),
    s=st.integers(1, 3),
    p=st.integers(0, 2),
    d=st.integers(1, 2),
    op=st.integers(0, 2),
)
def test_conv_shapes(dims, transposed, c_in, x_channels, size, k, s, p, d, op) -> None:
    kinds = {(1, False): nn.Conv1d, (2, False): nn.Conv2d}
    kinds |= {(1, True): nn.ConvTranspose1d, (2, True): nn.ConvTranspose2d}
    extra = {"output_padding": op} if transposed else {}
    try:
        module = kinds[dims, transposed](c_in, 3, k, s, p, dilation=d, **extra)
    except ValueError:
        return
    x = torch.zeros(1, x_channels, *(size,) * dims)
    _agrees(module_shape(module, (x,), {}), _torch_shape(module, x))


@settings(max_examples=80, deadline=None)
@given(
    kind=st.sampled_from([nn.MaxPool1d, nn.MaxPool2d, nn.AvgPool1d, nn.AvgPool2d]),
    size=st.integers(1, 12),
    k=st.integers(1, 4),
    s=st.one_of(st.none(), st.integers(1, 3)),
    p=st.integers(0, 2),
    d=st.integers(1, 2),
    ceil=st.booleans(),
)
def test_pool_shapes(kind, size, k, s, p, d, ceil) -> None:
    dims = 1 if kind in (nn.MaxPool1d, nn.AvgPool1d) else 2
    extra = {"dilation": d} if kind in (nn.MaxPool1d, nn.MaxPool2d) else {}
    module = kind(k, s, p, ceil_mode=ceil, **extra)
    x = torch.zeros(1, 2, *(size,) * dims)
    _agrees(module_shape(module, (x,), {}), _torch_shape(module, x))


@settings(max_examples=40, deadline=None)
@given(
    size=st.integers(1, 9),
    out=st.one_of(st.integers(1, 5), st.tuples(st.none() | st.integers(1, 5), st.integers(1, 5))),
    scale=st.one_of(st.none(), st.sampled_from([0.5, 1.5, 2, 3, (2, 1.5)])),
    target=st.one_of(st.none(), st.integers(1, 7)),
)
def test_adaptive_pool_and_interpolate_shapes(size, out, scale, target) -> None:
    x = torch.zeros(1, 2, size, size + 1)
    for module in (nn.AdaptiveAvgPool2d(out), nn.AdaptiveMaxPool2d(out)):
        _agrees(module_shape(module, (x,), {}), _torch_shape(module, x))
    up = nn.Upsample(size=target, scale_factor=scale)
    _agrees(module_shape(up, (x,), {}), _torch_shape(up, x))
    kwargs = {"size": target, "scale_factor": scale}
    _agrees(function_shape(F.interpolate, (x,), kwargs), _torch_shape(F.interpolate, x, **kwargs))


@settings(max_examples=40, deadline=None)
@given(
    a=st.lists(st.integers(1, 3), min_size=2, max_size=4),
    b=st.lists(st.integers(1, 3), min_size=2, max_size=4),
    dim=st.integers(-4, 3),
    fn=st.sampled_from([operator.add, operator.mul, torch.sub, torch.cat, F.relu, F.softmax]),
)
def test_elementwise_and_cat_shapes(a, b, dim, fn) -> None:
    x, y = torch.zeros(a), torch.zeros(b)
    if fn is torch.cat:
        args: tuple = ([x, y], dim)
    elif fn is F.softmax:
        args = (x, dim)
    elif fn is F.relu:
        args = (x,)
    else:
        args = (x, y)
    _agrees(function_shape(fn, args, {}), _torch_shape(fn, *args))
    _agrees(function_shape(operator.add, (x, 2.0), {}), tuple(a))


def test_linear_and_norm_shapes() -> None:
    x = torch.zeros(1, 4, 3, 3)
    assert module_shape(nn.Linear(3, 5), (x,), {}) == (1, 4, 3, 5)
    assert module_shape(nn.Linear(4, 5), (x,), {}) is None  # torch's error message instead
    assert module_shape(nn.GroupNorm(2, 4), (x,), {}) == (1, 4, 3, 3)
    assert module_shape(nn.GroupNorm(2, 6), (x,), {}) is None

    class SameConv(nn.Conv2d):  # a subclass may compute another shape in its forward
        pass

    assert module_shape(SameConv(4, 2, 3), (x,), {}) is None


def test_a_resnet_capture_imports_no_dynamo() -> None:
    """The formulas keep torch._dynamo (1-2 s to import) out of a plain CNN's capture."""
    code = (
        "import sys, torch\n"
        "from torch import nn\n"
        "from cnnforge.frontend.capture import capture\n"
        "class M(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.c, self.b = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)\n"
        "        self.p, self.a = nn.MaxPool2d(2), nn.AdaptiveAvgPool2d(1)\n"
        "        self.f = nn.Linear(16, 4)\n"
        "    def forward(self, x):\n"
        "        y = torch.relu(self.b(self.c(x)))\n"
        "        y = torch.cat([y, y + y], 1)\n"
        "        y = F.interpolate(self.p(y), scale_factor=2)\n"
        "        return self.f(torch.flatten(self.a(y), 1))\n"
        "import torch.nn.functional as F\n"
        "capture(M(), (3, 16, 16))\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
