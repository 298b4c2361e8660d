"""``compile --probe`` per-layer C dumps and ``cnnforge diff``: equal sets, the first diverging
layer with position and values, the supported formats, bad input."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from cnnforge.cli import main
from cnnforge.errors import InputError
from cnnforge.frontend.torch_fx import trace
from cnnforge.passes.lower import lower_to_hardware
from cnnforge.sim import simulate
from cnnforge.sim.float_eval import run_float
from cnnforge.targets.max7800x.c import emit_c
from cnnforge.targets.max7800x.c.probe import (
    compare,
    compare_layer,
    find_network,
    network_pairs,
    pair_layers,
    read_layer_outputs,
    run_probe,
)
from support.emit_c import random_input, random_network


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(argv)
    out, err = capsys.readouterr()
    return int(info.value.code), out, err


@pytest.fixture(scope="module")
def probed(tmp_path_factory) -> tuple[Path, Path, list[str]]:
    """A random multi-layer network: its C probe directory and the simulator's layers (.npz)."""
    root = tmp_path_factory.mktemp("probe")
    net = random_network(21)
    assert len(net.layers) >= 3
    x = random_input(net, 21)
    result = simulate(net, x[None], all_layers=True, device=None)
    emit_c(net, x, {k: v.numpy()[0] for k, v in result.outputs.items()}, root)
    run_probe(root, root, root / "probe")
    layers = {x.name: result.layers[x.name].numpy()[0] for x in net.layers}
    np.savez(root / "sim.npz", **layers)
    return root / "probe", root / "sim.npz", [x.name for x in net.layers]


def test_probe_equals_simulator(probed, capsys) -> None:
    probe, sim, names = probed
    dumped = read_layer_outputs(probe)
    assert list(dumped) == names
    result = compare(dumped, read_layer_outputs(sim))
    assert result.first_divergence is None and len(result.layers) == len(names)
    code, out, _ = run(["diff", str(probe), str(sim)], capsys)
    assert code == 0 and f"all {len(names)} common layers are equal" in out


def test_diff_names_the_first_diverging_layer(probed, tmp_path, capsys) -> None:
    probe, sim, names = probed
    bad = tmp_path / "bad"
    shutil.copytree(probe, bad)
    data = bytearray((bad / "001.bin").read_bytes())
    data[0] = (data[0] + 1) % 256
    (bad / "001.bin").write_bytes(bytes(data))
    code, out, _ = run(["diff", str(sim), str(bad)], capsys)
    assert code == 1
    assert f"first divergence: layer {names[1]} at (0, 0" in " ".join(out.split())


def test_formats_and_float_scaling(tmp_path) -> None:
    d = tmp_path / "npy"
    d.mkdir()
    np.save(d / "a.npy", np.array([[1, 2], [3, 4]]))
    np.save(d / "b.npy", np.array([5]))
    got = read_layer_outputs(d)
    assert set(got) == {"a", "b"}
    # float values are in units of 1/128 next to integers (docs/hardware/arithmetic.md R1.1)
    same = compare_layer("a", np.array([[1, 2], [3, 4]]) / 128.0, got["a"])
    assert same.equal
    off = compare_layer("a", np.array([[1, 2], [3, 5]]), got["a"][None])
    assert (off.first_index, off.a_value, off.b_value, off.differing) == ((1, 1), 5, 4, 1)
    assert compare_layer("a", np.array([1.0, 2.5]) / 128, np.array([1, 2]), tolerance=0.5).equal


def test_bad_input(tmp_path, capsys) -> None:
    with pytest.raises(InputError, match="no layer name in common"):
        compare({"a": np.zeros(2)}, {"b": np.zeros(2)})
    with pytest.raises(InputError, match="shapes"):
        compare_layer("a", np.zeros(3), np.zeros(4))
    code, _, err = run(["diff", str(tmp_path / "nope"), str(tmp_path / "nope2")], capsys)
    assert code == 2 and "not a set of layer outputs" in err
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "manifest.txt").write_text("garbage\n")
    code, _, err = run(["diff", str(tmp_path / "m"), str(tmp_path / "m")], capsys)
    assert code == 2 and "manifest.txt:1" in err


class _Small(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.relu1 = torch.nn.ReLU()
        self.pool = torch.nn.MaxPool2d(2)
        self.conv2 = torch.nn.Conv2d(8, 4, 3, padding=1)
        self.relu2 = torch.nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu2(self.conv2(self.pool(self.relu1(self.conv1(x)))))


def _dump(root: Path, network, x: np.ndarray, with_description: bool) -> Path:
    """Every layer's float output as .npy files, with the network's network.json if asked."""
    root.mkdir()
    for name, value in run_float(network, x, all_layers=True).items():
        np.save(root / f"{name}.npy", value.numpy())
    if with_description:
        (root / "network.json").write_text(network.to_json(), "utf-8")
    return root


def test_model_level_against_fused_layers(tmp_path, capsys) -> None:
    torch.manual_seed(0)
    model = trace(_Small().eval(), (3, 8, 8), name="small")
    hardware = lower_to_hardware(model, device=None).network
    assert hardware.is_hardware and not model.is_hardware
    # conv1 + relu1 -> conv1; pool (conv2's input pooling) + conv2 + relu2 -> conv2
    assert pair_layers(hardware, model) == {"conv1": "relu1", "conv2": "relu2"}
    x = np.random.default_rng(0).uniform(-1, 1, (3, 8, 8))
    a = _dump(tmp_path / "model", model, x, True)
    b = _dump(tmp_path / "hw", hardware, x, True)
    for first, second in ((a, b), (b, a)):
        code, out, _ = run(["diff", str(first), str(second), "--tolerance", "1e-6"], capsys)
        assert code == 0 and f"all {len(hardware.layers)} common layers are equal" in out, out
    # without a description on one side: pairing by name as before
    (a / "network.json").unlink()
    assert network_pairs(find_network(a), find_network(b)) is None
    code, out, _ = run(["diff", str(a), str(b), "--tolerance", "1e-6"], capsys)
    assert "first divergence" in " ".join(out.split()) and code == 1


def test_simulate_layers_keep_the_network_order_for_diff(tmp_path, capsys) -> None:
    """``simulate --layers`` writes the layers in network order (order.txt); ``diff`` of two such
    sets names the network's first diverging layer, not the alphabetically first (issue 31)."""
    from cnnforge.api.targets import device_for
    from cnnforge.checkpoint import save_quantized
    from cnnforge.passes.check import check_network
    from support.targets import rules_of

    dev = device_for("MAX78000", "simulate")
    net = next(
        n
        for n in map(random_network, range(100))
        if len(n) > 2 and not check_network(n, dev, rules=rules_of(dev))
    )
    names = [x.name for x in net.layers]
    save_quantized(net, tmp_path / "q.pth")
    x = random_input(net, 6)
    np.save(tmp_path / "x.npy", x)
    sets = []
    for i in range(2):
        out = tmp_path / f"L{i}"
        code, _, err = run(["simulate", "--network", str(tmp_path / "q.pth"), "--input",
                            str(tmp_path / "x.npy"), "--output", str(tmp_path / f"y{i}.npy"),
                            "--layers", str(out)], capsys)  # fmt: skip
        assert code == 0, err
        sets.append(out)
    assert list(read_layer_outputs(sets[0])) == names
    # change every layer of the second set: the first divergence is the network's first layer
    for f in sets[1].glob("*.npy"):
        np.save(f, np.load(f) + 1)
    code, out, _ = run(["diff", str(sets[0]), str(sets[1])], capsys)
    assert code == 1
    assert f"first divergence: layer {names[0]} " in out
    assert "layer order: the network's order" in out
    old = tmp_path / "by_name"  # a directory without order.txt: taken alphabetically, and said
    old.mkdir()
    for name, value in read_layer_outputs(sets[0]).items():
        np.save(old / f"{name}.npy", value)
    code, out, _ = run(["diff", str(old), str(sets[0])], capsys)
    assert code == 0 and "alphabetically" in out
