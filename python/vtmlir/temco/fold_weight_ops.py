"""`temco-fold-weight-ops`: elementwise ops computed from weights only become constants.

The importer writes eval-mode BatchNorm with its `1/sqrt(var + eps)` as run-time ops on the `[C]`
weight vectors. After `linalg-fuse-elementwise-ops` that square root and division sit inside the
per-element loop of the BatchNorm — and, in a TeMCO fused group (§3.2), inside the fconv's reduction,
once per output channel and input channel of every pixel: the fused kernels of UNet spent most of
their time there. This pass evaluates every all-parallel `linalg.generic` whose inputs are constants
(after earlier folds) with numpy in the ops' own precision and replaces its result by a `dense<>`
constant. float32 `+ - * /` and `sqrt` are correctly rounded in IEEE arithmetic on both sides, so
the constants are bitwise what the run time computed. A `cf.assert` in the body (the importer's
zero-size check) must hold for every element, else the op is left alone.

Handled in bodies: block arguments, `arith.constant` (inside or outside), `arith.{add,sub,mul,div}f`,
`arith.{maximum,minimum}f`, `arith.negf`, `arith.truncf`, `arith.extf`, `arith.cmpf`, `arith.select`,
`math.sqrt`, `cf.assert`; identity indexing maps only.
"""

from __future__ import annotations

import numpy as np
from torch_mlir import ir

from ..ir_utils import all_parallel, walk_ops
from ..passes.registry import Pass, register_pass, report_option
from ..errors import format_location
from ..ir_constants import constant_array, make_constant

# Fold nothing bigger (a per-channel vector is tiny; a full-size tensor would become a weight).
MAX_ELEMENTS = 1 << 16

_BINARY = {"arith.addf": np.add, "arith.subf": np.subtract, "arith.mulf": np.multiply,
           "arith.divf": np.divide, "arith.maximumf": np.maximum, "arith.minimumf": np.minimum}
# arith.CmpFPredicate: ordered (o*) compare false on NaN, unordered (u*) true.
_CMPF = {1: ("eq", False), 2: ("gt", False), 3: ("ge", False), 4: ("lt", False), 5: ("le", False),
         6: ("ne", False), 8: ("eq", True), 9: ("gt", True), 10: ("ge", True), 11: ("lt", True),
         12: ("le", True), 13: ("ne", True)}


class _Unsupported(Exception):
    pass


def _dtype(t):
    t = t.maybe_downcast() if hasattr(t, "maybe_downcast") else t
    if isinstance(t, ir.F32Type):
        return np.float32
    if isinstance(t, ir.F64Type):
        return np.float64
    if isinstance(t, ir.IntegerType) and t.width == 1:
        return np.bool_
    raise _Unsupported(f"type {t}")


def _producer(value):
    owner = value.owner
    return None if isinstance(owner, ir.Block) else owner.operation


def constant_input(value):
    """The numpy array of a constant tensor (possibly through expand/collapse_shape), else None."""
    producer = _producer(value)
    if producer is None:
        return None
    if producer.name == "arith.constant":
        return constant_array(producer)
    if producer.name in ("tensor.expand_shape", "tensor.collapse_shape"):
        source = constant_input(producer.operands[0])
        return None if source is None else source.reshape(ir.RankedTensorType(value.type).shape)
    return None


def _evaluate(generic, inputs: list[np.ndarray]) -> np.ndarray:
    body = generic.regions[0].blocks[0]
    values: dict = {}
    for arg, array in zip(body.arguments, inputs):
        values[arg] = array
    result = None
    for op in body.operations:
        op = op.operation
        name = op.name

        def get(v):
            if v in values:
                return values[v]
            producer = _producer(v)
            if producer is not None and producer.name == "arith.constant":
                attr = producer.attributes["value"].maybe_downcast()
                if isinstance(attr, ir.FloatAttr):
                    return _dtype(v.type)(attr.value)
            raise _Unsupported(f"operand of {name}")

        if name == "arith.constant":
            continue
        if name == "linalg.yield":
            result = get(op.operands[0])
            break
        if name in _BINARY:
            dtype = _dtype(op.results[0].type)
            a, b = (np.asarray(get(v), dtype=dtype) for v in op.operands)
            with np.errstate(all="ignore"):
                values[op.results[0]] = _BINARY[name](a, b).astype(dtype)
        elif name == "arith.negf":
            values[op.results[0]] = np.negative(get(op.operands[0]))
        elif name in ("arith.truncf", "arith.extf"):
            values[op.results[0]] = np.asarray(get(op.operands[0])).astype(_dtype(op.results[0].type))
        elif name == "math.sqrt":
            dtype = _dtype(op.results[0].type)
            with np.errstate(all="ignore"):
                values[op.results[0]] = np.sqrt(np.asarray(get(op.operands[0]), dtype=dtype)).astype(dtype)
        elif name == "arith.cmpf":
            predicate = ir.IntegerAttr(op.attributes["predicate"]).value
            if predicate not in _CMPF:
                raise _Unsupported(f"cmpf predicate {predicate}")
            kind, unordered = _CMPF[predicate]
            a, b = (np.asarray(get(v)) for v in op.operands)
            with np.errstate(all="ignore"):
                r = {"eq": np.equal, "gt": np.greater, "ge": np.greater_equal, "lt": np.less,
                     "le": np.less_equal, "ne": np.not_equal}[kind](a, b)
            nan = np.isnan(a) | np.isnan(b)
            values[op.results[0]] = (r | nan) if unordered else (r & ~nan) if kind == "ne" else r
        elif name == "arith.select":
            c, a, b = (get(v) for v in op.operands)
            values[op.results[0]] = np.where(c, a, b).astype(_dtype(op.results[0].type))
        elif name == "cf.assert":
            if not np.all(get(op.operands[0])):
                raise _Unsupported("the assertion fails")
        else:
            raise _Unsupported(name)
    if result is None:
        raise _Unsupported("no yield")
    shape = list(ir.RankedTensorType(generic.results[0].type).shape)
    return np.broadcast_to(np.asarray(result, dtype=_dtype(ir.RankedTensorType(generic.results[0].type).element_type)),
                           shape).copy()


def fold_weight_ops(module) -> list[str]:
    """Fold every qualifying generic under `module` (program order, so chains fold); report lines."""
    lines = []
    root = module.operation if hasattr(module, "operation") else module
    for generic in walk_ops(root, "linalg.generic"):
        if len(generic.results) != 1:
            continue
        out_type = generic.results[0].type.maybe_downcast()
        if (not isinstance(out_type, ir.RankedTensorType) or not out_type.has_static_shape
                or int(np.prod(out_type.shape)) > MAX_ELEMENTS
                or not all_parallel(generic)):
            continue
        n_in = int(ir.DenseI32ArrayAttr(generic.attributes["operandSegmentSizes"])[0])
        maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(generic.attributes["indexing_maps"])]
        identity = ir.AffineMap.get_identity(out_type.rank, context=generic.context)
        if n_in == 0 or any(m != identity for m in maps):
            continue
        inputs = [constant_input(v) for v in list(generic.operands)[:n_in]]
        if any(a is None for a in inputs):
            continue
        body = generic.regions[0].blocks[0]
        if any(True for _ in body.arguments[n_in].uses):
            continue  # reads its init
        try:
            array = _evaluate(generic, inputs + [None])
        except _Unsupported:
            continue
        with ir.InsertionPoint(generic), generic.location:
            constant = make_constant(array, out_type.element_type)
        generic.results[0].replace_all_uses_with(constant)
        lines.append(f"temco-fold-weight-ops: {format_location(generic.location)}: {out_type} folded\n")
        generic.erase()
    return lines


@register_pass
class TemcoFoldWeightOps(Pass):
    name = "temco-fold-weight-ops"
    summary = "Evaluate elementwise ops on constants (BatchNorm's 1/sqrt(var+eps)) into dense constants"
    description = (
        "Every all-parallel linalg.generic with identity maps whose inputs are constants (up to "
        f"{MAX_ELEMENTS} elements) is evaluated with numpy in its own precision (correctly rounded, so "
        "bitwise what the run time computes) and replaced by a constant; a failing cf.assert keeps it."
    )
    options = (report_option("one line per folded op"),)

    def run(self, module) -> None:
        self.write_report(module, "".join(fold_weight_ops(module)))
