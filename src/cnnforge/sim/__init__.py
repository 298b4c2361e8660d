"""cnnforge.sim."""
