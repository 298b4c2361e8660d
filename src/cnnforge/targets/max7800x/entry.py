"""The MAX78000 and MAX78002 as entries of the table of targets (api/targets.py): the vendor's
integer rules, this package's checker rules, compile recipe, planner and vendor-pair reader."""

from __future__ import annotations

from cnnforge import arithmetic
from cnnforge.pipeline.state import REPORT, SUMMARY
from cnnforge.pipeline.targets import Target
from cnnforge.targets.max7800x import plan_flow, recipe
from cnnforge.targets.max7800x.ai8x import pair_network
from cnnforge.targets.max7800x.device import DEVICES, Max7800xDevice
from cnnforge.targets.max7800x.firmware.options import TARGET_OPTIONS
from cnnforge.targets.max7800x.rules import RULES


def _entry(device: Max7800xDevice) -> Target:
    """One MAX7800x part: the vendor's integer rules, the MAX7800x recipe and planner."""
    return Target(
        device.name,
        f"Analog Devices {device.name} CNN accelerator",
        arithmetic,  # the vendor's integer rules
        device=device,
        aliases=(device.die,),
        rules=RULES,
        compile_steps=recipe.STEPS,
        planner=plan_flow.plan_request,
        write=plan_flow.write_outputs,
        plans="place",
        report=(REPORT, SUMMARY),
        read_pair=pair_network,
        options=TARGET_OPTIONS,
    )


#: The MAX7800x parts, MAX78000 first.
TARGETS: tuple[Target, ...] = tuple(_entry(device) for device in DEVICES)
