"""The one table of replacements ``cnnforge adapt`` makes (docs/adapt.md is tested against it).

Each row: the PyTorch modules it matches (class names), the replacement, why, and whether the
replacement computes the same function (``exact``) or needs the recovery (statistics measured on
the data, distillation). ``REFUSALS`` are ops with no replacement: adapt names them all at once.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Row:
    """One replacement: ``what`` (class names matched), ``replacement``, ``why``, ``exact``."""

    key: str
    what: tuple[str, ...]
    replacement: str
    why: str
    exact: str  # "yes", "no" or a condition


NORMS = ("InstanceNorm2d", "InstanceNorm1d", "GroupNorm")
SMOOTH = ("PReLU", "LeakyReLU", "ELU", "CELU", "SELU", "SiLU", "GELU", "Mish", "Hardswish")
CLAMPED = ("ReLU6", "Hardtanh")

ROWS: tuple[Row, ...] = (
    Row(
        "norm",
        NORMS,
        "BatchNorm2d (statistics measured on the data, then folded into the conv)",
        "per-sample statistics do not exist on the device; a BatchNorm folds into the conv "
        "before it (GroupNorm(1, C) is the LayerNorm over channels)",
        "no",
    ),
    Row(
        "activation",
        SMOOTH,
        "ReLU",
        "the device has ReLU and Abs only",
        "yes for LeakyReLU/PReLU/ELU/CELU with slope or alpha 0; else no",
    ),
    Row(
        "clamp",
        CLAMPED,
        "ReLU (the clamp is the output saturation at 127/128)",
        "every layer output saturates to [-1, 127/128]; the upper clamp becomes that saturation",
        "yes where the clamp is [0, x] with x >= 1 and the values stay below 1; else no",
    ),
    Row(
        "upsample",
        ("Upsample(bilinear)", "Upsample(bicubic)", "UpsamplingBilinear2d"),
        "Upsample(mode='nearest') at the same integer factor",
        "the device upsamples by repeating pixels (a nearest upsample is identity kernels)",
        "no",
    ),
    Row(
        "kernel",
        ("Conv2d(kernel>3)",),
        "(k-1)/2 stacked 3x3 convs, no activation between (the first takes the stride; it "
        "starts as the kernel's centre 3x3, the others as identities)",
        "the device has 1x1 and 3x3 kernels; stacked 3x3s reach the same extent and output size "
        "where the padding is (k-1)/2 (a 7x7/2 ResNet stem: three 3x3s, the first strided); the "
        "vendor's input fold would need a 4x4 kernel, which the device lacks too",
        "no (a product of 3x3 kernels is not every kxk kernel)",
    ),
    Row(
        "dilation",
        ("Conv2d(dilation>1)",),
        "stacked undilated 3x3 convs of the same extent (d(k-1)/2 of them, no activation "
        "between; the first starts as the dilated kernel's taps side by side)",
        "the device has no dilation; the undilated kernel of the same extent would be exact but "
        "is larger than 3x3",
        "no",
    ),
    Row(
        "pool-padding",
        ("MaxPool2d(padding>0)", "AvgPool2d(padding>0)"),
        "the same pool with kernel = stride and no padding (a 3x3/2 pad-1 max pool: 2x2/2)",
        "the device pools without padding; kernel = stride gives the padded pool's output size "
        "when the input size is a multiple of the stride",
        "no (each output sees its stride x stride window, not the padded kxk one)",
    ),
    Row(
        "gate",
        ("x * Sigmoid(...) (a sigmoid gate: MONAI's AttentionUnet)",),
        "x (the gate held open; the branch that computed it is dropped)",
        "the device has no sigmoid and no product of two tensors, so no gate value can reach "
        "x; an open gate (1 everywhere) is the one form it runs, and distillation teaches the "
        "rest of the network to do without the gate",
        "no",
    ),
    Row(
        "dropout",
        ("Dropout", "Dropout2d", "AlphaDropout"),
        "Identity",
        "inference does not drop; the capture keeps nothing of it",
        "yes (evaluation mode)",
    ),
    Row(
        "width",
        ("Conv2d", "ConvTranspose2d", "BatchNorm2d", "PReLU"),
        "the same layer with the hidden channels times the width multiplier",
        "kernel memory, bias memory and channel limits (check's list) are the wall: one "
        "multiplier for the hidden channels keeps inputs, outputs and concatenations",
        "no",
    ),
    Row(
        "depth",
        ("a repeated block (a Sequential's child of its predecessor's class, shape kept)",),
        "Identity (the block removed), the last repeat of the Sequential with the most first, "
        "until check's layer count passes; each cut is printed",
        "more than the device's layers (32 on the MAX78000) is the wall: a residual stage's "
        "repeats keep the shapes, so removing them keeps the network's structure",
        "no",
    ),
)

#: Rows matched by the gate, width and depth steps, not by a module's class.
STRUCTURAL = ("gate", "width", "depth")

#: Ops with no replacement: class name -> why. Named together, exit 2.
REFUSALS: dict[str, str] = {
    "Sigmoid": "a sigmoid that gates nothing (not x * sigmoid(...) in a module torch.fx "
    "traces): the device has no sigmoid",
    "Softmax": "the device has no softmax inside the network (a final argmax needs none)",
    "Tanh": "the device has no tanh",
    "LayerNorm": "a LayerNorm over the last dimension needs channels-last permutes, which the "
    "device lacks (GroupNorm(1, C), the LayerNorm over channels, is replaced)",
    "MultiheadAttention": "attention has no hardware form on the device",
    "LSTM": "recurrent layers have no hardware form on the device",
    "GRU": "recurrent layers have no hardware form on the device",
}


def row_for(class_name: str) -> Row | None:
    """The row that replaces modules of ``class_name`` (width and depth excluded), or None."""
    for row in ROWS:
        if row.key not in STRUCTURAL and class_name in row.what:
            return row
    return None


def markdown_table() -> str:
    """The table as docs/adapt.md shows it (the test compares the doc with this)."""
    lines = ["| what | replacement | why | exact |", "|---|---|---|---|"]
    for row in ROWS:
        lines.append(f"| {', '.join(row.what)} | {row.replacement} | {row.why} | {row.exact} |")
    lines += ["", "| no replacement | why |", "|---|---|"]
    lines += [f"| {name} | {why} |" for name, why in REFUSALS.items()]
    return "\n".join(lines)
