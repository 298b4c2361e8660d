"""The Python API: one function per command for models that live in memory (docs/python-api.md).

The CLI parses arguments and formats what these return; a script or notebook calls them with an
``nn.Module`` object and gets the same numbers back.
"""

import cnnforge
from cnnforge.api.functions import (
    DEFAULT_DEVICE,
    analyze,
    budget,
    check,
    compile,
    evaluate,
    plan,
    quantize,
    simulate,
    train,
)
from cnnforge.api.results import Analysis, Budget, CheckResult, Compiled, Quantized

#: The public names: the package's own list (cnnforge/__init__.py), and the default device.
__all__ = ["DEFAULT_DEVICE", *(name for name in cnnforge.__all__ if name != "__version__")]
