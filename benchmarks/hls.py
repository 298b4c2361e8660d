"""The HLS target on the plain VOC U-Net: C-simulation time per image beside the simulator's, and
float vs W5A8 (and W8A8) argmax agreement on a sample set. No assertions: a report.

The sample set is the procedural ``shapes`` images at 64x64 (cnnforge.training.datasets); the
U-Net is untrained (batchnorm statistics settled on the set, as benchmarks/ptq_agreement.py
does), so agreement measures quantization, not accuracy. Needs g++ and the ap_types headers
(hls4ml) for the C-simulation part.

    python benchmarks/hls.py [--images 16] [--runs 3]
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from pathlib import Path

import torch
from ptq_agreement import settle_batchnorm  # benchmarks/ is on sys.path when run as a script
from simulate import best_of

from cnnforge.api.targets import check_for
from cnnforge.frontend.torch_fx import load_model, trace
from cnnforge.quant.ptq import quantize_with_scales
from cnnforge.sim import simulate
from cnnforge.targets.hls.build import compile_cpp, find_ap_types
from cnnforge.targets.hls.device import HLS
from cnnforge.targets.hls.emitter import emit_hls
from cnnforge.training.datasets import ShapesConfig, render_shapes, to_hardware_range

SHAPE = (3, 64, 64)


def sample_set(n: int) -> torch.Tensor:
    config = ShapesConfig(size=SHAPE[1])
    return torch.stack([to_hardware_range(render_shapes(i, config)[0]) for i in range(n)]).long()


def agreement(model, lowered, x, bits: int, clip: str) -> tuple[float, float, object]:
    qnet, exps = quantize_with_scales(lowered, bits, clip, calibration=x[:4], device=HLS)
    out = qnet.outputs[0]
    y_q = simulate(qnet, x, device=None).outputs[out].double() * 2.0 ** exps.get(out, 0) / 128
    with torch.no_grad():
        y_f = model(x.float() / 128).double()
    agree = (y_q.argmax(1) == y_f.argmax(1)).double().mean().item()
    return agree, (y_q - y_f).abs().mean().item(), qnet


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=16)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks the script runs")
    args = parser.parse_args()
    if args.smoke:
        args.images, args.runs = 2, 1
    torch.manual_seed(0)
    model = load_model("unet-voc", {}, None)
    x = sample_set(args.images)
    settle_batchnorm(model, x)
    model.eval()
    source = trace(model, SHAPE, name="unet-voc")
    print(f"unet-voc {SHAPE} on {HLS.name}; {args.images} shapes images (64x64)")
    print(f"{'weights':>8} {'clip':>7} {'argmax agree':>13} {'mean|err|':>10}")
    nets = {}
    for bits in (5, 8):
        lowered = check_for(source, HLS, bits).network  # HLS placed by its own rules.place
        for clip in ("max", "avgmax"):
            agree, err, nets[bits, clip] = agreement(model, lowered, x, bits, clip)
            print(f"{f'W{bits}A8':>8} {clip:>7} {agree:>13.4f} {err:>10.5f}")
    net = nets[5, "max"]  # what `cnnforge compile --device HLS --ptq` builds
    one = x[:1]
    sim_fast = best_of(lambda: simulate(net, one, device=None), args.runs)
    sim_int = best_of(lambda: simulate(net, one, engine="int64", device=None), 1)
    sim_batch = best_of(lambda: simulate(net, x, device=None), args.runs) / len(x)
    print(f"simulator (fast engine), 1 image:        {sim_fast * 1e3:9.1f} ms")
    print(f"simulator (fast engine), per image of {len(x)}: {sim_batch * 1e3:9.1f} ms")
    print(f"simulator (int64 engine), 1 image:       {sim_int * 1e3:9.1f} ms")
    if find_ap_types() is None:
        print("C-simulation: skipped (no ap_types headers: pip install hls4ml)")
        return
    answer = {k: v.numpy()[0] for k, v in simulate(net, one, device=None).outputs.items()}
    with tempfile.TemporaryDirectory(prefix="cnnforge-hls-bench-") as tmp:
        project = Path(tmp)
        emitted = emit_hls(net, one[0].numpy(), answer, project)
        start = time.perf_counter()
        compile_cpp(project, project / "csim", (f"{emitted.top}.cpp", "tb.cpp"))
        build = time.perf_counter() - start
        line = []

        def run() -> None:
            proc = subprocess.run([str(project / "csim")], capture_output=True, text=True)
            line[:] = [proc.stdout.strip()]

        csim = best_of(run, args.runs)
    print(f"C-simulation (g++ -O2), 1 image:         {csim * 1e3:9.1f} ms  ({line[0]})")
    print(f"C-simulation build:                      {build:9.1f} s")
    print(f"ratio C-simulation / simulator (1 image): {csim / sim_fast:8.1f}x")


if __name__ == "__main__":
    main()
