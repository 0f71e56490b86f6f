"""Small exact evaluator and interval bounds for MLIR affine maps (no JIT).

The `vt` and `layout` dialects describe index mappings with affine maps that may use `floordiv`,
`ceildiv` and `mod` by constants (VTC Eq. 2). The bindings can build and compose such maps but not
evaluate them, so this module walks the `AffineExpr` tree itself. Semantics follow MLIR: `floordiv`
rounds towards negative infinity, `mod` is non-negative for a positive divisor (Python's `//`, `%`).
`eval_expr_grid` evaluates an expression at every point of a box at once (numpy), for the analyses
that enumerate index points (a walk of the tree per point made them minutes long).
"""

from collections.abc import Sequence

import numpy as np
from torch_mlir import ir


def _downcast(expr: ir.AffineExpr) -> ir.AffineExpr:
    return expr.maybe_downcast() if hasattr(expr, "maybe_downcast") else expr


def eval_expr(expr: ir.AffineExpr, dims: Sequence[int], symbols: Sequence[int] = ()) -> int:
    """The integer value of `expr` at dimension values `dims` and symbol values `symbols`."""
    e = _downcast(expr)
    if isinstance(e, ir.AffineConstantExpr):
        return e.value
    if isinstance(e, ir.AffineDimExpr):
        return dims[e.position]
    if isinstance(e, ir.AffineSymbolExpr):
        return symbols[e.position]
    return _combine(e, eval_expr(e.lhs, dims, symbols), eval_expr(e.rhs, dims, symbols), expr)


def _combine(e, lhs, rhs, expr):
    """The binary expression `e` of its operands' values (Python integers or numpy arrays)."""
    if isinstance(e, ir.AffineAddExpr):
        return lhs + rhs
    if isinstance(e, ir.AffineMulExpr):
        return lhs * rhs
    if isinstance(e, ir.AffineFloorDivExpr):
        return lhs // rhs
    if isinstance(e, ir.AffineCeilDivExpr):
        return -((-lhs) // rhs)
    if isinstance(e, ir.AffineModExpr):
        return lhs % rhs
    raise TypeError(f"unsupported affine expression {expr}")


def eval_map(amap: ir.AffineMap, dims: Sequence[int], symbols: Sequence[int] = ()) -> tuple[int, ...]:
    """Apply `amap` to a point: one integer per result."""
    if len(dims) != amap.n_dims:
        raise ValueError(f"affine map {amap} takes {amap.n_dims} dims, got {len(dims)} values")
    return tuple(eval_expr(r, dims, symbols) for r in amap.results)


def used_dims(expr: ir.AffineExpr) -> set[int]:
    """Positions of the dimensions `expr` reads."""
    e = _downcast(expr)
    if isinstance(e, ir.AffineDimExpr):
        return {e.position}
    if isinstance(e, (ir.AffineConstantExpr, ir.AffineSymbolExpr)):
        return set()
    return used_dims(e.lhs) | used_dims(e.rhs)


def bounds(expr: ir.AffineExpr, box: Sequence[tuple[int, int]]) -> tuple[int, int]:
    """A sound inclusive range [lo, hi] of `expr` over the box `box[d] = (lo_d, hi_d)` (hi exclusive).

    Interval arithmetic: exact for expressions in which each dimension occurs once and divisors are
    positive constants; an over-approximation otherwise (never an under-approximation).
    """
    e = _downcast(expr)
    if isinstance(e, ir.AffineConstantExpr):
        return e.value, e.value
    if isinstance(e, ir.AffineDimExpr):
        lo, hi = box[e.position]
        return lo, hi - 1
    if isinstance(e, ir.AffineSymbolExpr):
        raise ValueError("bounds of expressions with symbols are unknown")
    l_lo, l_hi = bounds(e.lhs, box)
    r_lo, r_hi = bounds(e.rhs, box)
    if isinstance(e, ir.AffineAddExpr):
        return l_lo + r_lo, l_hi + r_hi
    if isinstance(e, ir.AffineMulExpr):
        products = [l_lo * r_lo, l_lo * r_hi, l_hi * r_lo, l_hi * r_hi]
        return min(products), max(products)
    if r_lo != r_hi or r_lo <= 0:
        raise ValueError(f"divisor of {expr} is not a positive constant")
    c = r_lo
    if isinstance(e, ir.AffineFloorDivExpr):
        return l_lo // c, l_hi // c
    if isinstance(e, ir.AffineCeilDivExpr):
        return -((-l_lo) // c), -((-l_hi) // c)
    if isinstance(e, ir.AffineModExpr):
        if l_lo // c == l_hi // c:  # no wrap-around inside the range
            return l_lo % c, l_hi % c
        return 0, c - 1
    raise TypeError(f"unsupported affine expression {expr}")


def eval_expr_grid(expr: ir.AffineExpr, box: Sequence[tuple[int, int]]) -> np.ndarray:
    """`expr` at every integer point of `box[d] = (lo_d, hi_d)` (hi exclusive): an array of shape
    `(hi_d - lo_d for d)`, so its C-order ravel lists the points in `itertools.product` order. Exact:
    int64 where every subexpression's bound fits, else Python integers (an object array)."""
    exact = _fits_int64(expr, box)
    dtype = np.int64 if exact else object
    rank = len(box)
    axes = []
    for d, (lo, hi) in enumerate(box):
        shape = [1] * rank
        shape[d] = max(0, hi - lo)
        axes.append(np.arange(lo, max(lo, hi), dtype=np.int64).astype(dtype).reshape(shape))
    values = _eval_grid(expr, axes, dtype)
    return np.broadcast_to(values, tuple(max(0, hi - lo) for lo, hi in box))


def _eval_grid(expr, axes, dtype):
    e = _downcast(expr)
    if isinstance(e, ir.AffineConstantExpr):
        return np.array(e.value, dtype=dtype)
    if isinstance(e, ir.AffineDimExpr):
        return axes[e.position]
    if isinstance(e, ir.AffineSymbolExpr):
        raise ValueError("expressions with symbols cannot be evaluated on a grid")
    return _combine(e, _eval_grid(e.lhs, axes, dtype), _eval_grid(e.rhs, axes, dtype), expr)


def _fits_int64(expr, box) -> bool:
    """Every subexpression of `expr` stays inside int64 over `box` (and divides by a positive
    constant, so numpy's `//` and `%` are Python's)."""
    limit = 1 << 62
    e = _downcast(expr)
    if isinstance(e, ir.AffineSymbolExpr):
        return False
    if not isinstance(e, (ir.AffineConstantExpr, ir.AffineDimExpr)) and not (
            _fits_int64(e.lhs, box) and _fits_int64(e.rhs, box) and divisors_are_positive_constants(e)):
        return False
    try:
        lo, hi = bounds(e, box)
    except ValueError:
        return False
    return -limit < lo and hi < limit


def divisors_are_positive_constants(expr: ir.AffineExpr) -> bool:
    """True when every floordiv/ceildiv/mod in `expr` divides by a positive constant."""
    e = _downcast(expr)
    if isinstance(e, (ir.AffineConstantExpr, ir.AffineDimExpr, ir.AffineSymbolExpr)):
        return True
    if isinstance(e, (ir.AffineFloorDivExpr, ir.AffineCeilDivExpr, ir.AffineModExpr)):
        r = _downcast(e.rhs)
        if not (isinstance(r, ir.AffineConstantExpr) and r.value > 0):
            return False
    return divisors_are_positive_constants(e.lhs) and divisors_are_positive_constants(e.rhs)


def compose_maps(outer: ir.AffineMap, inner: ir.AffineMap) -> ir.AffineMap:
    """`outer ∘ inner` as one map: x -> outer(inner(x)). `inner` yields `outer`'s dims."""
    if inner.n_dims and len(inner.results) != outer.n_dims:
        raise ValueError(f"cannot compose {outer} after {inner}: {len(inner.results)} results "
                         f"feed {outer.n_dims} dims")
    results = [r.compose(inner) for r in outer.results]
    return ir.AffineMap.get(inner.n_dims, inner.n_symbols, results)
