"""Placement of a hardware network on a MAX7800x: processors, data memory, kernels, bias.

``planner.plan_network`` makes a plan, ``validate.validate_plan`` checks any plan at word
level (sizes derived from the spec through cnnforge.geometry, not the planner's helpers),
``metrics.plan_metrics`` measures a plan, ``deploy`` is what ``cnnforge plan`` does, ``report``
writes it readably.
"""
