"""The vendor tool's own test suite as vendor pairs (benchmarks/vendor_tests.py and the CI tests
over its stored subset, tests/targets/max7800x/test_vendor_suite.py).

The vendor repository's ``tests/test-*.yaml`` with ``arch: test`` name no checkpoint: the vendor
tool takes each layer's weights from ``tests/weights_<dataset>.npy`` (or the file the YAML's
``weights`` names) and the biases from ``tests/bias_<bias>.npy``, one array per layer that owns
weights, in layer order. Sample weights wider than the layer's ``quantization`` are shifted right
until they fit (binary: their signs), and the output shift gains ``8 - bits`` as for a
checkpoint. A *pair* holds the same numbers in the vendor checkpoint format
(docs/ai8x-format.md): the weights as the loader will read them (a transposed convolution's
un-flipped back to PyTorch's layout, a linear layer's 1x1 kernels as PyTorch's 2-D ``Linear``
weights), biases times ``2^(weight_bits - 1)``, output shift 0 (the
YAML's, if it names one, wins), and the YAML with its ``arch`` renamed to the checkpoint's and
the ``weights`` / ``bias`` file names dropped.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

ARCH = "vendortest"
_NO_WEIGHTS = {"none", "passthrough", "add", "sub", "or", "xor", "bitwiseor", "bitwise_or",
               "bitwisexor", "bitwise_xor"}  # fmt: skip
_OP_KEYS = ("convolution", "operation", "operator", "op")
_LINEAR = {"linear", "fc", "mlp"}

# Family of a configuration by its name: the first pattern that matches (order matters).
FAMILIES = (
    ("snoop", r"^snoop"),
    ("bypass", r"bypass"),
    ("fifostream", r"fifo"),
    ("streaming", r"stream"),
    ("depthwise", r"depthwise"),
    ("eltwise", r"eltwise|^mpadd|^resnet"),
    ("readahead", r"readahead|^ffs|^x4-"),
    ("conv1d", r"conv1d"),
    ("upsample", r"upsample|upscale|convtranspose"),
    ("passthrough", r"passthrough"),
    ("mlp/flatten", r"mlp|flatten"),
    ("wide", r"wide|chan1024|512"),
    ("multipass", r"multipass|^mppool|maxkern|maxproc|^layers"),
    ("pooling", r"pool"),
    ("nonsquare", r"nonsquare|largeinput"),
)


def family(name: str) -> str:
    """The family of a configuration named ``name`` (test-NAME.yaml), "conv2d" for the rest."""
    for fam, pattern in FAMILIES:
        if re.search(pattern, name):
            return fam
    return "conv2d"


@dataclass(frozen=True)
class SuiteCase:
    """One ``arch: test`` configuration of the vendor's suite."""

    name: str
    yaml: Path

    @property
    def family(self) -> str:
        return family(self.name)

    def doc(self) -> dict:
        return yaml.safe_load(self.yaml.read_text(encoding="utf-8"))

    def flags(self, device: str = "MAX78002") -> tuple[str, ...]:
        """The vendor flags the configuration runs with (on ``device``: the same on both):
        ``--fifo`` for those named after the FIFO and those whose first layer streams (the
        vendor tool requires the FIFOs for that); none for those named "nofifo"."""
        del device
        if "nofifo" in self.name:
            return ()
        layers = _layers(self.doc())
        streams = bool(layers) and bool(layers[0].get("streaming", False))
        fifo = "fifo" in self.name or streams
        return ("--fifo",) if fifo else ()


def suite(izer: Path) -> list[SuiteCase]:
    """Every ``arch: test`` configuration of the vendor repository at ``izer``, by name."""
    out = []
    for path in sorted((izer / "tests").glob("test-*.yaml")):
        text = path.read_text(encoding="utf-8")
        if re.search(r"^arch:\s*test\s*$", text, re.M):
            out.append(SuiteCase(path.stem.removeprefix("test-"), path))
    return out


def _layers(doc: dict) -> list[dict]:
    """The YAML's layers in their sequence order (a layer's ``sequence`` key places it)."""
    layers = list(doc.get("layers") or [])
    if not any("sequence" in ly for ly in layers):
        return layers
    placed: dict[int, dict] = {}
    nxt = 0
    for ly in layers:
        nxt = int(ly.get("sequence", nxt))
        placed[nxt] = ly
        nxt += 1
    return [placed[k] for k in sorted(placed)]


def _operation(layer: dict) -> str:
    for key in _OP_KEYS:
        if key in layer:
            return str(layer[key]).lower()
    return "conv2d"


def owns_weights(layer: dict) -> bool:
    """Whether the vendor tool reads weights for this layer (not an element-wise or passthrough
    layer, not bypassed)."""
    return _operation(layer) not in _NO_WEIGHTS and not layer.get("bypass", False)


def _quant(layer: dict) -> int:
    """The layer's weight bits (-1: binary), 8 when the YAML names none."""
    q = layer.get("quantization")
    if q is None:
        return 8
    return -1 if str(q).lower() in ("bin", "binary") else int(q)


def read_arrays(path: Path) -> list[np.ndarray]:
    """The arrays saved one after the other in ``path``; a single array holds one per layer."""
    arrays: list[np.ndarray] = []
    with path.open("rb") as f:
        while True:
            try:
                arrays.append(np.load(f, allow_pickle=False))
            except (ValueError, EOFError, OSError):
                break
    if len(arrays) == 1:
        return list(arrays[0])
    return arrays


def _fit(w: np.ndarray, quant: int) -> np.ndarray:
    """Sample weights as the vendor tool narrows them to ``quant`` bits (-1: their signs)."""
    w = np.asarray(w, np.int64).copy()
    hi, lo = int(w.max()), int(w.min())
    hi, lo = hi + 1 if hi < 0 else hi, lo + 1 if lo < 0 else lo
    width = max(abs(lo).bit_length() - 1, abs(hi).bit_length() - 1) + 2
    if width > 8:
        raise ValueError("sample weights wider than 8 bits")
    if quant == -1:
        return np.where(w >= 0, 1, -1).astype(np.int64)
    if width > quant:
        w >>= width - quant
    return w


@dataclass(frozen=True)
class Pair:
    """A configuration as a vendor pair: YAML text and the checkpoint's state (numbers)."""

    yaml_text: str
    state: OrderedDict  # key -> np.ndarray (float32 weights/biases, (1,) scalars)
    arch: str = ARCH  # the YAML's and the checkpoint's

    def save(self, folder: Path, name: str) -> tuple[Path, Path]:
        """Write ``name``.yaml and ``name``-q.pth.tar into ``folder``."""
        import torch

        folder.mkdir(parents=True, exist_ok=True)
        yaml_path = folder / f"{name}.yaml"
        yaml_path.write_text(self.yaml_text, encoding="utf-8")
        state = OrderedDict((k, torch.from_numpy(np.asarray(v))) for k, v in self.state.items())
        ckpt = folder / f"{name}-q.pth.tar"
        torch.save({"arch": self.arch, "epoch": 1000, "state_dict": state, "extras": {}}, ckpt)
        return yaml_path, ckpt


def pair_yaml(text: str) -> str:
    """The configuration's YAML text with ``arch`` renamed and the sample-file keys dropped."""
    text = re.sub(r"^arch:\s*test\s*$", f"arch: {ARCH}", text, count=1, flags=re.M)
    return re.sub(r"^(weights|bias):.*\n", "", text, flags=re.M)


def make_pair(case: SuiteCase, izer: Path) -> Pair:
    """The configuration's vendor pair (see the module docstring)."""
    doc = case.doc()
    layers = _layers(doc)
    dataset = str(doc["dataset"]).lower()
    wfile = izer / "tests" / (f"{doc['weights']}.npy" if "weights" in doc else
                              f"weights_{dataset}.npy")  # fmt: skip
    weights = read_arrays(wfile)
    biases: list[np.ndarray | None] = []
    if "bias" in doc:
        with (izer / "tests" / f"bias_{doc['bias']}.npy").open("rb") as f:
            for ly in layers:
                if owns_weights(ly):
                    try:
                        biases.append(np.load(f, allow_pickle=False))
                    except (ValueError, EOFError, OSError):
                        break
    state: OrderedDict = OrderedDict()
    owners = [ly for ly in layers if owns_weights(ly)]
    for k, (ly, w) in enumerate(zip(owners, weights, strict=False)):
        quant = _quant(ly)
        w = _fit(w, quant)
        if _operation(ly) == "convtranspose2d":  # the loader flips and swaps: undo it
            w = np.flip(w.swapaxes(0, 1), axis=(2, 3))
        elif _operation(ly) in _LINEAR and w.ndim == 4:  # (out, in, 1, 1): a Linear's (out, in)
            w = w.reshape(w.shape[0], -1)
        bits = 1 if quant == -1 else quant
        state[f"l{k}.op.weight"] = np.ascontiguousarray(w).astype(np.float32)
        b = biases[k] if k < len(biases) else None
        if b is not None:
            state[f"l{k}.op.bias"] = (np.asarray(b, np.int64) * 2 ** (bits - 1)).astype(np.float32)
        state[f"l{k}.output_shift"] = np.zeros(1, np.float32)
        state[f"l{k}.weight_bits"] = np.full(1, bits, np.float32)
    return Pair(pair_yaml(case.yaml.read_text(encoding="utf-8")), state)


def sample_path(case: SuiteCase, izer: Path) -> Path:
    """The configuration's sample input (the vendor's default for its dataset)."""
    return izer / "tests" / f"sample_{str(case.doc()['dataset']).lower()}.npy"


def _weight_prefix(key: str) -> tuple[str, str | None]:
    """(the layer part, the op part) of a ``*.weight`` key, as the vendor's loader splits it."""
    parts = key.rsplit(".", 2)
    return (parts[0], parts[1]) if len(parts) == 3 else (parts[0], None)


def demo_pair(yaml_path: Path, shapes: dict, seed: int = 0) -> Pair:
    """A demo network without a checkpoint as a pair: its YAML as it is and a checkpoint of
    random integer weights of the shapes its model has (``shapes``: the weight and bias keys of
    the model, in order). Each layer's output shift keeps a sum over its fan-in in range:
    -log2(fan-in) / 2, rounded (the YAML's own wins)."""
    text = yaml_path.read_text(encoding="utf-8")
    doc = yaml.safe_load(text)
    arch = str(doc["arch"])
    keys = dict((k, tuple(s)) for k, s in shapes[arch]["keys"])
    owners = [ly for ly in _layers(doc) if owns_weights(ly)]
    weights = [k for k in keys if k.endswith(".weight")]
    if len(weights) < len(owners):
        raise ValueError(f"{arch}: {len(owners)} YAML layers with weights, {len(weights)} weights")
    rng = np.random.default_rng(seed)
    state: OrderedDict = OrderedDict()
    for ly, key in zip(owners, weights, strict=False):
        quant = _quant(ly)
        bits = 1 if quant == -1 else quant
        shape = keys[key]
        if quant == -1:
            w = rng.choice(np.array([-1, 1]), size=shape)
        else:
            w = rng.integers(-(2 ** (bits - 1)), 2 ** (bits - 1), size=shape)
        layer, op = _weight_prefix(key)
        state[key] = w.astype(np.float32)
        bias_key = f"{layer}.{op}.bias" if op else f"{layer}.bias"
        if bias_key in keys:
            b = rng.integers(-128, 128, size=keys[bias_key])
            state[bias_key] = (b * 2 ** (bits - 1)).astype(np.float32)
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        implicit = 8 - bits
        shift = int(np.clip(-round(0.5 * np.log2(max(fan_in, 1))), -15 - implicit, 15 - implicit))
        state[f"{layer}.output_shift"] = np.full(1, shift, np.float32)
        state[f"{layer}.weight_bits"] = np.full(1, bits, np.float32)
    return Pair(text, state, arch)
