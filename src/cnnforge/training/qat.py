"""When and how the training loop switches a model to quantization-aware training."""

from __future__ import annotations

from typing import Any

from torch import nn


class QatHooks:
    """Activates QAT (``cnnforge.nn.enable_qat``) at the policy's ``start_epoch``; None: never."""

    def __init__(self, policy: Any | None) -> None:
        self.policy = policy
        self.active = False

    def should_activate(self, epoch: int) -> bool:
        return self.policy is not None and not self.active and epoch >= self.policy.start_epoch

    def activate(self, model: nn.Module) -> None:
        from cnnforge.nn import enable_qat

        enable_qat(model, self.policy)
        self.active = True
