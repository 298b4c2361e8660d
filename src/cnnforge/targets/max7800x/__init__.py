"""The MAX7800x target (MAX78000/MAX78002): planner, independent validator, vendor pair writers,
portable C, report.html and the MSDK firmware (docs/firmware.md)."""
