"""cnnforge.emit."""
