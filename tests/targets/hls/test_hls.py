"""The HLS target: target record, buffer planning, golden emitted project, and C-simulation
equal to the simulator bit for bit (50 random networks, the U-Net through the CLI).

Golden files: tests/golden_hls/<case>/ holds the emitted project of a small network; regenerate
with ``CNNFORGE_REGEN_GOLDEN=1 python -m pytest -q tests/targets/hls/test_hls.py -k golden``.
Builds need g++ and the ap_types headers (the ``hls4ml`` package of the test extra); without
them those tests skip with the reason.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cnnforge.api.targets import get_target
from cnnforge.arithmetic import accumulator_bits
from cnnforge.devices import Capabilities
from cnnforge.errors import DeviceLimitError
from cnnforge.geometry import live_intervals
from cnnforge.ir import Op
from cnnforge.sim import simulate
from cnnforge.targets.hls.buffer_plan import PINGPONG, plan_hls
from cnnforge.targets.hls.build import find_ap_types
from cnnforge.targets.hls.device import HLS
from cnnforge.targets.hls.emitter import emit_hls
from cnnforge.targets.max7800x.device import MAX78000, Max7800xDevice
from support.emit_c import random_network
from support.golden import check_files, folder_files
from support.hls import csim_batch, random_hls_network, random_sample
from support.paths import TESTS

GOLDEN = TESTS / "golden_hls"
N_RANDOM = 50
NEEDS_BUILD = pytest.mark.skipif(
    find_ap_types() is None or shutil.which("g++") is None,
    reason="needs g++ and the ap_types headers (pip install hls4ml, or set CNNFORGE_AP_TYPES)",
)


def _answer(net, x) -> dict[str, np.ndarray]:
    return {k: v.numpy()[0] for k, v in simulate(net, x[None], device=None).outputs.items()}


def test_the_target_is_data() -> None:
    hls = get_target("hls").device
    assert hls is HLS and isinstance(hls, Capabilities)
    assert not isinstance(hls, Max7800xDevice)  # no MAX7800x memories pretended
    assert (hls.default_weight_bits, hls.activation_bits) == (5, 8)
    assert hls.weight_bits_allowed(5) and not MAX78000.weight_bits_allowed(5)
    assert hls.supports_op(Op.CONVTRANSPOSE2D) and not hls.supports_op(Op.LINEAR)
    assert (hls.reg_control, hls.reg_height_width, hls.reg_kernel_padding, hls.reg_channels) == (
        0x000, 0x010, 0x020, 0x030,
    )  # fmt: skip
    with pytest.raises(dataclasses.FrozenInstanceError):
        hls.macs_per_cycle = 1  # type: ignore[misc]


def test_accumulator_bits_is_the_worst_case() -> None:
    w = np.array([[[[15, -16]]], [[[1, 0]]]])
    # channel 0: (15 + 16) * 128 + 127 * 128 = 20224 -> 15 magnitude bits + sign
    assert accumulator_bits(w, np.array([127, 0])) == 16
    assert accumulator_bits(w) == 13  # 31 * 128 = 3968


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000))
def test_buffers_never_hold_two_live_tensors(seed: int) -> None:
    """Tensors sharing a buffer have disjoint live intervals; ping-pong tensors live one step."""
    net = random_hls_network(seed)
    plan = plan_hls(net, HLS)
    live = live_intervals(net)
    by_buffer: dict[str, list[tuple[int, int]]] = {}
    for tensor, buf in plan.tensor_buffer.items():
        by_buffer.setdefault(buf, []).append(live[tensor])
        size = int(np.prod(net.shape_of(tensor)))
        assert plan.buffers[buf] >= size
        if buf in PINGPONG:
            first, last = live[tensor]
            assert last <= first + 1 or (last == len(net.layers) and first == last - 1)
            assert PINGPONG[first % 2] == buf
    for spans in by_buffer.values():
        spans.sort()
        for (_, a_last), (b_first, _) in itertools.pairwise(spans):
            assert a_last < b_first


def test_transposed_conv_macs_count_the_taps_that_read_input() -> None:
    """The plan's MACs equal a brute-force count: ConvTranspose2d of all-ones tensors."""
    import torch

    for seed in range(60):
        net = random_hls_network(seed)
        for lp in plan_hls(net, HLS).layers:
            x = lp.layer
            if x.op is not Op.CONVTRANSPOSE2D or x.pool is not None or x.eltwise is not None:
                continue
            c_in = sum(net.shape_of(n)[0] for n in x.inputs)
            ones = torch.ones((1, c_in, *net.shape_of(x.inputs[0])[1:]), dtype=torch.float64)
            w = torch.ones((c_in, x.out_shape[0], *x.kernel_size), dtype=torch.float64)
            y = torch.nn.functional.conv_transpose2d(
                ones, w, stride=x.stride, padding=x.padding, output_padding=x.output_padding
            )
            assert lp.macs == int(y.sum())


def test_unsupported_layers_are_refused() -> None:
    net = next(n for n in map(random_network, range(200)) if n.layers[0].op is Op.LINEAR)
    with pytest.raises(DeviceLimitError, match="not implemented by the HLS engines"):
        plan_hls(net, HLS)


def _golden_network():
    """A small network with a pool, a concatenation or skip, and a transposed conv."""
    for seed in range(500):
        net = random_hls_network(seed)
        ops = {x.op for x in net.layers}
        if (
            Op.CONVTRANSPOSE2D in ops
            and any(x.pool for x in net.layers)
            and any(len(x.inputs) > 1 for x in net.layers)
        ):
            return net, random_sample(net, seed)
    raise AssertionError("no golden candidate")


def test_golden_hls(tmp_path: Path) -> None:
    """The emitted project of a small network, byte for byte (see the module docstring)."""
    net, x = _golden_network()
    emit_hls(net, x, _answer(net, x), tmp_path)
    got = folder_files(tmp_path)
    check_files(GOLDEN / "small", got)
    text = got["cnnforge_top.cpp"].decode()
    for pragma in ("INTERFACE axis", "INTERFACE s_axilite", "PIPELINE II=1"):
        assert f"#pragma HLS {pragma}" in text
    assert "ARRAY_PARTITION" in got["cnnforge_hls.h"].decode()


@NEEDS_BUILD
def test_random_networks_csim_equals_simulator(tmp_path: Path) -> None:
    """50 random networks, one g++ -std=c++17 -Wall -Wextra -Werror build, every output."""
    projects = []
    for seed in range(N_RANDOM):
        net = random_hls_network(seed)
        x = random_sample(net, seed)
        out = tmp_path / f"n{seed}"
        out.mkdir()
        emit_hls(net, x, _answer(net, x), out, ns=f"n{seed}")
        projects.append((f"n{seed}", out))
    lines = csim_batch(tmp_path, projects)
    assert len(lines) == N_RANDOM
    assert [x for x in lines if not x.startswith("PASS")] == []


@NEEDS_BUILD
def test_compile_unet_for_hls_runs_csim(tmp_path: Path) -> None:
    """``cnnforge compile unet-voc --device hls --ptq --run``: W5A8, C-simulation passes."""
    from typer.testing import CliRunner

    from cnnforge.cli import app
    from cnnforge.cli.commands import register

    register(["compile"])  # the program imports its command's module itself (cli/commands.py)

    sample = tmp_path / "x.npy"
    np.save(sample, np.random.default_rng(0).integers(-128, 128, (3, 16, 16)).astype(np.int8))
    out = tmp_path / "out"
    args = ["compile", "unet-voc", "-i", "3,16,16", "--device", "hls", "--ptq", "--sample",
            str(sample), "-o", str(out), "--run"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["device"] == "HLS"
    assert summary["selftest"]["passed"], summary["selftest"]
    assert summary["selftest"]["output"].startswith("PASS unet-voc")
    network = json.loads((out / "network.json").read_text())
    bits = {x["quant"]["weight_bits"] for x in network["layers"] if x.get("quant")}
    assert bits == {5}
    report = (out / "report.md").read_text()
    assert "| 0x010 | HEIGHT_WIDTH |" in report and "reference design" in report
    assert (out / "hls" / "regmap.h").is_file() and not (out / "c").exists()
