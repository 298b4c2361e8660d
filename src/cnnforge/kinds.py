"""The kinds the IR and the integer semantics share (ops, activations, pooling, element-wise);
a leaf importing nothing, re-exported by ``cnnforge.ir``."""

from __future__ import annotations

from enum import StrEnum

#: Weight width code of MAX78002's binary (-1/+1) weights (docs/hardware/arithmetic.md R1.2).
BINARY_BITS = -1


class Op(StrEnum):
    """What a layer computes. The first five are hardware operations, the rest model-level."""

    CONV1D = "conv1d"
    CONV2D = "conv2d"
    CONVTRANSPOSE2D = "convtranspose2d"
    LINEAR = "linear"
    PASSTHROUGH = "passthrough"
    # Model-level only: fusion (passes/fuse.py) removes or absorbs these.
    BATCHNORM = "batchnorm"
    ACTIVATION = "activation"
    POOL = "pool"
    ELTWISE = "eltwise"
    CONCAT = "concat"
    FLATTEN = "flatten"
    UPSAMPLE = "upsample"
    PAD = "pad"  # F.pad: ``pad_amounts`` in F.pad order (last dim first), ``pad_value``
    SOFTMAX = "softmax"  # softmax / log_softmax / argmax over ``axis`` (``reduce_kind``)
    OPAQUE = "opaque"  # an op cnnforge cannot lower: kept for analysis, named by check


HARDWARE_OPS = frozenset({Op.CONV1D, Op.CONV2D, Op.CONVTRANSPOSE2D, Op.LINEAR, Op.PASSTHROUGH})
WEIGHT_OPS = frozenset({Op.CONV1D, Op.CONV2D, Op.CONVTRANSPOSE2D, Op.LINEAR})


class Activation(StrEnum):
    """Activation functions. Only NONE, RELU and ABS exist in hardware
    (docs/hardware/arithmetic.md R2.3)."""

    NONE = "none"
    RELU = "relu"
    ABS = "abs"
    RELU6 = "relu6"
    HARDTANH = "hardtanh"
    LEAKYRELU = "leakyrelu"
    SIGMOID = "sigmoid"
    TANH = "tanh"


HARDWARE_ACTIVATIONS = frozenset({Activation.NONE, Activation.RELU, Activation.ABS})


class PoolKind(StrEnum):
    MAX = "max"
    AVG = "avg"


class EltwiseOp(StrEnum):
    """Element-wise operators over 2..16 operands (docs/hardware/arithmetic.md §4); MUL is
    model-level only."""

    ADD = "add"
    SUB = "sub"
    OR = "or"
    XOR = "xor"
    MUL = "mul"


HARDWARE_ELTWISE = frozenset({EltwiseOp.ADD, EltwiseOp.SUB, EltwiseOp.OR, EltwiseOp.XOR})
