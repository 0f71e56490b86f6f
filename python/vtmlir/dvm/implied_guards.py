"""Removal of the guards of a traced template that the guards before it already imply.

A template (`template.py`) records every decision of the lowering and every check of `decode`
on its shape-dependent words (`bytecode.check_traced`) as a guard, in the order they were taken.
Many repeat an earlier one in a weaker or rearranged form: ``x>=1`` after ``x>1``, ``t>=0`` after
``t==1``, ``(s0*s1)>=0`` after ``s0>=1`` and ``s1>=1``, ``b==a`` after ``a==b``, bound checks of
offsets whose every term is known non-negative. Each guard costs the per-shape compile a
comparison and the template set's native JIT (`native_fill.py`) a branch, so a set of templates
carrying them compiles ≈2-3× slower at graph compile time than it needs to.

`prune(stmts)` drops a guard when the guards before it (in statement order) imply it; they are
evaluated first, by `fill` in Python and natively alike, so whenever execution reaches the
dropped guard it would have held: the admitted shapes, the words and every branch taken stay
exactly the same (the native fill's exactness argument is unchanged: a guard that held on a
wrapped value is still caught by its `check_exact` before any word is written).

The implication is decided soundly and incompletely over the integers:

- a guard ``A op B`` is turned into a linear form ``F + c op 0`` (`_Linear`: integer
  coefficients over *atoms*, the sizes, strides and variables that are not linear in them, and
  the non-linear subexpressions), inlining variables whose definition is linear;
- every guard that held is recorded as an interval of its form ``F`` (``F`` and ``-F`` share one
  entry), with the integer refinements of ``!=`` at an interval's end and of strict inequalities;
- ``F``'s interval is the recorded one intersected with interval arithmetic over its atoms (an
  atom's own recorded interval, its definition's, and ``*``, ``//``, ``%`` by positive divisors);
- a guard is implied when that interval, plus ``c``, satisfies ``op`` for every value in it.

Anything outside these forms (a float, ``/``, a call other than a tiling result's field) is left
alone: the guard is kept and records nothing. The statements are `expr` trees; an atom is the node
it stands for.
"""

from __future__ import annotations

import math

from .expr import MIRROR as _MIRROR
from .expr import BinOp, Compare, Const, Expr, Field, Name, Neg, TilingCall

_INF = math.inf


class _NotInteger(Exception):
    """A (sub)expression that is not known to be an integer: nothing is inferred from it."""


def prune(stmts: list) -> list:
    """`stmts` (a `symbolic.Tracer`'s ``("guard", Compare, None)`` / ``("set", var, Expr)``) without
    the guards that the guards before them imply (see the module docstring)."""
    facts = _Facts()
    kept = []
    for st in stmts:
        kind, a, b = st
        if kind == "set":
            facts.define(a, b)
            kept.append(st)
        elif not facts.holds(a):
            kept.append(st)
    return kept


class _Slack(Expr):
    """The fresh ``r >= 0`` of `_Facts._decides` for a remainder atom."""

    __slots__ = ("of",)

    def __init__(self, of: Expr):
        self.of = of
        self._init(0)

    def _key(self):
        return (self.of,)

    def __str__(self):
        return f"slack of {self.of}"


class _Linear:
    """``sum(coeff * atom) + const`` with integer coefficients; atoms are keys of `_Facts.atoms`
    (`Name`s of sizes, strides and non-linear variables, and non-linear nodes)."""

    __slots__ = ("terms", "const")

    def __init__(self, terms=None, const=0):
        self.terms = terms or {}
        self.const = const

    def scaled(self, k: int) -> "_Linear":
        if k == 0:
            return _Linear()
        return _Linear({a: c * k for a, c in self.terms.items()}, self.const * k)

    def plus(self, other: "_Linear", sign: int = 1) -> "_Linear":
        terms = dict(self.terms)
        for a, c in other.terms.items():
            v = terms.get(a, 0) + sign * c
            if v:
                terms[a] = v
            else:
                terms.pop(a, None)
        return _Linear(terms, self.const + sign * other.const)

    def key(self) -> tuple[tuple, int]:
        """(the canonical form of the non-constant part, its sign): ``F`` and ``-F`` share a key."""
        items = tuple(sorted(self.terms.items(), key=_term_order))
        if items and items[0][1] < 0:
            return tuple((a, -c) for a, c in items), -1
        return items, 1


def _term_order(term):
    return str(term[0]), term[1]


def _mul(a: float, b: float) -> float:
    return 0 if a == 0 or b == 0 else a * b


def _times(x, y):
    ps = [_mul(p, q) for p in x for q in y]
    return min(ps), max(ps)


def _floordiv(x, y):
    """Interval of ``a // b`` for ``a`` in x and ``b`` in y, y positive: monotone in each operand
    for a fixed sign, so the corners bound it."""
    if y[0] < 1:
        return (-_INF, _INF)
    vals = []
    for a in x:
        for b in y:
            if math.isinf(a):
                vals.append(a)
            elif math.isinf(b):
                vals.append(0 if a >= 0 else -1)
            else:
                vals.append(a // b)
    return min(vals), max(vals)


def _mod(x, y):
    if y[0] < 1:
        return (-_INF, _INF)
    if x[0] >= 0 and x[1] < y[0]:
        return x
    return (0, y[1] - 1)


def _meet(x, y):
    return max(x[0], y[0]), min(x[1], y[1])


class _Facts:
    """What the guards so far established, and the definitions of the trace's variables."""

    def __init__(self):
        self.defs: dict[str, Expr] = {}  # variable -> its definition
        self.linear: dict[str, _Linear | None] = {}  # variable -> its linear form (None: an atom)
        self.nonint: set[str] = set()  # variables not known to be integers (a float, a record)
        self.quotients: dict[Expr, tuple] = {}  # atom x // y -> (x, y, y's linear form)
        self.remainders: dict[Expr, _Linear] = {}  # atom x % y -> y's linear form
        self.atoms: dict[Expr, Expr | None] = {}  # atom -> the node whose interval it has (None: a name)
        self.bounds: dict[tuple, tuple] = {}  # canonical form -> interval
        self.excluded: dict[tuple, set] = {}  # canonical form -> values `!=` ruled out
        self._memo: dict = {}

    # -- the trace ----------------------------------------------------------------------------
    def define(self, var: str, node: Expr) -> None:
        self.defs[var] = node
        try:
            lin = self._lin(node)
        except _NotInteger:
            lin = None
        # a linear definition is inlined into the forms that use the variable (cancellation);
        # otherwise the variable is an atom whose interval comes from its definition, if that is
        # an integer expression (a float or a record makes every form using it unknown)
        self.linear[var] = lin if lin is not None and len(lin.terms) <= 8 else None
        if lin is None:
            self.nonint.add(var)

    def holds(self, node: Expr) -> bool:
        """Whether the guard `node` is implied by what was recorded; records it (it holds from
        here on)."""
        self._memo = {}
        if type(node) is not Compare:
            return False
        op = node.op
        try:
            form = self._lin(node.left).plus(self._lin(node.right), -1)
        except _NotInteger:
            return False
        # a guard whose evaluation could divide by zero is kept: dropping it would turn the
        # ZeroDivisionError its evaluation raises into going on
        implied = self._divisors_nonzero(node) and self._decides(form, op)
        if not implied:
            self._record(form, op)
        return implied

    def _divisors_nonzero(self, node) -> bool:
        for sub in node.walk():
            if type(sub) is BinOp and sub.op in ("//", "%"):
                lo, hi = self._interval(self._lin(sub.right))
                if lo <= 0 <= hi:
                    return False
        return True

    # -- linear forms --------------------------------------------------------------------------
    def _atom(self, key: Expr, node) -> _Linear:
        self.atoms.setdefault(key, node)
        return _Linear({key: 1})

    def _lin(self, node: Expr) -> _Linear:
        t = type(node)
        if t is Const:
            if type(node.value) is not int:
                raise _NotInteger
            return _Linear({}, node.value)
        if t is Name:
            if node.name in self.nonint:
                raise _NotInteger
            lin = self.linear.get(node.name)
            if lin is not None:
                return lin
            return self._atom(node, None)  # a size, a stride, or a non-linear variable
        if t is Neg:
            return self._lin(node.operand).scaled(-1)
        if t is BinOp:
            if node.op in ("+", "-"):
                return self._lin(node.left).plus(self._lin(node.right), 1 if node.op == "+" else -1)
            if node.op == "*":
                a, b = self._lin(node.left), self._lin(node.right)
                return self._product(a, b) or self._product(b, a) or self._atom(node, node)
            if node.op in ("//", "%"):
                x, y = self._lin(node.left), self._lin(node.right)  # integers, or raise
                if node.op == "//":
                    self.quotients[node] = (node.left, node.right, y)
                else:
                    self.remainders[node] = y
                return self._atom(node, node)
            raise _NotInteger  # `/`: a float
        if t is Field and type(self.defs.get(node.var)) is TilingCall:
            return self._atom(node, node)  # a tiling result's field: an int
        raise _NotInteger

    def _product(self, a: _Linear, b: _Linear) -> _Linear | None:
        """``a * b`` as a linear form where `b` is a constant, or where every term of `a` is a
        quotient ``x // y`` with ``y`` equal to `b`: then ``(x // y) * y == x - x % y`` (Python's
        floor division; ``y != 0``, else evaluating the quotient raised before), which keeps a
        ceiling division's ``-((-x) // y) * y == x + (-x) % y`` comparable with ``x``."""
        if not b.terms:
            out = _Linear({}, a.const * b.const)
            for atom, c in a.terms.items():
                q = self.quotients.get(atom)
                if q is not None and not q[2].terms and q[2].const == b.const:
                    out = out.plus(self._quotient_times_divisor(atom, q).scaled(c))
                else:
                    out = out.plus(_Linear({atom: c * b.const}))
            return out
        out = b.scaled(a.const)
        for atom, c in a.terms.items():
            q = self.quotients.get(atom)
            if q is None or q[2].const != b.const or q[2].terms != b.terms:
                return None
            out = out.plus(self._quotient_times_divisor(atom, q).scaled(c))
        return out

    def _quotient_times_divisor(self, atom, q) -> _Linear:
        x, y, _ = q
        rem = BinOp("%", x, y)
        return self._lin(x).plus(self._lin(rem), -1)

    # -- intervals -----------------------------------------------------------------------------
    def _interval(self, lin: _Linear):
        lo = hi = lin.const
        for atom, c in lin.terms.items():
            a = self._atom_interval(atom)
            p, q = _mul(c, a[0]), _mul(c, a[1])
            lo, hi = lo + min(p, q), hi + max(p, q)
        if len(lin.terms) > 1 or any(c != 1 for c in lin.terms.values()):  # what the guards said about it
            key, sign = lin.key()
            got = self.bounds.get(key)
            if got is not None:
                lo2, hi2 = (got if sign > 0 else (-got[1], -got[0]))
                lo, hi = max(lo, lo2 + lin.const), min(hi, hi2 + lin.const)
        return lo, hi

    def _atom_interval(self, atom: Expr):
        memo = self._memo.get(atom)
        if memo is not None:
            return memo
        self._memo[atom] = (-_INF, _INF)  # a cycle cannot occur; this only guards against one
        x = (-_INF, _INF)
        node = self.atoms[atom]
        if node is None and type(atom) is Name and atom.name in self.defs:
            try:
                x = self._node_interval(self.defs[atom.name])
            except _NotInteger:
                pass
        elif node is not None:
            x = self._node_interval(node)
        got = self.bounds.get(((atom, 1),))
        if got is not None:
            x = _meet(x, got)
        x = self._exclude(((atom, 1),), x)
        self._memo[atom] = x
        return x

    def _node_interval(self, node):
        if type(node) is BinOp and node.op in ("*", "//", "%"):
            a, b = self._interval(self._lin(node.left)), self._interval(self._lin(node.right))
            return {"*": _times, "//": _floordiv, "%": _mod}[node.op](a, b)
        if type(node) in (BinOp, Neg, Const, Name):
            return self._interval(self._lin(node))
        return (-_INF, _INF)

    def _exclude(self, key, x):
        out = self.excluded.get(key)
        if out:
            lo, hi = x
            while lo in out:
                lo += 1
            while hi in out:
                hi -= 1
            return lo, hi
        return x

    # -- deciding and recording ----------------------------------------------------------------
    def _decides(self, form: _Linear, op: str) -> bool:
        """Whether ``form op 0`` always holds. A remainder ``x % y`` with ``y >= 1`` is in
        ``[0, y-1]``, a relation to ``y`` that intervals lose: each is tried also as
        ``y - 1 - r`` with a fresh ``r >= 0``."""
        if self._decides_once(form, op):
            return True
        mods = [a for a in form.terms if a in self.remainders
                and self._interval(self.remainders[a])[0] >= 1][:3]
        for mask in range(1, 1 << len(mods)):
            f = form
            for i, m in enumerate(mods):
                if mask >> i & 1:
                    c = f.terms[m]
                    slack = _Slack(m)
                    f = f.plus(_Linear({m: c}), -1).plus(self.remainders[m].scaled(c)).plus(
                        _Linear({slack: -c}, -c))
                    self.atoms.setdefault(slack, None)
                    self._memo[slack] = (0, _INF)
            if self._decides_once(f, op):
                return True
        return False

    def _decides_once(self, form: _Linear, op: str) -> bool:
        if not form.terms:
            return _test(form.const, form.const, op)
        lo, hi = self._interval(form)
        if lo > hi:  # pragma: no cover - contradictory facts: the guards before never all hold
            return False
        if op == "!=" and not (lo > 0 or hi < 0):
            key, sign = form.key()
            return -sign * form.const in self.excluded.get(key, ())
        return _test(lo, hi, op)

    def _record(self, form: _Linear, op: str) -> None:
        """`form op 0` holds: the interval of its non-constant part F (integers)."""
        if not form.terms:
            return
        key, sign = form.key()
        c = form.const
        if sign < 0:  # -F + c op 0  <=>  F - c mirror(op) 0
            op, c = _MIRROR[op], -c
        # F + c op 0  <=>  F op -c
        v = -c
        if op == "!=":
            self.excluded.setdefault(key, set()).add(v)
            return
        lo, hi = {">=": (v, _INF), ">": (v + 1, _INF), "<=": (-_INF, v), "<": (-_INF, v - 1), "==": (v, v)}[op]
        old = self.bounds.get(key, (-_INF, _INF))
        self.bounds[key] = self._exclude(key, _meet(old, (lo, hi)))


def _test(lo, hi, op: str) -> bool:
    """Whether ``x op 0`` for every x in [lo, hi]."""
    return {">=": lo >= 0, ">": lo > 0, "<=": hi <= 0, "<": hi < 0, "==": lo == hi == 0,
            "!=": lo > 0 or hi < 0}[op]
