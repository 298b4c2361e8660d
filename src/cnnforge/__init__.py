"""cnnforge: compile PyTorch CNNs for tiny CNN accelerators (MAX78000/MAX78002), bit-exactly.

The Python API (docs/python-api.md) is here at the top: ``cnnforge.analyze``, ``check``,
``quantize``, ``plan``, ``compile``, ``simulate``, ``budget``, ``evaluate``, ``train``,
``adapt``, ``inspect``, ``diff``. They load on first use (PEP 562), so ``import cnnforge``
imports neither torch nor numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cnnforge.version import __version__

__all__ = [
    "Adaptation",
    "Analysis",
    "Budget",
    "CheckResult",
    "Compiled",
    "Demo",
    "Difference",
    "Evaluated",
    "History",
    "Inspection",
    "Planned",
    "Quantized",
    "__version__",
    "adapt",
    "analyze",
    "budget",
    "check",
    "compile",
    "demo",
    "diff",
    "evaluate",
    "inspect",
    "plan",
    "quantize",
    "simulate",
    "train",
]

if TYPE_CHECKING:
    from cnnforge.api import (
        Adaptation,
        Analysis,
        Budget,
        CheckResult,
        Compiled,
        Demo,
        Difference,
        Evaluated,
        History,
        Inspection,
        Planned,
        Quantized,
        adapt,
        analyze,
        budget,
        check,
        compile,
        demo,
        diff,
        evaluate,
        inspect,
        plan,
        quantize,
        simulate,
        train,
    )


def __getattr__(name: str) -> Any:
    """The API's names, imported when first used."""
    if name in __all__ and name != "__version__":
        from cnnforge import api

        return getattr(api, name)
    raise AttributeError(f"module 'cnnforge' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
