"""The firmware reader's fast paths read what the plain paths read (issue 38): long brace lists
of integer literals (weights, samples, known answers) parsed by a regular expression instead of
pycparser, and the directive scan's runs of plain characters."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from cnnforge.targets.max7800x.firmware.directives import _logical_lines
from cnnforge.targets.max7800x.firmware.interpret import Interpreter, _parse

_LITERAL = st.one_of(
    st.integers(0, 2**32 - 1).map(hex),
    st.integers(0, 2**31).map(str),
    st.integers(0, 2**20).map(lambda v: "0" + oct(v)[2:] if v else "0"),
    st.integers(0, 2**31).map(lambda v: f"-{v}"),
    st.integers(0, 2**32 - 1).map(lambda v: f"0x{v:X}U"),
    st.integers(0, 2**31).map(lambda v: f"{v}UL"),
)


@settings(max_examples=30, deadline=None)
@given(
    literals=st.lists(_LITERAL, min_size=16, max_size=60),
    sep=st.sampled_from([", ", ",\n  ", " ,"]),
)
def test_long_literal_lists_read_as_pycparser_reads_them(tmp_path_factory, literals, sep) -> None:
    """``a`` goes the fast way (16+ literals), ``b`` (an expression first) through pycparser:
    the same values."""
    folder: Path = tmp_path_factory.mktemp("lists")
    body = sep.join(literals)
    (folder / "cnn.c").write_text(
        "#include <stdint.h>\n"
        f"static const uint32_t a[] = {{ {body} }};\n"
        f"static const uint32_t b[] = {{ (0 + 0), {body}, }};\n"
    )
    (folder / "main.c").write_text("int main(void) { return 0; }\n")
    assert len(_parse(folder, "cnn.c")[1]) == 1  # ``a`` only: the regular expression's
    arrays = Interpreter(folder, "MAX78000").arrays
    assert arrays["a"].array == arrays["b"].array[1:]
    assert len(arrays["a"].array) == len(literals)


_TEXT = st.text(alphabet="ab#/*\\\n\"' x%:", max_size=200)


def _reference_lines(text: str) -> list[tuple[int, str]]:
    """The scan one character at a time (before the plain-run shortcut)."""
    out: list[tuple[int, str]] = []
    buf: list[str] = []
    line = start = 1
    i, n = 0, len(text)
    quote = ""
    while i < n:
        c = text[i]
        if quote:
            buf.append(c)
            if c == "\\" and i + 1 < n:
                buf.append(text[i + 1])
                line += text[i + 1] == "\n"
                i += 2
                continue
            if c == quote or c == "\n":
                quote = ""
                if c == "\n":
                    out.append((start, "".join(buf)))
                    buf, line, start = [], line + 1, line + 1
            i += 1
        elif text.startswith("\\\n", i):
            line += 1
            i += 2
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            line += text.count("\n", i, end)
            buf.append(" ")
            i = end
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 2 if text.startswith("\\\n", i) else 1
        elif c == "\n":
            out.append((start, "".join(buf)))
            buf, line, start = [], line + 1, line + 1
            i += 1
        else:
            if c in "\"'":
                quote = c
            buf.append(c)
            i += 1
    if buf:
        out.append((start, "".join(buf)))
    return out


@settings(max_examples=300, deadline=None)
@given(_TEXT)
def test_directive_scan_skips_plain_runs_without_changing_lines(text: str) -> None:
    assert _logical_lines(text) == _reference_lines(text)
