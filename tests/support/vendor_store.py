"""Cases of the vendor's test suite stored for CI (tests/data/vendor_tests, written by
``benchmarks/vendor_tests.py --capture``): per (configuration, part) the vendor pair as numbers
(YAML text, checkpoint state), the sample, the vendor tool's known answer and its firmware's
state image with the kernel loader's records. Nothing of the vendor's generated text is kept.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from cnnforge.sim import simulate
from cnnforge.targets.max7800x.ai8x import Ai8xModel, read_ai8x
from cnnforge.targets.max7800x.firmware.firmware import Firmware, build_firmware
from cnnforge.targets.max7800x.firmware.hostrun import StateImage
from cnnforge.targets.max7800x.firmware.options import FirmwareOptions

from .vendor_suite import ARCH, Pair

STORE = Path(__file__).parents[1] / "data" / "vendor_tests"


@dataclass
class StoredCase:
    """One (configuration, part) of the vendor's suite, as cnnforge's checks need it."""

    device: str
    name: str
    yaml_text: str
    state: dict[str, np.ndarray]  # the checkpoint's state_dict, as numbers
    sample: np.ndarray
    expected: np.ndarray  # the vendor tool's known answer
    flags: tuple[str, ...] = ()
    image: StateImage | None = None  # the vendor firmware's set-up state
    records: list[tuple[int, list[int]]] | None = field(default=None)
    arch: str = ARCH
    family: str = ""
    expect: tuple[str, ...] = ()  # the benchmark's columns it passed when stored

    def read(self, folder: Path) -> Ai8xModel:
        """cnnforge's reading of the pair (written into ``folder``)."""
        pair = Pair(self.yaml_text, OrderedDict(self.state), self.arch)
        yaml, ckpt = pair.save(folder, "pair")
        return read_ai8x(yaml, ckpt, self.sample.shape, device=self.device,
                         overlap_data="--overlap-data" in self.flags,
                         avg_pool_rounding="--avg-pool-rounding" in self.flags,
                         fifo="--fifo" in self.flags, calcx4="--calcx4" in self.flags,
                         read_ahead="--read-ahead" in self.flags)  # fmt: skip

    def outputs(self, model: Ai8xModel) -> dict[str, np.ndarray]:
        """cnnforge's simulation of the sample: every output layer's (C, H, W)."""
        result = simulate(model.network, self.x(model), device=model.plan.device)
        return {k: v.numpy() for k, v in result.outputs.items()}

    def difference(self, model: Ai8xModel, outputs: dict[str, np.ndarray]) -> str:
        """"" when the final layer's output is the vendor's known answer, else how it differs."""
        y = outputs[model.network.layers[-1].name]
        want = self.expected
        if y.size != want.size:
            return f"shape {list(y.shape)} vs the known answer's {list(want.shape)}"
        bad = int((y.reshape(want.shape) != want).sum())
        return f"{bad} of {want.size} values differ" if bad else ""

    def firmware(self, model: Ai8xModel, outputs: dict[str, np.ndarray]) -> Firmware:
        """cnnforge's firmware for the pair, with the vendor flags' options."""
        options = FirmwareOptions.from_vendor_flags(self.flags)
        return build_firmware(model.network, model.plan, self.x(model), outputs, options)

    def x(self, model: Ai8xModel) -> np.ndarray:
        """The sample as the network takes it (the vendor's C x L x 1 for 1-D data: C x L)."""
        return self.sample.astype(np.int64).reshape(model.network.input_shape)


def _image_arrays(image: StateImage, records: list[tuple[int, list[int]]] | None) -> dict:
    records = records or []
    return {"state": image.state, "input": image.input, "kat": image.kat, "fifo": image.fifo,
            "start": image.start,
            "rec_addr": np.array([a for a, _ in records], np.uint32),
            "rec_len": np.array([len(w) for _, w in records], np.uint32),
            "rec_words": np.array([v for _, w in records for v in w], np.uint32)}  # fmt: skip


def _image_of(d, device: str) -> tuple[StateImage, list[tuple[int, list[int]]]]:
    start = d["start"] if "start" in d.files else np.zeros((0, 2), np.uint32)
    image = StateImage(device, d["state"], d["input"], d["kat"], d["fifo"], start)
    words = d["rec_words"].tolist()
    records, at = [], 0
    for a, n in zip(d["rec_addr"].tolist(), d["rec_len"].tolist(), strict=True):
        records.append((a, words[at : at + n]))
        at += n
    return image, records


def save_image(path: Path, image: StateImage, records: list[tuple[int, list[int]]]) -> None:
    """A set-up's state image and kernel loader records as a compressed .npz."""
    np.savez_compressed(path, device=np.array(image.device), **_image_arrays(image, records))


def load_image(path: Path) -> tuple[StateImage, list[tuple[int, list[int]]]]:
    """What :func:`save_image` wrote."""
    with np.load(path) as d:
        return _image_of(d, str(d["device"]))


def save_stored(case: StoredCase, store: Path = STORE) -> Path:
    """Write ``case`` as ``<device>-<name>.npz`` (compressed numbers)."""
    assert case.image is not None
    store.mkdir(parents=True, exist_ok=True)
    meta = {"device": case.device, "name": case.name, "yaml": case.yaml_text,
            "flags": list(case.flags), "keys": list(case.state), "arch": case.arch,
            "family": case.family, "expect": list(case.expect)}  # fmt: skip
    arrays = {f"w{i}": np.asarray(v).astype(np.int32) for i, v in enumerate(case.state.values())}
    path = store / f"{case.device}-{case.name}.npz"
    np.savez_compressed(path, meta=np.array(json.dumps(meta)), sample=case.sample.astype(np.int8),
                        expected=case.expected.astype(np.int64),
                        **_image_arrays(case.image, case.records), **arrays)  # fmt: skip
    return path


def load_stored(path: Path) -> StoredCase:
    """A case written by :func:`save_stored`."""
    with np.load(path) as d:
        meta = json.loads(str(d["meta"]))
        state = OrderedDict(
            (k, d[f"w{i}"].astype(np.float32)) for i, k in enumerate(meta["keys"])
        )
        image, records = _image_of(d, meta["device"])
        return StoredCase(meta["device"], meta["name"], meta["yaml"], state,
                          d["sample"].astype(np.int64), d["expected"], tuple(meta["flags"]),
                          image, records, meta["arch"], meta["family"],
                          tuple(meta["expect"]))  # fmt: skip


def stored_names() -> list[str]:
    return sorted(p.stem for p in STORE.glob("*.npz"))


__all__ = ["ARCH", "STORE", "StoredCase", "load_image", "load_stored", "save_image",
           "save_stored", "stored_names"]
