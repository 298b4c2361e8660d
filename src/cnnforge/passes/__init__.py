"""cnnforge.passes."""
