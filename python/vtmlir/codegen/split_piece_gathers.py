"""`codegen-split-piece-gathers`: a kernel that gathers a concat piece by piece becomes one
elementwise kernel per piece.

VTC reads a concat of more pieces than it splits loops for element by element
(`vtc/select_views.py`): the body loads every piece at indices clamped into it (`affine.apply`,
`arith.maxsi`/`minsi`, `memref.load %piece_k[...]`) and keeps one value with a chain of
`arith.select`s whose conditions compare `linalg.index d` with the pieces' constant bounds. Such a
body is no vector code (loads at computed indices), so the kernel -- DenseNet's BatchNorm + ReLU of
every concat, or the prologue `codegen-split-prologues` moves out of the 1x1 convolution after it --
kept scalar loops, evaluating every piece's load, clamps and comparison for each element.

This pass cuts the kernel's range along the dimension the conditions compare (the piece dimension)
at every bound where a condition changes value, and makes one kernel per range, over subviews of
the output and of each input that dimension indexes. Inside a range every condition is a constant,
evaluated here from the constant bounds and the loop ranges (interval arithmetic on the affine
index expressions): each select becomes the value it picks, and the one load left reads its piece
through an ordinary input with a projected-permutation map (a subview of the piece where its
indices are offset), once each clamp around its indices is proved to change nothing over the range.
The other loads are dead and not copied. Each piece kernel then holds the same float ops on the same
element as before: an elementwise kernel the vector schedule takes, with bitwise the same results.

A kernel is left as it is unless all of this is proved: all loops parallel, one output whose map
names every loop, a body of `linalg.index`, `affine.apply`, `memref.load` (of buffers other than the
output) and arith/math ops only, at least one load, the conditions cut one dimension only, and in
every range each condition and clamp decided and each index an offset loop index or a constant.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch_mlir import ir
from torch_mlir.dialects import linalg, memref

from ..passes.registry import Pass, register_pass
from .bodies import buffer_root, iterator_attr, static_shape
from .kernels import indexing_maps_of, rewrite_generics

_BODY_OPS = ("linalg.index", "affine.apply", "memref.load", "linalg.yield")
_BODY_DIALECTS = ("arith", "math")


class _NoMatch(Exception):
    """The kernel is not a piece gather this pass can prove: it is left alone."""


@dataclass(frozen=True)
class _Linear:
    """An index value as `const + sum(coeff * d)` over loop dimensions d (`terms`: (d, coeff), coeff != 0)."""

    terms: tuple[tuple[int, int], ...]
    const: int

    @staticmethod
    def of(terms: dict, const: int) -> "_Linear":
        return _Linear(tuple(sorted((d, c) for d, c in terms.items() if c)), const)

    def __add__(self, other: "_Linear") -> "_Linear":
        terms = dict(self.terms)
        for d, c in other.terms:
            terms[d] = terms.get(d, 0) + c
        return _Linear.of(terms, self.const + other.const)

    def scale(self, k: int) -> "_Linear":
        return _Linear.of({d: c * k for d, c in self.terms}, self.const * k)

    def bounds(self, ranges: dict) -> tuple[int, int]:
        """The smallest and largest value over `ranges` (dimension -> (start, stop), stop exclusive)."""
        lo = hi = self.const
        for d, c in self.terms:
            start, stop = ranges[d]
            lo += min(c * start, c * (stop - 1))
            hi += max(c * start, c * (stop - 1))
        return lo, hi


def _int_constant(value):
    """The integer of an `arith.constant` of index or integer type (i1: a bool), else None."""
    if isinstance(value, ir.BlockArgument) or value.owner.operation.name != "arith.constant":
        return None
    attr = value.owner.operation.attributes["value"]
    if not isinstance(attr, ir.IntegerAttr):
        return None
    if isinstance(value.type, ir.IntegerType) and value.type.width == 1:
        return bool(attr.value)
    return attr.value


def _is_index_like(value) -> bool:
    t = value.type
    return isinstance(t, ir.IndexType) or (isinstance(t, ir.IntegerType) and t.width == 1)


class _Range:
    """The index computations of a gather body evaluated over one range of its loops."""

    def __init__(self, block: ir.Block, ranges: dict[int, tuple[int, int]]):
        self.block, self.ranges, self.memo = block, ranges, {}

    def index(self, value):
        """`value` as a `_Linear` (index) or a bool (a decided condition); None for a value computed
        from data (a float comparison, an input); _NoMatch for an index value not decided here."""
        if value in self.memo:
            return self.memo[value]
        result = self._index(value)
        self.memo[value] = result
        return result

    def _index(self, value):
        if isinstance(value, ir.BlockArgument) and value.owner == self.block:
            return None
        constant = _int_constant(value)
        if constant is not None:
            return constant if isinstance(constant, bool) else _Linear((), constant)
        if isinstance(value, ir.BlockArgument) or value.owner.operation.parent != self.block.owner.operation:
            if _is_index_like(value):
                raise _NoMatch  # an index from outside the body: nothing to decide it with
            return None
        op = value.owner.operation
        name = op.name
        if name == "linalg.index":
            return _Linear(((ir.IntegerAttr(op.attributes["dim"]).value, 1),), 0)
        if name == "affine.apply":
            amap = ir.AffineMapAttr(op.attributes["map"]).value
            operands = [self.linear(v) for v in op.operands]
            return _evaluate(amap.results[0], operands[:amap.n_dims], operands[amap.n_dims:])
        if name in ("arith.addi", "arith.subi", "arith.muli") and isinstance(value.type, ir.IndexType):
            a, b = (self.linear(v) for v in op.operands)
            if name == "arith.addi":
                return a + b
            if name == "arith.subi":
                return a + b.scale(-1)
            if a.terms and b.terms:
                raise _NoMatch
            return a.scale(b.const) if not b.terms else b.scale(a.const)
        if name in ("arith.maxsi", "arith.minsi"):
            a, b = (self.linear(v) for v in op.operands)
            (a_lo, a_hi), (b_lo, b_hi) = a.bounds(self.ranges), b.bounds(self.ranges)
            # A clamp is resolved only where it is proved to pick the same operand over the whole range.
            first, second = (a_lo >= b_hi, b_lo >= a_hi) if name == "arith.maxsi" else (a_hi <= b_lo, b_hi <= a_lo)
            if first:
                return a
            if second:
                return b
            raise _NoMatch
        if name == "arith.cmpi":
            a, b = (self.linear(v) for v in op.operands)
            return _decide(ir.IntegerAttr(op.attributes["predicate"]).value, a + b.scale(-1), self.ranges,
                           a.bounds(self.ranges), b.bounds(self.ranges))
        if name in ("arith.andi", "arith.ori", "arith.xori") and _is_index_like(value):
            a, b = (self.index(v) for v in op.operands)
            if isinstance(a, bool) and isinstance(b, bool):
                return {"arith.andi": a and b, "arith.ori": a or b, "arith.xori": a != b}[name]
            if isinstance(a, _Linear) or isinstance(b, _Linear) or isinstance(value.type, ir.IndexType):
                raise _NoMatch
            if a is None and b is None:
                return None
            raise _NoMatch  # a decided condition combined with a data one
        if isinstance(value.type, ir.IndexType):
            raise _NoMatch
        return None  # data (a float comparison's i1, a float)

    def linear(self, value) -> _Linear:
        found = self.index(value)
        if not isinstance(found, _Linear):
            raise _NoMatch
        return found


def _evaluate(expr, dims: list[_Linear], symbols: list[_Linear]) -> _Linear:
    """An affine expression of `affine.apply` over operands known as `_Linear`s (linear results only)."""
    if isinstance(expr, ir.AffineDimExpr):
        return dims[expr.position]
    if isinstance(expr, ir.AffineSymbolExpr):
        return symbols[expr.position]
    if isinstance(expr, ir.AffineConstantExpr):
        return _Linear((), expr.value)
    if isinstance(expr, ir.AffineAddExpr):
        return _evaluate(expr.lhs, dims, symbols) + _evaluate(expr.rhs, dims, symbols)
    if isinstance(expr, ir.AffineMulExpr):
        a, b = _evaluate(expr.lhs, dims, symbols), _evaluate(expr.rhs, dims, symbols)
        if a.terms and b.terms:
            raise _NoMatch
        return a.scale(b.const) if not b.terms else b.scale(a.const)
    raise _NoMatch  # mod, floordiv, ceildiv: not a piece's offset


# arith.cmpi predicates (arith's CmpIPredicate numbering): signed and unsigned orders and equality.
_EQ, _NE, _SLT, _SLE, _SGT, _SGE, _ULT, _ULE, _UGT, _UGE = range(10)


def _decide(predicate: int, diff: _Linear, ranges, a_bounds, b_bounds) -> bool:
    """`a <pred> b` over the whole range, from the bounds of `diff = a - b`; _NoMatch if it changes."""
    if predicate >= _ULT:
        if a_bounds[0] < 0 or b_bounds[0] < 0:
            raise _NoMatch  # unsigned orders agree with the signed ones on non-negative values only
        predicate -= _ULT - _SLT
    lo, hi = diff.bounds(ranges)
    if predicate in (_EQ, _NE):
        if lo == hi == 0:
            return predicate == _EQ
        if lo > 0 or hi < 0:
            return predicate == _NE
        raise _NoMatch
    holds = {_SLT: (hi < 0, lo >= 0), _SLE: (hi <= 0, lo > 0), _SGT: (lo > 0, hi <= 0), _SGE: (lo >= 0, hi < 0)}
    always, never = holds[predicate]
    if always:
        return True
    if never:
        return False
    raise _NoMatch


def _cuts(predicate: int, diff: _Linear) -> tuple[int, list[int]] | None:
    """Where `diff <pred> 0` can change value along the one dimension `diff` reads: (dimension, the
    indices at which a new range starts), or None if it reads no dimension or several."""
    if len(diff.terms) != 1:
        return None
    (d, c), k = diff.terms[0], diff.const
    if abs(c) != 1:
        return None
    x = -k * c  # diff == 0 at d == x
    if predicate >= _ULT:
        predicate -= _ULT - _SLT
    if predicate in (_EQ, _NE):
        return d, [x, x + 1]
    # diff < 0 (slt, sge) flips at d == x for c == 1 and at x + 1 for c == -1; diff <= 0 the other way.
    strict = predicate in (_SLT, _SGE)
    return d, [x if (c == 1) == strict else x + 1]


@dataclass
class _Plan:
    """One piece kernel: the range, the ops to copy, what each select becomes, and each load's read."""

    ranges: dict[int, tuple[int, int]]
    alias: dict
    ops: set
    args: set
    loads: dict  # memref.load op -> (buffer, offsets, sizes, map results)


def _plan(op, block, ranges: dict[int, tuple[int, int]]) -> _Plan:
    evaluator = _Range(block, ranges)
    plan = _Plan(ranges, {}, set(), set(), {})
    output = buffer_root(op.operands[-1])
    work = list(list(block.operations)[-1].operands)
    while work:
        value = work.pop()
        while value in plan.alias:
            value = plan.alias[value]
        if isinstance(value, ir.BlockArgument):
            if value.owner == block:
                plan.args.add(value.arg_number)
            continue
        inner = value.owner.operation
        if inner.parent != op.operation:
            continue  # defined outside the body: used as it is
        if inner in plan.ops or inner in plan.loads:
            continue
        if inner.name == "arith.select":
            condition = evaluator.index(inner.operands[0])
            if isinstance(condition, bool):
                plan.alias[value] = inner.operands[1 if condition else 2]
                work.append(value)
                continue
        elif inner.name == "memref.load":
            plan.loads[inner] = _load_read(inner, evaluator, ranges, output)
            continue
        if inner.name.split(".", 1)[0] not in _BODY_DIALECTS or any(
                evaluator.index(v) is not None for v in inner.operands):
            raise _NoMatch  # an index computation the kernel needs as data, or an op of another kind
        if _is_index_like(value) and evaluator.index(value) is not None:
            raise _NoMatch
        plan.ops.add(inner)
        work.extend(inner.operands)
    return plan


def _load_read(load, evaluator: _Range, ranges, output):
    """How a load reads its buffer over the range: (buffer, subview offsets, sizes, map results)."""
    buffer = load.operands[0]
    shape = static_shape(buffer)
    if shape is None or buffer_root(buffer) == output or (
            not isinstance(buffer, ir.BlockArgument) and buffer.owner.operation.parent == load.parent):
        raise _NoMatch
    offsets, sizes, results, seen = [], [], [], set()
    for extent, index in zip(shape, load.operands[1:]):
        linear = evaluator.linear(index)
        if not linear.terms:
            offset, size, result = linear.const, 1, ir.AffineConstantExpr.get(0)
        elif len(linear.terms) == 1 and linear.terms[0][1] == 1 and linear.terms[0][0] not in seen:
            d = linear.terms[0][0]
            seen.add(d)
            start, stop = ranges[d]
            offset, size, result = start + linear.const, stop - start, ir.AffineDimExpr.get(d)
        else:
            raise _NoMatch
        if offset < 0 or offset + size > extent:
            raise _NoMatch  # out of the buffer: the clamps (or the select) are not proved no-ops
        offsets.append(offset)
        sizes.append(size)
        results.append(result)
    return buffer, offsets, sizes, results


def _view(value, offsets, sizes):
    """`value` itself where the view would be all of it, else a subview (unit strides)."""
    shape = static_shape(value)
    if all(o == 0 for o in offsets) and list(sizes) == shape:
        return value
    return memref.subview(value, offsets, sizes, [1] * len(sizes))


def _range_view(value, amap: ir.AffineMap, ranges):
    """The part of `value` (an operand read with `amap`) that the loops read over `ranges`."""
    shape = static_shape(value)
    offsets, sizes = [], []
    for extent, e in zip(shape, amap.results):
        start, stop = ranges[e.position] if isinstance(e, ir.AffineDimExpr) else (0, extent)
        offsets.append(start)
        sizes.append(stop - start if isinstance(e, ir.AffineDimExpr) else extent)
    return _view(value, offsets, sizes)


def split_piece_gathers(op) -> bool:
    """Split `op` (a linalg.generic) into one elementwise kernel per piece range; False (untouched) if
    it is no piece gather or a step cannot be proved."""
    op = op.operation
    maps = indexing_maps_of(op)
    if maps is None or len(op.opview.outputs) != 1:
        return False
    parallel = iterator_attr(op.context, "parallel")
    if any(a != parallel for a in ir.ArrayAttr(op.attributes["iterator_types"])):
        return False
    block = op.regions[0].blocks[0]
    body = [o.operation for o in block.operations]
    if not any(o.name == "memref.load" for o in body) or any(
            o.name not in _BODY_OPS and o.name.split(".", 1)[0] not in _BODY_DIALECTS for o in body):
        return False
    n_loops = maps[-1].n_dims
    out_shape = static_shape(op.operands[-1])
    out_dims = [e.position for e in maps[-1].results if isinstance(e, ir.AffineDimExpr)]
    if out_shape is None or sorted(out_dims) != list(range(n_loops)) or any(
            static_shape(v) is None for v in op.operands[:-1]):
        return False
    extents = {e.position: out_shape[i] for i, e in enumerate(maps[-1].results) if isinstance(e, ir.AffineDimExpr)}
    full = {d: (0, extents[d]) for d in range(n_loops)}
    try:
        plans = [_plan(op, block, ranges) for ranges in _piece_ranges(block, full)]
    except _NoMatch:
        return False
    if len(plans) == 1 and not plans[0].loads:
        return False
    n_inputs = len(op.opview.inputs)
    for plan in plans:
        for a in plan.args:
            if a < n_inputs and not all(isinstance(e, (ir.AffineDimExpr, ir.AffineConstantExpr)) for e in maps[a].results):
                return False  # an input read through a window: not cut along the piece dimension here
    with op.location, ir.InsertionPoint(op):
        for plan in plans:
            _build(op, block, maps, plan, parallel)
    op.erase()
    return True


def _piece_ranges(block, full: dict) -> list[dict]:
    """The ranges of the loops over which every condition of the body may be constant: the piece
    dimension cut at each bound a comparison of it names (raises _NoMatch if several dimensions are)."""
    evaluator = _Range(block, full)
    cuts: dict[int, set[int]] = {}
    for inner in block.operations:
        if inner.operation.name != "arith.cmpi":
            continue
        try:
            a, b = (evaluator.linear(v) for v in inner.operation.operands)
        except _NoMatch:
            continue  # decided per range, or the kernel is refused there
        found = _cuts(ir.IntegerAttr(inner.operation.attributes["predicate"]).value, a + b.scale(-1))
        if found is not None:
            d, at = found
            cuts.setdefault(d, set()).update(x for x in at if full[d][0] < x < full[d][1])
    cuts = {d: at for d, at in cuts.items() if at}
    if len(cuts) > 1:
        raise _NoMatch
    if not cuts:
        return [full]
    (d, at), = cuts.items()
    bounds = [full[d][0]] + sorted(at) + [full[d][1]]
    return [{**full, d: (lo, hi)} for lo, hi in zip(bounds, bounds[1:])]


def _build(op, block, maps, plan: _Plan, parallel) -> None:
    """The piece kernel of `plan`, inserted at the current insertion point. Its loops count from the
    range's start: each operand the piece dimension indexes is a subview that starts there."""
    n_inputs = len(op.opview.inputs)
    n_loops = maps[-1].n_dims
    args = sorted(a for a in plan.args if a < n_inputs)
    loads = [o.operation for o in block.operations if o.operation in plan.loads]
    inputs = [_range_view(op.operands[a], maps[a], plan.ranges) for a in args]
    input_maps = [maps[a] for a in args]
    for load in loads:
        buffer, offsets, sizes, results = plan.loads[load]
        inputs.append(_view(buffer, offsets, sizes))
        input_maps.append(ir.AffineMap.get(n_loops, 0, results))
    output = _range_view(op.operands[-1], maps[-1], plan.ranges)
    kernel = linalg.GenericOp([], inputs, [output],
                              ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in input_maps + [maps[-1]]]),
                              ir.ArrayAttr.get([parallel] * n_loops))
    new_block = kernel.regions[0].blocks.append(*[v.type.element_type for v in inputs] + [output.type.element_type])
    mapping = {block.arguments[a]: new_block.arguments[i] for i, a in enumerate(args)}
    mapping.update({load.results[0]: new_block.arguments[len(args) + i] for i, load in enumerate(loads)})
    mapping[block.arguments[n_inputs]] = new_block.arguments[-1]

    def resolved(value):
        while value in plan.alias:  # a decided select is the value it picks
            value = plan.alias[value]
        return mapping.get(value, value)

    with ir.InsertionPoint(new_block):
        for inner in block.operations:
            if inner.operation in plan.ops:
                clone = inner.operation.clone()
                for i, operand in enumerate(clone.operands):
                    clone.operands[i] = resolved(operand)
                mapping.update(zip(inner.operation.results, clone.results))
        linalg.YieldOp([resolved(v) for v in list(block.operations)[-1].operands])


def split_all_piece_gathers(module_op) -> int:
    """Split every piece gather kernel; returns how many were split."""
    return rewrite_generics(module_op, split_piece_gathers)


@register_pass
class SplitPieceGathers(Pass):
    name = "codegen-split-piece-gathers"
    summary = "Split a kernel gathering a concat piece by piece (selects over memref.loads) into a kernel per piece"

    def run(self, module):
        split_all_piece_gathers(module)
