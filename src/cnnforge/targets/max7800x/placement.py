"""The placement of a hardware ``Network`` on a device, one ``Placement`` per layer: the data a
vendor YAML carries (masks: bit p = processor p; byte offsets, docs/hardware/devices.md §6)."""

from __future__ import annotations

from dataclasses import dataclass, field

from cnnforge.targets.max7800x.device import Max7800xDevice


@dataclass(frozen=True)
class Placement:
    """Where one hardware layer reads, writes and keeps its weights and bias."""

    layer: str
    in_processors: int  # YAML `processors`
    out_processors: int  # YAML `output_processors`
    in_offset: int
    out_offset: int
    write_gap: int = 0
    # first 72-bit kernel-memory column (docs/hardware/devices.md §3)
    kernel_start: int | None = None
    kernel_words: int = 0  # columns used per processor
    bias_quadrant: int | None = None  # docs/hardware/devices.md §4
    bias_offset: int | None = None  # first entry in that quadrant's bias memory
    # estimate by the vendor's latency model (docs/hardware/devices.md §5)
    cycles: int | None = None
    streaming: bool = False  # reads its input as a stream (circular buffer; plan/streaming.py)
    # MAX78002 speed-ups (YAML `calcx4`, `readahead`, `tcalc`; the results are the same): four
    # output channels at once from the four kernel-memory quarters; reading the next input
    # ahead; the pass counter in steps of 4 (None: with read-ahead over several passes)
    calcx4: bool = False
    read_ahead: bool = False
    tcalc: bool | None = None


@dataclass(frozen=True)
class Plan:
    """A whole network's placement on ``device`` (its record, as the planner read it)."""

    device: Max7800xDevice
    data_format: str  # "HWC" or "CHW": the input layout of the first layer
    placements: tuple[Placement, ...]
    allow_overlap: bool = False  # imported plans that rely on the vendor's --overlap-data
    fifo: bool = False  # the input arrives through the FIFOs (the vendor's --fifo)
    notes: tuple[str, ...] = field(default=())
    #: The YAML's global `snoop`: the data-snooping / conditional-execution registers the
    #: firmware writes in every quadrant used (MAX78002; docs/firmware.md)
    snoop: tuple[int, ...] = ()

    def placement(self, layer: str) -> Placement:
        for p in self.placements:
            if p.layer == layer:
                return p
        raise KeyError(layer)
