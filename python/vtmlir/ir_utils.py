"""Small helpers over the MLIR Python bindings that several parts of vtmlir share."""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import transform
from torch_mlir.dialects.transform import interpreter


def walk_ops(root, name: str | None = None) -> list:
    """All operations under `root` (pre-order, `root` included), optionally only those named `name`."""
    found = []
    root_op = root.operation if hasattr(root, "operation") else root

    def visit(op):
        if name is None or op.name == name:
            found.append(op)
        return ir.WalkResult.ADVANCE

    root_op.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def within(op, ancestor) -> bool:
    """Whether `op` is `ancestor` or nested in one of its regions (None: False)."""
    while op is not None:
        op = op.operation
        if op == ancestor:
            return True
        op = op.parent
    return False


def symbol_name(op) -> str:
    """The `sym_name` of a symbol op (a `func.func`)."""
    return ir.StringAttr(op.operation.attributes["sym_name"]).value


def copy_module(op) -> ir.Module | None:
    """A new module in the same context holding copies of every top-level op of the module that is
    or encloses `op` (dense resources live in the context and are shared); None outside a module."""
    module_op = op.operation
    while module_op is not None and module_op.name != "builtin.module":
        module_op = module_op.parent
    if module_op is None:
        return None
    module_op = module_op.operation
    with module_op.context, module_op.location:
        copy = ir.Module.create()
        attributes = module_op.attributes
        for i in range(len(attributes)):  # (iterating the map yields names, not named attributes)
            named = attributes[i]
            copy.operation.attributes[named.name] = named.attr
        for inner in module_op.regions[0].blocks[0].operations:
            inner.operation.clone(ip=ir.InsertionPoint(copy.body))
    return copy


def child_ops(op):
    """The ops directly inside `op`'s regions, in order."""
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                yield inner.operation


def nested_ops(op, descend=None):
    """Every op nested in `op`'s regions (`op` excluded), pre-order in program order. An op for which
    `descend(op)` is false is yielded but its regions are not entered. Iterative: IR may nest deeper
    than Python's recursion limit."""
    stack = [child_ops(op)]
    while stack:
        inner = next(stack[-1], None)
        if inner is None:
            stack.pop()
            continue
        yield inner
        if len(inner.regions) and (descend is None or descend(inner)):
            stack.append(child_ops(inner))


def nested_operands(op) -> list:
    """Operands of `op` and of every op nested in its regions (values defined inside appear too)."""
    values = list(op.operands)
    for inner in nested_ops(op):
        values.extend(inner.operands)
    return values


# Non-linalg destination-style ops: the operand index of the destination their result is written into.
_DESTINATION_OPERAND = {"tensor.insert_slice": 1, "tensor.insert": 1}


def destination_indices(op) -> range:
    """Indices of the operands a destination-style op writes its results into, in result order:
    the inits of `linalg.*` structured ops, the shared outputs of `scf.forall`, the destination of
    `tensor.insert_slice`/`insert`, the destinations of `vt.store_into`; empty for any other op."""
    n = len(op.operands)
    if op.name == "scf.forall":
        return range(n - len(op.results), n)
    if op.name in _DESTINATION_OPERAND:
        first = _DESTINATION_OPERAND[op.name]
        return range(first, first + 1)
    if op.name == "vt.store_into":
        return range(1, n)
    if op.name.startswith("linalg.") and "operandSegmentSizes" in op.attributes:
        n_inputs, n_outputs = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))[:2]
        return range(n_inputs, n_inputs + n_outputs)
    if op.name.startswith("linalg.") and len(op.results) and n >= len(op.results):
        return range(n - len(op.results), n)  # linalg.transpose/broadcast/map: `init` last
    return range(0)


# -- linalg iterator types, built and compared as attributes (never through their printed text) ----

ITERATOR_KINDS = ("parallel", "reduction")


def iterator_type(kind: str) -> ir.Attribute:
    """``#linalg.iterator_type<kind>`` ("parallel" or "reduction") through its attribute builder
    (in the current context)."""
    from torch_mlir.dialects import linalg  # the linalg bindings register the enum's builder

    return ir.AttrBuilder.get("linalg.IteratorTypeEnum")(getattr(linalg.IteratorType, kind), ir.Context.current)


def iterator_kinds(op) -> list[str]:
    """The iterator types of a `linalg.generic` (its `iterator_types` attribute), as "parallel" or
    "reduction" each: every attribute compared with the built one (attributes are uniqued)."""
    with op.context:
        reduction = iterator_type("reduction")
        return ["reduction" if a == reduction else "parallel" for a in ir.ArrayAttr(op.attributes["iterator_types"])]


def all_parallel(op) -> bool:
    """Whether every loop of the `linalg.generic` `op` is parallel."""
    return "reduction" not in iterator_kinds(op)


def apply_transform_script(payload, build) -> None:
    """Apply a transform-dialect script to `payload` (an op) with the transform interpreter. The
    script is `@__transform_main(%root: !transform.any_op {transform.readonly})`, built through the
    transform dialect's op builders: `build(root)` adds the body's ops (the yield is added here).
    A script that fails raises the interpreter's `ValueError` (its diagnostics already emitted)."""
    with payload.context, ir.Location.unknown():
        script = ir.Module.create()
        script.operation.attributes["transform.with_named_sequence"] = ir.UnitAttr.get()
        with ir.InsertionPoint(script.body):
            main = transform.NamedSequenceOp("__transform_main", [transform.AnyOpType.get()], [],
                                             arg_attrs=[{"transform.readonly": ir.UnitAttr.get()}])
        with ir.InsertionPoint(main.body):
            build(main.bodyTarget)
            transform.YieldOp([])
    interpreter.apply_named_sequence(payload, main.operation, script.operation)


def fill_value(op) -> ir.Value | None:
    """The value a fill writes everywhere into its one destination (tensor or buffer), else None:
    a `linalg.fill`'s scalar; or, for a `linalg.generic` or `linalg.map` whose only shaped operand
    is that destination and whose payload only yields one value, that value when it is defined
    outside the payload (an `arith.constant` above) or the scalar input it reads (a generalised
    `linalg.fill`). Whether the loops are all parallel is the caller's question."""
    if op.name == "linalg.fill":
        return op.operands[0]
    if op.name not in ("linalg.generic", "linalg.map") or len(op.results) > 1:
        return None
    operands = list(op.operands)
    if not operands or any(isinstance(v.type, ir.ShapedType) for v in operands[:-1]):
        return None
    block = op.regions[0].blocks[0]
    body = list(block.operations)
    if len(body) != 1 or body[0].operation.name != "linalg.yield" or len(body[0].operands) != 1:
        return None
    value = body[0].operands[0]
    if not isinstance(value.owner, ir.Block):
        return value  # defined above the payload
    if value.owner == block and value.arg_number < len(operands) - 1:
        return operands[value.arg_number]  # the scalar input
    return None  # the destination's element, or a value of an enclosing block
