"""Imports every command module so that each registers itself on the app (one line each)."""

from cnnforge.cli import (  # noqa: F401
    adapt,
    analyze,
    budget,
    check,
    compile,
    demo,
    diff,
    evaluate,
    inspect,
    plan,
    quantize,
    simulate,
    train,
)
