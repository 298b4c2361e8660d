"""The fuzz suite's resource family (issue 27): well-formed input that asks for more than the
machine has, or carries a value that is not a number. Huge and absurd shapes, wide layers,
oversized weights, ``.npy`` headers that lie, files of the wrong kind, non-finite checkpoint
metadata, deeply nested network JSON, ``__getattr__`` bombs, over-long output names.

Same rules as test_fuzz.py (exit 0/1/2, one line, no traceback, no leftovers), and each case
ends within ``CASE_SECONDS`` without growing the process past ``CASE_BYTES``. Commands that
could really run get ``--max-memory 256M``: what the estimate lets through is then small.
"""

from __future__ import annotations

import json
import math
import os
import resource
import shutil
import struct
import time
from collections import Counter

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.fuzz import (
    MODEL_SOURCE,
    OUTPUTS,
    check_outcome,
    fuzz_examples,
    load_seeds,
    run_cli,
    snapshot,
    workdir,
    write_report,
)
from support.paths import AI8X

pytestmark = pytest.mark.skipif(not AI8X.is_dir(), reason="../shared/data/ai8x is not present")

EXAMPLES = fuzz_examples()
CASE_SECONDS = 60
CASE_BYTES = 2**30
LIMIT = ["--max-memory", "256M"]

SHAPES = (
    "3,100000,100000",
    "3,65536,65536",
    "999999999999999999999,1,1",
    "2147483648,1,1",
    "1,1048576,1048576",
    "3,4096,4096",
    "3,1000000",
    "100000,8,8",
)
WIDTHS = ("width=100000", "width=1000000", "width=2147483647", "width=1025", "width=4096")
INIT_BOMBS = (
    "self.big = nn.Linear(100000, 100000)",
    "self.big = nn.Conv2d(4096, 4096, 64)",
    "self.big = nn.Parameter(torch.empty(10**6, 10**6))",
)
CLASS_BOMBS = (
    "    def __getattr__(self, name):\n        return self.__getattr__(name + 'x')\n",
    "    def __getattr__(self, name):\n        raise ValueError('no ' + name)\n",
    "    def __getattr__(self, name):\n        return getattr(self, name)\n",
    "    def __getattribute__(self, name):\n        if name == 'training':\n"
    "            raise RuntimeError('bomb')\n        return super().__getattribute__(name)\n",
)
EPOCHS = (math.nan, math.inf, -math.inf, 1e300, -1e300, 2**70, -(2**70), float("-0"))
NPY_SHAPES = ((10**12, 28, 28), (1, 2**40, 2**40), (2**62,), (1, 28, 28), (0,), (10**6, 1, 28))


@pytest.fixture(scope="module")
def seeds():
    """The shipped files' contents, parsed once."""
    return load_seeds()


@pytest.fixture(scope="module")
def report():
    """Counts per family and exit status, merged into $CNNFORGE_FUZZ_REPORT when set."""
    counts: dict[str, Counter] = {}
    yield counts
    write_report(counts)


def _rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _run(report, kind: str, args: list[str], work) -> None:
    """One case: the clean-outcome rules, within the time and memory bounds."""
    before = snapshot(work)
    rss, start = _rss(), time.monotonic()
    try:
        outcome = run_cli(args, work)
        took = time.monotonic() - start
        check_outcome(outcome, before, snapshot(work), OUTPUTS)
        assert took < CASE_SECONDS, f"{args}: {took:.0f} s"
        assert _rss() - rss < CASE_BYTES, f"{args}: grew {(_rss() - rss) >> 20} MB"
        report.setdefault("resource", Counter())[outcome.code] += 1
        report.setdefault(f"resource/{kind}", Counter())[outcome.code] += 1
        if os.environ.get("CNNFORGE_FUZZ_LOG"):
            with open(os.environ["CNNFORGE_FUZZ_LOG"], "a", encoding="utf-8") as log:
                line = outcome.err.strip().splitlines()[-1:] or [""]
                log.write(f"resource/{kind}\t{outcome.code}\t{args!r}\t{line[0]!r}\t{took:.1f}\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _model(work, init: str = "", cls: str = "") -> str:
    source = MODEL_SOURCE.replace("# INIT", init or "pass", 1)
    source = source.replace("    def forward(self, x):", cls + "\n    def forward(self, x):", 1)
    (work / "in" / "model.py").write_text(source, encoding="utf-8")
    return "in/model.py:Net"


def _model_command(data, ref: str, shape: str, extra: list[str]) -> list[str]:
    command = data.draw(st.sampled_from(["check", "analyze", "quantize", "plan"]), label="cmd")
    out = {"quantize": ["-o", "q.pth"], "plan": ["-o", "out"]}.get(command, [])
    return [command, ref, "-i", shape, *out, *extra]


def _npy_header(path, shape: tuple[int, ...], dtype: str, payload: int) -> None:
    """An .npy file whose header says ``shape`` followed by ``payload`` bytes of data."""
    header = f"{{'descr': '{dtype}', 'fortran_order': False, 'shape': {shape!r}, }}"
    header += " " * (-(len(header) + 11) % 64) + "\n"
    path.write_bytes(
        b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + b"\0" * payload
    )


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_fuzz_resources(seeds, report, data) -> None:
    work = workdir()
    kind = data.draw(
        st.sampled_from(
            ["shape", "width", "weights", "bomb", "npy", "kind", "epoch", "json", "name", "device"]
        ),
        label="kind",
    )
    limit = LIMIT if data.draw(st.integers(0, 4), label="limit") else []
    pair = ["--ai8x-yaml", "in/net.yaml", "--ai8x-checkpoint", "in/ckpt.pth.tar"]
    if kind == "shape":
        shape = data.draw(
            st.one_of(
                st.sampled_from(SHAPES),
                st.lists(st.integers(1, 10**7), min_size=3, max_size=3).map(
                    lambda s: ",".join(map(str, s))
                ),
            ),
            label="shape",
        )
        elements = math.prod(int(n) for n in shape.split(","))
        limit = limit if elements > 2**36 else LIMIT  # only absurd ones run without a limit
        if data.draw(st.booleans(), label="vendor"):
            args = ["simulate", *pair, "-i", shape, "--input", "in/sample_mnist.npy"]
            args += ["--output", "o.npy", *limit]
        else:
            args = _model_command(data, _model(work), shape, limit)
    elif kind == "width":
        arg = data.draw(st.sampled_from(WIDTHS), label="width")
        args = _model_command(data, _model(work), "3,64,64", ["--model-arg", arg, *LIMIT])
    elif kind == "weights":
        ref = _model(work, init=data.draw(st.sampled_from(INIT_BOMBS), label="init"))
        args = _model_command(data, ref, "3,8,8", limit)
    elif kind == "bomb":
        ref = _model(work, cls=data.draw(st.sampled_from(CLASS_BOMBS), label="bomb"))
        args = _model_command(data, ref, "3,8,8", LIMIT)
    elif kind == "npy":
        shape = data.draw(st.sampled_from(NPY_SHAPES), label="npy shape")
        dtype = data.draw(st.sampled_from(["<f4", "|i1", "<i8", "<f8"]), label="dtype")
        payload = data.draw(st.sampled_from([0, 64, 784, 4096]), label="payload")
        _npy_header(work / "in" / "sample_mnist.npy", shape, dtype, payload)
        args = ["simulate", *pair, "--input", "in/sample_mnist.npy", "--output", "o.npy", *limit]
    elif kind == "kind":
        torch.save({"state_dict": {"w": torch.zeros(3)}}, work / "in" / "t.pth")
        np.save(work / "in" / "a.npy", np.zeros((1, 28, 28), np.int8))
        args = data.draw(
            st.sampled_from(
                [
                    ["simulate", *pair, "--input", "in/t.pth", "--output", "o.npy"],
                    ["compile", *pair, "--sample", "in/ckpt.pth.tar", "-o", "out", "--no-report"],
                    ["check", "--ai8x-yaml", "in/net.yaml", "--ai8x-checkpoint", "in/a.npy"],
                    ["check", _model(work), "-i", "3,8,8", "--checkpoint", "in/a.npy"],
                    [
                        "simulate",
                        "--network",
                        "in/a.npy",
                        "--input",
                        "in/a.npy",
                        "--output",
                        "o.npy",
                    ],
                    [
                        "quantize",
                        _model(work),
                        "-i",
                        "3,8,8",
                        "-o",
                        "q.pth",
                        "--calibration",
                        "in/t.pth",
                    ],
                ]
            ),
            label="args",
        )
    elif kind == "epoch":
        doc = dict(seeds["ckpt"])
        doc["epoch"] = data.draw(st.sampled_from(EPOCHS), label="epoch")
        torch.save(doc, work / "in" / "ckpt.pth.tar")
        command = data.draw(st.sampled_from(["check", "plan", "analyze"]), label="cmd")
        args = [command, *pair, *(["-o", "out"] if command == "plan" else [])]
    elif kind == "json":
        args = _json_case(data, seeds["network"], work)
    elif kind == "name":
        length = data.draw(st.sampled_from([256, 300, 5000]), label="length")
        name = data.draw(st.sampled_from(["x" * length, "/".join(["y" * 250] * 20)]), label="name")
        args = data.draw(
            st.sampled_from(
                [
                    ["quantize", _model(work), "-i", "3,8,8", "-o", name],
                    ["plan", *pair, "-o", name],
                    ["check", *pair, "--json", name],
                    ["simulate", *pair, "--input", "in/sample_mnist.npy", "--output", name],
                ]
            ),
            label="args",
        )
    else:
        classes = data.draw(st.sampled_from([1025, 100000, 10**9]), label="classes")
        args = ["check", "qat-unet", "--model-arg", f"classes={classes}"]
    _run(report, kind, args, work)


def _json_case(data, network, work) -> list[str]:
    """cnnforge's checkpoint with its network JSON nested deeply or holding non-numbers."""
    from cnnforge.checkpoint import save_quantized

    path = work / "in" / "q.pth"
    save_quantized(network, path)
    doc = torch.load(path, weights_only=True)
    if data.draw(st.booleans(), label="deep"):
        depth = data.draw(st.sampled_from([1000, 10_000, 100_000]), label="depth")
        opener = data.draw(st.sampled_from(["[", '{"a":']), label="opener")
        closer = "]" if opener == "[" else "}"
        doc["network"] = opener * depth + closer * depth
    else:
        net = json.loads(doc["network"])
        layer = data.draw(st.sampled_from(net["layers"]), label="layer")
        numeric = [k for k, v in layer.items() if isinstance(v, int | float | list)]
        key = data.draw(st.sampled_from(numeric or ["name"]), label="key")
        layer[key] = data.draw(
            st.sampled_from([math.nan, math.inf, -math.inf, 1e308, 2**70, [math.nan]]),
            label="value",
        )
        doc["network"] = json.dumps(net)
    torch.save(doc, path)
    return [
        "simulate",
        "--network",
        "in/q.pth",
        "--input",
        "in/sample_mnist.npy",
        "--output",
        "o.npy",
    ]
