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
