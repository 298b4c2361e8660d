"""cnnforge.nn: QAT modules that train in float and, after ``enable_qat`` and
``set_quantized_eval``, evaluate bit for bit as the accelerator computes (nn/layers.py)."""

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
