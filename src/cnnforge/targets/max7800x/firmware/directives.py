"""The preprocessor directives of an untrusted firmware folder, checked before ``cpp`` reads it.

``inspect`` runs the C preprocessor over the folder's text; a directive that reads a file could
reach outside the folder (``#include "/etc/passwd"``, ``#include "../../x"``, a link out of it).
So each file cpp would read is scanned first, comments removed and continued lines joined (as the
preprocessor does, digraph ``%:`` included): an ``#include`` must name a plain relative file
("x.h" or <x.h>) without ``..``, a quoted one must stay inside the folder once links are
resolved, and directives that read or test files otherwise (``#include_next``, ``#import``,
``#embed``, ``#pragma GCC dependency``, ``__has_include``, ``_Pragma``, computed includes) are
refused. The message names file:line.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

_DIRECTIVE = re.compile(r"^\s*(?:#|%:)\s*([A-Za-z_]\w*)\s*(.*)$")
_INCLUDE = re.compile(r'^(?:"([^"\n]*)"|<([^>\n]*)>)\s*$')
_READS = {"include_next", "import", "embed"}
_PLAIN = re.compile(r"[^\"'\\/\n]+")
_WORDS = re.compile(r"\b(__has_include(?:_next)?|__has_embed|_Pragma)\b")


class DirectiveError(ValueError):
    """A directive that would read outside the folder (the message names file:line)."""


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first physical line, text) per logical line: comments blanked, continuations joined."""
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
        elif c in "\"'":
            quote = c
            buf.append(c)
            i += 1
        else:  # up to the next character any branch above looks at (one, if it is one)
            m = _PLAIN.match(text, i)
            j = m.end() if m else i + 1
            buf.append(text[i:j])
            i = j
    if buf:
        out.append((start, "".join(buf)))
    return out


def _inside(folder: Path, path: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
    except ValueError:
        return False
    return True


def check_folder_file(folder: Path, name: str, seen: set[str] | None = None) -> None:
    """Refuse (DirectiveError, file:line) any directive of ``name`` or the folder's files it
    includes that reads or tests a file outside ``folder``."""
    seen = set() if seen is None else seen
    if name in seen:
        return
    seen.add(name)
    path = folder / name
    if not _inside(folder, path):
        raise DirectiveError(f"{name}: a link to a file outside the folder")
    text = path.read_text(encoding="utf-8", errors="replace")
    for line, logical in _logical_lines(text):
        where = f"{name}:{line}"
        word = _WORDS.search(logical)
        if word:
            raise DirectiveError(f"{where}: {word.group(1)} is refused (it reads files)")
        m = _DIRECTIVE.match(logical)
        if not m:
            continue
        kind, rest = m.group(1), m.group(2).strip()
        if kind in _READS or (kind == "pragma" and re.match(r"GCC\s+dependency\b", rest)):
            raise DirectiveError(f"{where}: #{kind} {rest[:40]} is refused (it reads files)")
        if kind != "include":
            continue
        inc = _INCLUDE.match(rest)
        if not inc:
            raise DirectiveError(f"{where}: #include {rest[:60]} is refused (a computed include)")
        target = inc.group(1) if inc.group(1) is not None else inc.group(2)
        pure = PurePosixPath(target.replace("\\", "/"))
        if not target or pure.is_absolute() or ".." in pure.parts or ":" in target:
            raise DirectiveError(
                f'{where}: #include "{target}" is refused (an absolute path or one outside the '
                "folder)"
            )
        local = folder / pure
        if inc.group(1) is not None and local.exists():
            if not _inside(folder, local):
                raise DirectiveError(f'{where}: #include "{target}" links outside the folder')
            if local.is_file():
                check_folder_file(folder, str(pure), seen)
        elif local.exists() and local.is_file() and _inside(folder, local):
            check_folder_file(folder, str(pure), seen)
        elif local.exists():
            raise DirectiveError(f"{where}: #include <{target}> links outside the folder")
