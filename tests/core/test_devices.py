"""Devices as data: the numbers of docs/hardware/devices.md §1/§8 and the device questions."""

from __future__ import annotations

import dataclasses
import re

import pytest
import yaml

from cnnforge.errors import InputError
from cnnforge.ir import BINARY_BITS, EltwiseOp, Op
from cnnforge.targets.max7800x.device import DEVICES, MAX78000, MAX78002, Max7800xDevice, get_device
from support.paths import REPO

SPEC = REPO / "docs/hardware/devices.md"  # §8: the numbers as data


def _spec_yaml() -> dict:
    text = SPEC.read_text()
    block = re.search(r"## 8\..*?```yaml\n(.*?)```", text, re.S).group(1)
    return yaml.safe_load(block)["devices"]


@pytest.fixture(scope="module")
def spec() -> dict:
    return _spec_yaml()


# (Max7800xDevice attribute, path in the §8 YAML) pairs checked for both parts.
PAIRS = [
    ("die", "die"),
    ("processors", "processors"),
    ("quadrants", "quadrants"),
    ("processors_per_quadrant", "processors_per_quadrant"),
    ("processors_per_instance", "processors_per_data_instance"),
    ("data_instances", "data.instances"),
    ("instance_bytes", "data.instance_bytes"),
    ("data_base_addr", "data.base_addr"),
    ("data_quadrant_stride", "data.quadrant_stride"),
    ("data_instance_stride", "data.instance_stride"),
    ("kernel_word_bits", "kernels.word_bits"),
    ("kernel_words_large", "kernels.words_large"),
    ("kernel_words_small", "kernels.words_small"),
    ("kernel_large_processors", "kernels.large_processors"),
    ("kernel_banks_large", "kernels.banks_large"),
    ("kernel_banks_small", "kernels.banks_small"),
    ("kernel_start_align", "kernels.start_align"),
    ("kernel_base_addr", "kernels.base_addr"),
    ("kernel_quadrant_stride", "kernels.quadrant_stride"),
    ("kernel_processor_stride", "kernels.processor_stride"),
    ("bias_entries_per_quadrant", "bias.entries_per_quadrant"),
    ("bias_bits", "bias.bits"),
    ("bias_base_addr", "bias.base_addr"),
    ("bias_quadrant_stride", "bias.quadrant_stride"),
    ("bias_flatten_first", "bias.flatten_first"),
    ("max_layers", "layers.max"),
    ("max_streaming_layers", "layers.max_streaming"),
    ("max_channels", "channels.max"),
    ("pass_align", "channels.pass_align"),
    ("max_row_col", "dims.max_row_col"),
    ("count_bits", "dims.count_bits"),
    ("frame_limit", "dims.frame_limit"),
    ("conv2d_kernels", "conv2d.kernels"),
    ("conv_pads", "conv2d.pads"),
    ("conv2d_dilation_max", "conv2d.dilation_max"),
    ("conv1d_kernel_range", "conv1d.kernel_range"),
    ("conv_pads", "conv1d.pads"),
    ("conv1d_multipass_pad", "conv1d.multipass_pad_allowed"),
    ("conv1d_dilation_max", "conv1d.dilation_max"),
    ("convtranspose2d_kernel", "convtranspose2d.kernel"),
    ("convtranspose2d_stride", "convtranspose2d.stride"),
    ("convtranspose2d_output_padding", "convtranspose2d.output_padding"),
    ("convtranspose2d_pads", "convtranspose2d.hw_pads"),
    ("depthwise", "groups.depthwise"),
    ("pool_size_range", "pool.size_range"),
    ("pool_stride_range", "pool.stride_range"),
    ("pool_dilation_max", "pool.dilation_max"),
    ("passthrough_pool_max_passes", "pool.passthrough_max_passes"),
    ("eltwise_operands_range", "eltwise.operands_range"),
    ("pool_after_eltwise_operands", "eltwise.pool_after_max_operands"),
    ("eltwise_multipass_plain_only", "eltwise.multipass_needs_plain_layer"),
    ("eltwise_multipass_conv_bias", "eltwise.multipass_conv_bias"),
    ("shift_range", "output.shift_range"),
    ("write_ptr_inc_bits", "output.write_ptr_inc_bits"),
    ("flatten_max_chw", "flatten.max_chw"),
    ("flatten_max_hw", "flatten.max_hw"),
    ("linear_max_in", "linear.max_in"),
    ("linear_max_out", "linear.max_out"),
    ("binary_weights", "weights.binary_pm1"),
    ("fifo_max_hwc_channels", "fifo.max_hwc_channels"),
    ("fifo_max_chw_channels", "fifo.max_chw_channels"),
    ("fifo_hwc_mask", "fifo.hwc_mask"),
    ("fifo_chw_mask", "fifo.chw_mask"),
    ("streaming_final_layer_needs_pad", "streaming.final_layer_needs_pad"),
    ("streaming_passthrough_allowed", "streaming.passthrough_allowed"),
    ("streaming_one_by_one_as_3x3", "streaming.one_by_one_as_3x3"),
    ("cnn_clock_mhz", "clock.cnn_default_mhz"),
    ("pipeline", "clock.pipeline"),
]


def _lookup(doc: dict, path: str):
    for part in path.split("."):
        doc = doc[part]
    return doc


def _norm(value):
    if isinstance(value, (list, tuple)):
        return tuple(_norm(v) for v in value)
    return value


@pytest.mark.parametrize("device", DEVICES, ids=lambda d: d.name)
@pytest.mark.parametrize(("attr", "path"), PAIRS, ids=[a for a, _ in PAIRS])
def test_device_number_matches_spec_yaml(
    spec, device: Max7800xDevice, attr: str, path: str
) -> None:
    assert _norm(getattr(device, attr)) == _norm(_lookup(spec[device.name], path))


@pytest.mark.parametrize("device", DEVICES, ids=lambda d: d.name)
def test_weights_and_eltwise_match_spec(spec, device: Max7800xDevice) -> None:
    doc = spec[device.name]
    assert sorted(device.weight_bits) == sorted(doc["weights"]["bits"])
    assert {op.value for op in device.eltwise_ops} == set(doc["eltwise"]["ops"])
    assert doc["latency_model"] == ("izer-latency" if device.has_latency_model else None)


def test_devices_are_frozen_records_of_numbers() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        MAX78000.max_layers = 64  # type: ignore[misc]
    assert hash(MAX78000) != hash(MAX78002)
    assert DEVICES == (MAX78000, MAX78002)


def test_get_device_names() -> None:
    assert get_device("max78000") is MAX78000
    assert get_device(" MAX78002 ") is MAX78002
    assert get_device("ai87") is MAX78002
    assert get_device(MAX78002) is MAX78002
    with pytest.raises(InputError, match="unknown device 'MAX78001'") as info:
        get_device("MAX78001")
    assert "MAX78000, MAX78002" in info.value.one_line()


def test_kernel_words_per_processor() -> None:
    assert {MAX78000.kernel_words(p) for p in range(64)} == {768}
    assert [MAX78002.kernel_words(p) for p in (0, 1, 15, 16, 32, 48, 63)] == [
        5120,
        4096,
        4096,
        5120,
        5120,
        5120,
        4096,
    ]
    assert sum(MAX78002.kernel_banks(0)) == 5120 and sum(MAX78002.kernel_banks(5)) == 4096
    assert sum(MAX78002.kernel_words(p) for p in range(64)) == 266240
    with pytest.raises(InputError, match="processor 64"):
        MAX78000.kernel_words(64)


def test_weight_bits_and_ops() -> None:
    for bits in (8, 4, 2, 1):
        assert MAX78000.weight_bits_allowed(bits) and MAX78002.weight_bits_allowed(bits)
    assert not MAX78000.weight_bits_allowed(BINARY_BITS)
    assert MAX78002.weight_bits_allowed(BINARY_BITS)
    assert not MAX78002.weight_bits_allowed(3)
    assert MAX78002.allowed_weight_bits == (8, 4, 2, 1, BINARY_BITS)
    for op in (Op.CONV1D, Op.CONV2D, Op.CONVTRANSPOSE2D, Op.LINEAR, Op.PASSTHROUGH, "conv2d"):
        assert MAX78000.supports_op(op)
    for op in (Op.BATCHNORM, Op.UPSAMPLE, Op.CONCAT, "conv3d"):
        assert not MAX78000.supports_op(op)
    assert MAX78000.supports_eltwise(EltwiseOp.XOR) and not MAX78000.supports_eltwise("mul")
    assert not MAX78000.supports_groups(8, 8, 8) and MAX78002.supports_groups(8, 8, 8)
    assert not MAX78002.supports_groups(2, 8, 8) and MAX78000.supports_groups(1, 3, 5)


def test_derived_questions() -> None:
    assert MAX78000.shift_allowed(-15) and MAX78000.shift_allowed(15)
    assert not MAX78000.shift_allowed(16)
    assert MAX78000.write_gap_allowed(4, 3) and not MAX78000.write_gap_allowed(4, 4)
    assert MAX78002.write_gap_allowed(16, 15) and not MAX78002.write_gap_allowed(16, 16)
    assert [MAX78000.passes(c) for c in (1, 64, 65, 128, 1024)] == [1, 1, 2, 2, 16]
    assert MAX78000.quadrant_of(17) == 1 and MAX78000.instance_of(17) == 4
    assert MAX78000.clock_hz == 50e6 and MAX78002.clock_hz == 200e6
    assert MAX78002.passthrough_pool_max_passes == 65536
