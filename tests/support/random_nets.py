"""Random small PyTorch networks described by a list of steps, so the same network can be named
on a command line (``tests/support/random_nets.py:Steps`` with ``--model-arg steps=[...]``) and
built in a test: check and compile must agree on every target (tests/test_promises_kept.py)."""

from __future__ import annotations

from hypothesis import strategies as st
from torch import nn

#: 2-D steps; a network is 2-D (C,H,W) or 1-D (C,L), optionally with a Linear head.
STEPS_2D = (
    "conv3", "conv1", "conv3s2", "dilated", "grouped", "maxpool", "avgpool", "up", "relu",
    "sigmoid", "bn",
)  # fmt: skip
STEPS_1D = ("conv1d", "relu")


class Steps(nn.Module):
    """``steps``: a list of step names (STEPS_2D or STEPS_1D); ``cin``/``width`` channels."""

    def __init__(
        self, steps: list[str] | tuple[str, ...] = ("conv3",), cin: int = 3, width: int = 8,
        one_d: bool = False, head: int = 0, size: int = 16,
    ) -> None:  # fmt: skip
        super().__init__()
        layers: list[nn.Module] = []
        c, n = cin, size
        for step in steps:
            layer, c, n = _layer(step, c, width, n, one_d)
            layers.append(layer)
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(c * n * (1 if one_d else n), head) if head else None

    def forward(self, x):
        y = self.body(x)
        return self.head(y.flatten(1)) if self.head is not None else y


def _layer(step: str, c: int, width: int, n: int, one_d: bool) -> tuple[nn.Module, int, int]:
    """The module of ``step`` and the channels and side length after it."""
    if step == "relu":
        return nn.ReLU(), c, n
    if step == "sigmoid":
        return nn.Sigmoid(), c, n
    if step == "bn" and not one_d:
        return nn.BatchNorm2d(c), c, n
    if one_d:
        return nn.Conv1d(c, width, 3, padding=1), width, n
    if step == "conv1":
        return nn.Conv2d(c, width, 1), width, n
    if step == "conv3s2" and n >= 4:
        return nn.Conv2d(c, width, 3, stride=2, padding=1), width, (n + 1) // 2
    if step == "dilated":
        return nn.Conv2d(c, width, 3, padding=2, dilation=2), width, n
    if step == "grouped" and c % 2 == 0:
        return nn.Conv2d(c, width, 3, padding=1, groups=2), width, n
    if step in ("maxpool", "avgpool") and n >= 4:
        return (nn.MaxPool2d(2) if step == "maxpool" else nn.AvgPool2d(2)), c, n // 2
    if step == "up" and n <= 16:
        return nn.ConvTranspose2d(c, width, 3, stride=2, padding=1, output_padding=1), width, 2 * n
    return nn.Conv2d(c, width, 3, padding=1), width, n


@st.composite
def step_args(draw) -> dict:
    """Constructor arguments of a random ``Steps`` network (its --model-arg values)."""
    one_d = draw(st.booleans()) and draw(st.booleans())  # 1-D a quarter of the time
    menu = STEPS_1D if one_d else STEPS_2D
    return {
        "steps": draw(st.lists(st.sampled_from(menu), min_size=1, max_size=5)),
        "cin": draw(st.integers(1, 4)),
        "width": draw(st.sampled_from((4, 8, 16))),
        "one_d": one_d,
        "head": draw(st.sampled_from((0, 0, 10))),
        "size": draw(st.sampled_from((8, 16))),
    }


def input_shape(args: dict) -> tuple[int, ...]:
    n = args["size"]
    return (args["cin"], n) if args["one_d"] else (args["cin"], n, n)
