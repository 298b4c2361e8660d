"""The planner streams through the FIFO when early tensors exceed one pass of data memory.

The network is the vendor's cats-vs-dogs classifier at 3x128x128 (its YAML's layer list as a
plain-torch model: cnnforge.models.cats_dogs; its trained weights through the importer). The
vendor tool accepted the YAML + checkpoint that ``cnnforge compile cats-dogs --ptq`` wrote
(with --fifo, which the YAML header names, and no other flag) and its known answer equals
cnnforge's; that pair and answer are goldens in tests/golden/ai8x_demos/planned.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cnnforge.errors import PlanError
from cnnforge.ir import INPUT, Network
from cnnforge.sim import simulate
from cnnforge.targets.max7800x.ai8x import read_ai8x
from cnnforge.targets.max7800x.device import get_device
from cnnforge.targets.max7800x.metrics import plan_metrics
from cnnforge.targets.max7800x.planner import plan_network
from cnnforge.targets.max7800x.streaming import rollover_words, streaming_layers
from cnnforge.targets.max7800x.validate import validate_plan
from support.paths import TESTS

GOLDEN = TESTS / "golden" / "ai8x_demos"


def _vendor_cats_dogs(device: str = "MAX78000"):
    """The vendor's trained cats-dogs network (streaming YAML); the planner ignores its plan."""
    return read_ai8x(
        GOLDEN / "networks" / "cats-dogs-hwc.yaml",
        GOLDEN / "trained" / "ai85-catsdogs-qat8-q.int8.pth.tar",
        (3, 128, 128),
        device=device,
    ).network


def test_planner_streams_the_first_layers_on_max78000() -> None:
    network = _vendor_cats_dogs()
    assert streaming_layers(network, "MAX78000") == 2  # as the vendor's own YAML does
    out, plan = plan_network(network, "MAX78000")
    assert [p.streaming for p in plan.placements] == [True, True] + [False] * 5
    assert plan.fifo and plan.data_format == "HWC"
    assert validate_plan(out, plan, "MAX78000") == ()
    assert any("--fifo" in note for note in plan.notes)
    dev = get_device("MAX78000")
    assert [rollover_words(out, plan, i, dev) for i in (0, 1)] == [0x2, 0x20E]
    # The streamed tensors count as their buffers, not as 64 KiB that never exist whole.
    assert plan_metrics(out, plan, "MAX78000").high_water_bytes <= dev.instance_bytes


def test_no_streaming_where_everything_fits() -> None:
    network = _vendor_cats_dogs("MAX78002")  # 80 KiB instances hold 16x128x128
    assert streaming_layers(network, "MAX78002") == 0
    _, plan = plan_network(network, "MAX78002")
    assert not plan.fifo and not any(p.streaming for p in plan.placements)


def test_streaming_is_refused_beyond_the_fifo() -> None:
    """17 input channels do not pass the FIFO (16 HWC): no streaming, the memory error stays."""
    wide = _with_input_channels(_vendor_cats_dogs(), 17)
    assert streaming_layers(wide, "MAX78000") == 0
    with pytest.raises(PlanError, match="data memory exhausted"):
        plan_network(wide, "MAX78000")


def test_compiled_pair_matches_the_vendor_answer() -> None:
    """The YAML + checkpoint cnnforge compiled, as the vendor tool read them."""
    folder = GOLDEN / "planned"
    data = np.load(folder / "cats-dogs-known.npz")
    assert json.loads(str(data["meta"]))["vendor_flags"] == ["--fifo"]
    text = (folder / "cats-dogs.yaml").read_text()
    assert "--fifo" in text.split("layers:")[0] and text.count("streaming: true") == 2
    model = read_ai8x(
        folder / "cats-dogs.yaml", folder / "cats-dogs-q.pth.tar", (3, 128, 128), device="MAX78000"
    )
    assert model.plan.fifo
    assert validate_plan(model.network, model.plan, "MAX78000", in_place=False) == ()
    y = simulate(model.network, data["input"].astype(np.int64), device=None).outputs["fc"]
    expected = data["expected"]
    assert np.array_equal(y.numpy().reshape(expected.shape), expected)


def test_check_says_when_streaming_is_used(capsys) -> None:
    from cnnforge.cli import main

    with pytest.raises(SystemExit) as info:
        main(["check", "cats-dogs", "--json", "-"])
    report = json.loads(capsys.readouterr().out)
    assert info.value.code == 0 and report["fits"]
    assert report["streaming_layers"] == ["convs.0", "convs.1"]


def _with_input_channels(network, channels: int):
    first = network.layers[0]
    weights = np.concatenate([first.quant.weights] * 6, axis=1)[:, :channels]
    layer = replace(
        first,
        in_channels=channels,
        quant=replace(first.quant, weights=weights),
        weight=np.zeros(weights.shape, np.float32),
    )
    return replace(network, input_shape=(channels, 128, 128), layers=(layer, *network.layers[1:]))


def test_fifo_input_processors() -> None:
    """Eight input channels go to FIFO processors 0-3 and 16-19."""
    out, plan = plan_network(_with_input_channels(_vendor_cats_dogs(), 8), "MAX78000")
    assert plan.placements[0].in_processors == 0x000F000F
    assert validate_plan(out, plan, "MAX78000") == ()


@st.composite
def _large_input_chains(draw) -> Network:
    """Conv chains on 1..16 x 96..136 inputs (too large for one MAX78000 instance as HWC), with
    1x1 or 3x3 kernels and pooling 2/2 in between, as the planner must stream them."""
    from support.plan import POOL2, conv

    hw = draw(st.sampled_from((96, 104, 112, 128, 136)))
    c = draw(st.integers(1, 16))
    shape = (c, hw, hw)
    layers, src = [], INPUT
    for i in range(draw(st.integers(3, 7))):
        pool = POOL2 if hw >= 8 and draw(st.booleans()) else None
        hw = hw // 2 if pool else hw
        cout = draw(st.sampled_from((4, 8, 16, 24, 32)))
        k = draw(st.sampled_from((1, 3)))
        layers.append(conv(f"l{i}", src, c, cout, hw, k=k, pool=pool))
        src, c = f"l{i}", cout
    return Network("chain", shape, tuple(layers))


@settings(max_examples=int(os.environ.get("CNNFORGE_STREAM_EXAMPLES", "25")))
@given(_large_input_chains())
def test_streamed_plans_validate(network) -> None:
    """Whatever the planner streams passes the vendor's streaming rules and buffers."""
    try:
        out, plan = plan_network(network, "MAX78000")
    except PlanError as exc:
        assert "exhausted" in exc.what or "exceed" in exc.what, exc.one_line()
        return
    assert validate_plan(out, plan, "MAX78000") == ()
    streamed = sum(p.streaming for p in plan.placements)
    assert streamed == streaming_layers(out, "MAX78000")
    assert plan.fifo == (streamed > 0)
