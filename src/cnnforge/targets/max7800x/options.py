"""The MAX7800x target's own `compile` options, where ``cnnforge.targets.declared_options``
looks for them (declared with the firmware options they set, in firmware/options.py)."""

from cnnforge.targets.max7800x.firmware.options import TARGET_OPTIONS

__all__ = ["TARGET_OPTIONS"]
