"""``python -m cnnforge`` (used by ``torchrun -m cnnforge train ...``)."""

from cnnforge.cli import run

if __name__ == "__main__":
    run()
