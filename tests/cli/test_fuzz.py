"""Bad input of every kind, generated: exit 2 with one line, never an internal error (exit 70),
no leftovers, nothing outside the output path touched (issue 18).

Five families, each a hypothesis test run in-process through ``cnnforge.cli.main``: mutated
vendor YAML, mutated checkpoints (vendor and cnnforge's own), odd sample arrays, broken model
files and references, awkward output paths. ``CNNFORGE_FUZZ=large`` runs 1,000 cases per
family (``medium``: 200; a number: that many; default: 40). ``CNNFORGE_FUZZ_REPORT=FILE``
writes the counts per family and exit status as JSON.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from hypothesis import given, reject, settings
from hypothesis import strategies as st

from cnnforge.checkpoint import save_quantized
from cnnforge.outputs import MANIFEST
from support.fuzz import (
    CKPT,
    MODEL_SOURCE,
    NASTY_TEXTS,
    OUTPUTS,
    PATHS,
    REFERENCES,
    SAMPLE,
    SNIPPETS,
    YAML_KEYS,
    YAML_SPECIALS,
    check_outcome,
    fuzz_examples,
    load_seeds,
    run_cli,
    scalars,
    snapshot,
    workdir,
    write_report,
    yaml_values,
)
from support.paths import AI8X

pytestmark = pytest.mark.skipif(not AI8X.is_dir(), reason="../shared/data/ai8x is not present")

EXAMPLES = fuzz_examples()
CANARY = "canary-ran"


def _canary(*args):
    """A global a crafted pickle may name: it must never run (it leaves a file if it does)."""
    Path(CANARY).write_text("ran")
    return args


@pytest.fixture(scope="module")
def report():
    """Counts per family and exit status, merged into $CNNFORGE_FUZZ_REPORT when set."""
    counts: dict[str, Counter] = {}
    yield counts
    write_report(counts)


@pytest.fixture(scope="module")
def seeds():
    """The shipped files' contents, parsed once."""
    return load_seeds()


def _vendor_command(kind: str, yaml_path: str, ckpt: str, sample: str) -> list[str]:
    pair = ["--ai8x-yaml", yaml_path, "--ai8x-checkpoint", ckpt]
    return {
        "check": ["check", *pair],
        "analyze": ["analyze", *pair],
        "plan": ["plan", *pair, "-o", "out"],
        "validate": ["plan", *pair, "--validate-only"],
        "simulate": ["simulate", *pair, "--input", sample, "--output", "o.npy"],
        "compile": ["compile", *pair, "--sample", sample, "-o", "out", "--no-report"],
    }[kind]


VENDOR_COMMANDS = st.sampled_from(
    ["check", "check", "analyze", "plan", "validate", "simulate", "simulate", "compile"]
)


def _run_case(report, family: str, args: list[str], work: Path, outputs=OUTPUTS) -> None:
    before = snapshot(work)
    try:
        outcome = run_cli(args, work)
        check_outcome(outcome, before, snapshot(work), outputs)
        assert not (work / CANARY).exists(), "a pickled global ran during a load"
        report.setdefault(family, Counter())[outcome.code] += 1
        if os.environ.get("CNNFORGE_FUZZ_LOG"):  # one line per case, for reading the messages
            with open(os.environ["CNNFORGE_FUZZ_LOG"], "a", encoding="utf-8") as log:
                line = outcome.err.strip().splitlines()[-1:] or [""]
                log.write(f"{family}\t{outcome.code}\t{args!r}\t{line[0]!r}\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ---- 1. vendor YAML ----------------------------------------------------------------------------


def _mutate_doc(data, doc: dict) -> dict:
    for _ in range(data.draw(st.integers(1, 3), label="edits")):
        layers = doc.get("layers") if isinstance(doc.get("layers"), list) else []
        where = data.draw(st.integers(-1, max(len(layers) - 1, 0)), label="where")
        target = layers[where] if where >= 0 and layers and isinstance(layers[where], dict) else doc
        key = data.draw(st.one_of(st.sampled_from(YAML_KEYS), st.text(max_size=8)), label="key")
        action = data.draw(st.sampled_from(["set", "set", "name", "delete", "dup", "drop"]))
        if action == "set":
            target[key] = data.draw(yaml_values, label="value")
        elif action == "name":
            target[data.draw(st.sampled_from(["name", "arch", "dataset"]))] = data.draw(
                st.sampled_from(NASTY_TEXTS)
            )
        elif action == "delete":
            target.pop(key, None)
        elif action == "dup" and layers:
            layers.insert(where, dict(layers[where]))
        elif action == "drop" and layers:
            layers.pop(where)
    return doc


def _mutate_text(data, text: str) -> str:
    lines = text.splitlines(keepends=True)
    op = data.draw(st.sampled_from(["insert", "delete", "dupline", "swap", "truncate"]))
    pos = data.draw(st.integers(0, len(text)), label="pos")
    if op == "insert":
        return text[:pos] + data.draw(st.text(max_size=8), label="ins") + text[pos:]
    if op == "delete":
        return text[:pos] + text[pos + data.draw(st.integers(1, 20)) :]
    i = data.draw(st.integers(0, len(lines) - 1))
    j = data.draw(st.integers(0, len(lines) - 1))
    if op == "dupline":
        return "".join([*lines[: i + 1], lines[i], *lines[i + 1 :]])
    if op == "swap":
        lines[i], lines[j] = lines[j], lines[i]
        return "".join(lines)
    return text[:pos]


@settings(max_examples=EXAMPLES)
@given(data=st.data())
def test_fuzz_vendor_yaml(seeds, report, data) -> None:
    work = workdir()
    target = work / "in" / "net.yaml"
    mode = data.draw(st.sampled_from(["doc", "doc", "text", "special", "file"]), label="mode")
    if mode == "doc":
        doc = _mutate_doc(data, yaml.safe_load(seeds["yaml"]))
        try:
            text = yaml.safe_dump(doc, sort_keys=False)
        except yaml.YAMLError:
            shutil.rmtree(work)
            reject()
        target.write_text(text, encoding="utf-8")
    elif mode == "text":
        target.write_text(_mutate_text(data, seeds["yaml"]), encoding="utf-8")
    elif mode == "special":
        target.write_text(data.draw(st.sampled_from(YAML_SPECIALS)), encoding="utf-8")
    else:
        target.unlink()
        kind = data.draw(st.sampled_from(["fifo", "dir", "missing", "binary", "big"]))
        if kind == "fifo":
            os.mkfifo(target)
        elif kind == "dir":
            target.mkdir()
        elif kind == "binary":
            target.write_bytes(bytes(range(256)) * 4)
        elif kind == "big":
            target.write_text("# pad\n" * 400_000)
    args = _vendor_command(
        data.draw(VENDOR_COMMANDS), "in/net.yaml", "in/ckpt.pth.tar", "in/sample_mnist.npy"
    )
    _run_case(report, "yaml", args, work)


# ---- 2. checkpoints ------------------------------------------------------------------------


def _odd_tensor(data, orig: torch.Tensor) -> object:
    kind = data.draw(
        st.sampled_from(
            [
                "dtype",
                "frac",
                "nan",
                "inf",
                "huge",
                "shape",
                "empty",
                "scalar",
                "sparse",
                "meta",
                "quantized",
                "strided",
                "value",
                "complex",
            ]
        ),
        label="tensor",
    )
    plain = isinstance(orig, torch.Tensor) and orig.layout == torch.strided
    plain = plain and not orig.is_quantized and orig.device.type == "cpu" and not orig.is_complex()
    base = orig.detach().clone().to(torch.float32) if plain else torch.ones(3, 3)
    if kind == "dtype":
        dtype = data.draw(
            st.sampled_from(
                [
                    torch.float16,
                    torch.bfloat16,
                    torch.float64,
                    torch.int8,
                    torch.int32,
                    torch.int64,
                    torch.uint8,
                    torch.bool,
                    torch.int16,
                ]
            )
        )
        return base.to(dtype)
    if kind in ("frac", "nan", "inf", "huge"):
        flat = base.reshape(-1)
        if flat.numel():
            flat[data.draw(st.integers(0, flat.numel() - 1))] = {
                "frac": 0.5,
                "nan": float("nan"),
                "inf": float("-inf"),
                "huge": 1e30,
            }[kind]
        return flat.reshape(base.shape)
    if kind == "shape":
        dims = data.draw(st.lists(st.integers(0, 9), min_size=0, max_size=5))
        return torch.zeros(dims)
    if kind == "empty":
        return torch.zeros(0)
    if kind == "scalar":
        return torch.tensor(data.draw(st.integers(-(2**40), 2**40)))
    if kind == "sparse":
        return base.reshape(base.shape[0], -1).to_sparse() if base.dim() else base
    if kind == "meta":
        return torch.empty(base.shape, device="meta")
    if kind == "quantized":
        return torch.quantize_per_tensor(base, 0.5, 0, torch.qint8)
    if kind == "strided":
        return base.reshape(-1)[::2] if base.numel() > 1 else base
    if kind == "complex":
        return base.to(torch.complex64)
    return data.draw(st.one_of(scalars, st.just(1 + 2j), st.just(b"bytes")), label="value")


def _mutate_vendor_ckpt(data, doc: dict) -> dict:
    state = dict(doc["state_dict"])
    keys = list(state)
    for _ in range(data.draw(st.integers(1, 3), label="edits")):
        action = data.draw(st.sampled_from(["value", "value", "value", "del", "add", "top"]))
        key = data.draw(st.sampled_from(keys), label="key")
        if action == "value":
            state[key] = _odd_tensor(data, state[key]) if key in state else None
        elif action == "del":
            state.pop(key, None)
        elif action == "add":
            new = data.draw(
                st.sampled_from(["x.bn.weight", "extra.weight", "module.conv1.op.weight", "w"])
            )
            state[new] = _odd_tensor(data, torch.ones(3, 3))
        else:
            top = data.draw(st.sampled_from(["arch", "epoch", "extras", "state_dict"]))
            doc = {**doc, top: data.draw(yaml_values, label="top")}
    return {**doc, "state_dict": state} if isinstance(doc.get("state_dict"), dict) else doc


def _evil_pickles(path: Path, kind: str) -> None:
    """Checkpoints whose pickle calls a global: an optimizer constructor, or a canary."""

    class Reduce:
        def __init__(self, fn, args):
            self.fn, self.args = fn, args

        def __reduce__(self):
            return (self.fn, self.args)

    if kind == "optimizer":
        payload = Reduce(torch.optim.SGD, ([torch.zeros(1, requires_grad=True)],))
    else:
        payload = Reduce(_canary, ("x",))
    torch.save(
        {"state_dict": {"conv1.op.weight": torch.zeros(2, 1, 3, 3)}, "extras": payload}, path
    )


@settings(max_examples=EXAMPLES)
@given(data=st.data())
def test_fuzz_checkpoints(seeds, report, data) -> None:
    work = workdir()
    target = work / "in" / "ckpt.pth.tar"
    mode = data.draw(st.sampled_from(["vendor", "vendor", "vendor", "bytes", "evil", "cnnforge"]))
    if mode == "vendor":
        torch.save(_mutate_vendor_ckpt(data, dict(seeds["ckpt"])), target)
    elif mode == "bytes":
        raw = bytearray(CKPT.read_bytes())
        op = data.draw(st.sampled_from(["truncate", "flip", "empty", "text"]))
        pos = data.draw(st.integers(0, len(raw) - 1))
        if op == "truncate":
            raw = raw[:pos]
        elif op == "flip":
            raw[pos] ^= 0xFF
        elif op == "empty":
            raw = bytearray()
        else:
            raw = bytearray(b"state_dict: not a pickle\n")
        target.write_bytes(bytes(raw))
    elif mode == "evil":
        _evil_pickles(target, data.draw(st.sampled_from(["optimizer", "canary"])))
    else:
        _cnnforge_checkpoint(data, seeds["network"], work)
        args = [
            "simulate",
            "--network",
            "in/q.pth",
            "--input",
            "in/sample_mnist.npy",
            "--output",
            "o.npy",
        ]
        _run_case(report, "checkpoint", args, work)
        return
    args = _vendor_command(
        data.draw(VENDOR_COMMANDS), "in/net.yaml", "in/ckpt.pth.tar", "in/sample_mnist.npy"
    )
    _run_case(report, "checkpoint", args, work)


def _cnnforge_checkpoint(data, network, work: Path) -> None:
    """cnnforge's own checkpoint with its JSON description or tensors edited."""
    path = work / "in" / "q.pth"
    save_quantized(network, path)
    doc = torch.load(path, weights_only=True)
    if data.draw(st.booleans(), label="json"):
        net = json.loads(doc["network"])
        node = net
        for _ in range(data.draw(st.integers(0, 4), label="depth")):
            children = list(node.values()) if isinstance(node, dict) else list(node)
            inner = [c for c in children if isinstance(c, dict | list) and c]
            if not inner:
                break
            node = data.draw(st.sampled_from(inner), label="path")
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        key = data.draw(st.sampled_from(keys), label="key") if keys else None
        if key is not None:
            if isinstance(node, dict) and data.draw(st.booleans(), label="drop"):
                node.pop(key, None)
            else:
                node[key] = data.draw(yaml_values, label="json value")
        doc["network"] = json.dumps(net)
    else:
        name = data.draw(st.sampled_from(sorted(doc["layers"])))
        field = data.draw(st.sampled_from(["weight", "bias", "output_shift", "weight_bits"]))
        old = doc["layers"][name].get(field)
        doc["layers"][name][field] = (
            _odd_tensor(data, old) if isinstance(old, torch.Tensor) else data.draw(scalars)
        )
    torch.save(doc, path)


# ---- 3. samples ----------------------------------------------------------------------------


@settings(max_examples=EXAMPLES)
@given(data=st.data())
def test_fuzz_samples(report, data) -> None:
    work = workdir()
    target = work / "in" / "sample_mnist.npy"
    mode = data.draw(st.sampled_from(["array", "array", "array", "file"]), label="mode")
    if mode == "array":
        dtype = data.draw(
            st.sampled_from(
                [
                    "int8",
                    "int16",
                    "int64",
                    "uint8",
                    "uint64",
                    "float32",
                    "float64",
                    "complex64",
                    "bool",
                    "<U3",
                    "object",
                    "i1,i1",
                    ">i4",
                ]
            )
        )
        shape = data.draw(
            st.one_of(
                st.sampled_from(
                    [
                        (1, 28, 28),
                        (28, 28),
                        (2, 1, 28, 28),
                        (1, 1, 28, 28),
                        (1, 28, 29),
                        (3, 28, 28),
                        (),
                        (0,),
                        (1, 0, 28),
                        (1, 28, 28, 1, 1),
                    ]
                ),
                st.lists(st.integers(0, 6), max_size=5).map(tuple),
            )
        )
        fill = data.draw(st.sampled_from([0, 127, -128, 128, -129, 1000, 2**40, 0.5, float("nan")]))
        array = np.full(shape, 0, dtype=object)
        array.fill(fill)
        try:
            array = array.astype(dtype)
        except (ValueError, TypeError, OverflowError):
            array = np.zeros(shape, dtype=dtype)
        if data.draw(st.booleans(), label="fortran") and array.ndim > 1:
            array = np.asfortranarray(array)
        np.save(target, array, allow_pickle=dtype == "object")
    else:
        target.unlink()
        kind = data.draw(st.sampled_from(["npz", "truncated", "garbage", "empty", "fifo", "dir"]))
        if kind == "npz":
            np.savez(target, a=np.load(SAMPLE))
            target.with_suffix(".npy.npz").rename(target)
        elif kind == "truncated":
            target.write_bytes(SAMPLE.read_bytes()[: data.draw(st.integers(0, 200))])
        elif kind == "garbage":
            target.write_bytes(b"\x93NUMPY\x01\x00garbage")
        elif kind == "empty":
            target.write_bytes(b"")
        elif kind == "fifo":
            os.mkfifo(target)
        else:
            target.mkdir()
    command = data.draw(st.sampled_from(["simulate", "simulate", "simulate", "compile"]))
    args = _vendor_command(command, "in/net.yaml", "in/ckpt.pth.tar", "in/sample_mnist.npy")
    _run_case(report, "sample", args, work)


# ---- 4. model files and references -------------------------------------------------------------


@settings(max_examples=EXAMPLES)
@given(data=st.data())
def test_fuzz_models(report, data) -> None:
    work = workdir()
    source = MODEL_SOURCE
    for marker, snippets in SNIPPETS.items():
        if data.draw(st.integers(0, 2), label=marker) == 2:
            source = source.replace(f"# {marker}", data.draw(st.sampled_from(snippets)), 1)
    if data.draw(st.integers(0, 3)) == 3:
        pos = data.draw(st.integers(0, len(source)))
        source = source[:pos] + data.draw(st.text(max_size=3)) + source[pos + 1 :]
    (work / "in" / "model.py").write_text(source, encoding="utf-8")
    os.mkfifo(work / "in" / "fifo.py")
    np.save(work / "in" / "s.npy", np.random.default_rng(0).integers(-128, 128, (3, 8, 8)))
    ref = data.draw(st.sampled_from(REFERENCES), label="ref")
    shape = data.draw(st.sampled_from(["3,8,8"] * 4 + ["3,8", "0,8,8", "3,x,8", "4,8,8", "3,1,1"]))
    extra = []
    if data.draw(st.integers(0, 3)) == 3:
        arg = data.draw(
            st.sampled_from(
                [
                    "width=2",
                    "width=0",
                    "width=-1",
                    "width=abc",
                    "depth=3",
                    "width=2.5",
                    "width",
                    "=3",
                    "width=64",
                ]
            )
        )
        extra = ["--model-arg", arg]
    command = data.draw(
        st.sampled_from(["check", "analyze", "quantize", "calibrate", "plan", "compile"])
    )
    args = {
        "check": ["check", ref, "-i", shape],
        "analyze": ["analyze", ref, "-i", shape],
        "quantize": ["quantize", ref, "-i", shape, "-o", "q.pth"],
        "calibrate": ["quantize", ref, "-i", shape, "-o", "q.pth", "--calibration", "in/s.npy"],
        "plan": ["plan", ref, "-i", shape, "-o", "out"],
        "compile": [
            "compile",
            ref,
            "--ptq",
            "-i",
            shape,
            "--sample",
            "in/s.npy",
            "-o",
            "out",
            "--no-report",
        ],
    }[command]
    _run_case(report, "model", [*args, *extra], work)


# ---- 5. output paths -------------------------------------------------------------------------


def _output_world(work: Path) -> None:
    (work / "home").mkdir()
    (work / "home" / "notes").write_text("home")
    (work / "link").symlink_to(work / "bystander")
    (work / "filelink").symlink_to(work / "bystander" / "a.txt")
    (work / "empty").mkdir()
    os.mkfifo(work / "fifo")
    for name in ("prev", "prev-extra"):  # a previous cnnforge output (+ a file of the user's)
        (work / name).mkdir()
        (work / name / "old.txt").write_text("old")
        (work / name / MANIFEST).write_text(json.dumps({"files": ["old.txt"]}))
    (work / "prev-extra" / "mine.txt").write_text("mine")


@settings(max_examples=EXAMPLES)
@given(data=st.data())
def test_fuzz_output_paths(report, data) -> None:
    work = workdir()
    _output_world(work)
    path = data.draw(st.sampled_from(PATHS), label="path")
    second = data.draw(st.sampled_from(PATHS), label="second")
    overwrite = ["--overwrite"] if data.draw(st.booleans(), label="overwrite") else []
    pair = ["--ai8x-yaml", "in/net.yaml", "--ai8x-checkpoint", "in/ckpt.pth.tar"]
    command = data.draw(
        st.sampled_from(["plan", "simulate", "layers", "check", "analyze", "compile"])
    )
    args = {
        "plan": ["plan", *pair, "-o", path],
        "simulate": ["simulate", *pair, "--input", "in/sample_mnist.npy", "--output", path],
        "layers": [
            "simulate",
            *pair,
            "--input",
            "in/sample_mnist.npy",
            "--output",
            path,
            "--layers",
            second,
        ],
        "check": ["check", *pair, "--json", path],
        "analyze": ["analyze", *pair, "--json", path, "--markdown", second],
        "compile": ["compile", *pair, "--sample", "in/sample_mnist.npy", "-o", path, "--no-report"],
    }[command]
    saved = {k: os.environ.get(k) for k in ("HOME", "MPLCONFIGDIR")}
    os.environ["HOME"] = str(work / "home")  # "home" is refused as a home directory
    os.environ["MPLCONFIGDIR"] = tempfile.gettempdir()  # matplotlib's cache: not in "home"
    try:
        _run_case(report, "output", [*args, *overwrite], work, outputs=(path, second))
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
