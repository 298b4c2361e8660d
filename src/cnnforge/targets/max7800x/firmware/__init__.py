"""MAX7800x firmware: the MSDK project (cnn.c, weights.h, main.c, ...) and its host check."""
