"""The expressions of a traced DVM template: a small typed tree (`symbolic.Sym` builds it, `template`
evaluates it, `implied_guards` reasons about it, `native_fill` compiles it to MLIR).

A template (`template.py`) is a straight-line program over the kernel's parameters (input sizes
``s<i>_<d>``, element strides ``t<i>_<d>``) and the variables it assigns (``_v<n>``):

    Const(value)             an int, a float or a bool
    Name(name)               a parameter or a variable
    Field(var, field)        a field of a tiling call's result (``_v3.tile``)
    Neg(x)                   -x
    BinOp(op, a, b)          a op b, op one of + - * // % / (Python's integer semantics: ``//`` and
                             ``%`` round toward minus infinity, ``/`` is a float division)
    Compare(op, a, b)        a op b, op one of == != < <= > >=  (a guard)
    F64Bits(x)               the IEEE-754 bits of the float64 x as a signed int64 (a bytecode word)
    TilingCall(fn, args)     Alg. 1 (``tile_vector``) or the MatMul template (``tile_matmul``) on
                             concrete sizes, run per shape (`tiling.py`)

Nodes are immutable and compared structurally (a `Const` by type and value: ``1``, ``1.0`` and
``True`` differ). `str` renders them as the Python expression they stand for; `parse` reads that
syntax back (and the affine syntax of the importer's symbolic shapes), for tests and
`runner.DvmFunction`'s recorded shape symbols. `evaluator` turns a node into a Python closure over
a list of slot values: templates run without generating or executing source code.
"""

from __future__ import annotations

import operator
import struct
from operator import itemgetter

#: the comparison that holds when ``op`` does not
NEGATE = {"==": "!=", "!=": "==", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}
#: the comparison with its operands swapped
MIRROR = {">=": "<=", ">": "<", "<=": ">=", "<": ">", "==": "==", "!=": "!="}
ARITH_OPS = ("+", "-", "*", "//", "%", "/")
COMPARE_OPS = tuple(NEGATE)


def f64bits(x: float) -> int:
    """The IEEE-754 bit pattern of a float64 as a signed int64 word (the bytecode's f64 field)."""
    return struct.unpack("<q", struct.pack("<d", x))[0]


class Expr:
    """A node. `size` is the length of its rendering (`symbolic` binds long expressions to a
    variable); the hash is computed once (nodes are dictionary keys of traces and tries)."""

    __slots__ = ("_hash", "size")

    def _key(self) -> tuple:
        raise NotImplementedError

    def _init(self, size: int) -> None:
        self.size = size
        self._hash = hash((type(self).__name__,) + self._key())

    def __eq__(self, other):
        return self is other or (type(other) is type(self) and other._hash == self._hash
                                 and other._key() == self._key())

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return self._hash

    def __repr__(self):
        return f"{type(self).__name__}({str(self)!r})"

    def children(self) -> tuple["Expr", ...]:
        return ()

    def walk(self):
        """This node and every node below it (pre-order)."""
        stack = [self]
        while stack:
            e = stack.pop()
            yield e
            stack.extend(reversed(e.children()))

    def names(self) -> set[str]:
        """The names this expression reads (a `Field`'s variable included)."""
        out = set()
        for e in self.walk():
            if type(e) is Name:
                out.add(e.name)
            elif type(e) is Field:
                out.add(e.var)
        return out


class Const(Expr):
    __slots__ = ("value",)

    def __init__(self, value):
        if type(value) not in (int, float, bool):
            value = bool(value) if isinstance(value, bool) else (
                int(value) if isinstance(value, int) else float(value))
        self.value = value
        self._init(len(repr(value)))

    def _key(self):
        return (type(self.value), self.value)

    def __str__(self):
        return repr(self.value)


class Name(Expr):
    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name
        self._init(len(name))

    def _key(self):
        return (self.name,)

    def __str__(self):
        return self.name


class Field(Expr):
    __slots__ = ("var", "field")

    def __init__(self, var: str, field: str):
        self.var, self.field = var, field
        self._init(len(var) + 1 + len(field))

    def _key(self):
        return (self.var, self.field)

    def __str__(self):
        return f"{self.var}.{self.field}"


class Neg(Expr):
    __slots__ = ("operand",)

    def __init__(self, operand: Expr):
        self.operand = operand
        self._init(3 + operand.size)

    def _key(self):
        return (self.operand,)

    def children(self):
        return (self.operand,)

    def __str__(self):
        return f"(-{self.operand})"


class BinOp(Expr):
    __slots__ = ("op", "left", "right")

    def __init__(self, op: str, left: Expr, right: Expr):
        if op not in ARITH_OPS:
            raise ValueError(f"unknown arithmetic operator {op!r}")
        self.op, self.left, self.right = op, left, right
        self._init(2 + left.size + len(op) + right.size)

    def _key(self):
        return (self.op, self.left, self.right)

    def children(self):
        return (self.left, self.right)

    def __str__(self):
        return f"({self.left}{self.op}{self.right})"


class Compare(Expr):
    __slots__ = ("op", "left", "right")

    def __init__(self, op: str, left: Expr, right: Expr):
        if op not in NEGATE:
            raise ValueError(f"unknown comparison {op!r}")
        self.op, self.left, self.right = op, left, right
        self._init(left.size + len(op) + right.size)

    def _key(self):
        return (self.op, self.left, self.right)

    def children(self):
        return (self.left, self.right)

    def __str__(self):
        return f"{self.left}{self.op}{self.right}"


class F64Bits(Expr):
    __slots__ = ("operand",)

    def __init__(self, operand: Expr):
        self.operand = operand
        self._init(10 + operand.size)

    def _key(self):
        return (self.operand,)

    def children(self):
        return (self.operand,)

    def __str__(self):
        return f"_f64bits({self.operand})"


class _Target:
    """The tiling call's `tiling.Target` argument: the template set's own, bound at evaluation."""

    def __repr__(self):
        return "_target"


TARGET = _Target()


class TilingCall(Expr):
    """``fn(*args)``: `fn` the name of a tiling function; an argument is an `Expr`, a tuple of
    them, a frozenset of ints (reduction dimensions) or `TARGET`."""

    __slots__ = ("fn", "args")

    def __init__(self, fn: str, args: tuple):
        self.fn, self.args = fn, tuple(args)
        self._init(len(str(self)))

    def _key(self):
        return (self.fn, self.args)

    def children(self):
        out = []
        for a in self.args:
            if isinstance(a, Expr):
                out.append(a)
            elif isinstance(a, tuple):
                out.extend(a)
        return tuple(out)

    def __str__(self):
        parts = []
        for a in self.args:
            if isinstance(a, tuple):
                parts.append("(" + "".join(f"{x}, " for x in a) + ")")
            elif isinstance(a, frozenset):
                parts.append("{" + "".join(f"{x}, " for x in sorted(a)) + "}" if a else "set()")
            else:
                parts.append(str(a))
        return f"{self.fn}({', '.join(parts)})"


def const_or_expr(x) -> Expr:
    """`x` itself if it is a node, else the constant `x`."""
    return x if isinstance(x, Expr) else Const(x)


# ------------------------------------------------------------------------------- evaluation
def evaluator(e: Expr, slots: dict[str, int], calls: dict | None = None, target=None):
    """A closure ``f(env)`` computing `e` from the list `env`, where name ``n`` is ``env[slots[n]]``
    and a `TilingCall` calls ``calls[fn]`` with `target` for `TARGET`. Python's own operators
    compute every node, so results, and the exceptions of bad inputs (a zero divisor, a tiling
    error), are those of the Python expression `str(e)` stands for."""
    t = type(e)
    if t is Const:
        v = e.value
        return lambda env: v
    if t is Name:
        return itemgetter(slots[e.name])
    if t is Field:
        i, f = slots[e.var], e.field
        return lambda env: getattr(env[i], f)
    if t is Neg:
        if type(e.operand) is Name:
            i = slots[e.operand.name]
            return lambda env: -env[i]
        x = evaluator(e.operand, slots, calls, target)
        return lambda env: -x(env)
    if t is F64Bits:
        x = evaluator(e.operand, slots, calls, target)
        return lambda env: f64bits(x(env))
    if t is BinOp or t is Compare:
        return _binary(e, slots, calls, target)
    if t is TilingCall:
        fn = calls[e.fn]
        parts = []
        for a in e.args:
            if a is TARGET:
                parts.append(lambda env: target)
            elif isinstance(a, tuple):
                fs = [evaluator(x, slots, calls, target) for x in a]
                parts.append(lambda env, fs=fs: tuple(f(env) for f in fs))
            elif isinstance(a, frozenset):
                parts.append(lambda env, a=set(a): a)
            else:
                parts.append(evaluator(a, slots, calls, target))
        return lambda env: fn(*[p(env) for p in parts])
    raise TypeError(f"cannot evaluate {e!r}")


_PY = {"+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv, "%": operator.mod,
       "/": operator.truediv, "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
       ">": operator.gt, ">=": operator.ge}

# ``a op b`` with each operand read inline by its kind -- a slot ("s"), a constant ("c") or a
# closure ("f"): a closure's frame costs more than the operation, so names and constants get
# none of their own (a template's guards and words are mostly such nodes).
_OPERANDS = {
    "cc": lambda op, c, d: lambda e: op(c, d),
    "ss": lambda op, i, j: lambda e: op(e[i], e[j]),
    "sc": lambda op, i, c: lambda e: op(e[i], c),
    "sf": lambda op, i, g: lambda e: op(e[i], g(e)),
    "cs": lambda op, c, j: lambda e: op(c, e[j]),
    "cf": lambda op, c, g: lambda e: op(c, g(e)),
    "fs": lambda op, f, j: lambda e: op(f(e), e[j]),
    "fc": lambda op, f, c: lambda e: op(f(e), c),
    "ff": lambda op, f, g: lambda e: op(f(e), g(e)),
}


def _operand(x: Expr, slots, calls, target) -> tuple[str, object]:
    if type(x) is Name:
        return "s", slots[x.name]
    if type(x) is Const:
        return "c", x.value
    return "f", evaluator(x, slots, calls, target)


def _binary(e, slots, calls, target):
    (ka, a), (kb, b) = _operand(e.left, slots, calls, target), _operand(e.right, slots, calls, target)
    return _OPERANDS[ka + kb](_PY[e.op], a, b)


def evaluate(e: Expr, values: dict):
    """`e` on named values (no tiling calls): ``evaluate(parse("s0*2"), {"s0": 3}) == 6``."""
    names = sorted(e.names())
    missing = [n for n in names if n not in values]
    if missing:
        raise KeyError(f"no value for {', '.join(missing)} in {e}")
    return evaluator(e, {n: i for i, n in enumerate(names)})([values[n] for n in names])


# ------------------------------------------------------------------------------------ parsing
_AFFINE = {"floordiv": "//", "mod": "%"}


class ParseError(ValueError):
    pass


def parse(text: str) -> Expr:
    """An expression in the syntax `str` renders (Python's: names, ints, floats, unary minus,
    ``+ - * // % /``, one comparison, parentheses, ``_f64bits(x)`` and ``var.field``), also
    accepting the affine spellings ``floordiv``, ``ceildiv`` and ``mod`` of MLIR's printed affine
    expressions (the importer's symbolic shapes). Raises `ParseError` on anything else."""
    return _Parser(text).parse()


class _Parser:
    def __init__(self, text: str):
        self.text, self.toks, self.i = text, _tokens(text), 0

    def error(self, what: str):
        return ParseError(f"cannot parse {self.text!r}: {what}")

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, tok=None):
        t = self.peek()
        if t is None or (tok is not None and t != tok):
            raise self.error(f"expected {tok!r}" if tok else "unexpected end")
        self.i += 1
        return t

    def parse(self) -> Expr:
        e = self.sum()
        if self.peek() in NEGATE:
            op = self.take()
            e = Compare(op, e, self.sum())
        if self.peek() is not None:
            raise self.error(f"unexpected {self.peek()!r}")
        return e

    def sum(self) -> Expr:
        e = self.product()
        while self.peek() in ("+", "-"):
            op = self.take()
            e = BinOp(op, e, self.product())
        return e

    def product(self) -> Expr:
        e = self.unary()
        while self.peek() in ("*", "//", "%", "/", "floordiv", "mod", "ceildiv"):
            op = self.take()
            rhs = self.unary()
            if op == "ceildiv":  # -((-a) // b)
                e = Neg(BinOp("//", Neg(e), rhs))
            else:
                e = BinOp(_AFFINE.get(op, op), e, rhs)
        return e

    def unary(self) -> Expr:
        if self.peek() == "-":
            self.take()
            x = self.unary()
            if type(x) is Const and type(x.value) is not bool and self.toks[self.i - 1][0].isdigit():
                return Const(-x.value)  # a negative literal
            return Neg(x)
        if self.peek() == "+":
            self.take()
            return self.unary()
        return self.atom()

    def atom(self) -> Expr:
        t = self.take()
        if t == "(":
            e = self.sum()
            self.take(")")
            return e
        if t[0].isdigit():
            return Const(float(t) if any(c in t for c in ".eE") else int(t))
        if t in ("True", "False"):
            return Const(t == "True")
        if t[0].isalpha() or t[0] == "_":
            if t == "_f64bits" and self.peek() == "(":
                self.take("(")
                x = self.sum()
                self.take(")")
                return F64Bits(x)
            if self.peek() == ".":
                self.take(".")
                return Field(t, self.take())
            return Name(t)
        raise self.error(f"unexpected {t!r}")


def _tokens(text: str) -> list[str]:
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c.isdigit():
            j = _digits(text, i)
            if j < n and text[j] == ".":
                j = _digits(text, j + 1)
            if j < n and text[j] in "eE":
                k = j + 1 + (j + 1 < n and text[j + 1] in "+-")
                if k < n and text[k].isdigit():
                    j = _digits(text, k)
            out.append(text[i:j])
            i = j
        elif c.isalpha() or c == "_":
            j = i
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            out.append(text[i:j])
            i = j
        else:
            two = text[i:i + 2]
            if two in ("//", "==", "!=", "<=", ">="):
                out.append(two)
                i += 2
            elif c in "+-*/%()<>.":
                out.append(c)
                i += 1
            else:
                raise ParseError(f"cannot parse {text!r}: unexpected {c!r}")
    return out


def _digits(text: str, i: int) -> int:
    while i < len(text) and text[i].isdigit():
        i += 1
    return i
