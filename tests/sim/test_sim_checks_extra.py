"""The simulator refuses a passthrough layer with an activation (the hardware has none)."""

import numpy as np
import pytest

from cnnforge.errors import SimulationError
from cnnforge.ir import Activation, Layer, Network, Op
from cnnforge.sim import simulate


def test_passthrough_with_activation_is_refused():
    layer = Layer("copy", Op.PASSTHROUGH, out_shape=(4, 2, 2), in_channels=4, out_channels=4,
                  activation=Activation.RELU)  # fmt: skip
    net = Network("n", (4, 2, 2), (layer,))
    with pytest.raises(SimulationError, match="passthrough layer cannot have an activation"):
        simulate(net, np.zeros((4, 2, 2), np.int64), device=None)
