"""The board's self-test on the host: a firmware folder's network (decoded, recovered), its own
sample input (sampledata.h, or load_input's FIFO writes) read back, simulated bit-exactly,
against its known answer (sampleoutput.h). Nothing of the folder is compiled or run.

The input words are read back by running data.input_blocks (FIFO input: data.fifo_blocks) on
index tags (the words it writes say which input value each byte holds); the known answer is
checked against the data memory the simulated layers leave, each layer's output written where
data.known_answers says it goes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cnnforge.ir import Network
from cnnforge.targets.max7800x.firmware import data
from cnnforge.targets.max7800x.firmware.decode import DecodedLayer, decode_state
from cnnforge.targets.max7800x.firmware.facts import LayerFacts, network_facts
from cnnforge.targets.max7800x.firmware.hostrun import StateImage
from cnnforge.targets.max7800x.firmware.recover import (
    PairReader,
    recover,
    with_emulated_passes,
)
from cnnforge.targets.max7800x.firmware.regmap import FIFO_DATA, MAPS
from cnnforge.targets.max7800x.placement import Plan


@dataclass(frozen=True)
class Decoded:
    """A firmware folder read back: its state, layers, and the network they configure."""

    device: str
    image: StateImage
    layers: list[DecodedLayer]
    network: Network
    plan: Plan

    def sample(self) -> np.ndarray:
        """The firmware's own sample (sampledata.h), as the network's input."""
        first = network_facts(self.network, self.plan)[0]
        return sample_input(self.image, first, tuple(self.network.input_shape))


@dataclass(frozen=True)
class SelfTest:
    """The known answer against the simulation: words checked, words that differ, the first."""

    checked: int
    failed: int
    first: str | None  # "0x50400000: 0x00000012 != 0x00000013 (mask 0xffffffff)"

    @property
    def passed(self) -> bool:
        return self.checked > 0 and self.failed == 0


def read_network(folder: Path, device: str | None, read: PairReader) -> Decoded:
    """Read, decode and recover a firmware folder (errors: FirmwareError / DecodeError /
    ConfigError, each naming the file:line or register); ``read``: the vendor-pair reader."""
    from cnnforge.targets.max7800x.firmware.inspect import detect_device
    from cnnforge.targets.max7800x.firmware.interpret import read_setup

    dev = device or detect_device(folder)
    image, records = read_setup(folder, dev)
    return decode_image(image, records, read)


def decode_image(
    image: StateImage, records: list[tuple[int, list[int]]] | None, read: PairReader
) -> Decoded:
    """Decode and recover a set-up's state (``records``: the kernel loader's, None: the state
    alone); ``read``: the vendor-pair reader."""
    dev = image.device
    start = dict(image.start.tolist())
    layers = decode_state(dict(image.state.tolist()), dev, records, start)
    layers = with_emulated_passes(layers, dev)
    chw = bool(layers and layers[0].chw)
    network, plan = recover(layers, dev, read, "CHW" if chw else "HWC")
    return Decoded(dev, image, layers, with_outputs(network, plan, image.kat, dev), plan)


def with_outputs(network: Network, plan: Plan, table: np.ndarray, device: str) -> Network:
    """``network`` whose outputs are the layers the known answer checks: those that last write
    one of its addresses (the registers do not say which layers are outputs)."""
    t = [int(v) for v in table.tolist()]
    checked: set[int] = set()
    i = 0
    while i + 2 < len(t) and t[i]:
        checked.update(t[i] + 4 * k for k in range(t[i + 2]))
        i += 3 + t[i + 2]
    last: dict[int, str] = {}
    for f in network_facts(network, plan):
        pixels = int(np.prod(network.layer(f.name).out_shape[1:]))
        _, addrs, _ = data._checks(f, np.zeros((f.out_channels, pixels), np.int64), MAPS[device])
        for a in addrs.tolist():
            last[a] = f.name
    names = {last[a] for a in checked if a in last}
    order = [ly.name for ly in network.layers if ly.name in names]
    if not order or tuple(order) == tuple(network.outputs):
        return network
    return dataclasses.replace(network, outputs=tuple(order))


def sample_input(image: StateImage, first: LayerFacts, shape: tuple[int, ...]) -> np.ndarray:
    """The sample the firmware loads (load_input's words into data memory, or its stream of
    FIFO data-register writes), as the network input (int64)."""
    rmap = MAPS[image.device]
    if image.fifo.size:  # FIFO k's words in the order load_input writes them
        streams: dict[int, list[int]] = {}
        for reg, value in image.fifo.tolist():
            streams.setdefault((reg - FIFO_DATA) // 4, []).append(value)

        def fifo_layout(tags: np.ndarray) -> dict:
            return {(k, i): w for k, block in enumerate(data.fifo_blocks(first, tags))
                    for i, w in enumerate(block.tolist())}  # fmt: skip

        def fifo_word(loc: tuple[int, int]) -> int:
            words = streams.get(loc[0], [])
            return words[loc[1]] if loc[1] < len(words) else 0

        return _read_back(shape, fifo_layout, fifo_word)
    words = dict(image.state.tolist())
    words.update(dict(image.input.tolist()))

    def memory_layout(tags: np.ndarray) -> dict:
        return {addr + 4 * i: w for addr, block in data.input_blocks(first, tags, rmap)
                for i, w in enumerate(block.tolist())}  # fmt: skip

    return _read_back(shape, memory_layout, lambda addr: words.get(addr, 0))


def _read_back(
    shape: tuple[int, ...],
    layout: Callable[[np.ndarray], dict[Hashable, int]],
    word: Callable[[Hashable], int],
) -> np.ndarray:
    """The input whose ``layout`` (input -> {location: 32-bit word}, the writer's) gives the
    firmware's words (``word``): the layout run on index tags, 8 bits of them per round, says
    which input value each byte of each location holds (the layouts move bytes, never mix)."""
    n = int(np.prod(shape))
    rounds = -(-(n + 1).bit_length() // 8)
    where: dict[tuple[Hashable, int], int] = {}  # (location, byte) -> index + 1
    for r in range(rounds):
        tags = ((np.arange(n) + 1) >> (8 * r) & 0xFF).reshape(shape)
        for loc, w in layout(tags).items():
            for b in range(4):
                key = (loc, b)
                where[key] = where.get(key, 0) | (w >> 8 * b & 0xFF) << 8 * r
    x = np.zeros(n, np.int64)
    for (loc, b), tag in where.items():
        if tag:
            v = word(loc) >> 8 * b & 0xFF
            x[tag - 1] = v - 256 if v > 127 else v
    return x.reshape(shape)


def memory_after(facts: list[LayerFacts], outputs: dict[str, np.ndarray], device: str) -> dict:
    """The data-memory words the layers write, in order ({address: (value, mask)})."""
    rmap = MAPS[device]
    mem: dict[int, int] = {}
    for f in facts:
        if f.name not in outputs:
            continue
        y = np.asarray(outputs[f.name])
        masks, addrs, values = data._checks(f, y.reshape(y.shape[0], -1), rmap)
        for m, a, v in zip(masks.tolist(), addrs.tolist(), values.tolist(), strict=True):
            mem[a] = mem.get(a, 0) & ~m | v & m
    return mem


def known_answer(table: np.ndarray, mem: dict[int, int]) -> SelfTest:
    """Check the firmware's table (address, mask, count, values..., 0) against ``mem``."""
    t = [int(v) for v in table.tolist()]
    i = checked = failed = 0
    first = None
    while i + 2 < len(t) and t[i]:
        addr, mask, count = t[i], t[i + 1], t[i + 2]
        for k in range(count):
            want = t[i + 3 + k]
            got = mem.get(addr + 4 * k, 0) & mask
            checked += 1
            if got != want & mask:
                failed += 1
                if first is None:
                    first = f"0x{addr + 4 * k:08x}: 0x{got:08x} != 0x{want:08x} (mask 0x{mask:08x})"
        i += 3 + count
    return SelfTest(checked, failed, first)


def run_self_test(
    decoded: Decoded, x: np.ndarray | None = None
) -> tuple[dict[str, np.ndarray], SelfTest | None]:
    """Simulate the decoded network on ``x`` (None: the firmware's own sample) -> (its outputs,
    the known-answer check; None with a given ``x``)."""
    from cnnforge.sim import simulate
    from cnnforge.targets.max7800x.device import get_device

    network, plan = decoded.network, decoded.plan
    facts = network_facts(network, plan)
    own = x is None
    if x is None:
        x = decoded.sample()
    result = simulate(network, x, device=get_device(decoded.device), all_layers=own)
    outputs = {k: v.numpy() for k, v in result.outputs.items()}
    if not own:
        return outputs, None
    everything = {k: v.numpy() for k, v in result.layers.items()}
    mem = memory_after(facts, everything, decoded.device)
    return outputs, known_answer(decoded.image.kat, mem)
