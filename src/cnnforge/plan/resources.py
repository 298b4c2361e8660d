"""The device numbers the planner and the validator use, read from a ``cnnforge.devices.Device``.

One small frozen record so that the planner never branches on a device name: every figure here
is asked of the device (../shared/spec/devices.md §1 and §8). ``resources_of`` accepts a
``Device``, a device name, or an existing ``Resources``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PROCESSORS = 64  # devices.md §1 "Processors" (both parts)
PER_INSTANCE = 4  # processors sharing one data-memory instance (devices.md §1)
PER_QUADRANT = 16  # processors per quadrant (devices.md §1)


@dataclass(frozen=True)
class Resources:
    """Capacities and limits of one device, as plain numbers (devices.md §8)."""

    name: str
    instance_bytes: int  # data memory per instance (32 KiB / 80 KiB)
    kernel_words_large: int  # 72-bit kernel words of processors 0/16/32/48
    kernel_words_small: int  # 72-bit kernel words of the other processors
    kernel_banks_large: tuple[int, ...]  # physical bank sizes (depthwise layers stay in one)
    kernel_banks_small: tuple[int, ...]
    bias_entries: int  # bias memory per quadrant
    max_layers: int
    write_ptr_inc_bits: int  # out_passes * (write_gap + 1) <= 2**bits (devices.md §7)
    max_passes: int = 16
    flatten_bias_first: bool = False  # MAX78000: flatten layers get bias memory first (§4)
    pool_passthrough_max_passes: int = 1  # MAX78000: 1 (also a latency-model quirk, §5)
    has_latency_model: bool = True  # only the MAX78000 model is the vendor's own (§5)
    clock_mhz: float = 50.0

    def kernel_capacity(self, processor: int) -> int:
        """Kernel words of one processor (devices.md §1 "Weight memory per proc")."""
        large = processor % PER_QUADRANT == 0
        return self.kernel_words_large if large else self.kernel_words_small

    def kernel_banks(self, processor: int) -> tuple[int, ...]:
        large = processor % PER_QUADRANT == 0
        return self.kernel_banks_large if large else self.kernel_banks_small


def _get(device: Any, *names: str, default: Any = None) -> Any:
    """The first attribute of ``device`` (or nested ``data``/``kernels``...) that exists."""
    for name in names:
        obj = device
        for part in name.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                break
        if obj is not None:
            return obj
    if default is None:
        raise AttributeError(f"device {getattr(device, 'name', device)!r} lacks {names[0]}")
    return default


def resources_of(device: Any) -> Resources:
    """The ``Resources`` of a ``Device`` (or of a device name, via ``cnnforge.devices``)."""
    if isinstance(device, Resources):
        return device
    if isinstance(device, str):
        from cnnforge.devices import get_device

        device = get_device(device)
    large = int(_get(device, "kernel_words_large", "kernels.words_large"))
    small = int(_get(device, "kernel_words_small", "kernels.words_small"))
    return Resources(
        name=str(_get(device, "name")),
        instance_bytes=int(_get(device, "instance_bytes", "data.instance_bytes")),
        kernel_words_large=large,
        kernel_words_small=small,
        kernel_banks_large=tuple(_get(device, "kernel_banks_large", default=(large,))),
        kernel_banks_small=tuple(_get(device, "kernel_banks_small", default=(small,))),
        bias_entries=int(_get(device, "bias_entries_per_quadrant", "bias_entries")),
        max_layers=int(_get(device, "max_layers", "layers.max")),
        write_ptr_inc_bits=int(_get(device, "write_ptr_inc_bits", default=4)),
        max_passes=int(_get(device, "max_passes", default=16)),
        flatten_bias_first=bool(_get(device, "bias_flatten_first", default=False)),
        pool_passthrough_max_passes=int(_get(device, "passthrough_pool_max_passes", default=1)),
        has_latency_model=bool(_get(device, "has_latency_model", default=True)),
        clock_mhz=float(_get(device, "cnn_clock_mhz", "clock_mhz", default=50.0)),
    )
