"""The Python API: one function per command for models that live in memory (docs/python-api.md).

The CLI parses arguments and formats what these return; a script or notebook calls them with an
``nn.Module`` object and gets the same numbers back. The list of public names is the package's
own, ``cnnforge.__all__``: this module imports them, plus ``DEFAULT_DEVICE``.
"""

from cnnforge.api.firmware import diff, inspect
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
from cnnforge.api.results import (
    Adaptation,
    Analysis,
    Budget,
    CheckResult,
    Compiled,
    Demo,
    Difference,
    Evaluated,
    History,
    Inspection,
    Planned,
    Quantized,
)
from cnnforge.api.workflows import adapt, demo
