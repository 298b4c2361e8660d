"""`cnnforge simulate` refuses two network sources at once instead of ignoring one."""

from cnnforge.cli import main


def test_vendor_pair_and_network_together_is_an_error(tmp_path, capsys, ai8x_data):
    import numpy as np
    import pytest

    x = tmp_path / "x.npy"
    np.save(x, np.zeros((1, 28, 28), np.int64))
    args = [
        "simulate", "--ai8x-yaml", str(ai8x_data / "networks" / "mnist-chw-ai85.yaml"),
        "--ai8x-checkpoint", str(ai8x_data / "trained" / "ai85-mnist-qat8-q.pth.tar"),
        "--network", str(tmp_path / "q.pth"),
        "--input", str(x), "--output", str(tmp_path / "y.npy"),
    ]  # fmt: skip
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "not both" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "y.npy").exists()
