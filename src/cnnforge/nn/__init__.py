"""cnnforge.nn: QAT modules that train in float and evaluate exactly as the accelerator computes.

Put them in a plain ``torch.nn.Module`` model (with ``torch.cat`` for concatenation); the
frontend traces each one as a single hardware layer through its ``cnnforge_layer`` method.
Stages: float -> ``enable_qat(model, policy)`` -> ``set_quantized_eval(model)``; in the last,
``module(x_int / 128) * 128 == sim(x_int)`` bit for bit (see nn/layers.py for the wide case).
"""

from cnnforge.nn.eltwise import Add, Or, Pool, Sub, Xor
from cnnforge.nn.layers import Conv1d, Conv2d, ConvTranspose2d, Linear, QATModule, Stage
from cnnforge.nn.policy import (
    QATPolicy,
    enable_qat,
    load_policy,
    policy_from_dict,
    qat_modules,
    set_float,
    set_quantized_eval,
)

__all__ = [
    "Add",
    "Conv1d",
    "Conv2d",
    "ConvTranspose2d",
    "Linear",
    "Or",
    "Pool",
    "QATModule",
    "QATPolicy",
    "Stage",
    "Sub",
    "Xor",
    "enable_qat",
    "load_policy",
    "policy_from_dict",
    "qat_modules",
    "set_float",
    "set_quantized_eval",
]
