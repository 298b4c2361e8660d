"""The zoo (tests/support/zoo_models.py): every model is captured (checked against eager),
analyzed with exact parameter counts, and checked with exit 0 or 1 -- never 2 -- and every
reason named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from cnnforge.cli import main
from support import zoo_models

ZOO_FILE = Path(zoo_models.__file__)


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(args)
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


@pytest.mark.parametrize("name", list(zoo_models.ZOO))
def test_zoo_model_is_analyzed_and_checked(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    torch.manual_seed(0)
    spec = f"{ZOO_FILE}:{name}"
    shape = ",".join(map(str, zoo_models.ZOO[name]))
    code, out, err = _run(["analyze", spec, "-i", shape, "--json", "-"], capsys)
    assert code == 0, err
    model = getattr(zoo_models, name)()
    assert json.loads(out)["totals"]["params"] == sum(p.numel() for p in model.parameters())

    code, out, err = _run(["check", spec, "-i", shape, "--json", "-"], capsys)
    assert code in (0, 1), err
    report = json.loads(out)
    assert report["fits"] == (code == 0)
    for violation in report["violations"]:
        assert violation["rule"] and violation["actual"] and violation["hint"]
        assert violation["module_path"] or violation["layer"] == report["network"]
