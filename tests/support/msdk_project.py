"""What a Makefile says, as facts to compare with the vendor tool's (tests/data/msdk_project.json):
every ``include``, every variable assignment (name, operator, value) and every rule's target,
whitespace collapsed, comments and conditionals' syntax dropped, order ignored. The build-output
name (``PROJECT``, the vendor names it after its --prefix) and the relative MSDK path of a folder
without ``MAXIM_PATH`` (``DEPTH``: the vendor's depends on its output directory) are left out."""

from __future__ import annotations

import json
import re
from pathlib import Path

STORE = Path(__file__).resolve().parents[1] / "data" / "msdk_project.json"
# The vendor's folders for the stored cases: mnist (--softmax), and with --riscv --riscv-debug.
CASES = {
    "MAX78000": ("MAX78000", ()),
    "MAX78002": ("MAX78002", ()),
    "MAX78000-riscv": ("MAX78000", ("--riscv", "--riscv-debug")),
    "MAX78002-riscv": ("MAX78002", ("--riscv", "--riscv-debug")),
}
BUILD_FILES = ("Makefile", "project.mk", "Makefile.ARM", "Makefile.RISCV")
_ASSIGN = re.compile(r"^(override\s+)?([A-Za-z_.][A-Za-z0-9_.]*)\s*(\?=|:=|\+=|=)\s*(.*)$")
_RULE = re.compile(r"^([^=:\t#][^=:#]*?)\s*:(?!=)")
_LEFT_OUT = {"PROJECT", "DEPTH", "LIBS_DIR"}  # LIBS_DIR: only its MAXIM_PATH-less fallback


def _lines(text: str) -> list[str]:
    """Logical lines without comments (a recipe's text is kept whole)."""
    out = []
    for raw in text.replace("\\\n", " ").splitlines():
        if raw.startswith("\t"):
            out.append("\t" + " ".join(raw.split()))
            continue
        line = raw.split("#", 1)[0] if not raw.lstrip().startswith("$(") else raw
        line = " ".join(line.split())
        if line:
            out.append(line)
    return out


def makefile_facts(text: str) -> dict[str, list[str]]:
    """{"include": [...], "set": ["NAME OP VALUE", ...], "rule": [...], "recipe": [...]}."""
    facts: dict[str, set[str]] = {"include": set(), "set": set(), "rule": set(), "recipe": set()}
    for line in _lines(text):
        if line.startswith("\t"):
            facts["recipe"].add(line.strip())
        elif line.startswith(("include ", "-include ")):
            facts["include"].add(line.split(None, 1)[1])
        elif m := _ASSIGN.match(line):
            name, op, value = m.group(2), m.group(3), m.group(4)
            if name in _LEFT_OUT and "MAXIM_PATH" not in value and "$(" not in value:
                continue
            facts["set"].add(f"{name} {op} {value}".strip())
        elif (m := _RULE.match(line)) and not line.startswith(("if", "else", "endif", "$(")):
            facts["rule"].add(m.group(1))
    return {k: sorted(v) for k, v in facts.items()}


def folder_facts(folder: Path) -> dict[str, dict[str, list[str]]]:
    """{build file: its facts} of a firmware folder."""
    return {
        name: makefile_facts((folder / name).read_text(encoding="utf-8"))
        for name in BUILD_FILES
        if (folder / name).is_file()
    }


def stored_facts() -> dict[str, dict[str, dict[str, list[str]]]]:
    """The vendor's facts per case (CASES)."""
    return json.loads(STORE.read_text(encoding="utf-8"))
