"""`codegen-fold-row-broadcasts`: a vector whose rows each repeat one element becomes one broadcast.

A register tile multiplies a column of A (one element per row) by a row of B (one vector). The
vectoriser reads the column as `vector<12x1xf32>`, broadcasts it along a new leading dimension
(`vector<16x12x1xf32>`: `vector.broadcast` only adds leading dimensions) and transposes it to the
tile's `vector<12x16xf32>`; once the unit dimensions are dropped the transpose is lowered to a shape
cast, one 192-lane `vector.shuffle` and a shape cast back. The values are simply "row i is a_i
repeated", but LLVM receives 192 insertelements, 192 extractelements and their constants per k step
and spends most of its time on them (temco_resnet18: 38k of 66k LLVM dialect ops, each register
tile's column).

This pass follows each lane of a vector through `vector.shape_cast`, `vector.shuffle`,
`vector.broadcast` and `vector.transpose` back to one source vector. Where a 2-D result's row i is
element i of a source of `M` elements in every lane, the chain is replaced by
`vector.broadcast %column : vector<Mx1xT> to vector<MxNxT>` (the column shape-cast to `Mx1` first
if needed), which LLVM lowers to one splat per row. Only which element goes to which lane is looked
at, so the result is bitwise the same. The dead chain is left to `canonicalize`.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import vector

from ..passes.registry import Pass, register_pass

# Larger vectors are not followed (the lane tables are Python lists; a register tile is ≤ 512 lanes).
MAX_LANES = 4096
_LANE_OPS = ("vector.shape_cast", "vector.shuffle", "vector.broadcast", "vector.transpose")


def _shape(value: ir.Value) -> list[int] | None:
    vt = value.type
    if not isinstance(vt, ir.VectorType) or vt.scalable:
        return None
    return list(vt.shape)


def _size(shape: list[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _strides(shape: list[int]) -> list[int]:
    strides, s = [], 1
    for d in reversed(shape):
        strides.append(s)
        s *= d
    return strides[::-1]


def _lanes(value: ir.Value) -> tuple[ir.Value, list[int]] | None:
    """(source, table): lane f of `value` (row-major flat index) is lane table[f] of `source`, a value
    not defined by one of `_LANE_OPS` (or too large to follow). None when a lane is undefined
    (a shuffle mixing two sources, a poison lane) or the value is not a static vector."""
    shape = _shape(value)
    if shape is None or _size(shape) > MAX_LANES:
        return None
    op = value.owner
    if isinstance(op, ir.OpView):
        op = op.operation
    if isinstance(op, ir.Operation) and op.name in _LANE_OPS:
        traced = _trace(op, shape)
        if traced is not None or op.name == "vector.shuffle":
            return traced
    return value, list(range(_size(shape)))


def _trace(op: ir.Operation, shape: list[int]):
    source = _lanes(op.operands[0])
    if source is None:
        return None
    root, table = source
    if op.name == "vector.shape_cast":
        return root, table
    if op.name == "vector.shuffle":
        other = _lanes(op.operands[1])
        n = len(table)
        mask = list(ir.DenseI64ArrayAttr(op.attributes["mask"]))
        out = []
        for m in mask:
            if m < 0:
                return None  # a poison lane
            if m < n:
                out.append(table[m])
            elif other is not None and other[0] == root:
                out.append(other[1][m - n])
            else:
                return None
        return root, out
    src_shape = _shape(op.operands[0])
    if src_shape is None:
        return None  # a scalar broadcast: already a splat
    out_strides = _strides(shape)
    if op.name == "vector.broadcast":
        # Source dims align with the trailing result dims; a source dim of 1 is stretched.
        lead = len(shape) - len(src_shape)
        src_strides = _strides(src_shape)
        out = []
        for flat in range(_size(shape)):
            index = [(flat // s) % d for s, d in zip(out_strides, shape)]
            src_flat = sum((0 if src_shape[i] == 1 else index[lead + i]) * src_strides[i]
                           for i in range(len(src_shape)))
            out.append(table[src_flat])
        return root, out
    perm = list(ir.DenseI64ArrayAttr(op.attributes["permutation"]))
    src_strides = _strides(src_shape)
    out = []
    for flat in range(_size(shape)):
        index = [(flat // s) % d for s, d in zip(out_strides, shape)]
        out.append(table[sum(index[k] * src_strides[perm[k]] for k in range(len(perm)))])
    return root, out


def fold_row_broadcasts(module_op: ir.Operation) -> int:
    """Replace every 2-D vector built by lane ops whose row i repeats element i of one source; returns
    how many were replaced."""
    candidates = []

    def visit(op):
        if op.name in ("vector.shape_cast", "vector.shuffle", "vector.transpose") and len(op.results) == 1:
            shape = _shape(op.results[0])
            if shape is not None and len(shape) == 2 and shape[1] > 1:
                candidates.append(op)
        return ir.WalkResult.ADVANCE

    module_op.walk(visit)
    folded = 0
    for op in candidates:
        value = op.results[0]
        rows, cols = _shape(value)
        traced = _lanes(value)
        if traced is None:
            continue
        root, table = traced
        root_shape = _shape(root)
        if root is value or root_shape is None or _size(root_shape) != rows:
            continue
        if any(table[r * cols + c] != r for r in range(rows) for c in range(cols)):
            continue
        element = value.type.element_type
        with op.location, ir.InsertionPoint(op):
            column = root
            if root_shape != [rows, 1]:
                column = vector.shape_cast(ir.VectorType.get([rows, 1], element), root)
            splat = vector.broadcast(value.type, column)
        value.replace_all_uses_with(splat)
        folded += 1
    return folded


@register_pass
class FoldRowBroadcasts(Pass):
    name = "codegen-fold-row-broadcasts"
    summary = "A 2-D vector whose row i repeats element i of one vector becomes a broadcast of that column"
    description = (
        "Follows lanes through vector.shape_cast, vector.shuffle, vector.broadcast and vector.transpose: "
        "a register tile's A column, broadcast along a new leading dimension and transposed (a flattened "
        "shuffle after unit dims are dropped), becomes vector.broadcast of the column (vector<Mx1> to "
        "vector<MxN>): one splat per row instead of a shuffle of M*N lanes. Bitwise."
    )

    def run(self, module):
        fold_row_broadcasts(module.operation)
