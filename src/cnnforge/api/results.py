"""What the Python API returns: results with the CLI's numbers, a plain ``repr`` and an HTML
table for notebooks (``_repr_html_``), never printing anything themselves."""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cnnforge.owners import scratch_dir

if TYPE_CHECKING:
    import numpy as np

    from cnnforge.analysis.records import Analysis as AnalysisRecord
    from cnnforge.devices import Capabilities
    from cnnforge.ir import Network
    from cnnforge.passes.check import CheckReport
    from cnnforge.pipeline.state import CompileState


def html_table(title: str, headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A small self-contained HTML table (escaped), as notebooks show ``_repr_html_``."""
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows
    )
    return (
        f"<table><caption style='text-align:left'><b>{html.escape(title)}</b></caption>"
        f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    )


class _Delegating:
    """A result that wraps a stage's record and answers for its attributes too."""

    _wrapped = "record"  # the field holding the record

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(object.__getattribute__(self, self._wrapped), name)


@dataclass(frozen=True, repr=False)
class Analysis(_Delegating):
    """``cnnforge.analyze``: ``.layers`` (per-layer rows), ``.totals`` and ``.to_dict()`` (the
    JSON document of ``analyze --json``, docs/analyze-json.md)."""

    record: AnalysisRecord

    def __repr__(self) -> str:
        t = self.totals
        return (
            f"Analysis({self.record.network}, input {self.record.input_shape}: "
            f"{len(self.layers)} layers, {t.params:,} params, {t.macs:,} MACs)"
        )

    def _repr_html_(self) -> str:
        rows = [
            (s.name, s.op, "x".join(map(str, s.out_shape)), f"{s.params:,}", f"{s.macs:,}")
            for s in self.layers
        ]
        t = self.totals
        rows.append(("total", "", "", f"{t.params:,}", f"{t.macs:,}"))
        return html_table(repr(self), ("layer", "op", "output", "params", "MACs"), rows)


@dataclass(frozen=True, repr=False)
class CheckResult(_Delegating):
    """``cnnforge.check``: ``.fits``, every ``.violations`` at once, the exact ``.rewrites``,
    the lowered hardware ``.network`` the verdict is about, ``.to_dict()`` (``check --json``)."""

    report: CheckReport
    _wrapped = "report"

    def __repr__(self) -> str:
        verdict = "fits" if self.fits else "does not fit"
        return (
            f"CheckResult({self.report.network.name} on {self.report.device}: {verdict}, "
            f"{len(self.violations)} violation(s), {len(self.rewrites)} rewrite(s))"
        )

    def _repr_html_(self) -> str:
        rows = [
            (v.layer, v.module_path, v.rule, v.actual, v.limit, v.hint) for v in self.violations
        ]
        headers = ("layer", "module", "rule", "actual", "limit", "hint")
        return html_table(repr(self), headers, rows)


@dataclass(frozen=True)
class Quantized:
    """``cnnforge.quantize``: the quantized hardware network and its calibrated output scales."""

    network: Network
    device: Capabilities  # the device it was quantized for
    output_exponents: dict[str, int] = field(default_factory=dict)
    path: Path | None = None  # where it was saved, when asked

    def simulate(self, x: Any) -> np.ndarray:
        """Run ``x`` through the bit-exact simulator (see ``cnnforge.simulate``)."""
        from cnnforge.api.running import run_network

        return run_network(self.network, x, self.device)

    def __repr__(self) -> str:
        weights = sum(1 for x in self.network.layers if x.quant is not None)
        return f"Quantized({self.network.name}: {len(self.network)} layers, {weights} weighted)"

    def _repr_html_(self) -> str:
        rows = [
            (x.name, x.label(), x.quant.weight_bits, x.quant.output_shift, x.module_path)
            for x in self.network.layers
            if x.quant is not None
        ]
        return html_table(repr(self), ("layer", "op", "bits", "output_shift", "module"), rows)


@dataclass(frozen=True)
class Compiled:
    """``cnnforge.compile``: what was written where, and the network to run again."""

    state: CompileState
    output_dir: Path

    @property
    def network(self) -> Network:
        """The quantized hardware network (as ``network.pth`` holds it)."""
        assert self.state.network is not None
        return self.state.network

    @property
    def plan(self) -> Any:
        """The target's plan (processors and memories on the MAX7800x, buffers on HLS)."""
        own = self.state.target_state
        return None if own is None else own.plan

    @property
    def device(self) -> Capabilities:
        assert self.state.device is not None
        return self.state.device

    @property
    def files(self) -> tuple[Path, ...]:
        """Every file written, as paths under ``output_dir``."""
        return tuple(self.output_dir / f for f in self.state.files)

    @property
    def summary(self) -> dict[str, Any]:
        """The facts ``cnnforge compile`` prints and summary.json records."""
        from cnnforge.pipeline.state import summary

        return summary(self.state)

    @property
    def report_html(self) -> Path | None:
        """report.html, when one was written."""
        from cnnforge.pipeline.state import REPORT

        path = self.output_dir / REPORT
        return path if path.is_file() else None

    def simulate(self, x: Any) -> np.ndarray:
        """The bit-exact output of the compiled network on ``x`` (as ``cnnforge simulate``)."""
        from cnnforge.api.running import run_network

        return run_network(self.network, x, self.device)

    def run(self) -> str:
        """Build the portable C with the host's ``cc`` and run its known-answer self-test;
        returns its verdict line, or raises EmitError when it fails."""
        from cnnforge.errors import EmitError
        from cnnforge.pipeline.state import C_DIR
        from cnnforge.targets.max7800x.c.build import build_and_run

        c_dir = self.output_dir / C_DIR
        if not c_dir.is_dir():
            raise EmitError(f"{c_dir} holds no C project", hint="compile for a MAX7800x device")
        with scratch_dir("build") as tmp:
            result = build_and_run(c_dir, build_dir=Path(tmp))
        if not result.passed:
            raise EmitError(f"the C self-test failed: {result.output}", where=f"{c_dir}/main.c")
        return result.output

    def __repr__(self) -> str:
        s = self.summary
        return (
            f"Compiled({s['network']} on {s['device']}: {s['layers']} layers -> "
            f"{self.output_dir}, {len(self.state.files)} files)"
        )

    def _repr_html_(self) -> str:
        s = self.summary
        rows = [
            ("network", f"{s['network']} on {s['device']}, {s['layers']} layers"),
            ("output", str(self.output_dir)),
            ("files", ", ".join(s["files"][:8]) + (" ..." if len(s["files"]) > 8 else "")),
            *(("note", n) for n in s["notes"]),
        ]
        return html_table(repr(self), ("what", "value"), rows)


@dataclass(frozen=True)
class Budget:
    """``cnnforge.budget``: the generic on-chip-budget plan (``budget --json`` is ``to_dict``)."""

    plan: Any  # targets.generic.GenericPlan
    network: Network

    def to_dict(self) -> dict[str, Any]:
        import json

        from cnnforge.targets.generic import report

        return json.loads(report.to_json(self.plan))

    def __repr__(self) -> str:
        return f"Budget({self.network.name} on {self.plan.target.name})"

    def _repr_html_(self) -> str:
        from cnnforge.targets.generic import report

        return html_table(repr(self), ("what", "value"), report.summary_lines(self.plan))


@dataclass(frozen=True, repr=False)
class Planned(_Delegating):
    """``cnnforge.plan``: the validated plan (``.network``, ``.plan``, ``.metrics``, ``.files``,
    ``.issues``; the numbers of ``plan.json``)."""

    record: Any  # pipeline.plan.PlanResult

    def __repr__(self) -> str:
        m, plan = self.record.metrics, self.record.plan
        return (
            f"Planned({self.record.network.name} on {plan.device.name}: {m.layers} layers, "
            f"{m.cycles:,} cycles, kernel {m.kernel_words:,}/{m.kernel_capacity:,} words, "
            f"data high water {m.high_water_bytes:,} bytes)"
        )

    def _repr_html_(self) -> str:
        rows = [
            (p.layer, f"0x{p.in_processors:016x}", f"0x{p.out_processors:016x}",
             f"0x{p.in_offset:04x}", f"0x{p.out_offset:04x}", p.cycles if p.cycles else "-")
            for p in self.record.plan.placements
        ]  # fmt: skip
        headers = ("layer", "processors", "output processors", "in", "out", "cycles")
        return html_table(repr(self), headers, rows)


@dataclass(frozen=True, repr=False)
class Evaluated(_Delegating):
    """``cnnforge.evaluate``: ``.scores`` per mode (float, qat-eval, bit-exact), the QAT/sim
    agreement (``.outputs_compared``, ``.outputs_differing``), ``.absent`` rows and why."""

    record: Any  # training.evaluate.Evaluation

    def __repr__(self) -> str:
        scores = ", ".join(f"{mode} {100 * s.miou:.2f}" for mode, s in self.record.scores.items())
        return f"Evaluated({self.record.images} images, mIoU %: {scores})"

    def _repr_html_(self) -> str:
        rows = [
            (mode, f"{100 * s.pixel_accuracy:.2f}", f"{100 * s.miou:.2f}",
             f"{100 * s.mean_dice:.2f}")
            for mode, s in self.record.scores.items()
        ]  # fmt: skip
        rows += [(mode, "-", "-", why) for mode, why in self.record.absent.items()]
        return html_table(repr(self), ("mode", "pixel acc %", "mIoU %", "mean Dice %"), rows)


class History(list):
    """``cnnforge.train``: one ``EpochRecord`` per epoch (a list), shown as a table."""

    def __repr__(self) -> str:
        if not self:
            return "History(no epochs)"
        best = max(self, key=lambda r: r.miou)
        return (
            f"History({len(self)} epochs, last {self[-1].phase} mIoU {self[-1].miou:.4f}, "
            f"best {best.miou:.4f} at epoch {best.epoch})"
        )

    def _repr_html_(self) -> str:
        rows = [
            (r.epoch, r.phase, f"{r.train_loss:.4f}", f"{r.val_loss:.4f}",
             f"{r.pixel_accuracy:.4f}", f"{r.miou:.4f}", f"{r.lr:.2e}")
            for r in self
        ]  # fmt: skip
        headers = ("epoch", "phase", "train loss", "val loss", "pixel acc", "mIoU", "lr")
        return html_table(repr(self), headers, rows)


@dataclass(frozen=True, repr=False)
class Adaptation(_Delegating):
    """``cnnforge.adapt``: the replacements, the width, the four scores, the result's size and
    latency (``adapt.json``'s numbers; ``.to_dict()`` is that document) and where it is."""

    record: Any  # adaptation.run.AdaptResult
    output_dir: Path

    def __repr__(self) -> str:
        r = self.record
        bit = (r.scores.get("bit-exact") or {}).get("miou")
        ref = (r.scores.get("original float") or {}).get("miou")
        score = "" if bit is None or ref is None else f", mIoU {100 * ref:.2f} -> {100 * bit:.2f}"
        return (
            f"Adaptation({len(r.replacements)} replacements, width {r.width:g}"
            f"{'' if r.cap is None else f' (cap {r.cap})'}{score} -> {self.output_dir})"
        )

    def _repr_html_(self) -> str:
        rows = [
            (row, *(f"{100 * s[k]:.2f}" for k in ("miou", "pixel_accuracy", "dice")))
            for row, s in self.record.scores.items()
            if s is not None
        ]
        return html_table(repr(self), ("row", "mIoU %", "pixel acc %", "Dice %"), rows)


@dataclass(frozen=True, repr=False)
class Inspection(_Delegating):
    """``cnnforge.inspect``: the network a firmware folder sets up (``.device``, ``.layers``;
    ``.to_dict()`` = ``inspect --json``) and the contradictions found in it."""

    record: Any  # targets.max7800x.firmware: (device, state image, decoded layers)
    folder: Path
    contradictions: tuple[str, ...] = ()

    @property
    def device(self) -> str:
        return self.record[0]

    @property
    def layers(self) -> Any:
        return self.record[2]

    def to_dict(self) -> dict[str, Any]:
        from cnnforge.targets.max7800x.firmware.inspect import as_dict

        return as_dict(self.device, self.layers)

    def __repr__(self) -> str:
        bad = f", {len(self.contradictions)} contradiction(s)" if self.contradictions else ""
        return f"Inspection({self.folder}: {self.device}, {len(self.layers)} layers{bad})"

    def _repr_html_(self) -> str:
        from cnnforge.targets.max7800x.firmware.inspect import COLUMNS, rows

        return html_table(repr(self), COLUMNS, rows(self.layers))


@dataclass(frozen=True)
class Difference:
    """``cnnforge.diff``: ``.equal``; for layer outputs ``.comparison`` (every common layer,
    ``.first_divergence``), for two firmware folders ``.first`` (the first register apart)."""

    a: Path
    b: Path
    comparison: Any = None  # targets.max7800x.c.probe's comparison, for layer outputs
    first: str | None = None  # firmware folders: the first difference, None when equal
    devices: tuple[str, str] | None = None  # firmware folders: each one's part
    layers: int = 0  # firmware folders: the layers A sets up

    @property
    def equal(self) -> bool:
        if self.comparison is not None:
            return self.comparison.first_divergence is None
        return self.first is None and self.devices is not None and len(set(self.devices)) == 1

    def __repr__(self) -> str:
        if self.comparison is not None:
            d = self.comparison.first_divergence
            what = "equal" if d is None else f"first divergence at layer {d.layer}"
            return f"Difference({self.a} vs {self.b}: {len(self.comparison.layers)} layers, {what})"
        what = "equal" if self.equal else (self.first or f"parts {self.devices}")
        return f"Difference({self.a} vs {self.b}: {what})"

    def _repr_html_(self) -> str:
        if self.comparison is None:
            return html_table(repr(self), ("what", "value"), [("first", self.first or "-")])
        rows = [
            (d.layer, "x".join(map(str, d.shape)), d.differing, f"{d.max_abs:g}",
             "" if d.first_index is None else d.first_index)
            for d in self.comparison.layers
        ]  # fmt: skip
        return html_table(
            repr(self), ("layer", "shape", "differing", "max |a-b|", "first at"), rows
        )


@dataclass(frozen=True, repr=False)
class Demo(_Delegating):
    """``cnnforge.demo``: ``.evaluation`` (float, QAT-eval, bit-exact), ``.compile_state``
    (``.selftest``: the C self-test's verdict), ``.output``."""

    record: Any  # api.walkthrough.DemoResult
    evaluation: Evaluated

    @property
    def selftest(self) -> Any:
        return getattr(self.record.compile_state, "selftest", None)

    def __repr__(self) -> str:
        run = self.selftest
        verdict = "not run" if run is None else ("PASS" if run.passed else "FAIL")
        return f"Demo({self.evaluation!r}, C self-test {verdict} -> {self.record.output})"

    def _repr_html_(self) -> str:
        return self.evaluation._repr_html_().replace(
            html.escape(repr(self.evaluation)), html.escape(repr(self)), 1
        )
