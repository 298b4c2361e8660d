"""The host steps of the portable C: input normalization before the accelerator, softmax /
log_softmax / argmax after it, each checked by the self-test; emitted only where a network has
them."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import torch

from cnnforge.errors import EmitError
from cnnforge.ir import Network
from cnnforge.sim.agreement import output_scale
from cnnforge.sim.float_eval import host_reduce_float

#: Codes of the C's host step kinds (cnn.c: CNN_HOST_SOFTMAX ...).
KIND_CODES = {"softmax": 0, "log_softmax": 1, "argmax": 2}


def host_steps(
    network: Network,
    answer: Mapping[str, np.ndarray],
    exponents: Mapping[str, int] | None = None,
) -> tuple[list[dict[str, object]], np.ndarray]:
    """The template rows of every host step and their expected results (float64, in order)."""
    steps: list[dict[str, object]] = []
    expected: list[np.ndarray] = []
    offset = result = 0
    for name, kind in zip(network.outputs, network.host_reduce, strict=False):
        shape = network.shape_of(name)
        count = math.prod(shape)
        if kind:
            unit = output_scale(network, name, (exponents or {}).get(name, 0))
            pixels = count // shape[0]
            values = torch.from_numpy(np.asarray(answer[name], np.float64) * unit)
            got = host_reduce_float(kind, values.reshape(1, *shape))[0].numpy().reshape(-1)
            steps.append(
                {
                    "name": name,
                    "kind": KIND_CODES[kind.partition(":")[0]],
                    "kind_text": kind,
                    "offset": offset,
                    "channels": shape[0],
                    "pixels": pixels,
                    "unit": repr(float(unit)),
                    "result": result,
                }
            )
            expected.append(got)
            result += got.size
        offset += count
    flat = np.concatenate(expected) if expected else np.zeros(0)
    return steps, flat


def c_doubles(name: str, values: np.ndarray, per_line: int = 4) -> str:
    """``static const double name[N] = {...};`` with round-trip exact literals."""
    items = [repr(float(v)) for v in np.asarray(values, np.float64).reshape(-1)] or ["0.0"]
    lines = [
        "    " + ", ".join(items[i : i + per_line]) + "," for i in range(0, len(items), per_line)
    ]
    return f"static const double {name}[{len(items)}] = {{\n" + "\n".join(lines) + "\n};\n"


def host_input_step(
    network: Network, sample: np.ndarray
) -> tuple[dict[str, object] | None, np.ndarray]:
    """The template row of the host input step and the raw sample it maps to ``sample`` (the
    flat int8 vector); (None, empty) without a step."""
    from cnnforge.samples import quantize_floats

    step = network.host_input
    if step is None:
        return None, np.zeros(0)
    ndim = len(network.input_shape)
    shaped = np.asarray(sample, np.float64).reshape(network.input_shape) / 128.0
    raw = step.invert(shaped, ndim)
    again, _ = quantize_floats(step.apply(raw, ndim))
    if not np.array_equal(again.reshape(-1), np.asarray(sample).reshape(-1)):
        raise EmitError("the host input step does not map the raw sample back to the sample")
    row = {
        "text": step.describe(),
        "channels": len(step.scale),
        "pixels": math.prod(network.input_shape[1:]),
        "scale": ", ".join(repr(float(v)) for v in step.columns()[0]),
        "offset": ", ".join(repr(float(v)) for v in step.columns()[1]),
    }
    return row, raw.reshape(-1)
