"""cnnforge.train."""
