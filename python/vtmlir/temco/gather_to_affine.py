"""`temco-gather-to-affine`: a gather whose indices are affine in the output indices becomes a read.

TeMCO (Song et al., ICPP'24, §3.2) fuses the ops between an lconv and the next fconv into one tiled
kernel. In UNet the decoder's nearest-neighbour upsampling sits there: torch-mlir lowers
`upsample_nearest2d` to a `linalg.generic` with no inputs whose body computes each source index
from `linalg.index` (`floor(float(i) / 2.0)`, clamped) and reads the source with `tensor.extract`.
A captured tensor is not an operand, so tile-and-fuse cannot compute it per tile: the decoder
output before the upsampling stays full-size (the peak of both UNets after fusion).

This pass evaluates each source index's scalar computation for every value of the one output index
it depends on (numpy, with the ops' float32/integer semantics) and, when the table equals `i`,
`i floordiv q` or a constant for every `i` in range, rewrites the generic into one that reads the
source through the affine map `(d0, d1, d2 floordiv q, d3 floordiv q)` and yields it. The result
is the same element for element (the table check proves it for the shapes at hand), and the new
generic is an ordinary elementwise op with an operand: the upsampling and what produces its input
fuse with the decoder's next fconv.

Handled scalar ops: `linalg.index`, `arith.constant`, `arith.index_cast(ui)`, `arith.sitofp`,
`arith.uitofp`, `arith.fptosi`, `arith.fptoui`, `arith.{add,sub,mul,div}f`, `arith.{maximum,minimum}f`,
`math.floor`, `math.ceil`, `arith.{add,sub,mul}i`, `arith.{floordivsi,divsi,divui,maxsi,minsi}`.
Anything else leaves the generic alone.
"""

from __future__ import annotations

import numpy as np
from torch_mlir import ir
from torch_mlir.dialects import linalg

from ..ir_utils import all_parallel, walk_ops
from ..passes.registry import Pass, register_pass, report_option
from ..errors import format_location


class _Unsupported(Exception):
    pass


_FLOAT_BINARY = {"arith.addf": np.add, "arith.subf": np.subtract, "arith.mulf": np.multiply,
                 "arith.divf": np.divide, "arith.maximumf": np.maximum, "arith.minimumf": np.minimum}
_INT_BINARY = {"arith.addi": np.add, "arith.subi": np.subtract, "arith.muli": np.multiply,
               "arith.floordivsi": np.floor_divide, "arith.maxsi": np.maximum, "arith.minsi": np.minimum,
               "arith.divsi": lambda a, b: np.trunc(a / b).astype(np.int64),
               "arith.divui": np.floor_divide}
_CASTS = {"arith.index_cast", "arith.index_castui", "arith.extsi", "arith.extui", "arith.trunci"}


def _float_dtype(value):
    t = value.type.maybe_downcast()
    if isinstance(t, ir.F32Type):
        return np.float32
    if isinstance(t, ir.F64Type):
        return np.float64
    raise _Unsupported(f"float type {t}")


class _IndexEvaluator:
    """Evaluates scalar values of a generic's body as functions of one `linalg.index` dimension."""

    def __init__(self, body, shape: list[int]):
        self.body = body
        self.shape = shape
        self.cache: dict = {}

    def dims(self, value) -> set[int]:
        """The `linalg.index` dimensions `value` depends on."""
        owner = value.owner
        if isinstance(owner, ir.Block):
            raise _Unsupported("block argument")
        op = owner.operation
        if op.parent != self.body.owner.operation:
            return set()  # defined outside the generic: a constant operand
        if op.name == "linalg.index":
            return {ir.IntegerAttr(op.attributes["dim"]).value}
        if op.name == "arith.constant":
            return set()
        found: set[int] = set()
        for operand in op.operands:
            found |= self.dims(operand)
        return found

    def evaluate(self, value, dim: int | None):
        """`value` over `range(shape[dim])` (an array), or a scalar when `dim` is None."""
        key = (value, dim)
        if key in self.cache:
            return self.cache[key]
        owner = value.owner
        if isinstance(owner, ir.Block):
            raise _Unsupported("block argument")
        op = owner.operation
        name = op.name
        if name == "linalg.index":
            result = np.arange(self.shape[dim], dtype=np.int64)
        elif name == "arith.constant":
            attr = op.attributes["value"]
            if isinstance(attr.maybe_downcast(), ir.FloatAttr):
                result = _float_dtype(value)(ir.FloatAttr(attr).value)
            elif isinstance(attr.maybe_downcast(), ir.IntegerAttr):
                result = np.int64(ir.IntegerAttr(attr).value)
            else:
                raise _Unsupported("constant")
        elif name in _CASTS:
            result = self.evaluate(op.operands[0], dim)
        elif name in ("arith.sitofp", "arith.uitofp"):
            result = np.asarray(self.evaluate(op.operands[0], dim)).astype(_float_dtype(value))
        elif name in ("arith.fptosi", "arith.fptoui"):
            result = np.trunc(self.evaluate(op.operands[0], dim)).astype(np.int64)
        elif name in ("math.floor", "math.ceil"):
            source = self.evaluate(op.operands[0], dim)
            result = (np.floor if name == "math.floor" else np.ceil)(source)
        elif name in _FLOAT_BINARY:
            dtype = _float_dtype(value)
            a, b = (np.asarray(self.evaluate(v, dim), dtype=dtype) for v in op.operands)
            with np.errstate(all="ignore"):
                result = _FLOAT_BINARY[name](a, b).astype(dtype)
        elif name in _INT_BINARY:
            a, b = (np.asarray(self.evaluate(v, dim), dtype=np.int64) for v in op.operands)
            result = _INT_BINARY[name](a, b)
        else:
            raise _Unsupported(name)
        self.cache[key] = result
        return result


def _affine_read(generic):
    """(source, affine map, extract op) when `generic` is a gather with affine indices, else None."""
    n_in = int(ir.DenseI32ArrayAttr(generic.attributes["operandSegmentSizes"])[0])
    if n_in != 0 or len(generic.results) != 1:
        return None
    out_type = generic.results[0].type.maybe_downcast()
    if not isinstance(out_type, ir.RankedTensorType) or not out_type.has_static_shape:
        return None
    if not all_parallel(generic):
        return None
    body = generic.regions[0].blocks[0]
    ops = [o.operation for o in body.operations]
    terminator = ops[-1]
    extract = _producer(terminator.operands[0]) if len(terminator.operands) == 1 else None
    if extract is None or extract.name != "tensor.extract" or extract.parent != generic:
        return None
    source = extract.operands[0]
    if _producer(source) is not None and _producer(source).parent == generic:
        return None
    src_type = source.type.maybe_downcast()
    if not isinstance(src_type, ir.RankedTensorType) or not src_type.has_static_shape:
        return None
    if any(True for _ in body.arguments[0].uses):
        return None  # the body reads the init
    shape = list(out_type.shape)
    evaluator = _IndexEvaluator(body, shape)
    exprs = []
    try:
        for j, index in enumerate(list(extract.operands)[1:]):
            dims = evaluator.dims(index)
            if len(dims) > 1:
                return None
            if not dims:
                c = int(evaluator.evaluate(index, None))
                if not 0 <= c < src_type.shape[j]:
                    return None
                exprs.append(ir.AffineConstantExpr.get(c, context=generic.context))
                continue
            (k,) = dims
            table = np.asarray(evaluator.evaluate(index, k), dtype=np.int64)
            expr = _affine_expr(table, src_type.shape[j], k, generic.context)
            if expr is None:
                return None
            exprs.append(expr)
    except _Unsupported:
        return None
    # every other op of the body feeds the indices (nothing with side effects is dropped)
    needed = {extract, terminator}
    for index in list(extract.operands)[1:]:
        _collect_defs(index, generic, needed)
    if any(op not in needed for op in ops):
        return None
    return source, ir.AffineMap.get(len(shape), 0, exprs, context=generic.context), extract


def _affine_expr(table, src_size: int, k: int, context):
    """`d_k` or `d_k floordiv q` when `table[i]` equals it for every i and stays inside the source."""
    i = np.arange(len(table), dtype=np.int64)
    if table.min() < 0 or table.max() >= src_size:
        return None
    dim = ir.AffineDimExpr.get(k, context=context)
    if np.array_equal(table, i):
        return dim
    # the only candidate q for table == i // q: the length of the first run of equal values
    q = int(np.argmax(table != table[0])) if (table != table[0]).any() else len(table)
    if q >= 2 and np.array_equal(table, i // q):
        return ir.AffineExpr.get_floor_div(dim, ir.AffineConstantExpr.get(q, context=context))
    return None


def _collect_defs(value, generic, found: set) -> None:
    owner = value.owner
    if isinstance(owner, ir.Block):
        return
    op = owner.operation
    if op.parent != generic or op in found:
        return
    found.add(op)
    for operand in op.operands:
        _collect_defs(operand, generic, found)


def _producer(value):
    owner = value.owner
    return None if isinstance(owner, ir.Block) else owner.operation


def gather_to_affine(module) -> list[str]:
    """Rewrite every qualifying gather generic under `module`; one report line per rewrite."""
    lines = []
    root = module.operation if hasattr(module, "operation") else module
    for generic in walk_ops(root, "linalg.generic"):
        found = _affine_read(generic)
        if found is None:
            continue
        source, amap, _ = found
        result_type = generic.results[0].type
        element_type = ir.RankedTensorType(result_type).element_type
        rank = ir.RankedTensorType(result_type).rank
        with ir.InsertionPoint(generic), generic.location:
            new = linalg.GenericOp(
                [result_type], [source], [generic.operands[0]],
                ir.ArrayAttr.get([ir.AffineMapAttr.get(amap), ir.AffineMapAttr.get(ir.AffineMap.get_identity(rank))]),
                generic.attributes["iterator_types"])
            block = new.regions[0].blocks.append(element_type, element_type)
            with ir.InsertionPoint(block):
                linalg.YieldOp([block.arguments[0]])
        generic.results[0].replace_all_uses_with(new.results[0])
        lines.append(f"temco-gather-to-affine: {format_location(generic.location)}: reads "
                     f"{ir.RankedTensorType(source.type)} through {amap}\n")
        generic.erase()
    return lines


@register_pass
class TemcoGatherToAffine(Pass):
    name = "temco-gather-to-affine"
    summary = "Rewrite gathers with affine indices (nearest upsampling) into generics reading their source"
    description = (
        "A linalg.generic that computes source indices from linalg.index and reads a captured tensor with "
        "tensor.extract (torch-mlir's upsample_nearest2d) becomes a generic with that tensor as an operand "
        "and the indexing map (d_k or d_k floordiv q) that the index tables equal; tile-and-fuse can then "
        "compute the source per tile (TeMCO §3.2 fusion through UNet's upsampling). Exact."
    )
    options = (report_option("one line per rewrite"),)

    def run(self, module) -> None:
        self.write_report(module, "".join(gather_to_affine(module)))
