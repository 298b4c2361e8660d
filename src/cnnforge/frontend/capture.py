"""The front door: capture a PyTorch model (torch.fx, else torch.export) as a float ``Network``
checked against eager on a seeded input; a capture that differs is a ``ModelError``."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from cnnforge.errors import CnnforgeError, InputError, ModelError
from cnnforge.frontend.captured import Captured, leaves, owned_arrays
from cnnforge.frontend.loading import first_line, user_frame
from cnnforge.ir import Network
from cnnforge.sim.float_eval import CHECK_SEED, float_difference


@dataclass(frozen=True)
class Mismatch:
    """The first output where a capture and the eager model disagree."""

    index: int
    layer: str
    module_path: str
    what: str

    def describe(self, how: str) -> str:
        where = f"{self.layer} ({self.module_path})" if self.module_path else self.layer
        return f"the {how} capture differs from eager at output {self.index} [{where}]: {self.what}"


def capture(
    module: nn.Module,
    input_shape: Sequence[int],
    name: str | None = None,
    *,
    handed_over: bool = False,
) -> Network:
    """The float Network of ``module`` on ``input_shape`` (C,H,W or C,L), checked against eager;
    ``handed_over``: the module is not used again, so arrays may view its storage."""
    network = _capture(module, tuple(int(n) for n in input_shape), name)
    return network if handed_over else owned_arrays(network)


def _capture(module: nn.Module, shape: tuple[int, ...], name: str | None) -> Network:
    from cnnforge.frontend.torch_fx import capture_fx

    name = name or type(module).__name__
    with _eval_mode(module):
        x = check_input(module, shape)
        try:
            fx_capture: Captured | None = capture_fx(module, shape, name)
            fx_error: CnnforgeError | None = None
        except CnnforgeError as exc:
            fx_capture, fx_error = None, exc
        eager = _eager(module, x, fx_error)
        if fx_capture is not None:
            mismatch = compare(fx_capture, x, eager)
            if mismatch is None:
                return fx_capture.with_unused(module)
        problem = mismatch if fx_capture is not None else fx_error
        assert problem is not None
        return _export_fallback(module, shape, name, x, eager, problem)


def _export_fallback(
    module: nn.Module,
    shape: tuple[int, ...],
    name: str,
    x: torch.Tensor,
    eager: list[torch.Tensor],
    fx_problem: CnnforgeError | Mismatch,
) -> Network:
    from cnnforge.frontend.torch_export import capture_export

    try:
        exported = capture_export(module, shape, name, x)
    except CnnforgeError as exc:
        if isinstance(fx_problem, CnnforgeError):  # neither traces: fx names the user's line
            raise ModelError(
                f"{fx_problem.what}; torch.export fails too: {exc.what}",
                where=fx_problem.where or exc.where,
                hint=fx_problem.hint or exc.hint,
            ) from None
        raise ModelError(
            f"{fx_problem.describe('torch.fx')}, and {exc.what}", where=exc.where, hint=exc.hint
        ) from None
    mismatch = compare(exported, x, eager)
    if mismatch is None:
        return exported.with_unused(module)
    raise ModelError(
        f"neither torch.fx nor torch.export captures what forward() computes: "
        f"{mismatch.describe('torch.export')}",
        where=mismatch.module_path or name,
        hint="forward() must compute the same function on every call: no randomness, no "
        "state changed by forward(), no control flow on tensor values",
    )


def check_input(module: nn.Module, shape: tuple[int, ...]) -> torch.Tensor:
    """The seeded random batch-of-one input (in the model's float dtype) both sides run on."""
    if len(shape) not in (2, 3) or min(shape) <= 0:
        raise InputError(f"input shape {shape} must be C,H,W or C,L with positive sizes")
    floats = (p.dtype for p in module.parameters() if p.is_floating_point())
    dtype = next(floats, torch.get_default_dtype())
    generator = torch.Generator().manual_seed(CHECK_SEED)
    return torch.randn((1, *shape), generator=generator).to(dtype)


def _eager(
    module: nn.Module, x: torch.Tensor, fx_error: CnnforgeError | None
) -> list[torch.Tensor]:
    """The eager model's output tensors (pytree order) on ``x``."""
    try:
        with torch.no_grad():
            out = module(x.clone())
    except Exception as exc:
        if isinstance(fx_error, InputError):
            raise fx_error from None  # names the module where the shape fails
        raise InputError(
            f"the model fails on input shape {tuple(x.shape[1:])}: {first_line(exc)}",
            where=user_frame(exc) or type(module).__name__,
            hint="check --input-shape (C,H,W or C,L) against what the model expects",
        ) from None
    return [t for t in leaves(out) if isinstance(t, torch.Tensor)]


def compare(captured: Captured, x: torch.Tensor, eager: list[torch.Tensor]) -> Mismatch | None:
    """The first output where ``captured`` (float evaluation) and ``eager`` disagree, or None."""
    from cnnforge.sim.float_eval import run_float

    network = captured.network
    if len(captured.output_layers) != len(eager):
        return Mismatch(
            0,
            network.name,
            "",
            f"{len(captured.output_layers)} outputs captured, eager returns {len(eager)} "
            "(likely: a branch on a Python value the capture took differently)",
        )
    try:
        with torch.no_grad():
            got = run_float(network, x, given=captured.given_values(x))
    except Exception as exc:  # a capture whose layers do not even run is not the model
        return Mismatch(0, network.name, "", f"its float evaluation fails: {first_line(exc)}")
    for index, (name, want) in enumerate(zip(captured.output_layers, eager, strict=True)):
        layer = network.layer(name)
        what = float_difference(got[name], want)
        if what is not None:
            cause = (
                "a branch or size computation the capture took differently"
                if what.startswith("shape")
                else "an operation on a path the capture dropped or fixed, such as an "
                "isinstance/None test or a Python branch"
            )
            return Mismatch(index, name, layer.module_path, f"{what} (likely: {cause})")
    return None


@contextlib.contextmanager
def _eval_mode(module: nn.Module) -> Iterator[None]:
    """Eval mode (running BatchNorm statistics, no dropout) for the duration; restored after."""
    was_training = [m.training for m in module.modules()]
    module.eval()
    try:
        yield
    finally:
        for m, flag in zip(module.modules(), was_training, strict=True):
            m.training = flag
