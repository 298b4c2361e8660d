"""cnnforge.quant."""
