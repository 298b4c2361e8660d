"""The firmware decoder: an accelerator state read back into the network (issue 26).

Random planned networks -> firmware writer -> state -> decode gives back every field the registers
hold; every stored vendor state image decodes to the network its vendor YAML describes.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, event, given, settings

from cnnforge.errors import PlanError
from cnnforge.quant.ptq import quantize_network
from cnnforge.targets.max7800x.ai8x import read_ai8x
from cnnforge.targets.max7800x.firmware.decode import DecodeError, decode_state
from cnnforge.targets.max7800x.firmware.facts import LayerFacts, network_facts
from cnnforge.targets.max7800x.firmware.firmware import build_firmware, expected_image
from cnnforge.targets.max7800x.firmware.regmap import MAPS
from cnnforge.targets.max7800x.planner import plan_network
from support.decode import differences
from support.firmware import FIFO_VARIANTS, GOLDEN, OPTION_CASES, STATES, demo_yaml, stored
from support.plan import networks, with_weights


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(networks())
def test_random_planned_networks_decode_to_every_field(network) -> None:
    q = quantize_network(with_weights(network), 8, device=None)
    decoded = 0
    for device in ("MAX78000", "MAX78002"):
        try:
            planned, plan = plan_network(q, device)
            x = np.zeros(network.input_shape, np.int64)
            answer = {n: np.zeros(planned.layer(n).out_shape, np.int64) for n in planned.outputs}
            fw = build_firmware(planned, plan, x, answer)
        except (PlanError, NotImplementedError, ValueError):
            continue
        event(f"element-wise layers: {any(f.operands > 1 for f in fw.facts)}")
        event(f"decoded on {device}")
        state, _ = expected_image(fw)
        records = [(a, w.tolist()) for a, w in fw.kernels]
        assert differences(decode_state(state, device, records), fw.facts, device) == []
        assert differences(decode_state(state, device), fw.facts, device, exact=False) == []
        decoded += 1
    assume(decoded)


def _vendor_facts(name: str) -> tuple[str, list[LayerFacts]]:
    # mnist-riscv, mnist-zero-sram: the mnist network with other options (OPTION_CASES);
    # fifo-*: a demo run with --fifo added, its first layers made to stream (FIFO_VARIANTS)
    demo, streamed = FIFO_VARIANTS.get(name.removeprefix("fifo-"), (name, 0))
    fifo = name.startswith("fifo-")
    golden = OPTION_CASES.get(demo, (demo,))[0]
    data = np.load(GOLDEN / "known" / f"{golden}.npz")
    meta = json.loads(str(data["meta"]))
    flags = meta["flags"]
    model = read_ai8x(
        demo_yaml(golden, streamed),
        GOLDEN / "trained" / meta["trimmed"],
        data["input"].shape, device=meta["device"],
        overlap_data="--overlap-data" in flags, fifo=fifo or "--fifo" in flags,
    )  # fmt: skip
    return meta["device"], network_facts(model.network, model.plan)


VENDOR = sorted(p.stem for p in STATES.glob("MAX*.npz")) + [f"fifo-{v}" for v in FIFO_VARIANTS]


@pytest.mark.parametrize("name", VENDOR)
def test_vendor_state_decodes_to_its_yaml(name: str) -> None:
    device, facts = _vendor_facts(name)
    image = stored(name)
    got = decode_state(dict(image.state.tolist()), image.device)
    assert differences(got, facts, device, exact=False) == []


def test_contradictions_name_the_register() -> None:
    image = stored("MAX78000-mnist")
    state = dict(image.state.tolist())
    rmap = MAPS["MAX78000"]
    bad = dict(state)
    for q in range(4):
        bad[rmap.ctl(q, 2)] = 40
    with pytest.raises(DecodeError, match="0x50100008: last layer 40 past"):
        decode_state(bad, "MAX78000")
    bad = dict(state)
    bad[rmap.layer(0, 1, "mcnt")] = 0x17F8 << 16 | 0x17F8 + 80  # 11 kernels from column 767
    with pytest.raises(DecodeError, match=r"register 0x[0-9a-f]{8}: layer 1 kernel columns"):
        decode_state(bad, "MAX78000")
