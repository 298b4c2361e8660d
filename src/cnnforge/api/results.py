"""What the Python API returns: results with the CLI's numbers, a plain ``repr`` and an HTML
table for notebooks (``_repr_html_``), never printing anything themselves."""

from __future__ import annotations

import html
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from cnnforge.analysis.records import Analysis as AnalysisRecord
    from cnnforge.analysis.records import LayerStats, Totals
    from cnnforge.devices import Capabilities
    from cnnforge.ir import Network
    from cnnforge.passes.check import CheckReport, Rewrite, Violation
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


@dataclass(frozen=True)
class Analysis:
    """``cnnforge.analyze``: per-layer rows and totals (the numbers of ``analyze --json``)."""

    record: AnalysisRecord

    @property
    def layers(self) -> tuple[LayerStats, ...]:
        return self.record.layers

    @property
    def totals(self) -> Totals:
        return self.record.totals

    def to_dict(self) -> dict[str, Any]:
        """The JSON document of ``cnnforge analyze --json`` (docs/analyze-json.md)."""
        return self.record.to_dict()

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


@dataclass(frozen=True)
class CheckResult:
    """``cnnforge.check``: does it fit, every violation at once, the exact rewrites made."""

    report: CheckReport

    @property
    def fits(self) -> bool:
        return self.report.fits

    @property
    def violations(self) -> tuple[Violation, ...]:
        return self.report.violations

    @property
    def rewrites(self) -> tuple[Rewrite, ...]:
        return self.report.rewrites

    @property
    def network(self) -> Network:
        """The lowered hardware network the verdict is about."""
        return self.report.network

    def to_dict(self) -> dict[str, Any]:
        """The JSON document of ``cnnforge check --json``."""
        return self.report.to_dict()

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
        with tempfile.TemporaryDirectory(prefix="cnnforge-build-") as tmp:
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
