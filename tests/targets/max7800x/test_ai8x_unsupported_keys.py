"""A vendor YAML key cnnforge does not model is refused by its name, before the checks of its
value's type (the vendor's `data_buffer` holds a list of maps: it must not read as a type error)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cnnforge.errors import ConfigError
from cnnforge.targets.max7800x.ai8x_yaml import read_yaml_config

LAYER = """layers:
  - processors: 0x1
    output_processors: 0x1
    out_offset: 0
    operation: conv2d
    kernel_size: 3x3
    pad: 1
"""


def test_a_data_buffer_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "net.yaml"
    path.write_text("arch: x\ndataset: y\ndata_buffer:\n  - processors: 0xffffffff00000000\n"
                    "    dim: 5\n    offset: 0x7fc8\n" + LAYER)  # fmt: skip
    with pytest.raises(ConfigError) as error:
        read_yaml_config(path)
    text = str(error.value)
    assert f"{path}:3" in text and "`data_buffer`" in text and "not supported" in text
