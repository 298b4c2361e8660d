"""The QAT policy (docs/hardware/arithmetic.md R6.4: start_epoch, weight_bits, shift_quantile,
per-module overrides) and the stage switches of a whole model."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from torch import nn

from cnnforge.errors import InputError
from cnnforge.nn.layers import QATModule, Stage, _WeightLayer

ALLOWED_BITS = (1, 2, 4, 8)


@dataclass(frozen=True)
class QATPolicy:
    """When QAT starts and with which weight widths; ``overrides`` maps module path -> bits."""

    start_epoch: int = 0
    weight_bits: int = 8
    overrides: dict[str, int] = field(default_factory=dict)
    shift_quantile: float = 1.0

    def bits_for(self, path: str, module_default: int | None = None) -> int:
        """Weight bits of the module at ``path``: override, else the module's own, else default."""
        if path in self.overrides:
            return self.overrides[path]
        return self.weight_bits if module_default is None else module_default


def load_policy(path: Path | str) -> QATPolicy:
    """Read a qat_policy.yaml (safe YAML); InputError naming the file for bad content."""
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read QAT policy: {exc.strerror}", where=str(path)) from None
    except yaml.YAMLError as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", None)
        where = f"{path}:{line + 1}" if line is not None else str(path)
        raise InputError("QAT policy is not valid YAML", where=where) from None
    return policy_from_dict(doc, str(path))


def policy_from_dict(doc: object, where: str = "QAT policy") -> QATPolicy:
    """A QATPolicy from the parsed YAML mapping (validated)."""
    if not isinstance(doc, dict):
        raise InputError("QAT policy must be a mapping", where=where, hint="see nn/policy.py")
    unknown = set(doc) - {"start_epoch", "weight_bits", "overrides", "shift_quantile"}
    if unknown:
        raise InputError(f"unknown QAT policy keys {sorted(unknown)}", where=where)
    overrides = {}
    for name, value in (doc.get("overrides") or {}).items():
        bits = value.get("weight_bits") if isinstance(value, dict) else value
        overrides[str(name)] = _bits(bits, f"{where}: overrides.{name}")
    quantile = doc.get("shift_quantile", 1.0)
    if not isinstance(quantile, (int, float)) or not 0.0 < quantile <= 1.0:
        raise InputError(f"shift_quantile {quantile!r} must be in (0, 1]", where=where)
    start = doc.get("start_epoch", 0)
    if not isinstance(start, int) or start < 0:
        raise InputError(f"start_epoch {start!r} must be a non-negative integer", where=where)
    return QATPolicy(start, _bits(doc.get("weight_bits", 8), where), overrides, float(quantile))


def _bits(value: object, where: str) -> int:
    if isinstance(value, bool) or value not in ALLOWED_BITS:
        raise InputError(f"weight_bits {value!r} is not one of {ALLOWED_BITS}", where=where)
    return int(value)


def qat_modules(model: nn.Module) -> Iterator[tuple[str, QATModule]]:
    """Every cnnforge.nn module of ``model`` with its module path."""
    for name, module in model.named_modules():
        if isinstance(module, QATModule):
            yield name, module


def enable_qat(model: nn.Module, policy: QATPolicy | None = None) -> nn.Module:
    """Fold BatchNorm, set weight bits/shift quantile, switch every module to QAT (R6.4)."""
    policy = policy or QATPolicy()
    modules = dict(qat_modules(model))
    unknown = sorted(set(policy.overrides) - set(modules))
    if unknown:
        raise InputError(
            f"QAT policy overrides name no cnnforge.nn module: {unknown}",
            hint=f"module paths are e.g. {sorted(modules)[:4]}",
        )
    for name, module in modules.items():
        _to_stage(module, Stage.QAT, policy, name)
    return model


def set_quantized_eval(model: nn.Module, *, avg_pool_rounding: bool = False) -> nn.Module:
    """Switch every module to exact integer evaluation and ``model.eval()`` (float-stage modules
    quantized at their own bits); ``avg_pool_rounding`` as the Network's (R3.6)."""
    for _, module in qat_modules(model):
        module.avg_pool_rounding = avg_pool_rounding
        _to_stage(module, Stage.QUANTIZED, None, "")
    return model.eval()


def set_float(model: nn.Module) -> nn.Module:
    """Back to the float stage (a folded BatchNorm stays folded)."""
    for _, module in qat_modules(model):
        module.set_stage(Stage.FLOAT)
    return model


def _to_stage(module: QATModule, stage: Stage, policy: QATPolicy | None, name: str) -> None:
    if isinstance(module, _WeightLayer):
        module.fold_bn()
        if policy is not None:
            module.weight_bits = policy.bits_for(name, module.weight_bits)
            module.shift_quantile = policy.shift_quantile
    module.set_stage(stage)
