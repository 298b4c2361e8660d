"""cnnforge.nn."""
