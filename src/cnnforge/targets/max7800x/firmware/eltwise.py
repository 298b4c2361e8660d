"""The element-wise fields of a layer's registers (``eltwise: add|sub|xor|or`` over
``operands`` inputs, alone or before a convolution).

The operands lie interleaved in data memory at the layer's read pointer (the plan's write gaps); the
row and stride counters step over all of them (registers.py multiplies by ``operands``). What this
module adds is the 1D / element-wise control word's operation, operand count, "pool first" and
"convolution follows" bits, and for operands of several passes (more than 64 channels) the write
pointer's time-slot step and, on the MAX78000, the one-long-pass form. On the MAX78002 a layer that
average-pools right after an element-wise layer needs a small layer before it that resets the
pooling logic. Learned from the vendor tool's backend (the 1D, rows, layer control 2, kernel memory
and time-slot offset registers; the reset layer), the vendor tool's main program and its operation
encoding, checked word for word on the host against the vendor's firmware for the same YAML +
checkpoint (tests/data/firmware_state/eltwise-*.npz).
"""

from __future__ import annotations

from cnnforge.ir import Op
from cnnforge.targets.max7800x.device import get_device
from cnnforge.targets.max7800x.firmware.facts import LayerFacts
from cnnforge.targets.max7800x.firmware.regmap import RegisterMap, put

# The operation field's encoding (the vendor tool's operation encoding).
ELTWISE_FN = {"sub": 0, "add": 1, "or": 2, "xor": 3}


def eltwise_refusal(f: LayerFacts, device: str = "") -> str:
    """Why the writer cannot write this element-wise layer on ``device`` yet ('' when it can,
    or when the layer has a single operand)."""
    if f.operands <= 1:
        return ""
    if f.eltwise not in ELTWISE_FN:
        return f"element-wise '{f.eltwise}'"
    if f.streaming:  # cnnforge plans none, and reads none (a streaming layer reads one input)
        return "a streaming element-wise layer"
    if f.op is Op.CONV1D:  # the vendor tool refuses it
        return "an element-wise operation in a conv1d layer"
    if f.flatten:  # the vendor tool takes the operands' channels for the flattened input's
        return "an element-wise operation in a flattening layer"
    pools = f.pool != (1, 1) or f.pool_stride != (1, 1)
    if device and emulated(f, device) and (f.op is not Op.PASSTHROUGH or pools):
        return f"{f.operands} operands of {f.in_expand} passes with pooling or a convolution"
    bias = f.has_weights and f.bias is not None
    if device and bias and not get_device(device).eltwise_multipass_conv_bias:  # vendor refuses
        return f"an element-wise operation before a convolution with bias on the {device}"
    return ""


def eltwise_oned(f: LayerFacts) -> int:
    """The element-wise bits of the 1D register (0 for a single operand)."""
    if f.operands <= 1:
        return 0
    val = put("eltwise_ena", 1) | put("eltwise_fn", ELTWISE_FN[f.eltwise])
    val |= put("eltwise_operands", f.operands - 1)
    if (f.pool[0] > 1 or f.pool[1] > 1) and f.pool_first:
        val |= put("eltwise_pool_first", 1)
    if f.op is not Op.PASSTHROUGH:
        val |= put("eltwise_conv", 1)
    return val


def eltwise_meaning(f: LayerFacts) -> str:
    """The 1D register's comment for the element-wise part ('' for a single operand)."""
    if f.operands <= 1:
        return ""
    pooled = f.pool[0] > 1 or f.pool[1] > 1
    order = (" (pool first)" if f.pool_first else " (pool last)") if pooled else ""
    then = f", then the {f.op.value}" if f.op is not Op.PASSTHROUGH else ""
    return f", element-wise {f.eltwise} of {f.operands} operands{order}{then}"


def emulated(f: LayerFacts, device: str) -> bool:
    """The MAX78000 runs an element-wise layer over several passes other than 2 operands x 2
    passes as one long pass (the passes as extra rows)."""
    n, k = f.in_expand, f.operands
    return k > 1 and n > 1 and n * k != n + k and get_device(device).eltwise_multipass_plain_only


def multipass_values(
    f: LayerFacts, values: list[tuple[str, int, str]], instance_words: int, device: str
) -> list[tuple[str, int, str]]:
    """An element-wise layer over several passes: the write pointer steps a time slot per 4
    instances; emulated (``emulated``): rows x passes, one pass, no kernel-memory pass count."""
    if f.operands <= 1 or f.in_expand <= 1:
        return values
    out = []
    for name, value, meaning in values:
        if name == "wptr_toffs" and f.op is Op.PASSTHROUGH:
            value = instance_words * 4
        elif emulated(f, device) and name == "rows":
            value = f.in_dims[0] * f.in_expand - 1
            meaning = f"rows: {f.in_dims[0]} x {f.in_expand} passes (one long pass)"
        elif emulated(f, device) and name == "lctl2":
            value &= ~put("in_expand", 0xF)
        elif emulated(f, device) and name == "mcnt":
            value = 0
        out.append((name, value, meaning))
    return out


def avgpool_reset(facts: list[LayerFacts], f: LayerFacts, rmap: RegisterMap) -> bool:
    """MAX78002: a layer that average-pools right after an element-wise layer runs after a
    small layer of its own that resets the pooling logic (registers.py numbers it in)."""
    after = f.index > 0 and facts[f.index - 1].operands > 1
    return rmap.avgpool_reset_after_eltwise and after and f.pool_avg


def reset_values(values: list[tuple[str, int, str]]) -> list[tuple[str, int, str]]:
    """The reset layer's registers (quadrant of the first used only): one pixel of one
    processor, max-pooled through, read at the layer's read pointer and written where the
    layer's output starts (the layer then overwrites it); ``values``: the layer's own."""
    own = {name: value for name, value, _ in values}
    one = put("one_by_one", 1)
    return [
        ("rows", 1 << 16, "average-pool reset: rows: 1"),
        ("cols", 1 << 16, "average-pool reset: columns: 1"),
        ("stride", 1 << 4, "average-pool reset: stride"),
        ("wptr_base", own["wptr_base"], "average-pool reset: the layer's write pointer"),
        ("wptr_toffs", own["wptr_toffs"], "average-pool reset: write pointer time-slot offset"),
        ("rptr_base", own["rptr_base"], "average-pool reset: the layer's read pointer"),
        ("lctl", 0x20 | put("max_pool", 1) | put("master_slave", 1), "average-pool reset"),
        ("oned", one, "average-pool reset: 1x1"),
        ("post", put("passthrough", 3), "average-pool reset: passthrough"),
        ("ena", 1, "average-pool reset: processor 0"),
    ]
