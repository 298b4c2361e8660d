"""arithmetic.py is a leaf: it imports nothing of cnnforge and agrees with kinds.py on the codes."""

from __future__ import annotations

import ast
from pathlib import Path

import torch

from cnnforge import arithmetic, kinds
from cnnforge.kinds import Activation, EltwiseOp

SRC = Path(arithmetic.__file__).parent


def _cnnforge_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
    return [n for n in names if n == "cnnforge" or n.startswith("cnnforge.")]


def test_arithmetic_and_kinds_import_nothing_of_cnnforge():
    assert _cnnforge_imports(SRC / "arithmetic.py") == []
    assert _cnnforge_imports(SRC / "kinds.py") == []


def test_binary_code_is_the_same():
    assert arithmetic.BINARY_BITS == kinds.BINARY_BITS


def test_enums_and_plain_values_give_the_same_results():
    y = torch.tensor([-128, -3, 0, 5, 127])
    for act in (Activation.NONE, Activation.RELU, Activation.ABS):
        assert torch.equal(arithmetic.activate_int(y, act), arithmetic.activate_int(y, act.value))
    ops = [torch.tensor([100, -7]), torch.tensor([60, 3])]
    for op in (EltwiseOp.ADD, EltwiseOp.SUB, EltwiseOp.OR, EltwiseOp.XOR):
        assert torch.equal(arithmetic.eltwise_fold(op, ops), arithmetic.eltwise_fold(op.value, ops))


def test_ir_reexports_the_kinds():
    from cnnforge import ir

    for name in ("BINARY_BITS", "Op", "Activation", "PoolKind", "EltwiseOp", "HARDWARE_OPS"):
        assert getattr(ir, name) is getattr(kinds, name)
