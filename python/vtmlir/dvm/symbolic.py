"""Symbolic sizes for tracing the DVM lowering once per kernel structure (see `template.py`).

A `Sym` is an integer (or float) that carries its concrete value and an expression (`expr.Expr`)
over the kernel's parameters (input sizes and strides, tiling results). Arithmetic builds
expressions; every *decision* taken on a value -- a comparison, a truth test, an
``int()``/``index``/``hash`` conversion -- returns the concrete answer and records it as a guard
with the `Tracer`. Replaying the recorded guards on another shape tells whether the lowering would
take exactly the same decisions there; if so, every recorded expression evaluates to what the
lowering would compute.

The module depends on nothing else in vtmlir but `expr` so that `isa` and `bytecode` can let
`Sym` values pass through unconverted.
"""

from __future__ import annotations

import operator

from .expr import NEGATE, BinOp, Compare, Const, Expr, F64Bits, Field, Name, Neg, TilingCall, TARGET, f64bits

__all__ = ["Sym", "Tracer", "f64bits", "src", "traced_call", "tracer_of", "value"]

_AUTO_BIND = 16  # expressions rendered longer than this become a local variable (common subexpressions)


class Tracer:
    """The straight-line program recorded while tracing: guards (conditions that must hold), and
    assignments (`bind`ed subexpressions, calls such as Alg. 1 made on concrete values)."""

    def __init__(self):
        # ("guard", Compare, None) | ("set", variable name, Expr)
        self.stmts: list[tuple[str, Expr | str, Expr | None]] = []
        self._guards: set[Expr] = set()
        self.calls: list[str] = []  # variables holding `traced_call` results, in order
        self._bound: dict[Expr, str] = {}  # expression -> the variable `bind` assigned it to
        self._n = 0

    def param(self, name: str, value) -> "Sym":
        return Sym(value, Name(name), self)

    def guard(self, cond: Compare) -> None:
        if cond not in self._guards:
            self._guards.add(cond)
            self.stmts.append(("guard", cond, None))

    def assign(self, expr: Expr) -> str:
        var = f"_v{self._n}"
        self._n += 1
        self.stmts.append(("set", var, expr))
        return var

    def bind(self, s: "Sym") -> "Sym":
        """`s` as a local variable (evaluated once; the same expression bound again reuses it:
        variables are assigned once and in order, so it holds the same value)."""
        var = self._bound.get(s.e)
        if var is None:
            var = self._bound[s.e] = self.assign(s.e)
        return Sym(s.v, Name(var), self)


def src(x) -> Expr:
    """The expression of a traced value: a `Sym`'s, or a literal's."""
    if type(x) is Sym:
        return x.e
    if isinstance(x, (bool, int, float)):
        return Const(x)
    raise TypeError(f"cannot trace a value of type {type(x).__name__}")


def value(x):
    """The concrete value of a traced value (tuples and lists recursively)."""
    if type(x) is Sym:
        return x.v
    if isinstance(x, (tuple, list)):
        return type(x)(value(v) for v in x)
    return x


def tracer_of(*xs) -> Tracer | None:
    for x in xs:
        if type(x) is Sym:
            return x.tr
        if isinstance(x, (tuple, list)):
            t = tracer_of(*x)
            if t is not None:
                return t
    return None


def _arith(op: str, fn):
    def forward(a, b):
        if type(b) is not Sym and not isinstance(b, (int, float)):
            return NotImplemented
        return _make(a, b, op, fn)

    def reflected(a, b):
        if not isinstance(b, (int, float)):
            return NotImplemented
        return _make(b, a, op, fn)

    return forward, reflected


def _make(a, b, op, fn):
    """a `op` b with at least one `Sym`; folds the identities x*1, x+0, x-0, x*0, x//1."""
    tr = a.tr if type(a) is Sym else b.tr
    av = a.v if type(a) is Sym else a
    bv = b.v if type(b) is Sym else b
    if type(b) is not Sym and type(b) is int:
        if (op in ("*", "//") and b == 1) or (op in ("+", "-") and b == 0):
            return a
        if op == "*" and b == 0:
            return 0
    if type(a) is not Sym and type(a) is int:
        if (op == "*" and a == 1) or (op == "+" and a == 0):
            return b
        if op == "*" and a == 0:
            return 0
    s = Sym(fn(av, bv), BinOp(op, src(a), src(b)), tr)
    return tr.bind(s) if s.e.size > _AUTO_BIND else s


def _compare(op: str, fn):
    def cmp(a, b):
        if type(b) is not Sym and not isinstance(b, (int, float)):
            return NotImplemented
        bv = b.v if type(b) is Sym else b
        r = fn(a.v, bv)
        ea, eb = a.e, src(b)
        if ea != eb:  # the same expression decides the same way on every shape
            a.tr.guard(Compare(op if r else NEGATE[op], ea, eb))
        return r

    return cmp


class Sym:
    """A traced size: concrete value `v`, expression `e`, recording `tr` (see the module doc)."""

    __slots__ = ("v", "e", "tr")

    def __init__(self, v, e: Expr, tr: Tracer):
        self.v, self.e, self.tr = v, e, tr

    __add__, __radd__ = _arith("+", operator.add)
    __sub__, __rsub__ = _arith("-", operator.sub)
    __mul__, __rmul__ = _arith("*", operator.mul)
    __floordiv__, __rfloordiv__ = _arith("//", operator.floordiv)
    __mod__, __rmod__ = _arith("%", operator.mod)
    __truediv__, __rtruediv__ = _arith("/", operator.truediv)
    __eq__ = _compare("==", operator.eq)
    __ne__ = _compare("!=", operator.ne)
    __lt__ = _compare("<", operator.lt)
    __le__ = _compare("<=", operator.le)
    __gt__ = _compare(">", operator.gt)
    __ge__ = _compare(">=", operator.ge)

    def __neg__(self):
        return Sym(-self.v, Neg(self.e), self.tr)

    def __bool__(self):
        return self != 0

    def _pin(self):
        """Using the value as a plain integer: the trace holds only for this value."""
        self.tr.guard(Compare("==", self.e, Const(self.v)))
        return self.v

    def __index__(self):
        return self._pin()

    __int__ = __index__

    def __float__(self):
        return float(self._pin())

    def __hash__(self):
        return hash(self._pin())

    def __repr__(self):
        return repr(self.v)

    def __format__(self, spec):
        return format(self.v, spec)


class _Fields:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def traced_call(fn, args: tuple, results: tuple[str, ...], pinned: tuple[str, ...] = (), target: int | None = None):
    """``fn(*args)`` on the concrete values, returned as ``(result, view)``. Untraced, ``view`` is
    the result itself. While tracing, the call is recorded as ``_vN = fn(...)`` (an
    `expr.TilingCall`: the arguments by `src`, a set as a frozenset, argument `target` as the
    template set's `tiling.Target`), the `pinned` result fields are guarded to their values and
    ``view`` carries the `results` fields as `Sym`s (``_vN.field``). Alg. 1 and the MatMul template
    run this way: per shape, concretely, inside the replayed trace."""
    tr = tracer_of(args)
    res = fn(*(value(a) for a in args))
    if tr is None:
        return res, res
    parts = []
    for i, a in enumerate(args):
        if i == target:
            parts.append(TARGET)
        elif isinstance(a, (set, frozenset)):
            parts.append(frozenset(int(x) for x in a))
        elif isinstance(a, tuple):
            parts.append(tuple(src(x) for x in a))
        else:
            parts.append(src(a))
    var = tr.assign(TilingCall(fn.__name__, tuple(parts)))
    tr.calls.append(var)
    for f in pinned:
        tr.guard(Compare("==", Field(var, f), Const(getattr(res, f))))
    # result fields as variables: one attribute load each, however often used
    view = _Fields(**{f: getattr(res, f) for f in pinned},
                   **{f: Sym(getattr(res, f), Name(tr.assign(Field(var, f))), tr) for f in results})
    return res, view
