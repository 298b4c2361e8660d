"""cnnforge: compile PyTorch CNNs for tiny CNN accelerators (MAX78000/MAX78002), bit-exactly."""

__version__ = "0.1.0"
