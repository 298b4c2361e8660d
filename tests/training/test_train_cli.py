"""Bad input to train/evaluate: one line naming the file, exit status 2, no traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from support.folders import folder_with_a_corrupt_image


def _cnnforge(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cnnforge", *args], capture_output=True, text=True, cwd=cwd,
        timeout=300,
    )  # fmt: skip


def _assert_one_line_error(result: subprocess.CompletedProcess, *needles: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


TINY = ["qat-unet", "--model-arg", "channels=4,8,8,8", "--epochs", "1", "--size", "16"]


def test_missing_dataset_dir(tmp_path):
    r = _cnnforge("train", *TINY, "--dataset", "folder", "--data", str(tmp_path / "nope"),
                  "-o", str(tmp_path / "out"))  # fmt: skip
    _assert_one_line_error(r, "nope")
    assert not (tmp_path / "out").exists()


def test_wrong_voc_layout_and_class_mismatch(tmp_path):
    (tmp_path / "voc").mkdir()
    r = _cnnforge("train", *TINY, "--dataset", "voc", "--data", str(tmp_path / "voc"))
    _assert_one_line_error(r, "21")  # the 5-class model does not fit VOC's 21 classes
    r = _cnnforge("train", *TINY, "--model-arg", "classes=21", "--dataset", "voc",
                  "--data", str(tmp_path / "voc"))  # fmt: skip
    _assert_one_line_error(r, "split file", str(tmp_path / "voc"))


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["0", "1"])
def test_corrupt_image_names_the_file(tmp_path, workers):
    """Read in the main process or in a data-loading worker: the same one line."""
    root = folder_with_a_corrupt_image(tmp_path / "data", 16)
    r = _cnnforge("train", *TINY, "--dataset", "folder", "--data", str(root),
                  "-o", str(tmp_path / "out"), "--workers", workers)  # fmt: skip
    _assert_one_line_error(r, "b.png")


def test_evaluate_missing_checkpoint(tmp_path):
    r = _cnnforge("evaluate", "qat-unet", "--checkpoint", str(tmp_path / "none.pth"))
    _assert_one_line_error(r, "none.pth")
