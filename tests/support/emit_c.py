"""Random small quantized hardware networks for the C emitter tests.

``random_network(seed)`` builds a network of 1-5 hardware layers straight in the IR (no
frontend), covering every operation the C runtime executes: conv1d/conv2d with stride,
padding, dilation and groups, transposed conv, linear with flatten, passthrough, max/avg
pooling, element-wise add/sub/or/xor over 2-3 operands (pool_first both ways), concatenation,
relu/abs, output shifts on both sides of 7, 1/2/4/8-bit and binary weights, wide outputs.
"""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import numpy as np

from cnnforge.ir import (
    BINARY_BITS,
    INPUT,
    Activation,
    EltwiseOp,
    Layer,
    Network,
    Op,
    Pooling,
    PoolKind,
    Quantized,
)
from cnnforge.targets.max7800x.c.build import SANITIZE_CFLAGS, compile_c

ACTS = (Activation.NONE, Activation.RELU, Activation.ABS)
ELTS = (EltwiseOp.ADD, EltwiseOp.SUB, EltwiseOp.OR, EltwiseOp.XOR)


def _quant(rng: np.random.Generator, w_shape: tuple[int, ...], oc: int) -> Quantized:
    bits = int(rng.choice([8, 8, 8, 4, 2, 1, BINARY_BITS]))
    if bits == BINARY_BITS:
        w = rng.choice([-1, 1], size=w_shape)
    else:
        w = rng.integers(-(1 << (bits - 1)), 1 << (bits - 1), size=w_shape)
    if rng.random() < 0.3:
        w = w * (rng.random(w_shape) < 0.5)  # sparse (zero taps are skipped in C)
        if bits == BINARY_BITS:
            w = np.where(w == 0, 1, w)
    bias = rng.integers(-128, 128, size=oc) if rng.random() < 0.7 else None
    shift = int(rng.integers(-4, 4)) - (8 - abs(bits)) + int(rng.integers(0, 8))
    return Quantized(bits, w.astype(np.int64), bias, shift)


def _pool(rng: np.random.Generator, dims: tuple[int, ...]) -> Pooling | None:
    if rng.random() < 0.6:
        return None
    n = len(dims)  # dilation only in 2-D (1-D pooling ignores it, docs/hardware/arithmetic.md R3.7)
    k = int(rng.integers(1, 4))
    s = int(rng.integers(1, 4)) if k > 1 else int(rng.integers(2, 4))
    d = int(rng.integers(1, 3)) if k == 2 and n == 2 and rng.random() < 0.2 else 1
    kind = PoolKind.MAX if rng.random() < 0.5 else PoolKind.AVG
    pool = Pooling(kind, (k,) * n, (s,) * n, (d,) * n)
    return pool if min(pool.output_dims(dims)) > 0 else None


class _Builder:
    """Grows a network; ``tensors`` maps names to shapes of everything a layer may read."""

    def __init__(self, rng: np.random.Generator, input_shape: tuple[int, ...]) -> None:
        self.rng = rng
        self.layers: list[Layer] = []
        self.tensors: dict[str, tuple[int, ...]] = {INPUT: input_shape}

    def add(self, layer: Layer) -> None:
        self.layers.append(layer)
        self.tensors[layer.name] = layer.out_shape

    def last(self) -> str:
        return self.layers[-1].name if self.layers else INPUT

    def same_shape(self, name: str) -> list[str]:
        return [n for n, s in self.tensors.items() if s == self.tensors[name]]

    def same_dims(self, name: str) -> list[str]:
        dims = self.tensors[name][1:]
        return [n for n, s in self.tensors.items() if s[1:] == dims and len(s) > 1]


def _inputs(b: _Builder, name: str) -> tuple[tuple[str, ...], EltwiseOp | None]:
    r = b.rng.random()
    if r < 0.25 and len(b.same_shape(name)) > 1:
        others = [n for n in b.same_shape(name) if n != name]
        extra = list(b.rng.choice(others, size=min(len(others), int(b.rng.integers(1, 3)))))
        return (name, *extra), ELTS[int(b.rng.integers(0, 4))]
    if r < 0.4 and len(b.same_dims(name)) > 1:
        others = [n for n in b.same_dims(name) if n != name]
        return (name, str(b.rng.choice(others))), None
    return (name,), None


def _conv(b: _Builder, i: int, src: tuple[str, ...], elt, pool, c: int, dims) -> Layer | None:
    rng = b.rng
    one_d = len(dims) == 1
    k = int(rng.integers(1, 4)) if not one_d else int(rng.integers(1, 6))
    s = int(rng.integers(1, 3))
    p = int(rng.integers(0, 3))
    d = int(rng.integers(1, 3)) if k > 1 else 1
    g = int(rng.choice([g for g in (1, 2, 4) if c % g == 0]))
    oc = g * int(rng.integers(1, 4))
    out = tuple((n + 2 * p - d * (k - 1) - 1) // s + 1 for n in dims)
    if min(out) <= 0:
        return None
    n = len(dims)
    op = Op.CONV1D if one_d else Op.CONV2D
    return Layer(
        f"l{i}",
        op,
        src,
        (oc, *out),
        in_channels=c,
        out_channels=oc,
        kernel_size=(k,) * n,
        stride=(s,) * n,
        padding=(p,) * n,
        dilation=(d,) * n,
        groups=g,
        pool=pool,
        eltwise=elt,
        pool_first=bool(rng.random() < 0.7),
        activation=ACTS[int(rng.integers(0, 3))],
        quant=_quant(rng, (oc, c // g) + (k,) * n, oc),
    )


def _convt(b: _Builder, i: int, src, elt, pool, c: int, dims) -> Layer | None:
    rng = b.rng
    k, s = int(rng.integers(2, 4)), 2
    p, op_ = int(rng.integers(0, 2)), int(rng.integers(0, 2))
    g = 2 if c % 2 == 0 and rng.random() < 0.3 else 1
    oc = g * int(rng.integers(1, 4))
    out = tuple((n - 1) * s - 2 * p + (k - 1) + op_ + 1 for n in dims)
    if min(out) <= 0:
        return None
    return Layer(
        f"l{i}",
        Op.CONVTRANSPOSE2D,
        src,
        (oc, *out),
        in_channels=c,
        out_channels=oc,
        kernel_size=(k, k),
        stride=(s, s),
        padding=(p, p),
        output_padding=(op_, op_),
        groups=g,
        pool=pool,
        eltwise=elt,
        activation=ACTS[int(rng.integers(0, 3))],
        quant=_quant(rng, (c, oc // g, k, k), oc),
    )


def _step(b: _Builder, i: int, last_layer: bool) -> None:
    rng = b.rng
    src, elt = _inputs(b, b.last())
    shape = b.tensors[src[0]]
    c = shape[0] if elt is not None else sum(b.tensors[n][0] for n in src)
    pool = _pool(rng, shape[1:])
    dims = pool.output_dims(shape[1:]) if pool else shape[1:]
    r = rng.random()
    layer: Layer | None = None
    if r < 0.15 or (last_layer and r < 0.3):
        feats = c * math.prod(dims)
        oc = int(rng.integers(1, 6))
        layer = Layer(
            f"l{i}",
            Op.LINEAR,
            src,
            (oc,),
            in_channels=feats,
            out_channels=oc,
            flatten=True,
            pool=pool,
            eltwise=elt,
            activation=ACTS[int(rng.integers(0, 3))],
            quant=_quant(rng, (oc, feats), oc),
        )
    elif r < 0.3 and len(dims) == 2 and max(dims) <= 8:
        layer = _convt(b, i, src, elt, pool, c, dims)
    elif r < 0.42:
        pool_first = bool(rng.random() < 0.5)
        rng.integers(0, 3)  # an unused draw keeps the stream: passthroughs have no activation
        layer = Layer(
            f"l{i}",
            Op.PASSTHROUGH,
            src,
            (c, *dims),
            in_channels=c,
            out_channels=c,
            pool=pool,
            eltwise=elt,
            pool_first=pool_first,
        )
    if layer is None:
        layer = _conv(b, i, src, elt, pool, c, dims) or Layer(
            f"l{i}", Op.PASSTHROUGH, src, (c, *dims), pool=pool, eltwise=elt
        )
    if last_layer and layer.activation is Activation.NONE and rng.random() < 0.3:
        layer = _wide(layer)
    b.add(layer)


def _wide(layer: Layer) -> Layer:
    import dataclasses

    return dataclasses.replace(layer, wide=True)


def random_network(seed: int) -> Network:
    """A random quantized hardware network (deterministic in ``seed``)."""
    rng = np.random.default_rng(seed)
    one_d = rng.random() < 0.25
    c = int(rng.integers(1, 5))
    shape = (c, int(rng.integers(3, 17))) if one_d else (c, *rng.integers(3, 11, size=2).tolist())
    b = _Builder(rng, tuple(int(n) for n in shape))
    n_layers = int(rng.integers(1, 6))
    for i in range(n_layers):
        if b.layers and len(b.tensors[b.last()]) == 1:
            break  # after a linear layer: stop (vector)
        _step(b, i, i == n_layers - 1)
    outputs = (b.last(),)
    if rng.random() < 0.2 and len(b.layers) > 1 and not b.layers[0].wide:
        outputs = (b.layers[0].name, b.last())
    return Network(
        f"rand{seed}",
        b.tensors[INPUT],
        tuple(b.layers),
        outputs,
        avg_pool_rounding=bool(rng.random() < 0.5),
    )


def random_input(network: Network, seed: int) -> np.ndarray:
    """A random int8 sample for ``network``."""
    rng = np.random.default_rng(seed + 1_000_003)
    return rng.integers(-128, 128, size=network.input_shape).astype(np.int64)


def build_batch(
    root: Path, projects: list[tuple[str, Path]], *, sanitize: bool = False
) -> dict[str, str]:
    """Compile many emitted projects (each with its own API prefix) into one executable.

    ``projects``: (api prefix, directory). Each project's main.c is built with -DCNN_NO_MAIN;
    a generated driver calls every ``<api>_selftest``. Returns {api: its PASS/FAIL line}.
    """
    decls = "".join(f"int {api}_selftest(void);\n" for api, _ in projects)
    calls = "".join(f"    failures += {api}_selftest() != 0;\n" for api, _ in projects)
    driver = root / "driver.c"
    driver.write_text(
        f"#include <stdio.h>\n{decls}int main(void)\n{{\n    int failures = 0;\n{calls}"
        "    return failures != 0;\n}\n"
    )
    kernels = projects[0][1] / "cnn_kernels.c"
    sources = [str(driver), str(kernels)]
    for _, d in projects:  # one translation unit per project: its statics stay apart
        (d / "unit.c").write_text('#include "cnn.c"\n#include "main.c"\n')
        sources.append(str(d / "unit.c"))
    exe = root / ("batch_asan" if sanitize else "batch")
    extra = ("-DCNN_NO_MAIN", *(SANITIZE_CFLAGS if sanitize else ()))
    compile_c(root, exe, sources=tuple(sources), extra=extra)
    proc = subprocess.run([str(exe)], capture_output=True, text=True, timeout=600, check=False)
    assert not proc.stderr.strip(), proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == len(projects), proc.stdout[-3000:]
    return {api: line for (api, _), line in zip(projects, lines, strict=True)}
