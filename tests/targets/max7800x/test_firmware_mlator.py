"""``--mlator`` (docs/firmware.md, "Options"): cnn_unload reads an 8-bit output channel by
channel through the mlator register, with the vendor's register writes, where the vendor's two
mlator sequences agree; other output layers plainly, with a note.

The vendor's side is stored as numbers: tests/data/firmware_state/mlator-<device>-<model>.npz,
the trace of the vendor's own cnn_unload (written by the vendor tool with ``--mlator`` for
cnnforge's YAML + checkpoint of the tests/support/mlator_models.py networks), run on the host
by hostrun.run_unload. Captured once with ``python benchmarks/mlator_traces.py --capture``
(needs the vendor tool; without --capture it prints the comparison table).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from cnnforge.targets.max7800x.firmware.facts import LayerFacts
from cnnforge.targets.max7800x.firmware.hostrun import run_unload
from cnnforge.targets.max7800x.firmware.mlator import reason
from cnnforge.targets.max7800x.firmware.regmap import MAPS
from cnnforge.targets.max7800x.firmware.writer import folder_files
from support.cli import run_cli
from support.firmware import GOLDEN, builds_with_warnings_as_errors, demo_firmware, own_sample
from support.mlator_models import CASES, STORE, channel_segments, compile_args, load_trace

needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="no host C compiler")


def _compile(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: tuple, *extra: str):
    model, device, shape, _ = case
    sample = tmp_path / "x.npy"
    np.save(sample, own_sample(shape))
    out = tmp_path / ("out" + "".join(extra))
    code, printed, err = run_cli([*compile_args(model, device, shape, sample, out), *extra], capsys)
    assert code == 0, err
    return out, printed


def _notes(out: Path) -> list[str]:
    return json.loads((out / "summary.json").read_text(encoding="utf-8"))["notes"]


def _chw_words(y: np.ndarray) -> np.ndarray:
    """An 8-bit output (C, H, W) as the mlator unloads it: channel by channel, 4 pixels a word
    (a channel's last word padded with zeros here)."""
    c = y.shape[0]
    b = (y.reshape(c, -1).astype(np.int64) & 0xFF).astype(np.uint8)
    b = np.concatenate([b, np.zeros((c, -b.shape[1] % 4), np.uint8)], axis=1)
    return np.ascontiguousarray(b).reshape(-1).view("<u4")


@needs_cc
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[1]}-{c[0]}")
def test_mlator_unload_equals_vendor(
    case: tuple, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``compile MODEL --mlator``: cnn_unload, run on the host with the known answer in memory,
    writes and reads the vendor's registers in the vendor's order with the vendor's values (its
    stored trace) and fills out_buf channel by channel with the simulator's output."""
    model, device, _, layers = case
    out, _ = _compile(tmp_path, capsys, case)
    ran = run_unload(out / "firmware", device)
    vendor = load_trace(STORE / f"mlator-{device}-{model}.npz")
    theirs = channel_segments(vendor)
    assert len(theirs) == sum(n for _, n in layers)
    mine = channel_segments(ran.trace.astype(np.int64))
    name, channels = layers[0]  # read through the mlator by both
    assert len(mine) == channels
    assert np.array_equal(ran.trace.astype(np.int64), np.concatenate(theirs[:channels]))
    answers = np.load(out / "sample_output.npz")
    words = _chw_words(answers[name])
    got = ran.words[: words.size]
    pixels = answers[name][0].size
    per_channel = got.view(np.uint8).reshape(channels, -1)[:, :pixels]
    assert np.array_equal(per_channel, words.view(np.uint8).reshape(channels, -1)[:, :pixels])
    if len(layers) == 1:
        assert ran.words.size == words.size
        assert not [n for n in _notes(out) if n.startswith("--mlator")]
        return
    # Two outputs: c3 (processors 12-17) is unloaded plainly, with the note; under the model
    # the vendor's own sequence for c3's processors 12-15 (pointer 0 in quadrant 0) reads c2's
    # memory instead: the disagreement the fallback avoids.
    (other, _), plain = layers[1], ran.words[words.size :]
    notes = [n for n in _notes(out) if n.startswith("--mlator")]
    assert notes == [
        f"--mlator: layer {other} is unloaded plainly: its channels are in processors 12-17, "
        "not 0-3: the vendor's cnn_unload and its RTL check write different SRAM pointers"
    ]
    assert plain.size == answers[other][0].size * 2  # a word per pixel per instance (12-15, 16-17)
    assert np.count_nonzero(plain) > 0
    for k in range(4):
        assert np.array_equal(theirs[channels + k][:, 1:], theirs[k][:, 1:])
    assert "unload_words(unload_2" in (out / "firmware" / "cnn.c").read_text()


@needs_cc
def test_mlator_is_the_plain_unload_regrouped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The plain unload copies the data-memory words (4 channels a word, pixel after pixel);
    with --mlator out_buf holds the same bytes channel by channel. The set-up is the same; the
    mlator folder builds with -Wall -Wextra -Werror for the host and the Cortex-M4."""
    case = CASES[0]
    mlator, _ = _compile(tmp_path, capsys, case)
    model, device, shape, _ = case
    sample = tmp_path / "x.npy"
    plain = tmp_path / "plain"
    args = [a for a in compile_args(model, device, shape, sample, plain) if a != "--mlator"]
    code, _, err = run_cli(args, capsys)
    assert code == 0, err
    words = {p: run_unload(p / "firmware", device).words for p in (mlator, plain)}
    hwc = words[plain].view(np.uint8).reshape(-1, 4)
    assert np.array_equal(np.ascontiguousarray(hwc.T).reshape(-1).view("<u4"), words[mlator])
    for name in ("weights.h", "sampledata.h", "sampleoutput.h", "main.c"):
        assert (mlator / "firmware" / name).read_text() == (plain / "firmware" / name).read_text()
    builds_with_warnings_as_errors(mlator / "firmware", tmp_path)


@needs_cc
def test_mixed_folder_builds_with_warnings_as_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both loops (mlator and word copy) in one cnn_unload: -Werror, host and Cortex-M4; the
    folder reads back (cnnforge inspect)."""
    out, _ = _compile(tmp_path, capsys, CASES[-1])
    builds_with_warnings_as_errors(out / "firmware", tmp_path)
    code, printed, err = run_cli(["inspect", str(out / "firmware")], capsys)
    assert code == 0, err
    assert printed.count("conv2d") == 3


def test_no_unload_mlator_changes_nothing() -> None:
    """The camvid_unet and aisegment_unet demos' flags (--overlap-data --mlator --no-unload):
    no cnn_unload, so the folder is the one written without --mlator (its state the vendor's:
    test_firmware.py)."""
    for case in ("MAX78000-camvid_unet", "MAX78002-aisegment_unet"):
        fw = demo_firmware(case)
        assert fw.options.mlator and not fw.options.unload and not fw.unload_parts
        plain = replace(fw, options=replace(fw.options, mlator=False))
        assert folder_files(fw) == folder_files(plain)


def test_mlator_ignored_for_32_bit_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As the vendor: --mlator on a network whose output is 32-bit (mnist's `output_width:
    32`) keeps the plain unload; compile succeeds, with the note."""
    np.save(tmp_path / "x.npy", np.load(GOLDEN / "known" / "MAX78000-mnist.npz")["input"])
    out = tmp_path / "out"
    args = ["compile", "--ai8x-yaml", str(GOLDEN / "networks" / "mnist-chw-ai85.yaml")]
    args += ["--ai8x-checkpoint", str(GOLDEN / "trained" / "ai85-mnist-qat8-q.int8.pth.tar")]
    args += ["--sample", str(tmp_path / "x.npy"), "-o", str(out), "--no-report", "--mlator"]
    code, _, err = run_cli(args, capsys)
    assert code == 0, err
    assert _notes(out)[-1] == (
        "--mlator: layer layer4 is unloaded plainly: it writes 32-bit output (the vendor ignores "
        "--mlator too)"
    )
    cnn = (out / "firmware" / "cnn.c").read_text()
    assert "unload_runs" in cnn and "mlator" not in cnn


def test_mlator_in_compile_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, printed, _ = run_cli(["compile", "--help"], capsys)
    assert code == 0
    (line,) = [ln for ln in printed.splitlines() if ln.strip().startswith("--mlator")]
    assert "channel by channel" in line and "unloaded plainly, with a note" in line
    assert "refused" not in line


# The vendor's two mlator paths (the vendor tool's unload code), as read: per channel, the SRAM
# pointer values written, and (embedded cnn_unload only) the out_buf word of each read.
def _embedded(f: LayerFacts, h: int, w: int) -> list[tuple[list[int], list[int]]]:
    rmap, pixels = MAPS["MAX78000"], h * w
    start = (f.out_map & -f.out_map).bit_length() - 1 & ~3
    c, poffs, next_map, read_addr, out = 0, start, f.out_map >> start, None, []
    while c < f.out_channels:
        proc, this_map, this_c = poffs & ~3, next_map, c
        base = (proc % 16) * rmap.instance_words | (proc // 16) * rmap.quadrant_stride // 4
        for _ in range(4):
            if this_map & 1:
                pointers, targets = [], []
                for doffs in range(0, pixels, 4):
                    row, col = (0, doffs) if h == 1 or w == 1 else divmod(doffs, w)
                    source = f.out_offset + (base + (doffs >> 2)) * (f.write_gap + 1) * 4
                    if source != read_addr:
                        pointers.append(doffs)
                    targets.append((this_c * pixels + row * h + col) >> 2)
                    read_addr = source + 4
                out.append((pointers, targets))
            this_c, this_map = this_c + 1, this_map >> 1
        poffs, c, next_map = poffs + 4, c + (next_map & 0xF).bit_count(), next_map >> 4
    return out


def _verify(f: LayerFacts, h: int, w: int) -> list[list[int]]:
    rmap, pixels = MAPS["MAX78000"], h * w
    start = (f.out_map & -f.out_map).bit_length() - 1 & ~3
    c, poffs, this_map, read_addr, out = 0, start, f.out_map >> start, None, []
    while c < f.out_channels:
        proc = poffs & ~3
        base = (proc % 16) * rmap.instance_words | (proc // 16) * rmap.quadrant_stride // 4
        for _ in range(4):
            if this_map & 1:
                pointers = []
                for doffs in range(0, pixels, 4):
                    source = f.out_offset + (base + (doffs >> 2)) * 4
                    if source != read_addr:
                        pointers.append(source >> 2)
                    read_addr = source + 4
                out.append(pointers)
            this_map, c = this_map >> 1, c + 1
        poffs += 4
    return out


@given(
    st.one_of(
        st.integers(1, 4).map(lambda c: list(range(c))),  # processors 0..C-1
        st.lists(st.integers(0, 23), min_size=1, max_size=8, unique=True),
    ),
    st.integers(1, 9),
    st.integers(1, 9),
    st.sampled_from([0, 4, 0x100]),
)
@settings(max_examples=300, deadline=None)
def test_mlator_exactly_where_the_vendor_paths_agree(
    processors: list[int], h: int, w: int, offset: int
) -> None:
    """For an 8-bit output the vendor reads through the mlator (frame a multiple of 4 unless one
    channel, at least 4 pixels): cnnforge does so exactly where the vendor's embedded cnn_unload
    writes the pointers its RTL check writes and puts channel k's read i at out_buf word
    k * ceil(H*W / 4) + i; else it unloads plainly."""
    c = len(processors)
    assume(h * w >= 4 and (c == 1 or h * w % 4 == 0))
    out_map = sum(1 << p for p in processors)
    f = replace(_output_facts(), out_map=out_map, out_channels=c, out_offset=offset, wide=False)
    embedded, verify = _embedded(f, h, w), _verify(f, h, w)
    reads = -(-h * w // 4)
    agree = len(embedded) == len(verify) == c and all(
        pointers == verify[k] and targets == [k * reads + i for i in range(reads)]
        for k, (pointers, targets) in enumerate(embedded)
    )
    assert (reason(f, (c, h, w)) == "") == agree


def _output_facts() -> LayerFacts:
    """An output layer's facts to vary (the mnist demo's last layer)."""
    return demo_firmware("MAX78000-mnist").facts[-1]
