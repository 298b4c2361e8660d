"""What the compile steps pass along: the options, the immutable state and the output names.

Every step is a plain function ``(CompileState, workdir) -> CompileState``; ``summary`` is the
facts the CLI prints, summary.json records and the report shows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from cnnforge.c_text import RunResult
from cnnforge.ir import Network
from cnnforge.samples import InputArray

if TYPE_CHECKING:
    from cnnforge.devices import Capabilities
    from cnnforge.passes.check_rules import Violation
    from cnnforge.passes.rewrites import Rewrite

C_DIR = "c"
AI8X_DIR = "ai8x"
REPORT = "report.html"
SUMMARY = "summary.json"
KNOWN_ANSWER = "sample_output.npz"
SAMPLE = "sample_input.npy"
QUANTIZED = "network.json"
CHECKPOINT = "network.pth"  # cnnforge quantized checkpoint (cnnforge simulate --network)


@dataclass(frozen=True)
class CompileOptions:
    """What ``cnnforge compile`` was asked to do (see the CLI's help for each option)."""

    output: Path
    device: str  # the CLI's --device (its default: devices.DEFAULT_DEVICE)
    model: str | None = None
    checkpoint: Path | None = None
    ptq: bool = False
    sample: Path | np.ndarray | None = None
    calibration: Path | np.ndarray | None = None  # --ptq activation scales (default: the sample)
    input_shape: tuple[int, ...] | None = None
    model_args: Mapping[str, Any] = field(default_factory=dict)
    weight_bits: int | str | Mapping[str, int] | None = None  # None: the device's default
    ai8x_yaml: Path | None = None
    ai8x_checkpoint: Path | None = None
    overwrite: bool = False
    run: bool = False
    probe: bool = False
    sanitize: bool = False  # --run under AddressSanitizer + UBSan
    max_verify: int | None = None
    cpu: bool = False  # simulate the known answer on the CPU even where a GPU is present
    report: bool = True
    in_place: bool = True  # layers may overwrite their dying input (vendor: --overlap-data)
    fifo: bool = False  # MAX7800x: the input arrives through the FIFOs (the vendor's --fifo)
    # MAX7800x: write the MSDK firmware (targets/max7800x/firmware_step.py). None: when the
    # writer covers the network (else a note); True: or fail; False: not (--no-firmware).
    firmware: bool | None = None
    # MAX7800x: the vendor's code-generation options (a targets.max7800x.firmware.options
    # FirmwareOptions; None: the defaults)
    firmware_options: Any = None


@dataclass(frozen=True)
class PlanRequest:
    """What ``cnnforge plan`` was asked to plan (see the CLI's help for each option)."""

    model: str | None = None
    input_shape: tuple[int, ...] | None = None
    model_args: Mapping[str, Any] = field(default_factory=dict)
    checkpoint: Path | None = None
    weight_bits: int | str | Mapping[str, int] | None = None
    sample: Path | np.ndarray | None = None  # calibrates PTQ as compile's --sample does
    calibration: Path | np.ndarray | None = None  # as compile's --calibration
    ai8x_yaml: Path | None = None
    ai8x_checkpoint: Path | None = None
    allow_overlap: bool = False
    validate_only: bool = False
    in_place: bool = True


@dataclass(frozen=True)
class CompileState:
    """Everything the steps have produced so far (immutable: each step returns a new one)."""

    options: CompileOptions
    target: Any  # the compiled target's record (a pipeline.targets.Target), resolved once
    source: Network | None = None  # model-level float network (None for quantized inputs)
    rewrites: tuple[Rewrite, ...] = ()
    violations: tuple[Violation, ...] = ()
    weight_mode: str = ""
    weight_bits: dict[str, int] = field(default_factory=dict)
    network: Network | None = None  # quantized hardware network
    sample: np.ndarray | None = None  # int64, C,H,W (or C,L)
    sample_read: InputArray | None = None  # --sample as read (its floats: a host input step's)
    calibration: InputArray | None = None  # --calibration, N,C,H,W int64
    answer: dict[str, np.ndarray] = field(default_factory=dict)
    output_exponents: dict[str, int] = field(default_factory=dict)  # calibrated PTQ scales
    layer_outputs: dict[str, np.ndarray] = field(default_factory=dict)
    float_outputs: dict[str, np.ndarray] = field(default_factory=dict)
    emitted: Emitted | None = None  # the C or HLS C++ project
    files: tuple[str, ...] = ()
    selftest: RunResult | None = None  # the C self-test or the HLS C-simulation (--run)
    notes: tuple[str, ...] = ()
    # what the target's own steps keep (its plan, its imported vendor pair, ...): one record of
    # the target's (a TargetState, e.g. targets.max7800x.state.Max7800xState), None before its
    # first step
    target_state: TargetState | None = None

    @property
    def device(self) -> Capabilities:
        """The compiled target's device record."""
        return self.target.device

    def with_(self, **changes: Any) -> CompileState:
        """A copy with some fields replaced."""
        return dataclasses.replace(self, **changes)

    def wrote(self, *names: str) -> CompileState:
        """A copy that also lists ``names`` (paths relative to the output) as written."""
        return self.with_(files=tuple(sorted({*self.files, *names})))


class Emitted(Protocol):
    """What the summary reads of an emitted project with a known-answer self-test."""

    macs: int
    arena_bytes: int
    output_size: int
    verify_count: int
    checksum: int
    files: tuple[str, ...]


class TargetState(Protocol):
    """What a target's own steps keep (``CompileState.target_state``): its plan, and the facts
    it adds to the summary."""

    @property
    def plan(self) -> Any: ...

    def summary_facts(self) -> dict[str, Any]: ...


Step = Callable[[CompileState, Path], CompileState]
Steps = tuple[tuple[str, Step], ...]


def summary(state: CompileState) -> dict[str, Any]:
    """The facts the CLI prints and summary.json records; ``flash`` (the firmware's bytes on the
    part), ``latency`` (the predicted inference time) and any other fact a target adds come
    from its state's ``summary_facts()`` (one schema for every target: None where it has none)."""
    e = state.emitted
    run = state.selftest
    facts = {
        "network": state.network.name if state.network else None,
        "device": state.device.name if state.device else None,
        "layers": len(state.network.layers) if state.network else 0,
        "macs": e.macs if e else None,
        "c_arena_bytes": e.arena_bytes if e else None,
        "outputs": e.output_size if e else None,
        "verified_outputs": e.verify_count if e else None,
        "checksum": f"{e.checksum:08x}" if e else None,
        "selftest": None if run is None else {"passed": run.passed, "output": run.output},
        "flash": None,
        "latency": None,
        "notes": list(state.notes),
        "files": [f for f in state.files if f != SUMMARY],
    }
    if state.target_state is not None:
        facts.update(state.target_state.summary_facts())
    return facts
