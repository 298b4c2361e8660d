"""The QAT forward's shift kept on the device as 2^-shift (no read back per layer) is
``choose_shift``'s on every float32 parameter range, and the integer weights and QAT weights
made with it are the host path's bit for bit (hypothesis)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cnnforge.nn.functional import (
    choose_shift,
    device_unit,
    effective,
    int_params,
    qat_params,
    qat_weights,
)

BITS = st.sampled_from([8, 4, 2, 1, -1])
#: float32 magnitudes: around every power of two the shift can take, and anywhere at all
LEVELS = st.one_of(
    st.floats(0.0, 2.0**100, width=32),
    st.builds(lambda k, ulps: float(torch.tensor(2.0**k).float()) * (1 + ulps * 2.0**-23),
              st.integers(-40, 40), st.integers(-2, 2)),
)  # fmt: skip


def _params(level: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    weight = torch.rand(4, 3, 3, 3, generator=g) * 2 - 1
    bias = torch.rand(4, generator=g) * 2 - 1
    scale = max(float(weight.abs().max()), float(bias.abs().max()))
    weight, bias = weight * (level / scale), bias * (level / scale)
    return weight.float(), bias.float()


@settings(max_examples=300, deadline=None)
@given(level=LEVELS, bits=BITS, seed=st.integers(0, 1 << 16), negative=st.booleans())
def test_device_unit_is_choose_shifts(level: float, bits: int, seed: int, negative: bool) -> None:
    weight, bias = _params(level, seed)
    weight = -weight if negative else weight
    for b in (bias, None):
        unit = device_unit(weight, b, bits)
        assert unit.dtype == torch.float64 and unit.dim() == 0
        assert float(unit) == 2.0 ** -choose_shift(weight, b, bits, 1.0)


@settings(max_examples=100, deadline=None)
@given(level=LEVELS, bits=BITS, seed=st.integers(0, 1 << 16))
def test_qat_params_and_weights_are_the_host_paths(level: float, bits: int, seed: int) -> None:
    weight, bias = _params(level, seed)
    host, device = int_params(weight, bias, bits), qat_params(weight, bias, bits)
    assert float(device.unit) == 2.0**-host.output_shift
    assert torch.equal(device.weight, host.weight) and torch.equal(device.bias, host.bias)
    for values, q in ((weight, host.weight), (bias, host.bias)):
        on_host = effective(values, q, bits, 2.0**-host.output_shift)
        on_device = effective(values, q, bits, device.unit)
        assert on_device.dtype == torch.float32
        assert torch.equal(on_host.view(torch.int32), on_device.view(torch.int32))
    y = torch.randn(64) * 2.0**-20
    assert torch.equal(y / device.unit, y * 2.0**host.output_shift)


@settings(max_examples=100, deadline=None)
@given(level=LEVELS, bits=BITS, seed=st.integers(0, 1 << 16))
def test_weight_and_bias_quantized_together_are_each_alone(
    level: float, bits: int, seed: int
) -> None:
    """qat_weights puts weight and bias through the rule as one tensor on a GPU (fewer
    launches): the same values and the same gradients, bit for bit, as each on its own."""
    weight, bias = _params(level, seed)
    grads = torch.randn(
        weight.numel() + bias.numel(), generator=torch.Generator().manual_seed(seed)
    )
    results = []
    for together in (True, False):
        w, b = weight.clone().requires_grad_(), bias.clone().requires_grad_()
        if together:
            ew, eb, unit = qat_weights(w, b, bits, together=True)  # a GPU's way
        else:
            q = qat_params(w, b, bits)
            ew, eb, unit = (
                effective(w, q.weight, bits, q.unit),
                effective(b, q.bias, bits, q.unit),
                q.unit,
            )
        torch.cat([ew.flatten(), eb]).backward(grads)
        results.append((ew.detach(), eb.detach(), float(unit), w.grad, b.grad))
    for mine, theirs in zip(*results, strict=True):
        assert (
            mine == theirs
            if isinstance(mine, float)
            else torch.equal(mine.view(torch.int32), theirs.view(torch.int32))
        )
    assert results[0][0].shape == weight.shape and results[0][1].shape == bias.shape


def test_a_lower_quantile_stays_on_the_host() -> None:
    weight, bias = _params(0.7, 0)
    assert isinstance(qat_params(weight, bias, 8, 0.99).unit, float)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_parameter_that_is_not_finite_is_the_same_error(bad: float) -> None:
    weight, bias = _params(0.5, 0)
    weight[0, 0, 0, 0] = bad
    with pytest.raises(ValueError, match=f"largest parameter is {bad}"):
        choose_shift(weight, bias, 8, 1.0)
    with pytest.raises(ValueError, match=f"largest parameter is {bad}"):
        device_unit(weight, bias, 8)
