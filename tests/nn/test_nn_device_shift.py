"""The QAT forward's shift kept on the device (no read back per layer) is ``choose_shift``'s on
every float32 parameter range, and the integer weights and QAT weights made with it are the
host path's bit for bit (hypothesis)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cnnforge.arithmetic import power_of_two, quantize_weights
from cnnforge.nn.functional import choose_shift, device_shift, effective, int_params, qat_params

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
def test_device_shift_is_choose_shift(level: float, bits: int, seed: int, negative: bool) -> None:
    weight, bias = _params(level, seed)
    weight = -weight if negative else weight
    shift = device_shift(weight, bias, bits)
    assert shift.dtype == torch.int64 and shift.dim() == 0
    assert int(shift) == choose_shift(weight, bias, bits, 1.0)
    assert int(device_shift(weight, None, bits)) == choose_shift(weight, None, bits, 1.0)


@settings(max_examples=100, deadline=None)
@given(level=LEVELS, bits=BITS, seed=st.integers(0, 1 << 16))
def test_qat_params_and_weights_are_the_host_paths(level: float, bits: int, seed: int) -> None:
    weight, bias = _params(level, seed)
    host, device = int_params(weight, bias, bits), qat_params(weight, bias, bits)
    assert int(device.output_shift) == host.output_shift
    assert torch.equal(device.weight, host.weight) and torch.equal(device.bias, host.bias)
    for values, q in ((weight, host.weight), (bias, host.bias)):
        on_host = effective(values, q, bits, host.output_shift)
        on_device = effective(values, q, bits, device.output_shift)
        assert torch.equal(on_host.view(torch.int32), on_device.view(torch.int32))
    assert torch.equal(
        quantize_weights(weight, bits, device.output_shift),
        quantize_weights(weight, bits, host.output_shift),
    )


def test_power_of_two_is_exact() -> None:
    exponents = torch.arange(-1022, 1024)
    expected = torch.tensor([2.0**k for k in exponents.tolist()], dtype=torch.float64)
    assert torch.equal(power_of_two(exponents), expected)
    assert power_of_two(3) == 8.0


def test_a_lower_quantile_stays_on_the_host() -> None:
    weight, bias = _params(0.7, 0)
    assert isinstance(qat_params(weight, bias, 8, 0.99).output_shift, int)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_parameter_that_is_not_finite_is_the_same_error(bad: float) -> None:
    weight, bias = _params(0.5, 0)
    weight[0, 0, 0, 0] = bad
    with pytest.raises(ValueError, match=f"largest parameter is {bad}"):
        choose_shift(weight, bias, 8, 1.0)
    with pytest.raises(ValueError, match=f"largest parameter is {bad}"):
        device_shift(weight, bias, 8)
