"""The generic on-chip-budget target: schedule, lifetimes, allocation with DDR spill, report."""
