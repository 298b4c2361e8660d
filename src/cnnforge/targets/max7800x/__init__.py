"""The MAX78000 / MAX78002 target (firmware writer first; the planner and emitters join it)."""
