"""A planned network's firmware, as data: every write of the set-up, the input, the known answers.

``build_firmware`` derives it from cnnforge's network, plan, quantized weights and the simulator's
output for the sample; ``writer.py`` renders it as C, and ``expected_image`` applies it to an empty
address space the way the host run does, for comparisons without a compiler.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cnnforge.ir import Network
from cnnforge.targets.max7800x.firmware import bias, data, kernels, mlator, registers
from cnnforge.targets.max7800x.firmware.facts import LayerFacts, network_facts
from cnnforge.targets.max7800x.firmware.options import FirmwareOptions, OptionRefused, refusal
from cnnforge.targets.max7800x.firmware.regmap import FIFO_DATA, MAPS, RegisterMap
from cnnforge.targets.max7800x.placement import Plan

# The header of every file of the folder (cnnforge's, never the vendor's text).
HEADER = """\
/*
 * {name} -- written by cnnforge for the {device} CNN accelerator ({what}).
 * SPDX-License-Identifier: Apache-2.0
 * Register fields: docs/firmware.md of cnnforge. Regenerate instead of editing.
 */
"""


@dataclass(frozen=True)
class Firmware:
    """Everything cnn.c, weights.h, sampledata.h and sampleoutput.h carry."""

    device: str
    facts: list[LayerFacts]
    init: list[registers.Write]
    kernels: list[tuple[int, np.ndarray]]  # express-loader records
    bias: list[list[int]]  # per quadrant, the bytes from entry 0
    configure: list[registers.Write]
    inputs: list[tuple[int, np.ndarray]]  # (address, words)
    kat: np.ndarray  # known-answer table
    outputs: np.ndarray | None  # every output word's (with --max-checklines: kat is cut)
    fifo_inputs: list[np.ndarray] = field(default_factory=list)  # FIFO k's words (--fifo)
    options: FirmwareOptions = field(default_factory=FirmwareOptions)
    # --mlator: cnn_unload's output layers (none: the plain unload) and why a layer is not read
    # through the mlator (the summary's notes)
    unload_parts: tuple[mlator.Part, ...] = ()
    notes: tuple[str, ...] = ()
    input_procs: tuple[int, ...] = ()  # the processor each of ``inputs`` is named after

    @property
    def input_names(self) -> list[int]:
        """The numbers of sampledata.h's SAMPLE_INPUT_<n> and main.c's input_<n>, as the vendor
        numbers them: the processor a block is loaded for (data.processor_blocks), FIFO k's k.
        main.c is the user's to edit: the names stay when the rest is written again."""
        if self.fifo:
            return list(range(len(self.fifo_inputs)))
        return list(self.input_procs) or list(range(len(self.inputs)))

    @property
    def rmap(self) -> RegisterMap:
        return MAPS[self.device]

    @property
    def fifo(self) -> bool:
        """The input arrives through the FIFOs (load_input writes them, after cnn_start)."""
        return bool(self.fifo_inputs)

    @property
    def streaming(self) -> bool:
        return any(f.streaming for f in self.facts)


def build_firmware(
    network: Network,
    plan: Plan,
    x: np.ndarray,
    outputs: dict[str, np.ndarray],
    options: FirmwareOptions | None = None,
) -> Firmware:
    """The firmware of ``network`` placed by ``plan``, with sample ``x`` and the simulator's
    ``outputs`` for it ({layer name: (C, H, W)}; the network's output layers are checked),
    written as ``options`` (the vendor's code-generation options) ask."""
    options = options or FirmwareOptions()
    device = plan.device if isinstance(plan.device, str) else plan.device.name
    rmap = MAPS[device]
    facts = network_facts(network, plan)
    why = refusal(options, facts, network.outputs)
    if why:
        raise OptionRefused(why)
    kl = kernels.layout(facts, rmap)
    bl = bias.layout(facts, rmap)
    has_bias = any(bl.values)
    fifo = plan.fifo
    checked = [(f, outputs[f.name]) for f in facts if f.name in network.outputs]
    blocks = [] if fifo else data.processor_blocks(facts[0], x, rmap)
    parts, notes = (
        mlator.unload_parts(checked, rmap) if options.mlator and options.writes_unload else ((), ())
    )
    return Firmware(
        device=device,
        facts=facts,
        init=registers.init_writes(facts, rmap, has_bias, fifo, options.zero_sram),
        kernels=kernels.load_records(kl, rmap, skip_zero=options.zero_sram),
        bias=bl.values,
        configure=registers.layer_writes(facts, rmap, kl, bl, fifo, int(np.shape(x)[0])),
        inputs=[(addr, words) for _, addr, words in blocks],
        input_procs=tuple(p for p, _, _ in blocks),
        fifo_inputs=data.fifo_blocks(facts[0], x) if fifo else [],
        kat=data.known_answers(checked, rmap, options.max_checklines),
        outputs=data.known_answers(checked, rmap) if options.max_checklines else None,
        options=options,
        unload_parts=parts,
        notes=notes,
    )


def expected_image(fw: Firmware) -> tuple[dict[int, int], dict[int, int]]:
    """(state after cnn_configure, words load_input adds) as {address: value}, zeros dropped."""
    mem: dict[int, int] = {}
    for w in fw.init:
        if w.check:
            continue
        if w.wait:
            mem[w.addr] = mem.get(w.addr, 0) | w.value
        else:
            mem[w.addr] = w.value
    for addr, words in fw.kernels:
        mem[addr] = (mem.get(addr, 0) & ~0xFF00) | 0x0100  # the byte that sets the address
        for i, v in enumerate(words.tolist()):
            mem[addr + 4 * i] = v
    for q, values in enumerate(fw.bias):
        for i, v in enumerate(values):
            mem[fw.rmap.bias(q, i)] = v
    for w in fw.configure:
        mem[w.addr] = w.value
    state = {a: v for a, v in mem.items() if v}
    added = {}
    for addr, words in fw.inputs:
        for i, v in enumerate(words.tolist()):
            if v and state.get(addr + 4 * i) != v:
                added[addr + 4 * i] = v
    for k, words in enumerate(fw.fifo_inputs):  # a FIFO data register keeps its last word
        if words.size and words[-1] and state.get(FIFO_DATA + 4 * k) != int(words[-1]):
            added[FIFO_DATA + 4 * k] = int(words[-1])
    return state, added


def fifo_stream(fw: Firmware) -> np.ndarray:
    """The FIFO data-register writes of load_input in order, as (register, value) rows: word i of
    every FIFO, then word i + 1 (the order hostrun.py records)."""
    rows = [
        (FIFO_DATA + 4 * k, int(words[i]))
        for i in range(max((w.size for w in fw.fifo_inputs), default=0))
        for k, words in enumerate(fw.fifo_inputs)
        if i < words.size
    ]
    return np.array(rows, dtype=np.uint32).reshape(-1, 2)


def owner_of(fw: Firmware, addr: int) -> str:
    """What a word belongs to: a register write's meaning, a kernel record, bias or input."""
    for w in (*fw.init, *fw.configure):
        if w.addr == addr:
            return w.comment
    for rec, words in fw.kernels:
        if rec <= addr < rec + 4 * words.size:
            return f"kernel memory record at 0x{rec:08x}"
    for q, values in enumerate(fw.bias):
        if fw.rmap.bias(q) <= addr < fw.rmap.bias(q, len(values)):
            return f"bias memory of quadrant {q}"
    for start, words in fw.inputs:
        if start <= addr < start + 4 * words.size:
            return "sample input"
    if FIFO_DATA <= addr < FIFO_DATA + 4 * len(fw.fifo_inputs):
        return f"FIFO {(addr - FIFO_DATA) // 4} data (the sample input's last word)"
    return "no write of the plan"
