"""cnnforge.training."""
