"""Every vendor demo network with a shipped checkpoint, bit for bit against the vendor tool.

The goldens (tests/golden/ai8x_demos, README there) hold each demo's YAML, a trimmed copy of its
checkpoint, its sample and the vendor simulator's known answer, captured with the demo's own
flags by benchmarks/vendor_oracle.py. cnnforge imports, validates and simulates each one.
The vendor's own checkpoint files are too large for the repository: the tests that read them
look in $CNNFORGE_IZER_TRAINED (default /tmp/izer/trained) and skip when they are absent.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from cnnforge.errors import ConfigError
from cnnforge.sim import simulate
from cnnforge.targets.max7800x.ai8x import read_ai8x
from cnnforge.targets.max7800x.device import get_device
from cnnforge.targets.max7800x.streaming import rollover_words
from cnnforge.targets.max7800x.validate import validate_plan
from support.paths import TESTS

GOLDEN = TESTS / "golden" / "ai8x_demos"
KNOWN = sorted((GOLDEN / "known").glob("*.npz"))
TRAINED = Path(os.environ.get("CNNFORGE_IZER_TRAINED", "/tmp/izer/trained"))


def _demo(path: Path) -> tuple[dict, np.ndarray, np.ndarray]:
    data = np.load(path)
    return json.loads(str(data["meta"])), data["input"].astype(np.int64), data["expected"]


def _import(meta: dict, shape: tuple[int, ...], checkpoint: Path | None = None, **kw):
    flags = meta["flags"]
    return read_ai8x(
        GOLDEN / "networks" / meta["yaml"],
        checkpoint or GOLDEN / "trained" / meta["trimmed"],
        shape,
        device=meta["device"],
        overlap_data="--overlap-data" in flags,
        fifo="--fifo" in flags,
        **kw,
    )


@pytest.mark.parametrize("path", KNOWN, ids=[p.stem for p in KNOWN])
def test_demo_is_bit_exact(path: Path) -> None:
    meta, x, expected = _demo(path)
    model = _import(meta, x.shape)
    assert validate_plan(model.network, model.plan, meta["device"]) == ()
    outputs = simulate(model.network, x, device=get_device(meta["device"])).outputs
    y = outputs[model.network.layers[-1].name]
    assert y.shape == expected.shape or y.numel() == expected.size
    assert np.array_equal(y.numpy().reshape(expected.shape), expected)


def test_every_demo_list_entry_is_covered() -> None:
    """16 demo runs: 9 networks on MAX78000 and 9 on MAX78002, less the two -riscv twins."""
    assert len(KNOWN) == 16
    streaming = [p.stem for p in KNOWN if "--fifo" in _demo(p)[0]["flags"]]
    assert streaming == ["MAX78000-cats-dogs", "MAX78000-facedet_tinierssd"]


_ORIGINALS = sorted({_demo(p)[0]["checkpoint"]: p for p in KNOWN}.items())


@pytest.mark.parametrize(("name", "path"), _ORIGINALS, ids=[n for n, _ in _ORIGINALS])
def test_vendor_checkpoint_gives_the_same_network(name: str, path: Path) -> None:
    """The trimmed golden checkpoint and the vendor's file import to identical weights."""
    original = TRAINED / name
    if not original.is_file():
        pytest.skip(f"the vendor checkpoint {original} is absent (set CNNFORGE_IZER_TRAINED)")
    meta, x, _ = _demo(path)
    ours, theirs = _import(meta, x.shape), _import(meta, x.shape, original)
    for a, b in zip(ours.network.layers, theirs.network.layers, strict=True):
        assert (a.quant is None) == (b.quant is None)
        if a.quant is not None:
            assert np.array_equal(a.quant.weights, b.quant.weights)
            assert a.quant.output_shift == b.quant.output_shift
            assert (a.quant.bias is None) == (b.quant.bias is None)


def _cats_dogs(device: str = "MAX78000", **kw):
    meta, x, _ = _demo(GOLDEN / "known" / "MAX78000-cats-dogs.npz")
    return _import({**meta, "device": device}, x.shape, **kw)


@pytest.mark.parametrize(
    ("device", "yaml_name", "ckpt", "shape", "expected"),
    [  # FMAX ("Rollover") of layers 0 and 1 in the vendor's generated cnn.c, with --fifo
        ("MAX78000", "cats-dogs-hwc.yaml", "ai85-catsdogs", (3, 128, 128), (0x2, 0x20E)),
        ("MAX78002", "cats-dogs-hwc.yaml", "ai85-catsdogs", (3, 128, 128), (0x2, 0x191)),
        (
            "MAX78000",
            "ai85-facedet-tinierssd.yaml",
            "ai85-facedet-tinierssd",
            (3, 224, 168),
            (0x1FE, 0x15E),
        ),
        (
            "MAX78002",
            "ai85-facedet-tinierssd.yaml",
            "ai85-facedet-tinierssd",
            (3, 224, 168),
            (0x205, 0x10D),
        ),
    ],
)
def test_rollover_matches_the_vendor(device, yaml_name, ckpt, shape, expected) -> None:
    model = read_ai8x(
        GOLDEN / "networks" / yaml_name,
        GOLDEN / "trained" / f"{ckpt}-qat8-q.int8.pth.tar",
        shape,
        device=device,
        fifo=True,
    )
    dev = get_device(device)
    assert tuple(rollover_words(model.network, model.plan, i, dev) for i in (0, 1)) == expected


def _edited(tmp_path: Path, old: str, new: str) -> Path:
    text = (GOLDEN / "networks" / "cats-dogs-hwc.yaml").read_text()
    assert old in text
    path = tmp_path / "cats-dogs.yaml"
    path.write_text(text.replace(old, new, 1))
    return path


def _import_edited(yaml_path: Path, **kw):
    return read_ai8x(
        yaml_path,
        GOLDEN / "trained" / "ai85-catsdogs-qat8-q.int8.pth.tar",
        (3, 128, 128),
        **{"device": "MAX78000", **kw},
    )


def test_streaming_structure_errors_name_the_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cats-dogs-hwc.yaml:15: layer 0: .*needs the FIFO"):
        _import_edited(GOLDEN / "networks" / "cats-dogs-hwc.yaml", fifo=False)
    late = _edited(tmp_path, "    streaming: true\n", "")  # layer 1 streams, layer 0 not
    with pytest.raises(ConfigError, match=r"yaml:22: layer 1: a streaming layer after a non-"):
        _import_edited(late)
    fifo_procs = _edited(tmp_path, "processors: 0x0000000000000007", "processors: 0x70")
    with pytest.raises(ConfigError, match=r"yaml:12: layer 0: the FIFO feeds processors"):
        _import_edited(fifo_procs)


def _rules(yaml_path: Path) -> set[str]:
    model = _import_edited(yaml_path)
    return {x.rule for x in validate_plan(model.network, model.plan, "MAX78000")}


def test_streaming_memory_rules_are_validated(tmp_path: Path) -> None:
    model = _cats_dogs()
    assert validate_plan(model.network, model.plan, "MAX78000") == ()
    # Layer 1 on processors 0-15 reads at 0x1000 with a rollover of 0x20e words and writes to
    # processors 0-31: an output at 0x1400 lies inside its own buffer.
    procs = "processors: 0x000ffff000000000"
    ok = _edited(tmp_path, procs, "processors: 0x000000000000ffff")
    assert _rules(ok) == set()
    text = ok.read_text().replace("out_offset: 0x2000", "out_offset: 0x1400", 1)
    ok.write_text(text)
    assert "streaming-overlap" in _rules(ok)
    # Both buffers start at 0 in instance 0.
    text = text.replace("out_offset: 0x1000", "out_offset: 0x0000", 1)
    ok.write_text(text.replace("out_offset: 0x1400", "out_offset: 0x2000", 1))
    assert "streaming-buffers" in _rules(ok)
    # Layer 0's buffer (bytes 0-8 of instance 0) lies under the last streaming output at 0.
    bad = _edited(tmp_path, "out_offset: 0x2000", "out_offset: 0x0000")
    assert "streaming-output-overlap" in _rules(bad)
    # The input plus the buffer passes the instance end.
    bad = _edited(tmp_path, "out_offset: 0x1000", "out_offset: 0x7800")
    assert "streaming-bounds" in _rules(bad)


def test_streaming_arithmetic_is_the_plain_one() -> None:
    """The same weights with and without streaming give the same numbers (vendor's no-fifo YAML
    on MAX78002 vs the streaming YAML on MAX78000: both known answers are the vendor's)."""
    a = _demo(GOLDEN / "known" / "MAX78000-cats-dogs.npz")[2]
    b = _demo(GOLDEN / "known" / "MAX78002-cats-dogs.npz")[2]
    assert np.array_equal(a, b)
    assert any(p.streaming for p in _cats_dogs().plan.placements)


def _mnist_state() -> dict:
    return torch.load(GOLDEN / "trained" / "ai85-mnist-qat8-q.int8.pth.tar", weights_only=True)


def test_duplicated_state_dict_pairs_the_first_copy(tmp_path: Path) -> None:
    """kws20_v3's checkpoint holds `module.` and plain copies; an unequal copy is refused."""
    doc = _mnist_state()
    state = dict(doc["state_dict"])
    copy = {f"module.{k}": v.clone() for k, v in state.items()}
    meta, x, expected = _demo(GOLDEN / "known" / "MAX78000-mnist.npz")
    torch.save({**doc, "state_dict": {**copy, **state}}, tmp_path / "dup.pth.tar")
    model = _import(meta, x.shape, tmp_path / "dup.pth.tar")
    assert model.modules[0][1] == "module.conv1"
    y = simulate(model.network, x, device=None).outputs[model.network.layers[-1].name]
    assert np.array_equal(y.numpy().reshape(expected.shape), expected)
    copy["module.fc.op.weight"] = copy["module.fc.op.weight"] * 0
    torch.save({**doc, "state_dict": {**copy, **state}}, tmp_path / "bad.pth.tar")
    with pytest.raises(ConfigError, match="5 layers with weights but the checkpoint has 10"):
        _import(meta, x.shape, tmp_path / "bad.pth.tar")


def test_shift_and_bits_keys_follow_the_vendor_naming(tmp_path: Path) -> None:
    """For `P.X.weight` the vendor reads `P.output_shift` / `P.weight_bits`, whatever X is."""
    state = {
        "features.0.weight": torch.ones(4, 1, 3, 3),
        "features.output_shift": torch.tensor([2.0]),
        "features.weight_bits": torch.tensor([8.0]),
        "features.bias_bits": torch.tensor([8.0]),
        "features.shift_quantile": torch.tensor([1.0]),
        "features.adjust_output_shift": torch.tensor([0.0]),
        "features.0.output_shift": torch.tensor([-1.0]),  # not read by the vendor
    }
    torch.save({"state_dict": state, "arch": "x", "epoch": 1}, tmp_path / "c.pth.tar")
    (tmp_path / "n.yaml").write_text("arch: x\ndataset: d\nlayers:\n  - processors: 1\n")
    model = read_ai8x(tmp_path / "n.yaml", tmp_path / "c.pth.tar", (1, 4, 4), device="MAX78000")
    assert model.network.layers[0].quant.output_shift == 2


OUTPUTS = sorted((GOLDEN / "outputs").glob("*.npz"))


@pytest.mark.parametrize("path", OUTPUTS, ids=[p.stem for p in OUTPUTS])
def test_every_output_layer_is_bit_exact(path: Path) -> None:
    """The SSD detectors' other `output: true` layers (vendor run with --stop-after N)."""
    meta, x, _ = _demo(GOLDEN / "known" / path.name)
    model = _import(meta, x.shape)
    layers = simulate(model.network, x, all_layers=True, device=None).layers
    answers = np.load(path)
    assert len(answers.files) == len(model.network.outputs) - 1
    for key in answers.files:
        name = model.network.layers[int(key.removeprefix("layer"))].name
        assert name in model.network.outputs
        expected = answers[key]
        assert np.array_equal(layers[name].numpy().reshape(expected.shape), expected), key
