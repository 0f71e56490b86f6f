"""Small helpers over the MLIR Python bindings that several parts of vtmlir share."""

from __future__ import annotations

from torch_mlir import ir


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
