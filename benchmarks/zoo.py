"""The zoo of models nobody here wrote (tests/support/zoo_models.py, unet_styles.py), run as a
new user runs them.

For each model: ``cnnforge analyze`` (its parameter count against ``sum(p.numel())``), ``cnnforge
check`` (exit 0 fits / 1 does not, with the rules named; 2 would be a bug), and for those that fit
``compile --ptq --run`` (the C self-test) with the correlation of the compiled known answer and the
eager float model on the same seeded sample. Prints a Markdown table.

    python benchmarks/zoo.py
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from support import unet_styles, zoo_models  # noqa: E402  (the zoo lives with the tests)
from support.e2e import compile_tracking_eager  # noqa: E402

#: (module, model name, input shape): the zoo, then the U-Net styles the end-to-end tests compile
#: (MONAI BasicUNet small with BN + ReLU; a classic U-Net with F.pad and a softmax head).
MODELS = [
    *((zoo_models, name, shape) for name, shape in zoo_models.ZOO.items()),
    (unet_styles, "monai_basic_unet_bn_relu", (1, 16, 16)),
    (unet_styles, "PadUNet", (3, 16, 16)),
]


def _cli(*args: str) -> tuple[int, dict]:
    """Run ``cnnforge`` as a user does; (exit status, its JSON on stdout or {})."""
    argv = [sys.executable, "-m", "cnnforge", *args, "--json", "-"]
    run = subprocess.run(argv, capture_output=True, text=True)
    try:
        return run.returncode, json.loads(run.stdout)
    except json.JSONDecodeError:
        return run.returncode, {"error": run.stderr.strip()}


def _compiled(module, name: str, shape: tuple[int, ...], sample: np.ndarray) -> tuple[str, float]:
    """``compile --ptq --run``: the self-test line and the correlation with the eager model."""
    with tempfile.TemporaryDirectory() as tmp:
        state, corr = compile_tracking_eager(module, name, shape, sample, Path(tmp) / "out")
    return state.selftest.output.split(":")[0], corr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="one model: checks the script runs")
    args = parser.parse_args()
    print("| model | analyze params (= sum numel) | check | compile --ptq --run | correlation |")
    print("|---|---|---|---|---|")
    for module, name, shape in MODELS[:1] if args.smoke else MODELS:
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
