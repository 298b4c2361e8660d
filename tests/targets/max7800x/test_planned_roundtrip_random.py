"""Random networks through the whole vendor path: plan -> YAML + checkpoint -> re-import.

For >= 100 random small networks with skips, concatenations and adds (the planner's random
strategy), the emitted vendor pair re-imports into the same network, its plan validates, and
it simulates exactly like the IR it came from.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch
from hypothesis import assume, given, settings

from cnnforge.errors import CnnforgeError, PlanError
from cnnforge.quant.ptq import quantize_network
from cnnforge.sim import simulate
from cnnforge.targets.max7800x.ai8x import read_ai8x
from cnnforge.targets.max7800x.ai8x_checkpoint_writer import write_checkpoint
from cnnforge.targets.max7800x.ai8x_yaml_writer import write_yaml
from cnnforge.targets.max7800x.planner import plan_network
from cnnforge.targets.max7800x.validate import validate_plan
from support.ai8x import semantic_differences
from support.plan import networks, with_weights


def _vendor_writable(network) -> bool:
    """The vendor tool needs equal channel counts in a concatenation
    (docs/hardware/network-yaml.md §5)."""
    for layer in network.layers:
        if layer.is_concat:
            counts = {network.shape_of(n)[0] for n in layer.inputs}
            if len(counts) > 1:
                return False
    return True


@settings(max_examples=100)
@given(networks())
def test_random_planned_networks_round_trip_through_vendor_files(tmp_path_factory, network):
    assume(_vendor_writable(network))
    q = quantize_network(with_weights(network), 8, device=None)
    try:
        planned, plan = plan_network(q, "MAX78002")
    except PlanError:
        assume(False)
    assert validate_plan(planned, plan, "MAX78002") == ()
    tmp = tmp_path_factory.mktemp("rt")
    try:
        write_yaml(planned, plan, tmp / "n.yaml")
    except CnnforgeError as exc:  # a layout the vendor format cannot express: say which
        raise AssertionError(exc.one_line()) from None
    write_checkpoint(planned, tmp / "n.pth.tar")
    again = read_ai8x(tmp / "n.yaml", tmp / "n.pth.tar", network.input_shape, device="MAX78002")
    # The vendor YAML marks outputs per layer (`output: true`), so their order is layer order.
    assert set(again.network.outputs) == set(planned.outputs)
    in_layer_order = dataclasses.replace(planned, outputs=again.network.outputs)
    assert semantic_differences(in_layer_order, again.network) == []
    assert validate_plan(again.network, again.plan, "MAX78002") == ()
    x = torch.from_numpy(np.random.default_rng(0).integers(-128, 128, (2, *network.input_shape)))
    want = simulate(q, x, device=None).outputs
    got = simulate(again.network, x, device=None).outputs
    assert set(want) <= set(got)
    assert all(torch.equal(want[k], got[k]) for k in want)
