"""Targets other than the MAX7800x devices of ``devices.py`` (the generic accelerator first)."""
