"""Datasets: the procedural shapes set, the VOC reader on a tiny VOC tree, folders, bad input."""

from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from cnnforge.errors import InputError
from cnnforge.training.datasets import (
    SHAPES_CLASSES,
    VOID,
    ShapesConfig,
    ShapesDataset,
    fold,
    make_dataset,
    render_shapes,
    to_hardware_range,
    unfold,
    voc_dataset,
)
from support import shapes_reference


def _palette() -> list[int]:
    pal = [0] * 768
    pal[3:6] = [128, 0, 0]  # class 1
    pal[45:48] = [192, 128, 128]  # class 15 (person)
    pal[765:768] = [224, 224, 192]  # 255: void
    return pal


def _voc_tree(root: Path, names: dict[str, list[str]], size: int = 12) -> Path:
    (root / "ImageSets" / "Segmentation").mkdir(parents=True)
    (root / "JPEGImages").mkdir()
    (root / "SegmentationClass").mkdir()
    rng = np.random.default_rng(0)
    for split, ids in names.items():
        (root / "ImageSets" / "Segmentation" / f"{split}.txt").write_text("\n".join(ids) + "\n")
        for i, name in enumerate(ids):
            Image.fromarray(rng.integers(0, 256, (size, size, 3), np.uint8)).save(
                root / "JPEGImages" / f"{name}.jpg"
            )
            mask = np.zeros((size, size), np.uint8)
            mask[3:9, 3:9] = 15 if i % 2 else 1
            mask[2, 2:10] = VOID  # a void border around the object, as VOC draws it
            mask[9, 2:10] = VOID
            im = Image.fromarray(mask, mode="P")
            im.putpalette(_palette())
            im.save(root / "SegmentationClass" / f"{name}.png")
    return root


def test_hardware_range_follows_r61():
    img = np.array([[[0.0, 0.5, 1.0]]])
    assert to_hardware_range(img).flatten().tolist() == [-128, 0, 127]
    assert to_hardware_range(np.array([[[128 / 255, 1 / 255, 254 / 255]]])).flatten().tolist() == [
        round((128 / 255 - 0.5) * 256),
        round((1 / 255 - 0.5) * 256),
        round((254 / 255 - 0.5) * 256),
    ]


def test_shapes_is_deterministic_and_varied():
    a, b = ShapesDataset("train", 8, 32, seed=3), ShapesDataset("train", 8, 32, seed=3)
    x0, m0 = a[5]
    x1, m1 = b[5]
    assert torch.equal(x0, x1) and torch.equal(m0, m1)
    assert x0.dtype == torch.int16 and x0.shape == (3, 32, 32)
    assert int(x0.min()) >= -128 and int(x0.max()) <= 127
    val = ShapesDataset("val", 8, 32, seed=3)
    assert not torch.equal(val[5][0], x0)
    seen = set()
    for i in range(40):
        seen |= set(np.unique(a.__class__("train", 40, 32)[i][1].numpy()).tolist())
    assert seen == set(range(len(SHAPES_CLASSES)))


def test_voc_reader_reads_palette_masks_with_void(tmp_path):
    root = _voc_tree(tmp_path / "VOC2012", {"train": ["a", "b"], "val": ["c"]})
    ds = voc_dataset(root, "train", size=None)
    assert len(ds) == 2
    x, m = ds[1]
    assert x.shape == (3, 12, 12) and m.dtype == torch.int64
    assert set(np.unique(m.numpy()).tolist()) == {0, 15, VOID}
    assert int((m == VOID).sum()) == 16
    val = voc_dataset(root, "val", size=8)
    x, m = val[0]
    assert x.shape == (3, 8, 8) and m.shape == (8, 8)
    assert set(np.unique(m.numpy()).tolist()) <= {0, 1, VOID}


def test_voc_bad_layouts(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        voc_dataset(tmp_path / "nope", "train", None)
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="split file"):
        voc_dataset(tmp_path / "empty", "train", None)
    root = _voc_tree(tmp_path / "VOC", {"train": ["a"]})
    (root / "ImageSets" / "Segmentation" / "train.txt").write_text("a\nmissing\n")
    with pytest.raises(InputError, match=r"train.txt:2"):
        voc_dataset(root, "train", None)


def test_corrupt_image_and_class_mismatch(tmp_path):
    root = _voc_tree(tmp_path / "VOC", {"train": ["a", "b"]})
    (root / "JPEGImages" / "a.jpg").write_bytes(b"not a jpeg")
    ds = voc_dataset(root, "train", None)
    with pytest.raises(InputError, match=r"a\.jpg"):
        ds[0]
    small = voc_dataset(root, "train", None, num_classes=5)
    with pytest.raises(InputError, match="class 15"):
        small[1]
    with pytest.raises(InputError, match="21"):
        make_dataset("voc", "train", data=root, num_classes=5)
    with pytest.raises(InputError, match="5"):
        make_dataset("shapes", "train", num_classes=21)


def test_folder_dataset(tmp_path):
    (tmp_path / "images").mkdir()
    (tmp_path / "masks").mkdir()
    Image.fromarray(np.zeros((6, 6, 3), np.uint8)).save(tmp_path / "images" / "x.png")
    Image.fromarray(np.full((6, 6), 2, np.uint8), mode="L").save(tmp_path / "masks" / "x.png")
    ds = make_dataset("folder", "train", data=tmp_path, size=4, num_classes=3)
    x, m = ds[0]
    assert x.shape == (3, 4, 4) and int(m.max()) == 2
    (tmp_path / "masks" / "x.png").unlink()
    with pytest.raises(InputError, match="no mask"):
        make_dataset("folder", "train", data=tmp_path, num_classes=3)


def test_fold_unfold_round_trip():
    x = torch.arange(3 * 8 * 8).reshape(1, 3, 8, 8)
    y = fold(x, 4)
    assert y.shape == (1, 48, 2, 2)
    assert torch.equal(unfold(y, 4), x)


@settings(max_examples=120)
@given(st.integers(0, 2**31), st.integers(0, 3_000_000), st.integers(1, 120))
def test_fast_shapes_equal_the_first_renderer(seed: int, index: int, size: int):
    """Bit for bit: the float image and the mask of the vectorised renderer are the first
    renderer's (tests/support/shapes_reference.py), and so are the hardware-range integers."""
    config = ShapesConfig(size=size, seed=seed)
    image, mask = render_shapes(index, config)
    want_image, want_mask = shapes_reference.render_shapes(index, config)
    assert np.array_equal(image, want_image) and np.array_equal(mask, want_mask)
    want_x = np.clip(np.round((want_image - 0.5) * 256.0), -128, 127).transpose(2, 0, 1)
    assert np.array_equal(to_hardware_range(image).numpy(), want_x)
    x, m = ShapesDataset("train", index + 1, size, seed)[index]  # the planar path to integers
    assert x.dtype == torch.int16 and np.array_equal(x.numpy(), want_x)
    assert m.dtype == torch.int64 and np.array_equal(m.numpy(), want_mask)


@pytest.mark.parametrize("index", [0, 1, 2, 1_000_003])
def test_fast_shapes_equal_the_first_renderer_at_352(index: int):
    """The end-to-end benchmark's size (unet-large folded from 3x352x352)."""
    config = ShapesConfig(size=352)
    image, mask = render_shapes(index, config)
    want_image, want_mask = shapes_reference.render_shapes(index, config)
    assert np.array_equal(image, want_image) and np.array_equal(mask, want_mask)
