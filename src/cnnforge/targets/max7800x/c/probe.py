"""Layer-by-layer debugging: per-layer dumps of the C (``--probe``), ``.npz`` or ``.npy`` sets, and
``compare`` naming the first layer whose values differ."""

from __future__ import annotations

import math
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cnnforge.arithmetic import ACT_SCALE
from cnnforge.errors import EmitError, InputError
from cnnforge.ir import Network
from cnnforge.targets.max7800x.c.build import SOURCES, compile_c

MANIFEST = "manifest.txt"
ORDER = "order.txt"  # simulate --layers: "<file>.npy <layer>" per line, in the network's order
NETWORK = "network.json"  # the network description a compile output directory holds
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
    if path.is_dir() and (path / ORDER).is_file():
        return _read_ordered_dir(path)
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


def _read_ordered_dir(path: Path) -> dict[str, np.ndarray]:
    """A ``simulate --layers`` directory: its ``order.txt`` names each file's layer, in order."""
    out: dict[str, np.ndarray] = {}
    for lineno, line in enumerate((path / ORDER).read_text("utf-8").splitlines(), 1):
        fname, sep, name = line.partition(" ")
        if not sep or "/" in fname or not fname.endswith(".npy") or not (path / fname).is_file():
            raise InputError("malformed layer order line", where=f"{path / ORDER}:{lineno}")
        out[name] = np.load(path / fname, allow_pickle=False)
    return out


def layer_order(path: Path | str) -> str:
    """Which order ``read_layer_outputs`` gives for ``path``, in words (``diff`` says it)."""
    path = Path(path)
    if path.is_dir() and (path / MANIFEST).is_file():
        return f"the network's order ({path / MANIFEST})"
    if path.is_dir() and (path / ORDER).is_file():
        return f"the network's order ({path / ORDER})"
    if path.is_dir():
        return f"file names, alphabetically ({path} has no {ORDER}: not the network's order)"
    return f"the archive's order ({path})"


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
        a, b = (a * ACT_SCALE, b) if a_float else (a, b * ACT_SCALE)
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
    values = (x.reshape(-1)[flat].item() for x in (a, b))
    return LayerDiff(name, a.shape, count, float(diff.max()), index, *values)


def compare(
    a: dict[str, np.ndarray],
    b: dict[str, np.ndarray],
    tolerance: float = 0,
    pairs: dict[str, str] | None = None,
) -> DiffResult:
    """Compare the layers both sets have, in the order of ``a``; ``pairs`` (``pair_layers``)
    replaces pairing by name."""
    if pairs is None:
        pairs = {n: n for n in a}
    common = [n for n in a if pairs.get(n) in b]
    if not common:
        raise InputError("the two sets have no layer name in common")
    rows = tuple(
        compare_layer(n if pairs[n] == n else f"{n} ~ {pairs[n]}", a[n], b[pairs[n]], tolerance)
        for n in common
    )
    used = {pairs[n] for n in common}
    only_a, only_b = (n for n in a if n not in common), (n for n in b if n not in used)
    return DiffResult(rows, tuple(only_a), tuple(only_b))


def find_network(path: Path | str) -> Network | None:
    """The ``network.json`` of a set of layer outputs, in its directory or the one holding it; None
    when there is none or it is not a cnnforge network."""
    path = Path(path)
    for where in (path, path.parent) if path.is_dir() else (path.parent,):
        if (where / NETWORK).is_file():
            try:
                return Network.from_json((where / NETWORK).read_text("utf-8"))
            except InputError:
                return None
    return None


def pair_layers(hardware: Network, model: Network) -> dict[str, str]:
    """Hardware layer -> the model-level layer whose output it computes: its own, extended through
    the sole same-shape consumers fusion absorbed (hardware layers without one are left out)."""
    hardware_names = {layer.name for layer in hardware.layers}
    by_name = {layer.name: layer for layer in model.layers}
    pairs: dict[str, str] = {}
    for h in hardware.layers:
        current = by_name.get(h.module_path) or by_name.get(h.name)
        if current is None:
            continue
        while current.name not in model.outputs:
            users = model.consumers(current.name)
            if len(users) != 1 or users[0].out_shape != h.out_shape:
                break
            if users[0].name in hardware_names and users[0].name != h.name:
                break
            current = users[0]
        pairs[h.name] = current.name
    return pairs


def network_pairs(a: Network | None, b: Network | None) -> dict[str, str] | None:
    """Layer of ``a`` -> layer of ``b`` when exactly one of two given networks is a hardware
    network (``pair_layers``); None (pair by name) otherwise."""
    if a is None or b is None or a.is_hardware == b.is_hardware:
        return None
    if a.is_hardware:
        return pair_layers(a, b)
    return {m: h for h, m in pair_layers(b, a).items()}
