"""Segmentation datasets (``shapes``, ``voc``, ``folder``) yielding ``(x, mask)``: int16 images in
the hardware range (R6.1) and int64 class masks with ``VOID`` (255) ignored."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch
from PIL import Image, UnidentifiedImageError
from torch.utils.data import Dataset

from cnnforge.errors import InputError

VOID = 255
VOC_CLASSES = (
    "background", "aeroplane", "bicycle", "bird", "boat", "bottle", "bus", "car", "cat",
    "chair", "cow", "diningtable", "dog", "horse", "motorbike", "person", "pottedplant",
    "sheep", "sofa", "train", "tvmonitor",
)  # fmt: skip
SHAPES_CLASSES = ("background", "disc", "square", "triangle", "ring")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp")


def to_hardware_range(image: np.ndarray) -> torch.Tensor:
    """HxWx3 float image in [0, 1] -> int16 (3, H, W) in [-128, 127]
    (docs/hardware/arithmetic.md R6.1)."""
    x = image.astype(np.float64) - 0.5  # a new array: the steps below work in it
    x *= 256.0
    np.clip(np.round(x, out=x), -128, 127, out=x)
    return torch.from_numpy(x.transpose(2, 0, 1).astype(np.int16))


def _planes_to_hardware_range(planes: np.ndarray) -> torch.Tensor:
    """``to_hardware_range`` of (3, H, W) float64 planes, computed in them (they are spent)."""
    planes -= 0.5
    planes *= 256.0
    np.clip(np.round(planes, out=planes), -128, 127, out=planes)
    return torch.from_numpy(planes.astype(np.int16))


def fold(x: torch.Tensor, factor: int) -> torch.Tensor:
    """Space-to-depth: (..., C, H, W) -> (..., C*f*f, H/f, W/f), as the vendor U-Net's input."""
    return torch.nn.functional.pixel_unshuffle(x, factor) if factor > 1 else x


def unfold(x: torch.Tensor, factor: int) -> torch.Tensor:
    """Depth-to-space, the inverse of ``fold`` (for logits of a folded model)."""
    return torch.nn.functional.pixel_shuffle(x, factor) if factor > 1 else x


@dataclass(frozen=True)
class ShapesConfig:
    """Parameters of the procedural ``shapes`` set; every image is a function of (seed, index)."""

    size: int = 32
    max_objects: int = 4
    noise: float = 0.06
    seed: int = 0


def render_shapes(index: int, config: ShapesConfig) -> tuple[np.ndarray, np.ndarray]:
    """One image (H, W, 3 float in [0, 1]) and its mask (H, W uint8) for ``index``."""
    planes, mask = render_shapes_planar(index, config)
    return planes.transpose(1, 2, 0), mask


def render_shapes_planar(index: int, config: ShapesConfig) -> tuple[np.ndarray, np.ndarray]:
    """``render_shapes`` as (3, H, W) planes, fast yet bit-identical to the first version the
    shipped checkpoint was trained on (tests/training/test_datasets.py checks it)."""
    rng = np.random.default_rng([config.seed, index])
    n = config.size
    centres = np.arange(n, dtype=np.float64) + 0.5  # pixel centres, rows and columns alike
    planes = _background(rng, centres, n)
    mask = np.zeros((n, n), np.uint8)
    for _ in range(int(rng.integers(1, config.max_objects + 1))):
        cls = int(rng.integers(1, len(SHAPES_CLASSES)))
        box, region = _shape_region(rng, cls, centres, n)
        yy, xx = centres[box[0]][:, None], centres[box[1]][None, :]
        _paint_texture(rng, planes[(slice(None), *box)], region, yy, xx)
        np.copyto(mask[box], cls, where=region)
    # Generator.normal(0, s) is 0 + s * standard_normal, deviate by deviate (numpy's
    # distributions.c); adding 0.0 changes no sum below
    noise = rng.standard_normal((n, n, 3))
    noise *= config.noise
    planes += noise.transpose(2, 0, 1)
    return np.clip(planes, 0.0, 1.0, out=planes), mask


def _background(rng: np.random.Generator, centres: np.ndarray, n: int) -> np.ndarray:
    """(3, n, n) planes of ``base + y * slope_y + x * slope_x``, plus (half the time) a
    diagonal sine distractor."""
    base = rng.uniform(0.1, 0.9, 3)
    slope = rng.uniform(-0.4, 0.4, (2, 3)) / n
    # (base + y * s_y), then + x * s_x per pixel; the terms as contiguous (3, n) rows
    rows = np.ascontiguousarray((base + centres[:, None] * slope[0]).T)
    cols = np.ascontiguousarray((centres[:, None] * slope[1]).T)
    planes = rows[:, :, None] + cols[:, None, :]
    if rng.random() < 0.5:  # distractor texture on the background
        freq = rng.uniform(0.2, 0.8)
        # x + y of two pixel centres is the integer k = col + row + 1: one sine per diagonal,
        # seen as the (n, n) view whose element (row, col) is diagonal row + col
        diagonals = 0.08 * np.sin(freq * (np.arange(2 * n - 1, dtype=np.float64) + 1.0))
        planes += np.lib.stride_tricks.sliding_window_view(diagonals, n)[None]
    return planes


def _paint_texture(
    rng: np.random.Generator, box: np.ndarray, region: np.ndarray, yy: np.ndarray, xx: np.ndarray
) -> None:
    """Paint the texture into the (3, h, w) planes ``box`` where ``region`` holds (rows ``yy``,
    columns ``xx``): a colour, stripes or a checker of the colour and its mix with another."""
    colour = rng.uniform(0.0, 1.0, 3)
    kind = rng.integers(0, 3)
    if kind == 0:
        np.copyto(box, colour[:, None, None], where=region)
        return
    other = rng.uniform(0.0, 1.0, 3)
    if kind == 1:  # stripes
        angle = rng.uniform(0, math.pi)
        phase = np.sin(rng.uniform(0.6, 1.5) * (xx * math.cos(angle) + yy * math.sin(angle)))
        t = phase > 0
    else:  # checker
        step = int(rng.integers(2, 5))
        t = ((yy // step) + (xx // step)) % 2 == 0
    np.copyto(box, colour[:, None, None], where=region & t)
    np.copyto(box, (0.5 * (colour + other))[:, None, None], where=region & ~t)


#: A shape lies within 1.2 r of its centre (the square's corners are at 0.8 * sqrt(2) r).
SHAPE_REACH = 1.2


def _shape_region(
    rng: np.random.Generator, cls: int, centres: np.ndarray, n: int
) -> tuple[tuple[slice, slice], np.ndarray]:
    """The box (row and column slices) around the shape and the shape's pixels within it."""
    r = rng.uniform(n / 6, n / 3.5)
    cy, cx = rng.uniform(r * 0.5, n - r * 0.5, 2)
    angle = rng.uniform(0, 2 * math.pi)
    reach = SHAPE_REACH * r
    box = (_span(cy, reach, n), _span(cx, reach, n))
    dy, dx = centres[box[0]][:, None] - cy, centres[box[1]][None, :] - cx
    name = SHAPES_CLASSES[cls]
    if name in ("disc", "ring"):
        dist = np.hypot(dy, dx)
        return box, (dist <= r) if name == "disc" else (dist <= r) & (dist >= 0.55 * r)
    if name == "square":
        u = dx * math.cos(angle) + dy * math.sin(angle)
        v = -dx * math.sin(angle) + dy * math.cos(angle)
        return box, (np.abs(u) <= 0.8 * r) & (np.abs(v) <= 0.8 * r)
    # triangle: inside all three half-planes of an equilateral triangle of circumradius r
    inside = np.ones(np.broadcast_shapes(dy.shape, dx.shape), dtype=bool)
    for k in range(3):
        a = angle + k * 2 * math.pi / 3
        inside &= (dx * math.cos(a) + dy * math.sin(a)) <= r / 2
    return box, inside


def _span(centre: float, reach: float, n: int) -> slice:
    """Pixel indices whose centres lie within ``reach`` of ``centre`` (two pixels of margin)."""
    return slice(max(0, math.floor(centre - reach) - 2), min(n, math.ceil(centre + reach) + 2))


class ShapesDataset(Dataset):
    """The procedural ``shapes`` segmentation set; ``split`` selects a disjoint seed stream."""

    SPLIT_OFFSETS: ClassVar[dict[str, int]] = {"train": 0, "val": 1_000_003, "test": 2_000_003}

    def __init__(self, split: str = "train", length: int = 512, size: int = 32, seed: int = 0):
        if split not in self.SPLIT_OFFSETS:
            raise InputError(f"shapes has no split {split!r}", hint="use train, val or test")
        self.config = ShapesConfig(size=size, seed=seed)
        self.offset = self.SPLIT_OFFSETS[split]
        self.length = length
        self.classes = SHAPES_CLASSES

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        planes, mask = render_shapes_planar(self.offset + index, self.config)
        return _planes_to_hardware_range(planes), torch.from_numpy(mask.astype(np.int64))


def _read_image(path: Path, size: int | None) -> np.ndarray:
    try:
        with Image.open(path) as im:
            im = im.convert("RGB")
            if size:
                im = im.resize((size, size), Image.Resampling.BILINEAR)
            return np.asarray(im, dtype=np.float64) / 255.0
    except (OSError, UnidentifiedImageError, ValueError) as exc:
        raise InputError(f"cannot read image: {exc}", where=str(path)) from None


def _read_mask(path: Path, size: int | None) -> np.ndarray:
    """Index mask from a palette ('P') or greyscale PNG; resized with nearest neighbour."""
    try:
        with Image.open(path) as im:
            if im.mode not in ("P", "L"):
                raise InputError(
                    f"mask must be a palette or greyscale PNG, not mode {im.mode}",
                    where=str(path),
                    hint="VOC SegmentationClass masks are palette PNGs holding class indices",
                )
            if size:
                im = im.resize((size, size), Image.Resampling.NEAREST)
            return np.asarray(im, dtype=np.int64)
    except (OSError, UnidentifiedImageError, ValueError) as exc:
        raise InputError(f"cannot read mask: {exc}", where=str(path)) from None


class _FilePairs(Dataset):
    """(image, mask) file pairs, resized to ``size`` and checked against ``num_classes``."""

    def __init__(self, pairs: list[tuple[Path, Path]], size: int | None, num_classes: int):
        self.pairs = pairs
        self.size = size
        self.num_classes = num_classes

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        image_path, mask_path = self.pairs[index]
        image = _read_image(image_path, self.size)
        mask = _read_mask(mask_path, self.size)
        bad = (mask != VOID) & (mask >= self.num_classes)
        if bad.any():
            raise InputError(
                f"mask holds class {int(mask[bad].max())} but the model has "
                f"{self.num_classes} classes",
                where=str(mask_path),
                hint="check --num-classes / the model's output channels",
            )
        return to_hardware_range(image), torch.from_numpy(mask)


def voc_dataset(root: Path, split: str, size: int | None, num_classes: int = 21) -> _FilePairs:
    """Pascal VOC 2012 layout: ImageSets/Segmentation/<split>.txt, JPEGImages, SegmentationClass."""
    root = Path(root)
    if not root.is_dir():
        raise InputError("dataset directory does not exist", where=str(root))
    listing = root / "ImageSets" / "Segmentation" / f"{split}.txt"
    if not listing.is_file():
        raise InputError(
            f"not a VOC tree: split file {listing.relative_to(root)} is missing",
            where=str(root),
            hint="--data must point at VOC2012/ (with ImageSets, JPEGImages, SegmentationClass)",
        )
    pairs = []
    for lineno, line in enumerate(listing.read_text().splitlines(), 1):
        name = line.strip()
        if not name:
            continue
        image = root / "JPEGImages" / f"{name}.jpg"
        mask = root / "SegmentationClass" / f"{name}.png"
        for path in (image, mask):
            if not path.is_file():
                raise InputError(f"{path.name} listed but missing", where=f"{listing}:{lineno}")
        pairs.append((image, mask))
    return _FilePairs(pairs, size, num_classes)


def folder_dataset(root: Path, split: str, size: int | None, num_classes: int) -> _FilePairs:
    """``root[/split]/images/*`` with masks of the same stem in ``root[/split]/masks/*.png``."""
    root = Path(root)
    base = root / split if (root / split / "images").is_dir() else root
    images_dir, masks_dir = base / "images", base / "masks"
    for d in (images_dir, masks_dir):
        if not d.is_dir():
            raise InputError(
                f"folder dataset needs {d.name}/", where=str(base), hint="layout: images/, masks/"
            )
    pairs = []
    for image in sorted(images_dir.iterdir()):
        if image.suffix.lower() not in IMAGE_SUFFIXES:
            continue
        mask = masks_dir / f"{image.stem}.png"
        if not mask.is_file():
            raise InputError(f"no mask {mask.name} for this image", where=str(image))
        pairs.append((image, mask))
    if not pairs:
        raise InputError("no images found", where=str(images_dir))
    return _FilePairs(pairs, size, num_classes)


def make_dataset(
    name: str,
    split: str,
    *,
    data: Path | None = None,
    size: int = 32,
    num_classes: int | None = None,
    length: int = 512,
    seed: int = 0,
) -> Dataset:
    """Build a dataset by name (``shapes``, ``voc``, ``folder``)."""
    if name == "shapes":
        if num_classes is not None and num_classes != len(SHAPES_CLASSES):
            raise InputError(
                f"the model has {num_classes} classes but shapes has {len(SHAPES_CLASSES)}",
                hint="build the model with 5 output classes",
            )
        return ShapesDataset(split, length=length, size=size, seed=seed)
    if data is None:
        raise InputError(f"dataset {name!r} needs --data DIR")
    if name == "voc":
        if num_classes is not None and num_classes != len(VOC_CLASSES):
            raise InputError(f"the model has {num_classes} classes but VOC has 21")
        return voc_dataset(data, split, size)
    if name == "folder":
        return folder_dataset(data, split, size, num_classes or 256)
    raise InputError(f"unknown dataset {name!r}", hint="choose shapes, voc or folder")
