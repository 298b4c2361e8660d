"""Imports every command module so that each registers itself on the app (one line each)."""
from cnnforge.cli import analyze  # noqa: F401
from cnnforge.cli import check  # noqa: F401
from cnnforge.cli import quantize  # noqa: F401
from cnnforge.cli import simulate  # noqa: F401
from cnnforge.cli import train  # noqa: F401
from cnnforge.cli import evaluate  # noqa: F401
from cnnforge.cli import compile  # noqa: F401
from cnnforge.cli import diff  # noqa: F401
from cnnforge.cli import demo  # noqa: F401
from cnnforge.cli import plan  # noqa: F401
