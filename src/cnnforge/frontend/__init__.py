"""cnnforge.frontend."""
