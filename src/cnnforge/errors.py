"""The one exception family of cnnforge: what went wrong, where, and a hint.

Only ``cli`` turns these into exit codes (status 2) and one-line messages; library code raises
them and never calls ``sys.exit``. See ../shared/design/ARCHITECTURE.md "Errors".
"""

from __future__ import annotations


class CnnforgeError(Exception):
    """A user-facing error: what happened, where (layer, module path, file:line), a hint."""

    def __init__(self, what: str, *, where: str | None = None, hint: str | None = None) -> None:
        super().__init__(what)
        self.what = what
        self.where = where
        self.hint = hint

    def one_line(self) -> str:
        """The message as the CLI prints it: ``where: what (hint: ...)`` on one line."""
        text = f"{self.where}: {self.what}" if self.where else self.what
        if self.hint:
            text += f" (hint: {self.hint})"
        return " ".join(text.split())

    def __str__(self) -> str:
        return self.one_line()


class InputError(CnnforgeError):
    """A file, argument or value given by the user is missing, malformed or out of range."""


class ModelError(CnnforgeError):
    """The PyTorch model cannot be loaded, traced or mapped (unsupported op, bad checkpoint)."""


class ConfigError(CnnforgeError):
    """A vendor YAML / checkpoint pair is malformed or inconsistent (names file:line)."""


class DeviceLimitError(CnnforgeError):
    """The network breaks a device limit or does not fit a device resource."""


class PlanError(CnnforgeError):
    """No placement fits, or a given plan breaks a placement rule."""


class SimulationError(CnnforgeError):
    """The simulator was given data it cannot run (bad range, shape or dtype)."""


class EmitError(CnnforgeError):
    """Writing outputs failed (existing directory without --overwrite, C build failure)."""
