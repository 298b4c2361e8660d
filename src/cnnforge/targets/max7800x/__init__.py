"""The MAX7800x target (MAX78000/MAX78002): planner, validator, vendor writers, C, report.

Planning: ``planner.plan_network`` places a hardware network (processors, data memory,
kernels, bias) as a ``placement.Plan``; ``validate.validate_plan`` checks any plan at word
level (sizes derived from the spec through cnnforge.geometry, not the planner's helpers);
``metrics.plan_metrics`` measures a plan and ``plan_report`` writes it readably. Writing:
``ai8x_yaml_writer`` / ``ai8x_checkpoint_writer`` (the vendor pair), ``c/`` (portable C with
a known-answer self-test), ``compile_report`` (report.html), ``firmware/`` (the MSDK firmware,
register for register the vendor tool's; docs/firmware.md).
"""
