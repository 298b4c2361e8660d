"""cnnforge.models."""
