"""Helpers of the bad-input fuzz suite (test_fuzz.py): run the CLI in-process, snapshot trees,
check the outcome, and draw odd values.

An outcome is clean when the exit status is 0, 1 or 2 (never 70), nothing printed a traceback,
an exit-2 message is one plain line ``error: ... (hint: ...)``, and the work directory differs
from its snapshot only under the output paths of a successful run.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import strategies as st

from cnnforge.cli import main
from cnnforge.targets.max7800x.ai8x import read_ai8x
from cnnforge.targets.max7800x.ai8x_checkpoint import load_checkpoint_dict
from cnnforge.targets.max7800x.ai8x_yaml import ALIASES, LAYER_KEYS
from support.paths import AI8X

#: Examples per family: a few dozen in CI, thousands with CNNFORGE_FUZZ=large.
FUZZ_LEVELS = {"small": 40, "medium": 200, "large": 1000}
ANSI = re.compile(r"\x1b\[")
#: The shipped vendor files every family starts from, and the outputs its commands may write.
YAML = AI8X / "networks" / "mnist-chw-ai85.yaml"
CKPT = AI8X / "trained" / "ai85-mnist-qat8-q.pth.tar"
SAMPLE = AI8X / "samples" / "sample_mnist.npy"
OUTPUTS = ("out", "o.npy", "layers", "r.json", "r.md", "q.pth")


def fuzz_examples() -> int:
    level = os.environ.get("CNNFORGE_FUZZ", "small")
    return FUZZ_LEVELS.get(level) or int(level)


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str


class Seeds(dict):
    """The parsed seed files (a short repr for hypothesis' failure reports)."""

    def __repr__(self) -> str:
        return "seeds"


def load_seeds() -> Seeds:
    """The shipped files' contents: YAML text, checkpoint dict (re-savable), network."""
    doc = load_checkpoint_dict(CKPT)
    doc = {k: v for k, v in doc.items() if k != "optimizer_type"}  # a class: not re-savable
    network = read_ai8x(YAML, CKPT, device="MAX78000").network
    return Seeds({"yaml": YAML.read_text(), "ckpt": doc, "network": network})


def workdir() -> Path:
    """A fresh directory with the seed files under ``in/`` and a bystander tree to leave alone."""
    work = Path(tempfile.mkdtemp(prefix="cnnforge-fuzz-"))
    (work / "in").mkdir()
    (work / "bystander" / "deep").mkdir(parents=True)
    (work / "bystander" / "a.txt").write_text("not yours")
    (work / "bystander" / "deep" / "b.bin").write_bytes(b"\x00\x01")
    shutil.copy(YAML, work / "in" / "net.yaml")
    shutil.copy(CKPT, work / "in" / "ckpt.pth.tar")
    shutil.copy(SAMPLE, work / "in" / "sample_mnist.npy")
    return work


def run_cli(args: list[str], cwd: Path) -> Outcome:
    """``cnnforge ARGS`` in-process, in ``cwd``, with stdout and stderr captured."""
    out, err = io.StringIO(), io.StringIO()
    old = Path.cwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main([str(a) for a in args])
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
    finally:
        os.chdir(old)
    return Outcome(code, out.getvalue(), err.getvalue())


def write_report(counts: dict) -> None:
    """Merge ``{family: Counter(exit status)}`` into the JSON file $CNNFORGE_FUZZ_REPORT, if set
    (each fuzz module adds its families)."""
    target = os.environ.get("CNNFORGE_FUZZ_REPORT")
    if not target:
        return
    path = Path(target)
    doc = json.loads(path.read_text()) if path.exists() else {}
    doc.update({k: {"cases": sum(v.values()), "exit": dict(v)} for k, v in counts.items()})
    path.write_text(json.dumps(doc, indent=1, sort_keys=True))


def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under ``root`` (links not followed): kind, mode and a content digest."""
    tree: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            st_ = path.lstat()
            if path.is_symlink():
                tree[rel] = ("link", os.readlink(path))
            elif path.is_file():
                digest = hashlib.sha1(path.read_bytes()).hexdigest()
                tree[rel] = ("file", st_.st_mode, digest)
            elif path.is_dir():
                tree[rel] = ("dir", st_.st_mode)
            else:
                tree[rel] = ("other", st_.st_mode)
    return tree


def changed(before: dict[str, tuple], after: dict[str, tuple]) -> list[str]:
    keys = set(before) | set(after)
    return sorted(k for k in keys if before.get(k) != after.get(k))


def check_outcome(
    outcome: Outcome,
    before: dict[str, tuple],
    after: dict[str, tuple],
    outputs: tuple[str, ...] = (),
    allowed: tuple[int, ...] = (0, 1, 2),
) -> None:
    """The clean-outcome rules of the module docstring (``outputs``: relative output paths)."""
    text = outcome.out + outcome.err
    context = f"exit {outcome.code}: {outcome.err[-2000:]!r}"
    assert outcome.code != 70, context
    assert outcome.code in allowed, context
    assert "Traceback" not in text, context
    if outcome.code == 2:
        lines = outcome.err.strip().splitlines()
        assert len(lines) == 1, context
        assert lines[0].startswith("error: ") and "(hint: " in lines[0], context
        assert not ANSI.search(outcome.err), context
        assert "\U0001f4af" not in outcome.err, context  # rich's emoji for ":100:"
    diff = changed(before, after)
    if outcome.code != 0:
        assert diff == [], f"{context}; left behind or touched: {diff[:5]}"
        return
    stray = [d for d in diff if not any(_under(d, o) for o in outputs)]
    assert stray == [], f"{context}; touched outside the outputs: {stray[:5]}"


def _under(rel: str, output: str) -> bool:
    """``rel`` is the output, inside it, or a parent directory created for it."""
    out = os.path.normpath(output)
    return rel == out or rel.startswith(out + os.sep) or out.startswith(rel + os.sep)


# ---- odd values ----------------------------------------------------------------------------

#: Texts that have broken tools before: traversal, injection, emoji codes, control characters.
NASTY_TEXTS = (
    "",
    " ",
    "../../escaped",
    "/abs/path",
    "a\\",
    "a\nb",
    "a\n  - processors: 1",
    "x: 1",
    "#",
    "*/ int x; /*",
    '"; system("x"); "',
    ":100:",
    "[red]x[/red]",
    "\x1b[31mred",
    "\u00e9\u4e2d\U0001f600",
    "\x00",
    "%s%n",
    "stop",
    "input",
    "CON",
    "x" * 300,
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, -1, 2, 3, 7, 8, 15, 16, 17, 32, 64, 255, 256, 65535, 2**63, -(2**63)]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(NASTY_TEXTS),
    st.text(max_size=12),
)
yaml_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


# ---- the fuzz families' material ----------------------------------------------------------

MODEL_SOURCE = """\
import sys
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, width: int = 4):
        super().__init__()
        self.conv = nn.Conv2d(3, width, 3, padding=1)
        self.bn = nn.BatchNorm2d(width)
        self.head = nn.Conv2d(width, 2, 1)
        # INIT

    def forward(self, x):
        # FORWARD
        x = torch.relu(self.bn(self.conv(x)))
        return self.head(x)


def build(width: int = 4):
    return Net(width)


def helper():
    return 5


CONSTANT = 3


class NotModule:
    pass
# MODULE
"""

# Every key the importer knows (its own tables), plus the top-level ones: mutations hit them.
YAML_KEYS = (
    "arch",
    "dataset",
    "layers",
    "output_map",
    "unload",
    *sorted(LAYER_KEYS | {alias for names in ALIASES.values() for alias in names}),
)

YAML_SPECIALS = (
    'a: &a ["x","x","x","x","x","x","x","x","x"]\n'
    + "".join(
        f"{c}: &{c} [*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p}]\n"
        for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    )
    + "arch: *i\n",
    "arch: " + "[" * 3000 + "]" * 3000 + "\n",
    "arch: x\ndataset: y\nlayers:\n"
    + "  - processors: 1\n" * 5
    + "  - &l {processors: 1}\n"
    + "  - *l\n" * 100,
    "arch: x\x00\ndataset: y\nlayers: []\n",
    "\ufeffarch: x\n",
    "arch: !!python/object/apply:os.system ['echo hi']\n",
    "--- {}\n--- {}\n",
    "arch:\tx\n",
    "",
    "layers:\n" + "  - processors: 1\n" * 20000,
)

SNIPPETS = {
    "INIT": (
        'raise RuntimeError("boom")',
        "sys.exit(3)",
        'sys.exit("bye")',
        "import not_a_module_x",
        'self.conv.weight.data[0, 0, 0, 0] = float("nan")',
        "self.bn.running_var.fill_(-1.0)",
        'self.conv.bias.data.fill_(float("inf"))',
        "self.conv.weight.data.zero_()",
        "self.conv.weight.data.mul_(1e30)",
        "self.head = None",
        "self.bn.eps = -1.0",
    ),
    "FORWARD": (
        "x = torch.sort(x, dim=1)[0]",
        "x = x * float('nan')",
        "sys.exit(0)",
        "if x.sum() > 0:\n            x = -x",
        "return (x, x)",
        "return x.mean()",
        "return x.view(-1)",
        "x = x * 1e30",
        "x = x[:, :2]",
        "raise ValueError('fwd')",
        "x = torch.zeros_like(x)",
    ),
    "MODULE": (
        "sys.exit(2)",
        "raise SystemExit",
        "Net = 5",
        "build = None",
        "def helper(:",
        "x = 1/0",
    ),
}

REFERENCES = (
    "in/model.py:Net",
    "in/model.py:Net",
    "in/model.py:build",
    "in/model.py:helper",
    "in/model.py:CONSTANT",
    "in/model.py:NotModule",
    "in/model.py:Missing",
    "in/model.py:",
    "in/model.py:1x",
    "in/missing.py:Net",
    "in:Net",
    "in/fifo.py:Net",
    "subprocess:getoutput",
    "os:system",
    "builtins:eval",
    "torch.hub:load",
    "torch:zeros",
    "numpy:array",
    "cnnforge.cli:main",
    "not_a_package_x.mod:Net",
    ":Net",
    "unet-voc-bogus",
)

PATHS = (
    ".",
    "..",
    "/",
    "",
    "~",
    "home",
    "in",
    "in/..",
    "bystander",
    "bystander/a.txt",
    "bystander/a.txt/x",
    "link",
    "link/out",
    "filelink",
    "prev",
    "prev-extra",
    "empty",
    "fifo",
    "/proc/cnnforge-x",
    "/proc/self/x",
    "/dev/null",
    "a/b/c/out",
    "x" * 300,
    "n\nl",
    ":100:",
    "out",
    "in/net.yaml",
    "in/sample_mnist.npy",
)
