"""Word-level run of a plan: what every byte lane of the 16 data-memory instances holds, layer after
layer, with each read and write checked (docs/hardware/devices.md §2 addressing)."""

from __future__ import annotations

import functools

import numpy as np

from cnnforge.geometry import layer_in_geometry, live_intervals, tensor_geometry
from cnnforge.ir import INPUT, Layer, Network
from cnnforge.targets.max7800x.device import Max7800xDevice
from cnnforge.targets.max7800x.inplace import in_place_words
from cnnforge.targets.max7800x.issues import Issue
from cnnforge.targets.max7800x.placement import Placement, Plan
from cnnforge.targets.max7800x.streaming import streaming_prefix

EMPTY = -1
CHW_ANY = -2  # CHW input bytes: one channel per word, four pixels per word


class _Memory:
    """Tensor id, channel and pixel per (processor lane, word)."""

    def __init__(self, words: int, dev: Max7800xDevice) -> None:
        self.tid = np.full((dev.processors, words), EMPTY, dtype=np.int32)
        self.ch = np.full((dev.processors, words), EMPTY, dtype=np.int32)
        self.px = np.full((dev.processors, words), EMPTY, dtype=np.int32)
        self.words = words
        self.dev = dev


def _procs(mask: int, dev: Max7800xDevice) -> np.ndarray:
    return np.array([p for p in range(dev.processors) if mask >> p & 1], dtype=np.int64)


def simulate_words(
    network: Network, plan: Plan, dev: Max7800xDevice, allow_overlap: bool, in_place: bool = True
) -> list:
    """The issues found by running ``plan`` at word level; ``in_place``: accept a layer overwriting
    its dying input where inplace.py proves it."""
    names = [INPUT, *(x.name for x in network.layers)]
    ids = {n: i for i, n in enumerate(names)}
    live = live_intervals(network)
    mem = _Memory(dev.instance_bytes // 4, dev)
    issues: list[Issue] = []
    first = network.layers[0]
    place0 = plan.placements[0]
    if first.inputs != (INPUT,):
        issues.append(Issue(first.name, "input-load", "the first layer must read the input alone"))
        return issues
    chw = plan.data_format == "CHW"
    load = Placement(INPUT, 0, place0.in_processors, 0, place0.in_offset)
    overlap = "own-input" if allow_overlap else ("proven" if in_place else "none")
    # A streaming prefix never holds its inputs whole (rollover buffers, plan/streaming.py):
    # the run starts with the last streaming layer writing its whole output.
    streamed = streaming_prefix(plan)
    if not streamed and first.split_operands > 1:
        issues += _load_split_input(mem, network, place0, ids)
    elif not streamed:
        issues += _write(mem, network, -1, INPUT, load, ids, live, names, overlap, chw)
    for i, (layer, place) in enumerate(zip(network.layers, plan.placements, strict=True)):
        if i < streamed - 1:
            continue
        if i >= streamed:
            issues += _read(mem, network, layer, place, ids, names, chw and i == 0)
        # The in-place proof assumes HWC input words; a CHW first layer never qualifies.
        mode = "none" if chw and i == 0 and overlap == "proven" else overlap
        issues += _write(mem, network, i, layer.name, place, ids, live, names, mode)
    return issues


def _write_index(
    offset: int, pixels: int, out_passes: int, gap: int, wide: bool, lane: int
) -> list[np.ndarray]:
    """Word indices of each pass of one processor's channel (docs/hardware/devices.md §2 output
    rule)."""
    pix = np.arange(pixels, dtype=np.int64)
    if wide:
        return [
            offset // 4 + (pix * 4 * out_passes + 4 * e) * (gap + 1) + lane
            for e in range(out_passes)
        ]
    return [offset // 4 + (pix * out_passes + e) * (gap + 1) for e in range(out_passes)]


def _written(
    network: Network, name: str, place: Placement, dev: Max7800xDevice, chw: bool = False
) -> list[tuple[int, int, np.ndarray]]:
    """(processor, channel slot, word indices) of every word the tensor ``name`` is written to."""
    geo = tensor_geometry(network, name, dev)
    procs = _procs(place.out_processors, dev)
    t = len(procs)
    words = []
    # The indices depend on the processor's lane only for 32-bit output: computed once per
    # lane (or once), the arrays shared by the processors (nobody writes into them).
    by_lane: dict[int, list[np.ndarray]] = {}
    for j, p in enumerate(procs):
        lane = int(p) % dev.processors_per_instance if geo.wide and not chw else 0
        if lane not in by_lane:
            by_lane[lane] = (
                [place.out_offset // 4 + np.arange(-(-geo.pixels * geo.passes // 4))]
                if chw
                else _write_index(
                    place.out_offset, geo.pixels, geo.passes, place.write_gap, geo.wide, lane
                )
            )
        for e, w in enumerate(by_lane[lane]):
            words.append((int(p), j + e * t, w))
    return words


def in_place_layers(network: Network, plan: Plan) -> tuple[str, ...]:
    """Layers writing over their own (dying) input, which the vendor accepts only with
    ``--overlap-data``: found by comparing written words with the inputs', without the run."""
    chw = plan.data_format == "CHW"
    dev = plan.device
    lanes = dev.processors_per_instance
    first = plan.placements[0]
    streamed = streaming_prefix(plan)
    homes = {INPUT: (Placement(INPUT, 0, first.in_processors, 0, first.in_offset), chw)}
    homes.update({x.layer: (x, False) for x in plan.placements})

    @functools.cache
    def marks(name: str) -> np.ndarray:  # (instance, word) -> written (whole words)
        place, is_chw = homes[name]
        written = _written(network, name, place, dev, is_chw)
        top = max(int(w.max()) for _, _, w in written) + 1
        mark = np.zeros((dev.processors // lanes, top), dtype=bool)
        for p, _, w in written:
            mark[p // lanes, w] = True
        return mark

    found = []
    for i, layer in enumerate(network.layers):
        if i < streamed:  # streaming layers never hold their inputs whole (plan/streaming.py)
            continue
        out = marks(layer.name)
        for src in layer.inputs:
            held = marks(src)
            n = min(out.shape[1], held.shape[1])
            if (out[:, :n] & held[:, :n]).any():
                found.append(layer.name)
                break
    return tuple(found)


def _write(mem, network, index, name, place, ids, live, names, overlap, chw=False) -> list:
    geo = tensor_geometry(network, name, mem.dev)
    per = mem.dev.processors_per_instance
    words = _written(network, name, place, mem.dev, chw)
    top = max(int(w.max()) for _, _, w in words)
    where = name if name != INPUT else (network.layers[0].name)
    if top >= mem.words:
        return [Issue(where, "output-bounds", f"writes word {top:#x} past the instance end")]
    allowed = overlap == "own-input" or (
        overlap == "proven" and _proven_in_place(network, index, place, mem.dev)
    )
    issues = _overwrites(mem, network, index, name, words, ids, live, names, allowed)
    # All (processor, word) pairs at once, in the order of ``words``: whole words first (every
    # lane of the instance), then the processor's own lane.
    proc = np.concatenate([np.full(w.size, p) for p, _, w in words])
    chan = np.concatenate([np.full(w.size, c if c < geo.channels else EMPTY) for _, c, w in words])
    word = np.concatenate([w for _, _, w in words])
    pixel = np.concatenate([np.arange(w.size) for _, _, w in words]) % max(1, geo.pixels)
    if geo.wide:  # every lane of a word holds the channel (one channel per word)
        lanes = (proc - proc % per)[:, None] + np.arange(per)
        whole = (lanes, word[:, None])
        mem.tid[whole] = ids[name]
        mem.ch[whole] = chan[:, None]
        mem.px[whole] = EMPTY
    else:  # the same constants in each lane: mark the words once per instance
        mark = np.zeros((mem.dev.processors // per, mem.words), dtype=bool)
        mark[proc // per, word] = True
        whole = np.repeat(mark, per, axis=0)
        mem.tid[whole] = ids[name]
        mem.ch[whole] = EMPTY
        mem.px[whole] = EMPTY
    mem.ch[proc, word] = CHW_ANY if chw else chan
    mem.px[proc, word] = CHW_ANY if chw else pixel
    if geo.wide:
        mem.ch[whole] = chan[:, None]
    return issues


def _load_split_input(mem, network: Network, place: Placement, ids) -> list:
    """The network input of an element-wise first layer over its channel groups, group k where
    operand k is read (the vendor's input loader's interleave)."""
    first = network.layers[0]
    geo = layer_in_geometry(network, first, mem.dev)  # one operand's channels
    procs = _procs(place.in_processors, mem.dev)
    per, k_all, t = mem.dev.processors_per_instance, first.split_operands, len(procs)
    pix = np.arange(geo.pixels, dtype=np.int64)
    lanes = []
    for k in range(k_all):
        for e in range(geo.passes):
            w = place.in_offset // 4 + (pix * geo.passes + e) * k_all + k
            if w.size and int(w.max()) >= mem.words:
                return [Issue(first.name, "input-bounds", "the input ends past the instance end")]
            lanes += [(int(p), w, k * geo.channels + e * t + j) for j, p in enumerate(procs)
                      if e * t + j < geo.channels]  # fmt: skip
    for p, w, _ in lanes:  # whole words: every lane of the instance
        home = slice(p - p % per, p - p % per + per)
        mem.tid[home, w] = ids[INPUT]
        mem.ch[home, w] = EMPTY
        mem.px[home, w] = EMPTY
    for p, w, c in lanes:
        mem.ch[p, w] = c
        mem.px[p, w] = pix
    return []


def _proven_in_place(network: Network, index: int, place: Placement, dev: Max7800xDevice) -> bool:
    """True when the layer may overwrite its dying input (plan/inplace.py's proof holds)."""
    if index < 0 or place.write_gap:
        return False
    words = in_place_words(network, network.layers[index], dev)
    return words is not None and place.in_offset - place.out_offset >= 4 * words


def _overwrites(mem, network, index, name, words, ids, live, names, allow_overlap) -> list:
    layer = network.layers[index] if index >= 0 else None
    per = mem.dev.processors_per_instance
    written = np.zeros((mem.dev.processors // per, mem.words), dtype=bool)
    for p, _, w in words:
        written[p // per, w] = True  # whole words: all lanes of the instance
    held = mem.tid[np.repeat(written, per, axis=0)]
    hit = {int(i) + EMPTY for i in np.flatnonzero(np.bincount(held - EMPTY))}  # tensor ids
    hit.discard(EMPTY)
    hit.discard(ids[name])
    issues = []
    for tid in sorted(hit):
        other = names[tid]
        if live[other][1] < index:
            continue
        own_input = layer is not None and other in layer.inputs and live[other][1] == index
        if allow_overlap and own_input:
            continue
        what = "its own input" if own_input else "live data"
        issues.append(
            Issue(
                layer.name if layer else INPUT,
                "overwrite",
                f"output overwrites {what}: tensor {other} (live until layer "
                f"{_until(network, live[other][1])})",
            )
        )
    return issues


def _until(network: Network, index: int) -> str:
    if index >= len(network.layers):
        return "the end (network output)"
    return network.layers[index].name


def _read(mem, network: Network, layer: Layer, place: Placement, ids, names, chw: bool) -> list:
    """Check every word the layer reads holds the expected (tensor, channel, pixel)."""
    geo = layer_in_geometry(network, layer, mem.dev)
    procs = _procs(place.in_processors, mem.dev)
    t, e_in = len(procs), geo.passes
    operands = layer.operand_count
    parts = [network.shape_of(n)[0] for n in layer.inputs]
    pix = np.arange(geo.pixels, dtype=np.int64)
    if chw:  # one byte per pixel and pass: whole words of each channel's instance
        pix = np.arange(-(-geo.pixels * e_in // 4), dtype=np.int64)
        e_in = 1
    for k in range(operands):
        for e in range(e_in):
            w = place.in_offset // 4 + (pix * e_in + e) * operands + k
            if w.size and int(w.max()) >= mem.words:
                return [Issue(layer.name, "input-bounds", "reads past the instance end")]
            # The processors of this pass at once; the first (in processor order) that reads
            # a wrong word is reported.
            rows = [j for j in range(t) if e * t + j < geo.channels]
            expect = [_source(layer, parts, k, e * t + j, geo.channels) for j in rows]
            bad = _mismatches(mem, procs[rows], w, [ids[x] for x, _ in expect], expect, chw)
            if bad is not None:
                row, i = bad
                p, (src, ch) = int(procs[rows[row]]), expect[row]
                return [Issue(layer.name, "read", _describe(i, p, w, src, ch, names, mem))]
    return []


def _source(layer: Layer, parts: list[int], k: int, c: int, per: int) -> tuple[str, int]:
    """(tensor, channel) operand ``k``'s channel ``c`` is (``per``: one operand's channels)."""
    if layer.split_operands > 1:
        return layer.inputs[0], k * per + c
    if layer.operand_count > 1:
        return layer.inputs[k], c
    for name, n in zip(layer.inputs, parts, strict=True):
        if c < n:
            return name, c
        c -= n
    return layer.inputs[-1], c


def _mismatches(
    mem, procs: np.ndarray, w: np.ndarray, tids: list[int], expect: list, chw: bool
) -> tuple[int, int] | None:
    """(row, word index) of the first word that does not hold what processor ``procs[row]``
    expects (tensor ``tids[row]``, channel ``expect[row][1]``, pixel = index), else None."""
    if not len(procs):
        return None
    where = (procs[:, None], w[None, :])
    ok = mem.tid[where] == np.array(tids)[:, None]
    if not chw:
        ok &= mem.ch[where] == np.array([ch for _, ch in expect])[:, None]
        ok &= mem.px[where] == np.arange(w.size)
    if ok.all():
        return None
    row = int(np.argmin(ok.all(axis=1)))
    return row, int(np.argmin(ok[row]))


def _describe(i: int, p: int, w: np.ndarray, src: str, ch: int, names, mem) -> str:
    word = int(w[i])
    tid = int(mem.tid[p, word])
    found = (
        "nothing"
        if tid == EMPTY
        else (f"channel {int(mem.ch[p, word])} pixel {int(mem.px[p, word])} of {names[tid]}")
    )
    return (
        f"processor {p} word {word:#x} should hold channel {ch} pixel {i} of {src} "
        f"but holds {found}"
    )
