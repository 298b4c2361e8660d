"""The ONNX import's equivalence gate: every layer of the imported network must compute what
onnxruntime computes on one seeded input, so a mis-mapped operator is an error naming it."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from cnnforge.errors import ModelError
from cnnforge.ir import Network, Op


def onnxruntime_values(path: Path, x: np.ndarray, tensors: list[str]) -> dict[str, np.ndarray]:
    """onnxruntime's value of every tensor in ``tensors`` (made graph outputs) on ``x``."""
    import onnx
    import onnxruntime

    model = onnx.load(str(path))
    known = {o.name for o in model.graph.output}
    model.graph.output.extend(onnx.ValueInfoProto(name=t) for t in tensors if t not in known)
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3  # errors only: no warnings on stderr
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    names = [o.name for o in session.get_outputs()]
    values = session.run(None, {session.get_inputs()[0].name: x})
    return dict(zip(names, values, strict=True))


def check_against_onnxruntime(path: Path, network: Network, tensors: dict[str, str]) -> None:
    """ModelError naming the first layer whose float evaluation differs from onnxruntime's."""
    import torch

    from cnnforge.sim.float_eval import CHECK_SEED, float_difference, run_float

    rng = np.random.default_rng(CHECK_SEED)
    x = rng.standard_normal((1, *network.input_shape)).astype(np.float32)
    try:
        values = onnxruntime_values(path, x, list(tensors.values()))
    except Exception as exc:  # onnxruntime refuses the graph: say so, do not guess
        raise ModelError(
            f"onnxruntime cannot run the model to check the import: {type(exc).__name__}",
            where=str(path),
            hint="check the file with onnx.checker.check_model; re-export it",
        ) from None
    given = {
        layer.name: torch.from_numpy(values[tensors[layer.name]])
        for layer in network.layers
        if layer.op is Op.OPAQUE
    }
    with torch.no_grad():
        got = run_float(network, x, all_layers=True, given=given)
    for layer in network.layers:
        if layer.name in given or tensors.get(layer.name) not in values:
            continue
        what = float_difference(got[layer.name], torch.from_numpy(values[tensors[layer.name]]))
        if what is not None:
            raise ModelError(
                f"the imported network differs from onnxruntime at layer {layer.name}: {what}",
                where=f"{path} ({layer.module_path or layer.name})",
                hint="an ONNX operator cnnforge maps wrongly: report it with the file",
            )
