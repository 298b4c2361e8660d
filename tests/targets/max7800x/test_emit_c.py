"""C emitter: worked examples of docs/hardware/arithmetic.md §7/§8 run as C, the arena, packing,
checksum, literals, determinism, golden files and errors.

Golden files: tests/golden_c/<case>/ holds the emitted project of a small network; regenerate
after an intended format change with
``CNNFORGE_REGEN_GOLDEN=1 python -m pytest -q tests/targets/max7800x/test_emit_c.py -k golden``
(they then skip).
"""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from cnnforge.c_text import c_string, fnv1a32, pack_rows
from cnnforge.errors import EmitError, InputError
from cnnforge.ir import BINARY_BITS, Activation, Layer, Network, Op, Quantized
from cnnforge.sim import simulate
from cnnforge.targets.max7800x.c import emit_c
from cnnforge.targets.max7800x.c.arena import Buffer, allocate, check_arena
from cnnforge.targets.max7800x.c.build import build_and_run, compile_c
from support.emit_c import build_batch, random_input, random_network
from support.golden import check_files, folder_files
from support.paths import TESTS

GOLDEN = TESTS / "golden_c"

# ---- worked examples as C (docs/hardware/arithmetic.md §7, §8)
# ------------------------------------------

EX_A_X = np.array([[[12, -7, 100], [-128, 55, 3], [27, 90, -64]]])
EX_A_W = np.array([[[[5, -3, 17], [2, 127, -128], [-9, 0, 44]]]])


def _one_output_conv(name: str, q: Quantized, in_shape: tuple[int, ...], **kw) -> Network:
    """A network of one conv2d (no padding) producing a single output value."""
    k = q.weights.shape[2:]
    layer = Layer(
        "conv",
        Op.CONV2D,
        out_shape=(1, 1, 1),
        in_channels=in_shape[0],
        out_channels=1,
        kernel_size=k,
        stride=(1, 1),
        padding=(0, 0),
        quant=q,
        **kw,
    )
    return Network(name, in_shape, (layer,))


def _conv_a(shift: int, *, wide: bool = False, act=Activation.RELU) -> Network:
    q = Quantized(8, EX_A_W, np.array([-20]), shift)
    act = Activation.NONE if wide else act
    return _one_output_conv("example_a", q, (1, 3, 3), wide=wide, activation=act)


def _conv_b(act: Activation) -> Network:
    q = Quantized(4, np.array([-3, 1, -1, 5]).reshape(1, 4, 1, 1), None, 0)
    return _one_output_conv("example_b", q, (4, 1, 1), activation=act)


def _big_shift(x: int) -> Network:
    """s = 15 > 7: the accumulator is shifted left by 8 and saturates (§8.3)."""
    q = Quantized(8, np.array([1]).reshape(1, 1, 1, 1), None, 15)
    return _one_output_conv(f"shift15_{x + 1}", q, (1, 1, 1))


EXAMPLES = [
    (_conv_a(1), EX_A_X, 39),
    (_conv_a(3), EX_A_X, 127),
    (_conv_a(-3), EX_A_X, 2),
    (_conv_a(1, wide=True), EX_A_X, 2507),
    (_conv_b(Activation.NONE), np.array([3, -1, 2, 0]).reshape(4, 1, 1), -1),
    (_conv_b(Activation.RELU), np.array([3, -1, 2, 0]).reshape(4, 1, 1), 0),
    (_conv_b(Activation.ABS), np.array([3, -1, 2, 0]).reshape(4, 1, 1), 1),
    (_big_shift(0), np.array([[[1]]]), 127),
    (_big_shift(-1), np.array([[[-1]]]), -128),
    (_big_shift(1), np.array([[[0]]]), 0),
]


def test_worked_examples_in_c(tmp_path: Path) -> None:
    """The spec's hand-computed values, given to the C as its known answer."""
    projects = []
    for i, (net, x, expected) in enumerate(EXAMPLES):
        sim = simulate(net, x[None], device=None).outputs[net.outputs[0]].reshape(-1).tolist()
        assert sim == [expected], net.name
        out = tmp_path / f"e{i}"
        out.mkdir()
        emit_c(net, x, np.array([expected]), out, api=f"e{i}")
        projects.append((f"e{i}", out))
    results = build_batch(tmp_path, projects)
    assert all(line.startswith("PASS") for line in results.values()), results


# ---- pieces ---------------------------------------------------------------------------------


@given(
    st.lists(st.tuples(st.integers(0, 300), st.integers(-1, 12), st.integers(0, 6)), max_size=25)
)
def test_arena_never_overlaps_live_buffers(specs) -> None:
    buffers = [
        Buffer(f"b{i}", size, start, start + length)
        for i, (size, start, length) in enumerate(specs)
    ]
    arena = allocate(buffers)
    check_arena(buffers, arena)
    assert all(off % 4 == 0 for off in arena.offsets)
    for t in range(-1, 19):  # never smaller than what is live at once
        live = sum(b.size for b in buffers if b.start <= t <= b.end)
        assert arena.size >= live


@given(
    st.sampled_from([1, 2, 4, BINARY_BITS]),
    st.integers(1, 4),
    st.integers(1, 40),
    st.integers(0, 2**32 - 1),
)
def test_pack_rows_unpacks_to_the_weights(bits: int, rows: int, cols: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    binary = bits == BINARY_BITS
    b = 1 if binary else bits
    w = (
        rng.choice([-1, 1], (rows, cols))
        if binary
        else rng.integers(-(1 << (b - 1)), 1 << (b - 1), (rows, cols))
    )
    packed = pack_rows(w, b, binary)
    assert packed.shape == (rows, (cols * b + 7) // 8)
    fields = np.unpackbits(packed, axis=1, bitorder="little")[:, : cols * b].reshape(rows, cols, b)
    codes = (fields.astype(np.int64) << np.arange(b)).sum(axis=2)
    back = 1 - 2 * codes if binary else np.where(codes >= 1 << (b - 1), codes - (1 << b), codes)
    assert np.array_equal(back, w)


@given(st.lists(st.integers(-(2**31), 2**31 - 1), max_size=20))
def test_checksum_is_fnv1a_of_le_int32(values) -> None:
    h = 0x811C9DC5
    for v in values:
        for byte in (v & 0xFFFFFFFF).to_bytes(4, "little"):
            h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    assert fnv1a32(np.array(values, dtype=np.int64)) == h


def test_c_string_literals_round_trip(tmp_path: Path) -> None:
    names = ["enc1.0", 'a"b\\c', "tri??/graph", "naïve/ü", "tab\there"]
    body = "".join(f"    fputs({c_string(n)}, stdout); putchar('\\n');\n" for n in names)
    (tmp_path / "s.c").write_text(
        f"#include <stdio.h>\nint main(void)\n{{\n{body}    return 0;\n}}\n"
    )
    compile_c(tmp_path, tmp_path / "s", sources=("s.c",))
    out = subprocess.run([str(tmp_path / "s")], capture_output=True, check=True).stdout
    assert out.decode("utf-8").splitlines() == names


# ---- whole projects ----------------------------------------------------------------------------


def _project(seed: int, out: Path, **kw) -> None:
    net = random_network(seed)
    x = random_input(net, seed)
    answer = {k: v.numpy()[0] for k, v in simulate(net, x[None], device=None).outputs.items()}
    emit_c(net, x, answer, out, **kw)


def test_emit_is_deterministic(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    _project(11, tmp_path / "a")
    _project(11, tmp_path / "b")
    assert folder_files(tmp_path / "a") == folder_files(tmp_path / "b")


GOLDEN_CASES = {"rand5": 5, "rand40": 40}


@pytest.mark.parametrize("case", sorted(GOLDEN_CASES))
def test_golden_c(tmp_path: Path, case: str) -> None:
    """The emitted project of small networks, byte for byte (see the module docstring)."""
    _project(GOLDEN_CASES[case], tmp_path, max_verify=4)
    check_files(GOLDEN / case, folder_files(tmp_path))


def test_max_verify_keeps_the_checksum(tmp_path: Path) -> None:
    _project(7, tmp_path, max_verify=2)
    text = (tmp_path / "sampleoutput.h").read_text()
    assert "#define CNN_VERIFY_COUNT 2L" in text
    assert "CNN_OUTPUT_CHECKSUM" in text


def test_makefile_targets(tmp_path: Path) -> None:
    """make run / probe / sanitize: the self-test passes, probes land in probe/."""
    _project(21, tmp_path)
    for target in ("run", "probe", "sanitize"):
        proc = subprocess.run(["make", "-s", target], cwd=tmp_path, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert proc.stdout.strip().startswith("PASS"), target
    assert (tmp_path / "probe" / "manifest.txt").read_text().count("\n") == 4


# ---- errors ---------------------------------------------------------------------------------


def test_sample_shape_mismatch_names_both_shapes(tmp_path: Path) -> None:
    net = _conv_a(1)
    with pytest.raises(InputError, match=r"\(1, 4, 4\).*\(1, 3, 3\)"):
        emit_c(net, np.zeros((1, 4, 4), dtype=np.int64), np.array([0]), tmp_path)


def test_sample_out_of_range(tmp_path: Path) -> None:
    with pytest.raises(EmitError, match="sample values"):
        emit_c(_conv_a(1), np.full((1, 3, 3), 200), np.array([0]), tmp_path)


def test_unquantized_and_model_level_layers_are_refused(tmp_path: Path) -> None:
    net = _conv_a(1)
    float_net = net.with_layers([dataclasses.replace(net.layers[0], quant=None)])
    with pytest.raises(EmitError, match="not quantized"):
        emit_c(float_net, EX_A_X, np.array([0]), tmp_path)
    relu = Layer("relu", Op.ACTIVATION, ("conv",), (1, 1, 1), activation=Activation.RELU)
    with pytest.raises(EmitError, match="not a hardware layer"):
        emit_c(net.with_layers([*net.layers, relu]), EX_A_X, np.array([0]), tmp_path)


def test_wide_output_feeding_a_layer_is_refused(tmp_path: Path) -> None:
    wide = _conv_a(1, wide=True).layers[0]
    copy = Layer("copy", Op.PASSTHROUGH, ("conv",), (1, 1, 1))
    net = Network("w", (1, 3, 3), (wide, copy))
    with pytest.raises(EmitError, match="32-bit output"):
        emit_c(net, EX_A_X, np.array([0]), tmp_path)


def test_weights_out_of_range_are_refused(tmp_path: Path) -> None:
    net = _conv_b(Activation.NONE)
    q = dataclasses.replace(
        net.layers[0].quant, weights=np.array([-9, 1, 1, 1]).reshape(1, 4, 1, 1)
    )
    bad = net.with_layers([dataclasses.replace(net.layers[0], quant=q)])
    with pytest.raises(EmitError, match="4-bit weights out of range"):
        emit_c(bad, np.zeros((4, 1, 1), dtype=np.int64), np.array([0]), tmp_path)


def test_python_codes_match_the_c_enums() -> None:
    """model.py's codes and the enums of cnn_kernels.h are one list in the same order."""
    from importlib import resources

    from cnnforge.targets.max7800x.c.emitter import C_ENUMS
    from cnnforge.targets.max7800x.c.model import ACT, ELTWISE, KIND, POOL

    folder = resources.files("cnnforge.targets.max7800x.c")
    header = folder.joinpath("templates", "cnn_kernels.h").read_text()
    for field, codes in (("kind", KIND), ("eltwise", ELTWISE), ("pool", POOL), ("act", ACT)):
        names = C_ENUMS[field]
        assert sorted(codes.values()) == list(range(len(names)))
        assert "enum { " + ", ".join(names) + " };" in header


@st.composite
def single_conv(draw) -> tuple[Network, np.ndarray]:
    """One conv1d/conv2d/convtranspose2d layer with drawn geometry, widths, shift and data."""
    op = draw(st.sampled_from([Op.CONV2D, Op.CONV1D, Op.CONVTRANSPOSE2D]))
    n = 1 if op is Op.CONV1D else 2
    g = draw(st.sampled_from([1, 2]))
    cin, cout = g * draw(st.integers(1, 3)), g * draw(st.integers(1, 3))
    k, s = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    p, d = draw(st.integers(0, 2)), draw(st.integers(1, 2))
    dims = tuple(draw(st.integers(3, 9)) for _ in range(n))
    bits = draw(st.sampled_from([8, 4, 2, 1, BINARY_BITS]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    if op is Op.CONVTRANSPOSE2D:
        s, p, op_pad = 2, min(p, k - 1), draw(st.integers(0, 1))
        w_shape = (cin, cout // g, k, k)
        out = tuple((m - 1) * s - 2 * p + d * (k - 1) + op_pad + 1 for m in dims)
    else:
        op_pad, w_shape = 0, (cout, cin // g) + (k,) * n
        out = tuple((m + 2 * p - d * (k - 1) - 1) // s + 1 for m in dims)
    assume(min(out) > 0)
    lo, hi = (-1, 1) if bits == BINARY_BITS else (-(1 << (abs(bits) - 1)), 1 << (abs(bits) - 1))
    w = rng.choice([-1, 1], w_shape) if bits == BINARY_BITS else rng.integers(lo, hi, w_shape)
    q = Quantized(bits, w, rng.integers(-128, 128, cout), draw(st.integers(-8, 8)))
    extra = {"output_padding": (op_pad, op_pad)} if op is Op.CONVTRANSPOSE2D else {}
    layer = Layer(
        "conv",
        op,
        out_shape=(cout, *out),
        in_channels=cin,
        out_channels=cout,
        kernel_size=(k,) * n,
        stride=(s,) * n,
        padding=(p,) * n,
        dilation=(d,) * n,
        groups=g,
        quant=q,
        activation=draw(st.sampled_from(list(Activation)[:3])),
        **extra,
    )
    x = rng.integers(-128, 128, (cin, *dims))
    return Network("hyp", (cin, *dims), (layer,)), x


@settings(max_examples=12)
@given(single_conv())
def test_single_layer_c_equals_simulator(tmp_path_factory, case) -> None:
    """Hypothesis: any drawn conv layer computes in C exactly what the simulator computes."""
    net, x = case
    answer = simulate(net, x[None], device=None).outputs["conv"].numpy()[0]
    out = tmp_path_factory.mktemp("hyp")
    emit_c(net, x, answer, out)
    result = build_and_run(out)
    assert result.passed, result.output


EXTRA_WARNINGS = (
    "-Wconversion",
    "-Wshadow",
    "-Wstrict-prototypes",
    "-Wmissing-prototypes",
    "-Wcast-qual",
    "-Wundef",
    "-Wdouble-promotion",
    "-Wfloat-equal",
)


@pytest.mark.parametrize("define", ["-DCNN_PLAIN", "-DCNN_PROBE", "-DCNN_BENCH_RUNS=2"])
def test_clean_under_extra_warnings(tmp_path: Path, define: str) -> None:
    """Beyond the required flags: -Wconversion and friends, in every build variant."""
    _project(40, tmp_path)
    compile_c(tmp_path, tmp_path / "t", extra=(*EXTRA_WARNINGS, define))


def test_shift_outside_the_hardware_range_is_refused(tmp_path: Path) -> None:
    with pytest.raises(EmitError, match=r"shift 16 is outside \[-15, 15\]"):
        emit_c(_conv_a(16), EX_A_X, np.array([0]), tmp_path)
