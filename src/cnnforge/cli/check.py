"""``cnnforge check``: will this model run on the device? Rewrites made, widths, all violations.

Exit status 0 when the network fits, 1 when it does not, 2 for bad input (the CLI's error path).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from cnnforge.cli.app import app
from cnnforge.cli.common import (
    ai8x_checkpoint_option,
    console,
    model_arg_option,
    model_argument,
    model_input_shape,
    parse_model_args,
    parse_weight_bits,
)
from cnnforge.outputs import atomic_output_file
from cnnforge.targets.max7800x.device import DEFAULT_DEVICE, DEVICE_NAMES

if TYPE_CHECKING:
    from cnnforge.passes.check import CheckReport
    from cnnforge.passes.check_rules import Violation
    from cnnforge.pipeline.targets import Target


@app.command("check")
def check(
    model: str = model_argument(),
    device: str = typer.Option(
        DEFAULT_DEVICE, "--device", "-d", help=f"{DEVICE_NAMES}, HLS or generic[:KEY=VALUE,...]."
    ),
    input_shape: str = typer.Option(
        None,
        "--input-shape",
        "-i",
        help="Input shape without batch: C,H,W (or C,L for 1-D); shipped models know theirs.",
    ),
    weight_bits: str = typer.Option(
        None,
        "--weight-bits",
        help="Weight width for all layers (8, 4, 2, 1) or 'auto'; default: the layers' own "
        "(quantized/imported) or 8.",
    ),
    model_arg: list[str] = model_arg_option(),
    checkpoint: Path = typer.Option(
        None, "--checkpoint", help="state_dict to load (weights-only .pth/.pt)."
    ),
    json_out: str = typer.Option(None, "--json", help="Write the report as JSON to FILE or '-'."),
    ai8x_yaml: Path = typer.Option(
        None, "--ai8x-yaml", help="Check a vendor network YAML (with --ai8x-checkpoint)."
    ),
    ai8x_checkpoint: Path = ai8x_checkpoint_option(),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing --json FILE."),
    verbose: bool = typer.Option(
        False, "--verbose", "-v", help="List every rewrite and per-layer weight width."
    ),
) -> None:
    """List the exact rewrites applied and ALL device violations; exit 1 if it does not fit."""
    from cnnforge.api import check as check_model
    from cnnforge.api.targets import get_target

    shape = model_input_shape(model, input_shape)
    target = get_target(device)
    if target.check_float is not None:  # generic: what budget --accuracy runs
        _check_float(target, model, device, shape, parse_model_args(model_arg), checkpoint)
    report = check_model(
        model, device, shape,
        weight_bits=parse_weight_bits(weight_bits, binary=True) if weight_bits else None,
        model_args=parse_model_args(model_arg), checkpoint=checkpoint, ai8x_yaml=ai8x_yaml,
        ai8x_checkpoint=ai8x_checkpoint,
    ).report  # fmt: skip
    emit_report(report, json_out, overwrite, verbose)
    raise typer.Exit(0 if report.fits else 1)


def _check_float(
    target: Target,
    model: str | None,
    device: str,
    shape: tuple[int, ...] | None,
    model_args: dict[str, object],
    checkpoint: Path | None,
) -> None:
    """``check`` of a target that judges the float model (its ``check_float``; generic: the
    layers its integers refuse, so exit 0 promises that ``budget --accuracy`` runs it)."""
    assert target.check_float is not None  # asked by the caller
    record, network, violations = target.check_float(model, device, shape, model_args, checkpoint)
    if violations:
        console.print(_violations_table(violations))
    verdict = "[red]does not fit[/red]" if violations else "[green]fits[/green]"
    console.print(
        f"{network.name} on {record.name}: {verdict} — {len(network)} layers, "
        f"{len(violations)} violation(s)"
    )
    raise typer.Exit(1 if violations else 0)


def _violations_table(violations: tuple[Violation, ...]) -> Table:
    table = Table(title="Violations (model order)", title_justify="left")
    for col in ("layer", "module", "rule", "actual", "limit", "hint"):
        table.add_column(col, overflow="fold")
    for v in violations:
        table.add_row(v.layer, v.module_path, v.rule, v.actual, v.limit, v.hint)
    return table


def emit_report(
    report: CheckReport, json_out: str | None, overwrite: bool = False, verbose: bool = False
) -> None:
    """Print the report's tables (unless JSON goes to stdout) and write the JSON if asked."""
    if json_out is not None:
        text = json.dumps(report.to_dict(), indent=1) + "\n"
        if json_out == "-":
            typer.echo(text, nl=False)
            return
        with atomic_output_file(Path(json_out), overwrite) as tmp:
            tmp.write_text(text, encoding="utf-8")
    print_report(report, verbose)


def print_report(report: CheckReport, verbose: bool = False) -> None:
    """What a person reads first: the verdict and every violation; then one line each for the
    rewrites and widths (their full tables with ``verbose``)."""
    verdict = "[green]fits[/green]" if report.fits else "[red]does not fit[/red]"
    kernels = report.kernel_capacity_words  # 0: the target has no MAX7800x kernel memory
    memory = f"kernel memory {report.kernel_words}/{kernels} words, " if kernels else ""
    console.print(
        f"{report.network.name} on {report.device}: {verdict} — {len(report.network)} hardware "
        f"layers, {memory}{len(report.violations)} violation(s)"
    )
    if report.violations:
        console.print(_violations_table(report.violations))
        _adapt_line(report)
    if report.streaming:
        console.print(
            f"streaming: layers {', '.join(report.streaming)} stream through the FIFO (their "
            "inputs do not fit one pass of data memory; the vendor tool needs --fifo)",
            highlight=False,
        )
    if report.rewrites:
        counts: dict[str, int] = {}
        for r in report.rewrites:
            counts[r.rule] = counts.get(r.rule, 0) + 1
        summary = ", ".join(f"{n} {rule}" for rule, n in counts.items())
        more = "" if verbose else " (--verbose lists them)"
        console.print(f"rewrites (exact): {summary}{more}", highlight=False)
    if report.network.host_input is not None:  # passes/host_input.py: the user must do it
        step = report.network.host_input
        console.print(f"{step.describe()} (from {step.module_path})", highlight=False)
    if verbose and report.rewrites:
        table = Table(title="Rewrites applied (exact)", title_justify="left")
        for col in ("layer", "module", "rule", "detail"):
            table.add_column(col)
        for r in report.rewrites:
            table.add_row(r.layer, r.module_path, r.rule, r.detail)
        console.print(table)
    _print_widths(report, verbose)


def _adapt_line(report: CheckReport) -> None:
    """When some violations are swaps ``cnnforge adapt`` makes, say so once, with its command."""
    from cnnforge.passes.check_rules import ADAPT

    swaps = [v for v in report.violations if ADAPT in v.hint or "`cnnforge adapt`" in v.hint]
    if not swaps:
        return
    console.print(
        f"{len(swaps)} of these are swaps `cnnforge adapt` makes: cnnforge adapt MODEL "
        f"--checkpoint float.pth -d {report.device} -o OUT replaces them, fits the width to the "
        "device and retrains by distillation from your model (docs/adapt.md)",
        highlight=False,
        markup=False,
    )


def _print_widths(report: CheckReport, verbose: bool) -> None:
    widths = sorted(set(report.weight_bits.values()), reverse=True)
    if len(widths) <= 1:
        console.print(f"weight bits: {widths[0] if widths else '-'} ({report.weight_mode})")
        return
    if not verbose:
        counts = [sum(1 for b in report.weight_bits.values() if b == w) for w in widths]
        mixed = ", ".join(f"{w} on {n} layer(s)" for w, n in zip(widths, counts, strict=True))
        console.print(f"weight bits ({report.weight_mode}): {mixed} (--verbose lists them)")
        return
    table = Table(title=f"Weight widths ({report.weight_mode})", title_justify="left")
    for col in ("layer", "module", "bits", "processors", "words/processor"):
        table.add_column(col)
    for n in report.kernel_needs:
        table.add_row(n.layer, n.module_path, str(n.weight_bits), str(n.processors), str(n.words))
    if not report.kernel_needs:  # no kernel memory (HLS): the widths alone
        for name, bits in report.weight_bits.items():
            table.add_row(name, name, str(bits), "-", "-")
    console.print(table)
