"""Fit (docs/adapt.md, step 3): refuse what no width fixes, cut repeated blocks, then take the
widest width check passes, its tries checked several at once in forked processes."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from cnnforge.adaptation.depth import cut_depth, depth_rule
from cnnforge.adaptation.forked import forked_map, usable_workers
from cnnforge.adaptation.gates import open_gates
from cnnforge.adaptation.surgery import refusals, replace_ops
from cnnforge.adaptation.width import channel_graph, narrow
from cnnforge.errors import CnnforgeError, InputError

#: Widths ``--width auto`` tries, largest first (above 1: wider than the original, where the
#: device has room); each also with hidden layers capped at one processor pass (64 channels:
#: concatenations and pooled layers place in one pass).
WIDTHS = (4.0, 3.0, 2.0, 1.5, 1.0, 0.75, 0.5, 0.375, 0.25, 0.1875, 0.125)
CAP = 64
#: The largest multiplier ``--width`` takes (check says whether it fits).
MAX_WIDTH = 8.0


def check_fits(model: nn.Module, shape: tuple[int, ...], target: Any):
    """check's report for ``model`` (a plain module) at ``shape`` on ``target``'s device."""
    from cnnforge.frontend.capture import capture
    from cnnforge.passes.check import check_report
    from cnnforge.passes.lower import lower_to_hardware

    # lowered once without its per-pass float checks (check's own lowering then changes
    # nothing): the search's many tries are checks, and the chosen student's lowering for
    # adapted.py (hardware_network) runs them
    captured = capture(model, shape, name=type(model).__name__)
    lowered = lower_to_hardware(captured, target.device, verify_steps=False).network
    return check_report(lowered, target.device, rules=target.rules)


@dataclass
class Checked:
    """The model preflight ends with and check's report for it (the width search reuses it)."""

    model: nn.Module | None = None
    report: Any = None


#: Violations no width changes (an op left without hardware form, too many layers).
NOT_BY_WIDTH = frozenset({"unsupported-op", "activation", "layer-count"})


def _not_by_width(v) -> bool:
    """A violation no width fixes: those of NOT_BY_WIDTH, except a ReLU after a multi-pass
    element-wise op (at 64 channels or fewer the identity conv that carries it fits)."""
    return v.rule in NOT_BY_WIDTH and not (v.rule == "activation" and "-pass" in v.hint)


def preflight(
    model: nn.Module, shape: tuple[int, ...], target: Any, checked: Checked | None = None
):
    """The adapted module and its replacements (gates, swaps, depth cut; ``checked`` gets its
    report), or one InputError naming every op no width fixes, before any training."""
    model, gates = open_gates(model)
    refused = refusals(model)
    if refused:
        by_class: dict[tuple[str, str], list[str]] = {}
        for path, cls, why in refused:
            by_class.setdefault((cls, why), []).append(path)
        names = "; ".join(
            f"{cls} x{len(paths)} ({_first(paths)}): {why}"
            for (cls, why), paths in by_class.items()
        )
        raise InputError(
            f"no replacement for {len(refused)} op(s): {names}",
            hint="change these in the model; docs/adapt.md lists what adapt replaces",
        )
    adapted, reps = replace_ops(model)
    reps = gates + reps
    report = check_fits(adapted, shape, target)
    if any(depth_rule(v) for v in report.violations):  # the depth cut
        adapted, cuts = cut_depth(adapted, shape, target)
        reps, report = reps + cuts, check_fits(adapted, shape, target)
    left = [v for v in report.violations if _not_by_width(v)]
    if left:
        by_hint: dict[str, list[str]] = {}
        for v in left:
            key = f"{v.rule}: {v.hint.split(',')[0].split(':')[0][:90]}"
            by_hint.setdefault(key, []).append(v.module_path or v.layer)
        text = "; ".join(f"{k} ({len(paths)}: {_first(paths)})" for k, paths in by_hint.items())
        cut = sum(r.row == "depth" for r in reps)
        text += f" (after cutting {cut} repeated blocks)" if cut else ""
        raise InputError(
            f"no replacement after the table's for {len(left)} op(s): {text}",
            hint="change these in the model (a norm before its conv has no hardware form)",
        )
    if checked is not None:
        checked.model, checked.report = adapted, report
    return adapted, reps


def _first(paths: list[str]) -> str:
    return ", ".join(paths[:3]) + (", ..." if len(paths) > 3 else "")


def check_width(width: str) -> str:
    """``auto`` or a multiplier in (0, MAX_WIDTH]; else InputError (exit 2)."""
    if width == "auto":
        return width
    try:
        value = float(width)
    except ValueError:
        value = -1.0
    if not 0 < value <= MAX_WIDTH:
        raise InputError(
            f"--width {width!r}",
            hint=f"auto, or a multiplier in (0, {MAX_WIDTH:g}] such as 0.5 or 2",
        )
    return width


def choose_width(
    model: nn.Module,
    shape: tuple[int, ...],
    target: Any,
    width: str,
    checked: Checked | None = None,
    workers: int | None = None,
) -> tuple[nn.Module, float, int | None, list[dict[str, Any]], dict[str, tuple[int, ...]]]:
    """The widest try that check passes (``auto``: ``WIDTHS``, each uncapped then capped at
    ``CAP``) and every try with its parameters and why it fails; ``checked``: preflight's.
    ``workers`` tries are checked at once, in forked processes (default: the usable cores);
    the result is the same for any number."""
    candidates = iter([(w, cap) for w in (WIDTHS if width == "auto" else (float(width),))
                       for cap in (None, CAP)])  # fmt: skip
    workers = usable_workers() if workers is None else workers
    search = _Search(model, shape, target, checked)
    tries: list[dict[str, Any]] = []
    while (found := search.wave(candidates, workers, tries)) is not False:
        if found is not None:
            return found.student, found.width, found.cap, tries, found.kept
    last = "; ".join(f"{t['width']}/{t['cap']}: {t['why']}" for t in tries)
    raise InputError(f"no width makes the model fit {target.name} ({last})", hint="--width")


def verdict(student: nn.Module, shape: tuple[int, ...], target: Any) -> list[Any]:
    """check's answer for one try, as JSON data: [fits, its rules] or ["error", why]."""
    try:
        return _answer(check_fits(student, shape, target))
    except CnnforgeError as exc:
        return ["error", str(exc)]


def _answer(report: Any) -> list[Any]:
    """What the search keeps of check's report: [fits, its rules]."""
    return [report.fits, sorted({v.rule for v in report.violations})]


class _Search:
    """The width search's state: the channel graph (made once) and check's answer per model
    shape; check depends on the layers' shapes only, so a try shaped as an earlier one (wide
    tries all capped at CAP, width 1 without a cap = preflight's model) reuses its answer."""

    def __init__(self, model: nn.Module, shape: tuple[int, ...], target: Any,
                 checked: Checked | None) -> None:  # fmt: skip
        self.model, self.shape, self.target = model, shape, target
        self.graph: Any = None
        self.answers: dict[tuple, list[Any]] = {}
        if checked is not None and checked.model is not None:
            self.answers[_shapes(checked.model)] = _answer(checked.report)

    def wave(self, candidates: Iterator, workers: int, tries: list[dict[str, Any]]):
        """The next tries, built here in order (widening draws from torch's generator) until
        ``workers`` new shapes are to check, checked at once, then read in order: the first
        that fits, with the generator as right after building it (as if no later try had been
        built); None if none does, False once ``candidates`` is empty."""
        built: list[_Try] = []
        todo: dict[tuple, nn.Module] = {}
        for w, cap in candidates:
            built.append(t := self._build(w, cap))
            if t.key is not None and t.key not in self.answers:
                todo.setdefault(t.key, t.student)
            if len(todo) >= max(workers, 1):
                break
        if not built:
            return False
        items = list(todo.items())
        answers = forked_map(lambda item: verdict(item[1], self.shape, self.target), items,
                             workers, stop=lambda a: a[0] is True)  # fmt: skip
        self.answers.update((key, a) for (key, _), a in zip(items, answers, strict=False))
        for t in built:
            answer = ["error", t.why] if t.key is None else self.answers[t.key]
            if answer[0] == "error":
                tries.append({"width": t.width, "cap": t.cap, "fits": False, "why": answer[1]})
                continue
            fits, rules = answer
            tries.append(
                {"width": t.width, "cap": t.cap, "params": t.params, "fits": fits,
                 "why": ", ".join(rules) or "fits"}
            )  # fmt: skip
            if fits:
                torch.set_rng_state(t.rng)
                return t
        return None

    def _build(self, w: float, cap: int | None) -> _Try:
        """One try's student and what it keeps, or why it cannot be built."""
        try:
            if self.graph is None and (w != 1 or cap is not None):
                self.graph = channel_graph(self.model, self.shape)
            student, kept = narrow(self.model, w, self.shape, cap, self.graph)
        except CnnforgeError as exc:
            return _Try(w, cap, why=str(exc))
        return _Try(w, cap, student=student, kept=kept, key=_shapes(student),
                    rng=torch.get_rng_state())  # fmt: skip


@dataclass
class _Try:
    """One width try as built: its student, or why it could not be built."""

    width: float
    cap: int | None
    why: str = ""
    student: Any = None
    kept: dict[str, tuple[int, ...]] = field(default_factory=dict)
    key: tuple | None = None  # _shapes(student)
    rng: Any = None  # torch's generator state right after building it

    @property
    def params(self) -> int:
        return sum(p.numel() for p in self.student.parameters())


def _shapes(model: nn.Module) -> tuple[str, tuple]:
    """What check sees of ``model``: its modules (types, channels, kernels, strides) and the
    shape of every parameter and buffer; two modules alike here get the same report."""
    return repr(model), tuple((k, tuple(v.shape)) for k, v in model.state_dict().items())
