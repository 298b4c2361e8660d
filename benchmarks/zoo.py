"""The zoo of models nobody here wrote (tests/support/zoo_models.py, unet_styles.py), run as a
new user runs them.

For each model: ``cnnforge analyze`` (its parameter count against ``sum(p.numel())``), ``cnnforge
check`` (exit 0 fits / 1 does not, with the rules named; 2 would be a bug), and for those that fit
``compile --ptq --run`` (the C self-test) with the correlation of the compiled known answer and the
eager float model on the same seeded sample. Prints a Markdown table.

    python benchmarks/zoo.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

from cnnforge.emit.c.host import output_unit_of
from cnnforge.pipeline import CompileOptions, compile_model
from cnnforge.sim.float_eval import host_reduce_float

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from support import unet_styles, zoo_models  # noqa: E402  (the zoo lives with the tests)

#: (module, model name, input shape): the zoo, then the U-Net styles the end-to-end tests compile
#: (MONAI BasicUNet small with BN + ReLU; a classic U-Net with F.pad and a softmax head).
MODELS = [
    *((zoo_models, name, shape) for name, shape in zoo_models.ZOO.items()),
    (unet_styles, "monai_basic_unet_bn_relu", (1, 16, 16)),
    (unet_styles, "PadUNet", (3, 16, 16)),
]


def _cli(*args: str) -> tuple[int, dict]:
    """Run ``cnnforge`` as a user does; (exit status, its JSON on stdout or {})."""
    run = subprocess.run(["cnnforge", *args, "--json", "-"], capture_output=True, text=True)
    try:
        return run.returncode, json.loads(run.stdout)
    except json.JSONDecodeError:
        return run.returncode, {"error": run.stderr.strip()}


def _eager(module, name: str, sample: np.ndarray) -> np.ndarray:
    torch.manual_seed(0)  # the untrained weights every command sees (frontend.load_network)
    model = getattr(module, name)().eval()
    with torch.no_grad():
        x = torch.from_numpy(sample[None].astype(np.float32) / 128.0)
        return model(x)[0].double().numpy()


def _compiled(module, name: str, shape: tuple[int, ...], sample: np.ndarray) -> tuple[str, float]:
    """``compile --ptq --run``: the self-test line and the correlation with the eager model."""
    with tempfile.TemporaryDirectory() as tmp:
        options = CompileOptions(
            output=Path(tmp) / "out",
            model=f"{module.__file__}:{name}",
            ptq=True,
            sample=sample,
            input_shape=shape,
            run=True,
            report=False,
        )
        state = compile_model(options)
    net = state.network
    out = net.outputs[0]
    unit = output_unit_of(net, out, state.output_exponents.get(out, 0))
    kind = (net.host_reduce or ("",))[0]
    got = host_reduce_float(kind, torch.from_numpy(state.answer[out] * unit)[None])[0]
    corr = np.corrcoef(got.numpy().ravel(), _eager(module, name, sample).ravel())[0, 1]
    return state.selftest.output.split(":")[0], float(corr)


def main() -> None:
    print("| model | analyze params (= sum numel) | check | compile --ptq --run | correlation |")
    print("|---|---|---|---|---|")
    for module, name, shape in MODELS:
        spec, dims = f"{module.__file__}:{name}", ",".join(map(str, shape))
        torch.manual_seed(0)
        numel = sum(p.numel() for p in getattr(module, name)().parameters())
        code, analysis = _cli("analyze", spec, "-i", dims)
        params = analysis.get("totals", {}).get("params")
        analyzed = f"{params:,} ({'=' if params == numel else '!= ' + str(numel)})"
        code, report = _cli("check", spec, "-i", dims)
        rules = sorted({v["rule"] for v in report.get("violations", [])})
        checked = f"exit {code}" + (f": {', '.join(rules)}" if rules else " (fits)")
        compiled, corr = "-", "-"
        if code == 0:
            sample = np.random.default_rng(0).integers(-128, 128, shape)
            compiled, value = _compiled(module, name, shape, sample)
            corr = f"{value:.4f}"
        analyzed = analyzed if code != 2 else "error"
        print(f"| {name} {dims} | {analyzed} | {checked} | {compiled} | {corr} |")


if __name__ == "__main__":
    main()
