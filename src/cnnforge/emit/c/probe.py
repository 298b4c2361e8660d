"""Layer-by-layer debugging: per-layer dumps of the C (``--probe``) and comparing two sets.

A *set of layer outputs* is any of: a C probe directory (``manifest.txt`` + ``NNN.bin``), a
``.npz`` archive (one array per layer name, e.g. ``sim_layers.npz`` of ``compile --probe``), or a
directory of ``.npy`` files (``cnnforge simulate --layers``). ``compare`` walks the layers of
the first set in order and names the first one whose values differ, with position and values.
"""

from __future__ import annotations

import math
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cnnforge.emit.c.build import SOURCES, compile_c
from cnnforge.errors import EmitError, InputError

MANIFEST = "manifest.txt"
DTYPES = {"int8": np.dtype("i1"), "int32": np.dtype("=i4")}


def run_probe(c_dir: Path, build_dir: Path, probe_dir: Path) -> dict[str, np.ndarray]:
    """Build the probe variant of the C project, run it, return what it dumped."""
    exe = Path(build_dir).resolve() / "cnn_probe"
    compile_c(Path(c_dir), exe, sources=SOURCES, extra=("-DCNN_PROBE",))
    probe_dir = Path(probe_dir)
    probe_dir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [str(exe), str(probe_dir.resolve())], capture_output=True, text=True, check=False
    )
    if not (probe_dir / MANIFEST).is_file():
        raise EmitError(f"the probe build wrote no dumps: {proc.stdout}{proc.stderr}".strip())
    return read_layer_outputs(probe_dir)


def _read_probe_dir(path: Path) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for lineno, line in enumerate((path / MANIFEST).read_text("utf-8").splitlines(), 1):
        parts = line.split(" ", 3)
        if len(parts) != 4 or parts[1] not in DTYPES:
            raise InputError("malformed probe manifest line", where=f"{path / MANIFEST}:{lineno}")
        fname, dtype, shape_text, name = parts
        shape = tuple(int(n) for n in shape_text.split(","))
        data = np.fromfile(path / fname, dtype=DTYPES[dtype])
        if data.size != math.prod(shape):
            raise InputError(
                f"{fname} has {data.size} values, not {math.prod(shape)}", where=str(path)
            )
        out[name] = data.reshape(shape)
    return out


def read_layer_outputs(path: Path | str) -> dict[str, np.ndarray]:
    """Layer name -> array, in layer order, from any supported set (see the module docstring)."""
    path = Path(path)
    if path.is_dir() and (path / MANIFEST).is_file():
        return _read_probe_dir(path)
    if path.is_dir():
        files = sorted(path.glob("*.npy"))
        if not files:
            raise InputError("no manifest.txt and no .npy files", where=str(path))
        return {f.stem: np.load(f, allow_pickle=False) for f in files}
    if path.is_file() and path.suffix == ".npz":
        try:
            with np.load(path, allow_pickle=False) as archive:
                return {k: archive[k] for k in archive.files}
        except (ValueError, OSError) as exc:
            raise InputError(f"not a readable .npz archive: {exc}", where=str(path)) from None
    raise InputError(
        "not a set of layer outputs",
        where=str(path),
        hint="give a C probe directory, a .npz archive or a directory of .npy files",
    )


@dataclass(frozen=True)
class LayerDiff:
    """How one layer's outputs compare: differing count, largest difference, first position."""

    layer: str
    shape: tuple[int, ...]
    differing: int
    max_abs: float
    first_index: tuple[int, ...] | None = None
    a_value: float | None = None
    b_value: float | None = None

    @property
    def equal(self) -> bool:
        """No value differs beyond the tolerance."""
        return self.differing == 0


@dataclass(frozen=True)
class DiffResult:
    """Per-layer comparisons in order, the layers present in only one set, the first divergence."""

    layers: tuple[LayerDiff, ...]
    only_a: tuple[str, ...]
    only_b: tuple[str, ...]

    @property
    def first_divergence(self) -> LayerDiff | None:
        """The first layer (in A's order) with a differing value, or None."""
        return next((d for d in self.layers if not d.equal), None)


def _as_comparable(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Same shape (a batch axis of 1 dropped); floats are in units of 1/128 (R1.1) next to ints."""
    if a.ndim == b.ndim + 1 and a.shape[0] == 1:
        a = a[0]
    if b.ndim == a.ndim + 1 and b.shape[0] == 1:
        b = b[0]
    a_float, b_float = a.dtype.kind == "f", b.dtype.kind == "f"
    if a_float != b_float:
        a, b = (a * 128.0, b) if a_float else (a, b * 128.0)
    if a_float or b_float:
        return a.astype(np.float64), b.astype(np.float64)
    return a.astype(np.int64), b.astype(np.int64)


def compare_layer(name: str, a: np.ndarray, b: np.ndarray, tolerance: float = 0) -> LayerDiff:
    """Compare one layer exactly (integers) or within ``tolerance`` (floats involved)."""
    a, b = _as_comparable(np.asarray(a), np.asarray(b))
    if a.size != b.size:
        raise InputError(f"layer {name}: shapes {a.shape} and {b.shape} differ")
    if a.shape != b.shape:
        b = b.reshape(a.shape)
    diff = np.abs(a - b)
    bad = diff > tolerance
    count = int(bad.sum())
    if count == 0:
        return LayerDiff(name, a.shape, 0, float(diff.max(initial=0)))
    flat = int(np.argmax(bad.reshape(-1)))
    index = tuple(int(i) for i in np.unravel_index(flat, a.shape))
    return LayerDiff(
        name,
        a.shape,
        count,
        float(diff.max()),
        index,
        a.reshape(-1)[flat].item(),
        b.reshape(-1)[flat].item(),
    )


def compare(a: dict[str, np.ndarray], b: dict[str, np.ndarray], tolerance: float = 0) -> DiffResult:
    """Compare the layers both sets have, in the order of ``a``."""
    common = [n for n in a if n in b]
    if not common:
        raise InputError("the two sets have no layer name in common")
    rows = tuple(compare_layer(n, a[n], b[n], tolerance) for n in common)
    return DiffResult(rows, tuple(n for n in a if n not in b), tuple(n for n in b if n not in a))
