"""cnnforge.analysis."""
