"""``compile --ptq --run`` of a model file's class, and how its known answer tracks the eager model
(used by tests/pipeline/test_unet_e2e.py and benchmarks/zoo.py)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import numpy as np
import torch

from cnnforge.api.targets import compile_model
from cnnforge.pipeline import CompileOptions, CompileState
from cnnforge.sim.agreement import output_scale
from cnnforge.sim.float_eval import host_reduce_float


def eager_output(module: ModuleType, name: str, sample: np.ndarray) -> np.ndarray:
    """The eager float model's output on the int8 ``sample`` (model units = value / 128)."""
    torch.manual_seed(0)  # the untrained weights every command sees (frontend.load_network)
    model = getattr(module, name)().eval()
    with torch.no_grad():
        x = torch.from_numpy(sample[None].astype(np.float32) / 128.0)
        return model(x)[0].double().numpy()


def compile_tracking_eager(
    module: ModuleType, name: str, shape: tuple[int, ...], sample: np.ndarray, out: Path
) -> tuple[CompileState, float]:
    """Compile ``module.name`` with PTQ on ``sample`` and run its C self-test into ``out``; also
    the correlation of the compiled known answer (host reduction applied) with eager."""
    options = CompileOptions(
        output=out,
        model=f"{module.__file__}:{name}",
        ptq=True,
        sample=sample,
        input_shape=shape,
        run=True,
        report=False, device="MAX78000"
    )
    state = compile_model(options)
    net = state.network
    first = net.outputs[0]
    kind = (net.host_reduce or ("",))[0]
    unit = output_scale(net, first, state.output_exponents.get(first, 0))
    got = host_reduce_float(kind, torch.from_numpy(state.answer[first] * unit)[None])[0]
    eager = eager_output(module, name, sample)
    return state, float(np.corrcoef(got.numpy().ravel(), eager.ravel())[0, 1])
