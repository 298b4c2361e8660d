"""The vendor tool's code-generation options, as cnnforge's firmware writer takes them.

One frozen record, passed from the CLI (``compile --softmax ...``) through the pipeline to
``build_firmware`` and the writer. The names and meanings are the vendor tool's (ai8x-synthesis
the vendor tool's command line, top-level code and backend); docs/firmware.md
says what each changes in the folder. ``refusal`` names an option the device or the network
cannot honour (a one-line error before anything is written).
"""

from __future__ import annotations

from dataclasses import dataclass

from cnnforge.targets.max7800x.firmware.facts import LayerFacts


class OptionRefused(ValueError):
    """An option the network cannot honour (the message says why)."""


@dataclass(frozen=True)
class FirmwareOptions:
    """What the firmware folder holds beyond the vendor tool's defaults."""

    softmax: bool = False  # main.c unloads the output and prints its softmax (softmax.c)
    overlap_data: bool = False  # a layer may write over its own dying input (the plan's choice)
    mlator: bool = False  # cnn_unload reads 8-bit outputs channel by channel (mlator.py)
    unload: bool = True  # cnn_unload is written (--no-unload: not, unless --softmax needs it)
    new_kernel_loader: bool = True  # the loader of weights.h's records (the vendor's default)
    zero_sram: bool = False  # cnn_init zeroes the memories (BIST); all-zero kernel columns skipped
    boost: tuple[int, int] | None = None  # port, pin turned on while the CNN runs
    kat: bool = True  # main.c checks the known answer (sampleoutput.h)
    max_checklines: int | None = None  # at most N known-answer words
    riscv: bool = False  # the RISC-V project layout (main.c boots main_riscv.c)
    # MAX78002 speed-ups (the results are the same; targets/max7800x/speedups.py): a vendor
    # pair's every layer, a model's every layer that can take them (YAML keys per layer)
    calcx4: bool = False
    read_ahead: bool = False

    def flags(self) -> tuple[str, ...]:
        """The vendor tool's command-line flags that ask for the same folder."""
        out: list[str] = []
        for name, on in (
            ("--softmax", self.softmax),
            ("--overlap-data", self.overlap_data),
            ("--mlator", self.mlator),
            ("--no-unload", not self.unload),
            ("--zero-sram", self.zero_sram),
            ("--no-kat", not self.kat),
            ("--riscv", self.riscv),
            ("--calcx4", self.calcx4),
            ("--read-ahead", self.read_ahead),
        ):
            if on:
                out.append(name)
        if self.boost is not None:
            out += ["--boost", f"{self.boost[0]}.{self.boost[1]}"]
        if self.max_checklines is not None:
            out += ["--max-checklines", str(self.max_checklines)]
        return tuple(out)

    @classmethod
    def from_vendor_flags(cls, flags: tuple[str, ...] | list[str]) -> FirmwareOptions:
        """The options a vendor command line (e.g. a demo's flags) asks for; flags that do not
        change the folder (``--new-kernel-loader``, ``--fifo``, ...) are ignored."""
        words = list(flags)

        def value(name: str) -> str | None:
            return words[words.index(name) + 1] if name in words else None

        checklines, boost = value("--max-checklines"), value("--boost")
        return cls(
            softmax="--softmax" in words,
            overlap_data="--overlap-data" in words,
            mlator="--mlator" in words,
            unload="--no-unload" not in words,
            zero_sram="--zero-sram" in words,
            boost=None if boost is None else parse_boost(boost),
            kat="--no-kat" not in words,
            max_checklines=None if checklines is None else int(checklines),
            riscv="--riscv" in words,
            calcx4="--calcx4" in words,
            read_ahead="--read-ahead" in words,
        )

    @property
    def writes_unload(self) -> bool:
        """cnn_unload is in cnn.c (the vendor writes it for --softmax even with --no-unload)."""
        return self.unload or self.softmax


def parse_boost(text: str) -> tuple[int, int]:
    """``--boost P.N`` (the vendor's "port.pin"): GPIO port 0-3, pin 0-31; ValueError else."""
    parts = text.split(".")
    try:
        port, pin = (int(p, 0) for p in parts) if len(parts) == 2 else (-1, -1)
    except ValueError:
        port, pin = -1, -1
    if not (0 <= port <= 3 and 0 <= pin <= 31):
        raise ValueError(f"--boost {text!r} is not a port.pin (port 0-3, pin 0-31, e.g. 2.5)")
    return port, pin


def refusal(options: FirmwareOptions, facts: list[LayerFacts], outputs: tuple[str, ...]) -> str:
    """Why the network (its layers' ``facts``, its ``outputs``) cannot be written with
    ``options`` ('' when it can)."""
    wide = {f.name: f.wide for f in facts if f.name in outputs}
    if options.softmax and not all(wide.values()):
        narrow = ", ".join(n for n, w in wide.items() if not w)
        return (
            f"--softmax takes 32-bit outputs; {narrow} writes 8-bit output (the vendor's "
            "`output_width: 32`)"
        )
    if options.max_checklines is not None and options.max_checklines < 1:
        return "--max-checklines must be at least 1"
    return ""
