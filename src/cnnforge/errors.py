"""The one exception family of cnnforge: what went wrong, where, and a hint; only ``cli`` turns
them into exit status 2 and one-line messages (docs/bad-input.md)."""

from __future__ import annotations

import re
from typing import ClassVar

#: ANSI escape sequences (torch colours some messages) and other control characters.
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|[\x00-\x08\x0b-\x1f\x7f]")


def plain_text(text: str) -> str:
    """``text`` on one line, without ANSI codes or control characters."""
    return " ".join(_CONTROL.sub("", text).split())


class Note(UserWarning):
    """A fact about a run the user should know, raised with ``warnings.warn(text, Note)``; the CLI
    prints ``note: text`` only after the command succeeds."""


class CnnforgeError(Exception):
    """A user-facing error: what happened, where (layer, module path, file:line), a hint."""

    #: The hint when the raiser gives none: every message ends with ``(hint: ...)``.
    default_hint: ClassVar[str] = "check the input named above"

    def __init__(self, what: str, *, where: str | None = None, hint: str | None = None) -> None:
        super().__init__(what)
        self.what = what
        self.where = where
        self.hint = hint

    def one_line(self) -> str:
        """The message as the CLI prints it: ``where: what (hint: ...)`` on one line."""
        text = f"{self.where}: {self.what}" if self.where else self.what
        text += f" (hint: {self.hint or self.default_hint})"
        return plain_text(text)

    def __str__(self) -> str:
        return self.one_line()


class InputError(CnnforgeError):
    """A file, argument or value given by the user is missing, malformed or out of range."""

    default_hint = "check the file, option or value named"


class ModelError(CnnforgeError):
    """The PyTorch model cannot be loaded, traced or mapped (unsupported op, bad checkpoint)."""

    default_hint = "fix the model or checkpoint named; `cnnforge analyze MODEL` shows how it traces"


class ConfigError(CnnforgeError):
    """A vendor YAML / checkpoint pair is malformed or inconsistent (names file:line)."""

    default_hint = "fix the vendor YAML or checkpoint at the place named (docs/ai8x-format.md)"


class DeviceLimitError(CnnforgeError):
    """The network breaks a device limit or does not fit a device resource."""

    default_hint = "`cnnforge check` lists every violation with its limit"


class PlanError(CnnforgeError):
    """No placement fits, or a given plan breaks a placement rule."""

    default_hint = "`cnnforge plan --validate-only` lists the plan's issues"


class SimulationError(CnnforgeError):
    """The simulator was given data it cannot run (bad range, shape or dtype)."""

    default_hint = "the simulator runs quantized hardware networks; see `cnnforge check`"


class EmitError(CnnforgeError):
    """Writing outputs failed (existing directory without --overwrite, C build failure)."""

    default_hint = "check the output path, or pass --overwrite where cnnforge may replace it"


class DistributedError(CnnforgeError):
    """Another process of a ``torchrun`` run failed or stopped answering."""

    default_hint = "the failing rank's own error line, or torchrun's report, names it and why"


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived: the run stops and cleans up as a failure does; not an
    ``Exception``, so nothing swallows it. ``resumable``: the hint names ``--resume``."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum
        self.resumable = False
