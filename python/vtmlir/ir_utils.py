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


def nested_operands(op) -> list:
    """Operands of `op` and of every op nested in its regions (values defined inside appear too)."""
    values = list(op.operands)
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                values.extend(nested_operands(inner.operation))
    return values
