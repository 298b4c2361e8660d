"""Run a firmware folder's accelerator set-up on the host; the state it leaves, as numbers.

The folder's ``cnn.c``, ``main.c`` (its ``main`` renamed) and ``softmax.c`` are built with the
host's C compiler against the stand-in MSDK header of ``host/`` and linked with ``host/hostrun.c``,
which maps the CNN address space at its own address, calls ``cnn_init``, ``cnn_load_weights``,
``cnn_load_bias``, ``cnn_configure`` and ``load_input`` and dumps the non-zero words. Two folders
written for the same network are equal when their :class:`StateImage` are: every register and
memory word after the set-up, the words the sample input adds, and the known-answer table.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from cnnforge.owners import scratch_dir
from cnnforge.resources import tool_ran_out
from cnnforge.targets.max7800x.device import MAX78000, MAX78002
from cnnforge.targets.max7800x.firmware.regmap import MAPS

HOST = Path(__file__).with_name("host")
# Per device: bytes of CNN address space from 0x50000000, quadrant stride, quadrant 0 registers
# (the vendor's tornadocnn.py: C_GROUP_OFFS, C_SRAM_BASE).
SPACE = {
    MAX78000.name: (0x0140_0000, 0x40_0000, 0x5010_0000),
    MAX78002.name: (0x0500_0000, 0x100_0000, 0x5100_0000),
}


# The interrupt handler's attribute and the idle loop's instruction of a RISC-V folder.
_RISCV_ONLY = (
    ('__attribute__((interrupt("machine")))', ""),
    ('asm volatile("wfi")', "MXC_LP_EnterSleepMode()"),
    ('__asm__("wfi")', "MXC_LP_EnterSleepMode()"),
)


class HostRunError(RuntimeError):
    """The firmware did not build or its set-up did not finish on the host."""


@dataclass(frozen=True)
class StateImage:
    """What a firmware's set-up leaves in the CNN address space, as sorted (address, value)."""

    device: str
    state: np.ndarray  # (n, 2) uint32: every non-zero word after cnn_configure
    input: np.ndarray  # (m, 2) uint32: the words load_input wrote or changed
    kat: np.ndarray  # (k,) uint32: the known-answer table (address, mask, count, values..., 0)
    fifo: np.ndarray  # (f, 2) uint32: the FIFO data-register writes, in order (register, value)
    # (s, 2) uint32: the constant stores of cnn_start (the quadrant controls it arms; the
    # MAX78002's binary-weights bit lives there), read by interpret.py; not compared
    start: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), np.uint32))

    def save(self, path: Path) -> None:
        """Write the image as a compressed .npz (numbers only; addresses as differences, which
        compress to almost nothing)."""
        np.savez_compressed(
            path,
            device=np.array(self.device),
            state_addr_delta=_delta(self.state[:, 0]),
            state_value=self.state[:, 1],
            input_addr_delta=_delta(self.input[:, 0]),
            input_value=self.input[:, 1],
            kat=self.kat,
            fifo=self.fifo,
            start=self.start,
        )

    @classmethod
    def load(cls, path: Path) -> StateImage:
        """Read an image written by :meth:`save`."""
        with np.load(path) as data:
            state = _pairs_of(data["state_addr_delta"], data["state_value"])
            added = _pairs_of(data["input_addr_delta"], data["input_value"])
            start = data["start"] if "start" in data.files else np.zeros((0, 2), np.uint32)
            return cls(str(data["device"]), state, added, data["kat"], data["fifo"], start)

    def differences(self, other: StateImage, limit: int = 10) -> list[str]:
        """Up to ``limit`` lines, one per differing word (empty when equal)."""
        out: list[str] = []
        if self.device != other.device:
            out.append(f"device {self.device} != {other.device}")
        for part in ("state", "input"):
            a = dict(getattr(self, part).tolist())
            b = dict(getattr(other, part).tolist())
            for addr in sorted(set(a) | set(b)):
                mine, theirs = a.get(addr, 0), b.get(addr, 0)
                if mine != theirs:
                    out.append(f"{part} 0x{addr:08x}: 0x{mine:08x} != 0x{theirs:08x}")
                    if len(out) >= limit:
                        return out
        if not np.array_equal(self.fifo, other.fifo):
            out.append(f"FIFO stream differs ({len(self.fifo)} vs {len(other.fifo)} writes)")
        if not np.array_equal(self.kat, other.kat):
            out.append(f"known-answer table differs ({self.kat.size} vs {other.kat.size} words)")
        return out[:limit]


def _delta(addresses: np.ndarray) -> np.ndarray:
    return np.diff(addresses.astype(np.int64), prepend=0).astype(np.int64)


def _pairs_of(delta: np.ndarray, values: np.ndarray) -> np.ndarray:
    addresses = np.cumsum(delta.astype(np.int64)).astype(np.uint32)
    return np.stack([addresses, values.astype(np.uint32)], axis=1).reshape(-1, 2)


def _pairs(path: Path) -> np.ndarray:
    return np.fromfile(path, dtype="<u4").reshape(-1, 2)


def run_setup(
    folder: Path, device: str, cc: str = "cc", timeout: float = 120.0, wait_ms: int = 20000
) -> StateImage:
    """Build ``folder`` for the host, run its set-up, return the state it leaves. The set-up
    may spend ``wait_ms`` milliseconds in all (a wait the host does not answer ends there)."""
    size, stride, first = SPACE[device]
    with scratch_dir("hostrun") as tmp:
        work = Path(tmp)
        exe = _build(Path(folder).resolve(), work, cc, timeout)
        _run(
            [str(exe), hex(size), hex(stride), hex(first), str(work / "out"), str(wait_ms)],
            timeout,
            "set-up",
        )
        state = _pairs(work / "out.state")
        after = _pairs(work / "out.input")
        kat = np.fromfile(work / "out.kat", dtype="<u4")
        fifo = _pairs(work / "out.fifo")
    before = dict(state.tolist())
    added = np.array(
        [(a, v) for a, v in after.tolist() if before.get(a) != v], dtype=np.uint32
    ).reshape(-1, 2)
    return StateImage(device, state, added, kat, fifo)


def run_main(
    folder: Path, device: str, cc: str = "cc", timeout: float = 120.0, wait_ms: int = 20000
) -> str:
    """Build ``folder`` for the host and run its own ``main`` (the self-test) against a fake
    accelerator that, when main first sleeps after cnn_start, writes the known answer's words
    where the output layers write them and calls the done interrupt; what main prints."""
    size, stride, first = SPACE[device]
    with scratch_dir("hostrun") as tmp:
        work = Path(tmp)
        exe = _build(Path(folder).resolve(), work, cc, timeout)
        argv = [str(exe), hex(size), hex(stride), hex(first), str(work / "out"), str(wait_ms)]
        return _run([*argv, "main"], timeout, "main")


@dataclass(frozen=True)
class UnloadRun:
    """What a folder's cnn_unload did on the host (``run_unload``)."""

    words: np.ndarray  # (CNN_NUM_OUTPUTS,) uint32: out_buf
    trace: np.ndarray  # (n, 3) uint32: every access to CTL, the mlator, layer 0's write pointer
    # base and LCTL2 of any quadrant, in order: (0 write / 1 read, address, value)


def run_unload(folder: Path, device: str, cc: str = "cc", timeout: float = 120.0) -> UnloadRun:
    """Build ``folder`` for the host, write its known answer where the output layers write it,
    run its ``cnn_unload`` with those registers traced (a read of the mlator answered by the
    model of host/hostrun.c, docs/firmware.md) and return out_buf and the trace."""
    size, stride, first = SPACE[device]
    rmap = MAPS[device]
    where = (rmap.ctl(0, rmap.mlator_reg), rmap.layer(0, 0, "wptr_base"),
             rmap.layer(0, 0, "lctl2"), rmap.sram(0, 0))  # fmt: skip
    with scratch_dir("hostrun") as tmp:
        work = Path(tmp)
        exe = _build(Path(folder).resolve(), work, cc, timeout)
        argv = [str(exe), hex(size), hex(stride), hex(first), str(work / "out"), "20000"]
        _run([*argv, "unload", *map(hex, where)], timeout, "unload")
        words = np.fromfile(work / "out.unload", dtype="<u4")
        trace = np.fromfile(work / "out.trace", dtype="<u4").reshape(-1, 3)
    return UnloadRun(words, trace)


def _build(folder: Path, work: Path, cc: str, timeout: float) -> Path:
    """The folder's cnn.c, main.c (main_riscv.c) and softmax.c with host/hostrun.c, in ``work``."""
    riscv = folder / "main_riscv.c"  # the RISC-V core runs the set-up (the vendor's --riscv)
    sources = [folder / "cnn.c", riscv if riscv.is_file() else folder / "main.c"]
    sources += [folder / "softmax.c"] if (folder / "softmax.c").is_file() else []
    exe = work / "hostrun"
    objects = []
    for src in sources:  # the firmware's main is renamed; hostrun.c brings its own
        if riscv.is_file():  # RISC-V-only syntax: dropped on the host
            text = src.read_text(encoding="utf-8")
            for riscv_only, host in _RISCV_ONLY:
                text = text.replace(riscv_only, host)
            src = work / src.name
            src.write_text(text, encoding="utf-8")
        obj = work / f"{src.stem}.o"
        flags = ["-c", "-O1", "-w", "-I", str(HOST), "-I", str(folder)]
        flags.append("-Dmain=cnnforge_firmware_main")
        _run([cc, *flags, str(src), "-o", str(obj)], timeout, "build")
        objects.append(str(obj))
    if not (folder / "sampleoutput.h").is_file():  # --no-kat: an empty known-answer table
        (work / "sampleoutput.h").write_text("#define SAMPLE_OUTPUT { 0 }\n", encoding="utf-8")
    _run([cc, "-O1", "-I", str(HOST), "-I", str(folder), "-I", str(work),
          str(HOST / "hostrun.c"), *objects, "-o", str(exe)], timeout, "build")  # fmt: skip
    return exe


def _run(cmd: list[str], timeout: float, what: str) -> str:
    if shutil.which(cmd[0]) is None and not Path(cmd[0]).is_file():
        raise HostRunError(f"{what}: {cmd[0]} not found")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise HostRunError(f"{what}: timed out after {timeout:.0f} s") from exc
    if proc.returncode != 0:
        tool_ran_out(proc.stderr + proc.stdout, f"firmware/cnn.c ({what})", proc.returncode)
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise HostRunError(f"{what} failed (exit {proc.returncode}): {' | '.join(tail)}")
    return proc.stdout
