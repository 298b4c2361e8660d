"""The planner streams through the FIFO when early tensors exceed one pass of data memory.

The network is the vendor's cats-vs-dogs classifier at 3x128x128 (its YAML's layer list as a
plain-torch model: cnnforge.models.cats_dogs; its trained weights through the importer). The
vendor tool accepted the YAML + checkpoint that ``cnnforge compile cats-dogs --ptq`` wrote
(with --fifo, named in the YAML header, and --overlap-data for the in-place layers the plan notes)
and its known answer equals cnnforge's; that pair and answer are goldens in
tests/golden/ai8x_demos/planned.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from cnnforge.devices import get_device
from cnnforge.errors import PlanError
from cnnforge.frontend.ai8x import read_ai8x
from cnnforge.plan.metrics import plan_metrics
from cnnforge.plan.planner import plan_network
from cnnforge.plan.streaming import rollover_words, streaming_layers
from cnnforge.plan.validate import validate_plan
from cnnforge.sim import simulate

GOLDEN = Path(__file__).parent / "golden" / "ai8x_demos"


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
    network = _vendor_cats_dogs()
    first = network.layers[0]
    weights = np.concatenate([first.quant.weights] * 6, axis=1)[:, :17]
    layer = replace(
        first,
        in_channels=17,
        quant=replace(first.quant, weights=weights),
        weight=np.zeros(weights.shape, np.float32),
    )
    wide = replace(network, input_shape=(17, 128, 128), layers=(layer, *network.layers[1:]))
    assert streaming_layers(wide, "MAX78000") == 0
    with pytest.raises(PlanError, match="data memory exhausted"):
        plan_network(wide, "MAX78000")


def test_compiled_pair_matches_the_vendor_answer() -> None:
    """The YAML + checkpoint cnnforge compiled, as the vendor tool read them."""
    folder = GOLDEN / "planned"
    data = np.load(folder / "cats-dogs-known.npz")
    assert json.loads(str(data["meta"]))["vendor_flags"] == ["--fifo", "--overlap-data"]
    text = (folder / "cats-dogs.yaml").read_text()
    assert "--fifo" in text.split("layers:")[0] and text.count("streaming: true") == 2
    model = read_ai8x(folder / "cats-dogs.yaml", folder / "cats-dogs-q.pth.tar", (3, 128, 128))
    assert model.plan.fifo
    assert validate_plan(model.network, model.plan, "MAX78000", allow_overlap=True) == ()
    y = simulate(model.network, data["input"].astype(np.int64)).outputs["fc"]
    expected = data["expected"]
    assert np.array_equal(y.numpy().reshape(expected.shape), expected)


def test_check_says_when_streaming_is_used(capsys) -> None:
    from cnnforge.cli import main

    with pytest.raises(SystemExit) as info:
        main(["check", "cats-dogs", "--json", "-"])
    report = json.loads(capsys.readouterr().out)
    assert info.value.code == 0 and report["fits"]
    assert report["streaming_layers"] == ["convs.0", "convs.1"]
