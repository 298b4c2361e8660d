"""The vendor tool's code-generation options, as cnnforge's firmware writer takes them.

One frozen record, passed from the CLI (``compile --softmax ...``) through the pipeline to
``build_firmware`` and the writer. The names and meanings are the vendor tool's (ai8x-synthesis
the vendor tool's command line, top-level code and backend); docs/firmware.md
says what each changes in the folder. ``refusal`` names an option the device or the network
cannot honour (a one-line error before anything is written).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cnnforge.errors import InputError
from cnnforge.target_options import TargetOption, TargetOptions

if TYPE_CHECKING:
    from cnnforge.targets.max7800x.firmware.facts import LayerFacts


class OptionRefused(ValueError):
    """An option the network cannot honour (the message says why)."""


#: The vendor's switches: (field, flag, the field's value when the flag is absent).
_SWITCHES = (
    ("softmax", "--softmax", False),
    ("overlap_data", "--overlap-data", False),
    ("mlator", "--mlator", False),
    ("unload", "--no-unload", True),
    ("zero_sram", "--zero-sram", False),
    ("kat", "--no-kat", True),
    ("riscv", "--riscv", False),
    ("calcx4", "--calcx4", False),
    ("read_ahead", "--read-ahead", False),
)


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
        out = [flag for name, flag, unless in _SWITCHES if getattr(self, name) != unless]
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
            boost=None if boost is None else parse_boost(boost),
            max_checklines=None if checklines is None else int(checklines),
            **{name: (flag in words) != unless for name, flag, unless in _SWITCHES},
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


def _vendor(name: str, text: str, kind: type = bool, metavar: str | None = None) -> TargetOption:
    """One of the vendor's code-generation options: a switch, off unless given, or (with a
    ``metavar``) a value, None unless given."""
    flag = "--" + name.replace("_", "-")
    default = False if metavar is None else None
    return TargetOption(name, flag, f"Firmware (vendor option): {text}", default, kind, metavar)


#: The `compile` options of the MAX7800x parts, in the order `compile --help` lists them.
CLI_OPTIONS = (
    TargetOption(
        "firmware",
        "--firmware/--no-firmware",
        "MAX78000/MAX78002: firmware/, the MSDK project (cnn.c, weights.h, main.c, ...) "
        "with the vendor tool's API, runs on the part (c/ runs anywhere); with --run its set-up "
        "is checked on the host. Default: written where the writer covers the network (else a "
        "note); --firmware: or fail; --no-firmware: not. See docs/firmware.md.",
        default=None,
    ),
    _vendor("softmax", "main.c unloads the 32-bit outputs and prints their softmax per class "
            "(softmax.c)."),
    TargetOption(
        "overlap_data",
        "--overlap-data",
        "Vendor option: a layer may write its output over its own "
        "dying input (cnnforge plans so by default; the opposite of --no-in-place).",
        only_its_own=False,
    ),
    _vendor("mlator", "cnn_unload reads an 8-bit output channel by channel through the mlator "
            "register (out_buf: channel-major bytes, 4 pixels a word), with the vendor's register "
            "writes; an output layer where the vendor's two mlator sequences disagree (or it "
            "ignores --mlator: 32-bit, frame not a multiple of 4) is unloaded plainly, with a "
            "note. With --no-unload: no change."),
    _vendor("no_unload", "no cnn_unload (unless --softmax)."),
    _vendor("new_kernel_loader", "load the kernels from weights.h's records. Always so (the "
            "vendor's default); accepted for its command lines."),
    _vendor("zero_sram", "cnn_init zeroes the data, kernel, TRAM and bias memories by BIST; "
            "all-zero kernel columns are then not loaded."),
    _vendor("boost", "main.c turns the boost circuit's GPIO on while the accelerator runs, e.g. "
            "2.5.", str, "PORT.PIN"),
    _vendor("no_kat", "main.c without the known-answer check (no sampleoutput.h)."),
    _vendor("max_checklines", "check only the first N output words of the known answer.", int,
            "N"),
    _vendor("riscv", "the RISC-V layout of the vendor's mnist-riscv: main.c boots the RISC-V "
            "core, main_riscv.c runs the self-test there."),
    _vendor("calcx4", "MAX78002: four output channels at once (a vendor pair: every layer; a "
            "model: every 3x3 Conv2d that can take it). Same results, faster."),
    _vendor("read_ahead", "MAX78002: layers read their next input ahead (a vendor pair: every "
            "layer; a model: every weight layer whose input and output lie in different "
            "memories). Same results."),
    TargetOption(
        "fifo",
        "--fifo",
        "MAX78000/MAX78002 (the vendor's --fifo): the input arrives through the FIFOs, the "
        "first layer streams; an error when it cannot.",
    ),
)
_PLAN_FLAGS = ("--overlap-data", "--calcx4", "--read-ahead")  # the YAML says them too


def read_cli_options(
    values: dict[str, Any], in_place: bool
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """``cnnforge.compile``'s firmware, firmware_options and fifo from the CLI's values, and
    the flags given that only the MAX7800x parts take; --overlap-data contradicts
    --no-in-place, the firmware's own options contradict --no-firmware."""
    words: list[str] = []  # as a vendor command line (--firmware, --fifo: not the folder's)
    for o in CLI_OPTIONS:
        if o.kind is bool and values[o.name] is True:
            words.append(o.flag)
        elif o.kind is not bool and values[o.name] is not None:
            words += [o.flag, str(values[o.name])]
    try:
        options = FirmwareOptions.from_vendor_flags(words)
    except ValueError as exc:  # --boost's port.pin
        raise InputError(str(exc), where="--boost", hint="give port.pin, e.g. --boost 2.5") from exc
    firmware, fifo = values["firmware"], values["fifo"]
    given = [f for f in options.flags() if f.startswith("--")]
    if options.overlap_data and not in_place:
        raise InputError(
            "--overlap-data lets a layer write over its own input, --no-in-place forbids it",
            where="--overlap-data",
            hint="drop one of the two",
        )
    code = [f for f in given if f not in _PLAN_FLAGS]
    kept = FirmwareOptions(
        overlap_data=options.overlap_data, calcx4=options.calcx4, read_ahead=options.read_ahead
    )
    if firmware is False and options != kept:
        raise InputError(
            f"{code[0]} is an option of the firmware, and --no-firmware writes none",
            where=code[0],
            hint=f"drop {code[0]} or --no-firmware",
        )
    asked = ["--firmware"] if firmware else []
    asked += (["--fifo"] if fifo else []) + [f for f in given if f != "--overlap-data"]
    compile_args = {"firmware": firmware, "firmware_options": options, "fifo": fifo}
    return compile_args, tuple(asked)


#: The MAX7800x parts' `compile` options (pipeline.targets.Target.options).
TARGET_OPTIONS = TargetOptions(CLI_OPTIONS, read_cli_options)
