"""A firmware folder's set-up read without compiling or running it (preprocessed, parsed, only what
generators write interpreted; else FirmwareError at file:line): hostrun.py's StateImage, exactly."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from cnnforge.targets.max7800x.firmware.directives import DirectiveError, check_folder_file
from cnnforge.targets.max7800x.firmware.hostrun import HOST, SPACE, StateImage
from cnnforge.targets.max7800x.firmware.regmap import MAPS

SETUP = ("cnn_init", "cnn_load_weights", "cnn_load_bias", "cnn_configure")
FIFO_DATA = range(0x5000_0008, 0x5000_0018, 4)
MAX_STEPS = 20_000_000
MAX_DEPTH = 32
_SIZES = {"char": 1, "uint8_t": 1, "int8_t": 1, "uint16_t": 2, "int16_t": 2, "short": 2}


class FirmwareError(ValueError):
    """A firmware folder outside what inspect reads (the message names file:line)."""


@dataclass
class Ptr:
    """A pointer: into a constant array (``array`` set) or to an absolute address."""

    addr: int  # absolute address, or the element index into ``array``
    size: int  # bytes per element
    array: list[int] | None = None


@dataclass
class _Machine:
    device: str
    mem: dict[int, int] = field(default_factory=dict)
    fifo: list[tuple[int, int]] = field(default_factory=list)
    steps: int = 0
    depth: int = 0  # calls in progress
    records: list[tuple[int, list[int]]] = field(default_factory=list)  # kernel loader's


class _Return(Exception):
    def __init__(self, value: object) -> None:
        self.value = value


def _where(node) -> str:
    c = node.coord
    return f"{Path(c.file).name}:{c.line}" if c else "?"


def preprocess(folder: Path, name: str) -> str:
    """The file after the C preprocessor (no compiler runs; only the stand-in headers), once
    directives.py has checked that nothing it includes lies outside the folder."""
    try:
        check_folder_file(folder, name)
    except DirectiveError as exc:
        raise FirmwareError(str(exc)) from None
    # asm volatile("wfi") (the RISC-V main's wait): asm -> a macro taking the volatile(...) away
    cmd = ["cpp", "-nostdinc", "-undef", "-I", str(HOST / "libc"), "-I", str(HOST), "-I",
           str(folder), "-D__attribute__(x)=", "-D__asm__(x)=", "-Dasm=__cnnforge_asm",
           "-D__cnnforge_asm(x)=", "-Dvolatile(x)=", "-D__volatile__=", "-D__inline=",
           "-D__restrict=", str(folder / name)]  # fmt: skip
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise FirmwareError(f"{name}: the C preprocessor failed ({exc})") from None
    if done.returncode:
        raise FirmwareError(f"{name}: {done.stderr.strip().splitlines()[0]}")
    return done.stdout


# A brace list of 16 or more integer literals (weights, sample data, known answers): read with
# a regular expression, not pycparser, which takes seconds per 100,000 items.
_NUMBER = r"-?\s*(?:0[xX][0-9a-fA-F]+|[0-9]+)[uUlL]*"
_LIST = re.compile(rf"\{{\s*(?:{_NUMBER}\s*,\s*){{15,}}{_NUMBER}\s*,?\s*\}}")
_LIST_MARK = "__cnnforge_list"


def _parse(folder: Path, name: str) -> tuple[object, list[list[int]]]:
    """The file's syntax tree, and the integer lists its long brace lists stand for (each
    replaced by ``{ __cnnforge_list(k) }``, k its index in the lists)."""
    from pycparser import c_parser

    lists: list[list[int]] = []

    def stash(m: re.Match) -> str:
        items = [t for t in m.group(0).strip("{} \t\n,").split(",")]
        lists.append([_literal(t) for t in items])
        return f"{{ {_LIST_MARK}({len(lists) - 1}) }}"

    text = _LIST.sub(stash, preprocess(folder, name))
    try:
        return c_parser.CParser().parse(text, filename=name), lists
    except Exception as exc:  # pycparser's ParseError: "file:line:col: before: x"
        raise FirmwareError(f"{name}: {exc}") from None


def _literal(text: str) -> int:
    """An integer literal of a brace list as C reads it (0x hex, 0 octal, decimal, a sign)."""
    t = text.replace(" ", "").replace("\t", "").replace("\n", "").rstrip("uUlL")
    sign = -1 if t.startswith("-") else 1
    t = t.lstrip("-")
    value = int(t, 8) if len(t) > 1 and t[0] == "0" and t[1].isdigit() else int(t, 0)
    return sign * value


class Interpreter:
    """The set-up functions of one folder, interpreted over a model of the CNN address space."""

    def __init__(self, folder: Path, device: str, max_steps: int = MAX_STEPS) -> None:
        from pycparser import c_ast

        self.ast = c_ast
        self.device = device
        self.folder = folder
        self.max_steps = max_steps
        self.space = (0x5000_0000, 0x5000_0000 + SPACE[device][0])
        self.rmap = MAPS[device]
        self.functions: dict = {}
        self.arrays: dict[str, Ptr] = {}
        self.globals: dict[str, object] = {}
        self._lists: list[list[int]] = []
        main = "main_riscv.c" if (folder / "main_riscv.c").is_file() else "main.c"
        for name in ("cnn.c", main):
            if not (folder / name).is_file():
                raise FirmwareError(f"{folder}: no {name}")
            tree, self._lists = _parse(folder, name)
            for ext in tree.ext:
                self._top(ext)
        self.m = _Machine(device)

    def _top(self, ext) -> None:
        a = self.ast
        if isinstance(ext, a.FuncDef):
            self.functions[ext.decl.name] = ext
        elif isinstance(ext, a.Decl) and isinstance(ext.type, a.ArrayDecl) and ext.init:
            if not isinstance(ext.init, a.InitList):
                raise FirmwareError(f"{_where(ext)}: array {ext.name} without a constant list")
            values = self._stashed(ext.init.exprs)
            if values is None:
                values = [self._const(e) & 0xFFFF_FFFF for e in ext.init.exprs]
            self.arrays[ext.name] = Ptr(0, _elem_size(ext.type.type), values)

    def _stashed(self, exprs: list) -> list[int] | None:
        """The values of a list _parse read itself (``{ __cnnforge_list(k) }``), else None."""
        a = self.ast
        if len(exprs) != 1 or not isinstance(exprs[0], a.FuncCall):
            return None
        call = exprs[0]
        if not isinstance(call.name, a.ID) or call.name.name != _LIST_MARK:
            return None
        k = self._const(call.args.exprs[0]) if call.args and len(call.args.exprs) == 1 else -1
        if not 0 <= k < len(self._lists):
            raise FirmwareError(f"{_where(call)}: {_LIST_MARK} is not read")
        return [v & 0xFFFF_FFFF for v in self._lists[k]]

    def _const(self, e) -> int:
        v = self._eval(e, {})
        if not isinstance(v, int):
            raise FirmwareError(f"{_where(e)}: not a constant")
        return v

    # --- running -------------------------------------------------------------------------------

    def run(self) -> StateImage:
        """cnn_init, cnn_load_weights, cnn_load_bias, cnn_configure, then load_input."""
        try:
            return self._run()
        except RecursionError:  # an expression nested past Python's stack (never generated)
            raise FirmwareError(f"{self.folder}: an expression nests too deep to read") from None

    def _run(self) -> StateImage:
        for name in SETUP:
            self.call(name, [])
        state = dict(self.m.mem)
        if "load_input" in self.functions:
            self.call("load_input", [])
        added = {a: v for a, v in self.m.mem.items() if v and state.get(a, 0) != v}
        kat = self.arrays.get("sample_output")
        return StateImage(
            self.device,
            _pairs({a: v for a, v in state.items() if v}),
            _pairs(added),
            np.array(kat.array if kat else [], np.uint32),
            np.array(self.m.fifo, np.uint32).reshape(-1, 2),
            np.array(self._start_stores(), np.uint32).reshape(-1, 2),
        )

    def _start_stores(self) -> list[tuple[int, int]]:
        """cnn_start's stores of a constant to a constant address (its quadrant controls), in
        order; nothing else of it is run (it starts the accelerator and the board's timer)."""
        a = self.ast
        fn = self.functions.get("cnn_start")
        out = []
        for s in (fn.body.block_items or []) if fn is not None else []:
            if not (isinstance(s, a.Assignment) and s.op == "=" and isinstance(s.lvalue, a.UnaryOp)
                    and s.lvalue.op == "*"):  # fmt: skip
                continue
            try:
                where, value = self._eval(s.lvalue.expr, {}), self._eval(s.rvalue, {})
            except FirmwareError:
                continue
            if isinstance(where, Ptr) and where.array is None and isinstance(value, int):
                out.append((where.addr, value & 0xFFFF_FFFF))
        return out

    def call(self, name: str, args: list, node=None):
        fn = self.functions.get(name)
        if fn is None:
            if name in ("memcpy", "memcpy32"):
                return self._memcpy(args, 1 if name == "memcpy" else 4, node)
            raise FirmwareError(f"{_where(node) if node else name}: call to {name} is not read")
        params = fn.decl.type.args.params if fn.decl.type.args else []
        env: dict[str, object] = {}
        for p, v in zip(params, args, strict=False):
            if isinstance(p, self.ast.Decl):
                env[p.name] = v
        if self.m.depth >= MAX_DEPTH:  # set-up code calls a few levels deep, never itself
            where = _where(node) if node is not None else name
            raise FirmwareError(
                f"{where}: calls nest more than {MAX_DEPTH} deep ({name} calls itself, directly "
                "or through another function)"
            )
        self.m.depth += 1
        try:
            self._stmt(fn.body, env)
        except _Return as r:
            return r.value
        finally:
            self.m.depth -= 1
        return 0

    def _memcpy(self, args: list, unit: int, node) -> int:
        dst, src, n = args
        if not isinstance(dst, Ptr) or not isinstance(src, Ptr):
            raise FirmwareError(f"{_where(node)}: memcpy of something but constant arrays")
        for _ in range(n * unit // max(src.size, 1)):
            self._store(dst, self._load(src, node), node)
            dst = Ptr(dst.addr + dst.size, dst.size, dst.array)
            src = Ptr(
                src.addr + 1 if src.array is not None else src.addr + src.size, src.size, src.array
            )
        return 0

    def _step(self, node) -> None:
        self.m.steps += 1
        if self.m.steps > self.max_steps:
            raise FirmwareError(f"{_where(node)}: the set-up runs past {self.max_steps} steps")

    def _stmt(self, s, env: dict) -> None:
        a = self.ast
        self._step(s)
        if s is None or isinstance(s, a.EmptyStatement):
            return
        if isinstance(s, a.Compound):
            for item in s.block_items or []:
                self._stmt(item, env)
        elif isinstance(s, a.Decl):
            env[s.name] = self._eval(s.init, env) if s.init is not None else 0
        elif isinstance(s, a.Return):
            raise _Return(self._eval(s.expr, env) if s.expr is not None else 0)
        elif isinstance(s, a.While):
            while _true(self._eval(s.cond, env)):
                self._step(s)
                self._stmt(s.stmt, env)
        elif isinstance(s, a.For):
            if s.init is not None:
                self._stmt(s.init, env) if isinstance(s.init, a.DeclList) else self._eval(
                    s.init, env
                )
            while s.cond is None or _true(self._eval(s.cond, env)):
                self._step(s)
                self._stmt(s.stmt, env)
                if s.next is not None:
                    self._eval(s.next, env)
        elif isinstance(s, a.DeclList):
            for d in s.decls:
                self._stmt(d, env)
        elif isinstance(s, a.If):
            if _true(self._eval(s.cond, env)):
                self._stmt(s.iftrue, env)
            elif s.iffalse is not None:
                self._stmt(s.iffalse, env)
        elif isinstance(s, (a.Assignment, a.UnaryOp, a.FuncCall, a.Cast, a.ExprList)):
            self._eval(s, env)
        else:
            raise FirmwareError(f"{_where(s)}: {type(s).__name__} statement is not read")

    # --- expressions ---------------------------------------------------------------------------

    def _eval(self, e, env: dict):
        a = self.ast
        if isinstance(e, a.Constant):
            return _constant(e)
        if isinstance(e, a.ID):
            if e.name in env:
                return env[e.name]
            if e.name in self.arrays:
                arr = self.arrays[e.name]
                return Ptr(0, arr.size, arr.array)
            raise FirmwareError(f"{_where(e)}: {e.name} is not read")
        if isinstance(e, a.Cast):
            v = self._eval(e.expr, env)
            if isinstance(e.to_type.type, a.PtrDecl):
                if isinstance(v, Ptr):
                    return Ptr(v.addr, _elem_size(e.to_type.type.type), v.array)
                return Ptr(int(v), _elem_size(e.to_type.type.type))
            return v
        if isinstance(e, a.UnaryOp):
            return self._unary(e, env)
        if isinstance(e, a.BinaryOp):
            return self._binary(e, env)
        if isinstance(e, a.Assignment):
            return self._assign(e, env)
        if isinstance(e, a.FuncCall):
            name = e.name.name if isinstance(e.name, a.ID) else "?"
            if name not in self.functions and name not in ("memcpy", "memcpy32"):
                raise FirmwareError(f"{_where(e)}: call to {name} is not read")
            args = [self._eval(x, env) for x in (e.args.exprs if e.args else [])]
            return self.call(name, args, e)
        if isinstance(e, a.ExprList):
            v = 0
            for x in e.exprs:
                v = self._eval(x, env)
            return v
        raise FirmwareError(f"{_where(e)}: {type(e).__name__} expression is not read")

    def _unary(self, e, env: dict):
        op = e.op
        if op == "sizeof":
            return self._sizeof(e)
        if op == "*":
            p = self._eval(e.expr, env)
            if not isinstance(p, Ptr):
                raise FirmwareError(f"{_where(e)}: a pointer computed at run time")
            return self._load(p, e)
        if op in ("p++", "p--", "++", "--"):
            v = self._eval(e.expr, env)
            d = 1 if "+" in op else -1
            new = _add(v, d)
            self._set(e.expr, new, env)
            return v if op.startswith("p") else new
        v = self._eval(e.expr, env)
        if isinstance(v, Ptr):
            raise FirmwareError(f"{_where(e)}: {op} of a pointer is not read")
        return {"-": lambda: -v, "~": lambda: ~v & 0xFFFF_FFFF, "!": lambda: int(not v),
                "+": lambda: v}.get(op, lambda: _refuse(e, op))()  # fmt: skip

    def _sizeof(self, e) -> int:
        """``sizeof(type)`` of the scalar types, ``sizeof array`` of a constant array."""
        a = self.ast
        t = e.expr
        if isinstance(t, a.Typename) and isinstance(t.type, a.TypeDecl):
            return _elem_size(t.type)
        if isinstance(t, a.ID) and t.name in self.arrays:
            arr = self.arrays[t.name]
            return len(arr.array or []) * arr.size
        raise FirmwareError(f"{_where(e)}: this sizeof is not read")

    def _binary(self, e, env: dict):
        op = e.op
        if op == "&&":
            return int(_true(self._eval(e.left, env)) and _true(self._eval(e.right, env)))
        if op == "||":
            return int(_true(self._eval(e.left, env)) or _true(self._eval(e.right, env)))
        x, y = self._eval(e.left, env), self._eval(e.right, env)
        if isinstance(x, Ptr) and op in ("+", "-") and isinstance(y, int):
            return _add(x, y if op == "+" else -y)
        if isinstance(x, Ptr) and op == "|" and x.array is None:
            return Ptr(x.addr | y, x.size)
        if isinstance(x, Ptr) and op in ("==", "!=") and isinstance(y, int):
            z = x.array is None and x.addr == y
            return int(z) if op == "==" else int(not z)
        if isinstance(x, Ptr) or isinstance(y, Ptr):
            raise FirmwareError(f"{_where(e)}: {op} of a pointer is not read")
        ops = {
            "+": x + y, "-": x - y, "*": x * y, "&": x & y, "|": x | y, "^": x ^ y,
            "<<": x << y if 0 <= y < 64 else 0, ">>": x >> y if 0 <= y < 64 else 0,
            "==": int(x == y), "!=": int(x != y), "<": int(x < y), ">": int(x > y),
            "<=": int(x <= y), ">=": int(x >= y),
        }  # fmt: skip
        if op in ("/", "%"):
            if y == 0:
                raise FirmwareError(f"{_where(e)}: division by zero")
            return x // y if op == "/" else x % y
        if op not in ops:
            _refuse(e, op)
        return ops[op]

    def _assign(self, e, env: dict):
        v = self._eval(e.rvalue, env)
        if e.op != "=":
            old = self._eval(e.lvalue, env)
            fake = self.ast.BinaryOp(e.op[:-1], self.ast.Constant("int", "0"), e.rvalue, e.coord)
            v = self._binary_values(fake, old, v)
        self._set(e.lvalue, v, env)
        return v

    def _binary_values(self, e, x, y):
        if isinstance(x, Ptr):
            return _add(x, y if e.op == "+" else -y)
        return {"+": x + y, "-": x - y, "|": x | y, "&": x & y, "^": x ^ y, "*": x * y,
                "<<": x << y, ">>": x >> y}.get(e.op, 0)  # fmt: skip

    def _set(self, lvalue, v, env: dict) -> None:
        a = self.ast
        if isinstance(lvalue, a.ID):
            if lvalue.name not in env:
                raise FirmwareError(f"{_where(lvalue)}: store to {lvalue.name} is not read")
            env[lvalue.name] = v
        elif isinstance(lvalue, a.UnaryOp) and lvalue.op == "*":
            p = self._eval(lvalue.expr, env)
            if not isinstance(p, Ptr):
                raise FirmwareError(f"{_where(lvalue)}: a pointer store computed at run time")
            self._store(p, v, lvalue)
        elif isinstance(lvalue, a.ArrayRef):
            raise FirmwareError(f"{_where(lvalue)}: store through an array index is not read")
        else:
            raise FirmwareError(f"{_where(lvalue)}: a store computed at run time")

    # --- memory --------------------------------------------------------------------------------

    def _load(self, p: Ptr, node) -> int:
        if p.array is not None:
            if not 0 <= p.addr < len(p.array):
                raise FirmwareError(f"{_where(node)}: read past a constant array")
            return p.array[p.addr]
        if p.addr in FIFO_DATA or 0x5000_0000 <= p.addr < 0x5000_1000:
            return 0  # FIFO status: never full
        word = self.m.mem.get(p.addr & ~3, 0)
        if p.addr & ~3 == p.addr and self._sram_test(p.addr):
            if MAPS[self.device].require_reg_clear:
                word |= 1 << 25  # a quadrant's "clear registers" done bit (hostrun.c)
            for bist in range(4):  # --zero-sram's memory self-tests: done (hostrun.c)
                if word >> 2 * bist & 1:
                    word |= 1 << (18 + bist) | 1 << 27
        return word >> 8 * (p.addr & 3) & ((1 << 8 * p.size) - 1)

    def _sram_test(self, addr: int) -> bool:
        base, stride, ctl = SPACE[self.device]
        del base
        return (addr - ctl) % stride == 12 and addr >= ctl

    def _store(self, p: Ptr, v, node) -> None:
        if isinstance(v, Ptr):
            raise FirmwareError(f"{_where(node)}: stores a pointer")
        if p.array is not None:
            raise FirmwareError(f"{_where(node)}: store into a constant array")
        if p.addr in FIFO_DATA:  # recorded, and kept as the register's last word (as on the host)
            self.m.fifo.append((p.addr, v & 0xFFFF_FFFF))
        if not self.space[0] <= p.addr < self.space[1]:
            raise FirmwareError(
                f"{_where(node)}: store to 0x{p.addr:08x}, outside the {self.device} accelerator"
            )
        self._record(p, v)
        word, shift = p.addr & ~3, 8 * (p.addr & 3)
        mask = ((1 << 8 * p.size) - 1) << shift
        self.m.mem[word] = (self.m.mem.get(word, 0) & ~mask | (v << shift) & mask) & 0xFFFF_FFFF

    def _record(self, p: Ptr, v: int) -> None:
        """Kernel stores as the express loader's records: a byte store to ``addr | 1`` starts
        one, word stores to the next address continue it (decode.py reads them exactly)."""
        r = self.rmap
        rel = p.addr - r.kernel(0, 0)
        if not 0 <= rel < 4 * r.quadrant_stride or (
            rel % r.quadrant_stride >= 16 * r.kernel_processor_stride
        ):
            return
        recs = self.m.records
        if p.size == 1 and p.addr & 3 == 1:
            recs.append((p.addr & ~3, []))
        elif p.size == 4 and recs and recs[-1][0] + 4 * len(recs[-1][1]) == p.addr:
            recs[-1][1].append(v & 0xFFFF_FFFF)
        elif p.size == 4:
            recs.append((p.addr, [v & 0xFFFF_FFFF]))


def _elem_size(t) -> int:
    names = getattr(getattr(t, "type", None), "names", None) or ["uint32_t"]
    return _SIZES.get(names[-1], 4)


def _constant(e) -> int:
    text = e.value.rstrip("uUlL")
    if e.type == "char":
        return ord(text.strip("'")[-1])
    if e.type not in ("int", "unsigned int", "long int", "unsigned long int", "long long int",
                      "unsigned long long int") and not text[:1].isdigit():  # fmt: skip
        raise FirmwareError(f"{_where(e)}: constant {e.value} is not read")
    return int(text, 0) if not (text.startswith("0") and text[1:2].isdigit()) else int(text, 8)


def _add(v, d: int):
    if isinstance(v, Ptr):
        return Ptr(v.addr + (d if v.array is not None else d * v.size), v.size, v.array)
    return v + d


def _true(v) -> bool:
    return bool(v.addr if isinstance(v, Ptr) and v.array is None else v)


def _refuse(e, op: str):
    raise FirmwareError(f"{_where(e)}: operator {op} is not read")


def _pairs(words: dict[int, int]) -> np.ndarray:
    return np.array(sorted(words.items()), np.uint32).reshape(-1, 2)


def read_state(folder: Path, device: str, max_steps: int = MAX_STEPS) -> StateImage:
    """The state a firmware folder's set-up leaves, read from its C (nothing of it runs)."""
    return Interpreter(folder, device, max_steps).run()


def read_setup(
    folder: Path, device: str, max_steps: int = MAX_STEPS
) -> tuple[StateImage, list[tuple[int, list[int]]]]:
    """(the set-up's state, the kernel loader's records) of a firmware folder."""
    interp = Interpreter(folder, device, max_steps)
    image = interp.run()
    return image, [r for r in interp.m.records if r[1]]
