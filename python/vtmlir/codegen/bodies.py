"""Pieces of `linalg.generic` bodies, shared by the passes that split a kernel in two
(`codegen-split-checks`, `codegen-split-prologues`): the ops a value is computed from, and copies of
them in a new body."""

from __future__ import annotations

from torch_mlir import ir

# Ops that may be copied out of a body into another kernel: pure, elementwise, no memory access.
PURE_DIALECTS = ("arith", "math")


def backward_slice(block: ir.Block, values) -> tuple[list, set[int]] | None:
    """(the ops of `block` that compute `values`, in block order; the numbers of the block arguments
    they read), or None if one of those ops is not pure arith/math. Values defined outside the body
    are used as they are."""
    needed, args, work = set(), set(), list(values)
    owners = {}
    for op in block.operations:
        for r in op.results:
            owners[r] = op.operation
    while work:
        value = work.pop()
        if isinstance(value, ir.BlockArgument):
            if value.owner == block:
                args.add(value.arg_number)
            continue
        op = owners.get(value)
        if op is None:
            continue  # defined outside the body: usable as it is
        if op.name.split(".", 1)[0] not in PURE_DIALECTS:
            return None
        if op not in needed:
            needed.add(op)
            work.extend(op.operands)
    ordered = [op.operation for op in block.operations if op.operation in needed]
    return ordered, args


def clone_ops(ops, mapping: dict) -> None:
    """Clone `ops` at the current insertion point, their operands looked up in (and their results
    added to) `mapping`."""
    for inner in ops:
        clone = inner.clone()
        for i, operand in enumerate(clone.operands):
            if operand in mapping:
                clone.operands[i] = mapping[operand]
        for old, new in zip(inner.results, clone.results):
            mapping[old] = new


def iterator_attr(context, kind: str) -> ir.Attribute:
    """linalg's `parallel` / `reduction` iterator attribute, as linalg's own builder makes it."""
    from torch_mlir.dialects._linalg_enum_gen import IteratorType, _iteratortypeenum

    return _iteratortypeenum(getattr(IteratorType, kind), context)
