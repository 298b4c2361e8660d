"""``python -m cnnforge`` (used by ``torchrun -m cnnforge train ...``)."""

from cnnforge.cli import main

if __name__ == "__main__":
    main()
