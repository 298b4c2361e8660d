"""Random small quantized networks for the HLS target, and a batch C-simulation helper.

``random_hls_network(seed)`` grows 2-8 layers straight in the IR within what the HLS engines
run (docs/hls-target.md §3): stride-1 K x K convolutions (K 1-3, any padding below K),
transposed convolutions (K 2-3, stride 2), passthroughs, max/avg input pooling (both orders),
element-wise add/sub/or/xor over 2-3 operands, concatenations, skips to any earlier tensor
of the same size, relu/abs, 2-8-bit weights (mostly 5), several outputs.
"""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import numpy as np

from cnnforge.ir import INPUT, Layer, Network, Op, PoolKind, Quantized
from cnnforge.targets.hls.build import compile_cpp
from support.emit_c import ACTS, _Builder, _inputs, _pool


def _quant(rng: np.random.Generator, w_shape: tuple[int, ...], oc: int) -> Quantized:
    bits = int(rng.choice([5, 5, 5, 8, 6, 4, 3, 2]))
    w = rng.integers(-(1 << (bits - 1)), 1 << (bits - 1), size=w_shape)
    bias = rng.integers(-128, 128, size=oc) if rng.random() < 0.7 else None
    shift = int(rng.integers(-4, 4)) - (8 - bits) + int(rng.integers(0, 8))
    return Quantized(bits, w.astype(np.int64), bias, shift)


def _layer(b: _Builder, i: int) -> Layer:
    rng = b.rng
    src, elt = _inputs(b, b.last())
    shape = b.tensors[src[0]]
    c = shape[0] if elt is not None else sum(b.tensors[n][0] for n in src)
    pool = _pool(rng, shape[1:])
    if pool is not None and pool.kind is PoolKind.AVG:
        pool = dataclasses.replace(pool, dilation=(1, 1))  # average pooling has no dilation
    h, w = pool.output_dims(shape[1:]) if pool else shape[1:]
    common = {"pool": pool, "eltwise": elt, "pool_first": bool(rng.random() < 0.6)}
    act = ACTS[int(rng.integers(0, 3))]
    r = rng.random()
    if r < 0.2 and max(h, w) <= 8:
        k, p = int(rng.integers(2, 4)), int(rng.integers(0, 2))
        op_ = int(rng.integers(0, 2))
        oc = int(rng.integers(1, 5))
        out = tuple((n - 1) * 2 - 2 * p + k + op_ for n in (h, w))
        if min(out) > 0:
            return Layer(f"l{i}", Op.CONVTRANSPOSE2D, src, (oc, *out), in_channels=c,
                         out_channels=oc, kernel_size=(k, k), stride=(2, 2), padding=(p, p),
                         output_padding=(op_, op_), activation=act,
                         quant=_quant(rng, (c, oc, k, k), oc), **common)  # fmt: skip
    if r < 0.35:
        return Layer(f"l{i}", Op.PASSTHROUGH, src, (c, h, w), in_channels=c, out_channels=c,
                     **common)  # fmt: skip
    k = int(rng.choice([1, 3, 3, 2]))
    p = int(rng.integers(0, k))
    oc = int(rng.integers(1, 6))
    out = (h + 2 * p - k + 1, w + 2 * p - k + 1)
    if min(out) <= 0:
        return Layer(f"l{i}", Op.PASSTHROUGH, src, (c, h, w), **common)
    return Layer(f"l{i}", Op.CONV2D, src, (oc, *out), in_channels=c, out_channels=oc,
                 kernel_size=(k, k), stride=(1, 1), padding=(p, p), activation=act,
                 quant=_quant(rng, (oc, c, k, k), oc), **common)  # fmt: skip


def random_hls_network(seed: int) -> Network:
    """A random quantized network the HLS engines run (deterministic in ``seed``)."""
    rng = np.random.default_rng(seed)
    c = int(rng.integers(1, 5))
    b = _Builder(rng, (c, *(int(n) for n in rng.integers(3, 11, size=2))))
    for i in range(int(rng.integers(2, 9))):
        b.add(_layer(b, i))
    outputs = (b.last(),)
    if rng.random() < 0.25 and len(b.layers) > 1:
        outputs = (b.layers[0].name, b.last())
    return Network(f"hls{seed}", b.tensors[INPUT], tuple(b.layers), outputs,
                   avg_pool_rounding=bool(rng.random() < 0.5))  # fmt: skip


def random_sample(network: Network, seed: int) -> np.ndarray:
    """A random int8 sample for ``network``."""
    rng = np.random.default_rng(seed + 1_000_003)
    return rng.integers(-128, 128, size=network.input_shape).astype(np.int64)


def csim_batch(root: Path, projects: list[tuple[str, Path]], *, opt: str = "-O0") -> list[str]:
    """Build many emitted projects (namespace = first item) into one program; their PASS lines.

    One translation unit includes every project's top and testbench: the ap_types templates
    are parsed once. ``-DCNNFORGE_NO_MAIN`` drops each testbench's main.
    """
    unit = root / "batch.cpp"
    includes = "".join(
        f'#include "{d}/cnnforge_top.cpp"\n#include "{d}/tb.cpp"\n' for _, d in projects
    )
    decl = "".join(f"namespace {ns} {{ int selftest(); }}\n" for ns, _ in projects)
    calls = "".join(f"    failures += {ns}::selftest();\n" for ns, _ in projects)
    unit.write_text(f"{includes}{decl}int main() {{\n    int failures = 0;\n{calls}"
                    "    return failures != 0;\n}\n")  # fmt: skip
    exe = root / "batch"
    compile_cpp(root, exe, (str(unit),), opt=opt, extra=("-DCNNFORGE_NO_MAIN",))
    proc = subprocess.run([str(exe)], capture_output=True, text=True, timeout=600, check=False)
    return proc.stdout.strip().splitlines()
