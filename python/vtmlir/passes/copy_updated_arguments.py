"""`copy-updated-arguments`: before `one-shot-bufferize`, arguments read-only unless donated, and a
read-only argument whose update is returned copied once at the entry (`argument_updates` says why).

`copy-updated-arguments` (before it) marks every tensor argument of a public function read-only
(`bufferization.writable = false`) except the donated ones (`= true`). A read-only argument whose
update is returned needs a copy; one-shot would make it at the update -- inside the decode layer's
attention block (VTC Fig. 2's frame 2), and too late for the update's producer to write into it
(`eliminate-empty-tensors` points the producer at the read-only argument: a temporary and a second
copy). So the pass copies such an argument once at the function's entry
(`bufferization.alloc_tensor() copy(%arg)`) and lets every use read the copy: producers write
straight into it, and as it is returned, `buffer-results-to-out-params{hoist-static-allocs}` makes it
the caller's out-parameter -- one copy kernel per updated argument, before any compute.
"""

from __future__ import annotations

from torch_mlir import ir

from ..ir_utils import destination_indices
from .argument_updates import DONATED, WRITABLE, arg_attrs
from .registry import Pass, register_pass


def mark_writability(func) -> set[int]:
    """`bufferization.writable` on every tensor argument of `func`: true where `vtmlir.donated`,
    false elsewhere. Returns the read-only argument indices."""
    attrs = arg_attrs(func)
    args = func.regions[0].blocks[0].arguments
    read_only = set()
    with func.context:
        for i, d in enumerate(attrs):
            if isinstance(args[i].type, ir.RankedTensorType):
                d[WRITABLE] = ir.BoolAttr.get(DONATED in d)
                if DONATED not in d:
                    read_only.add(i)
        func.attributes["arg_attrs"] = ir.ArrayAttr.get([ir.DictAttr.get(d) for d in attrs])
    return read_only


def _owner(use):
    return use.owner.operation if hasattr(use.owner, "operation") else use.owner


def _returned_update(arg) -> bool:
    """Some op writes into `arg` (as its destination, or into a slice of it taken as a destination:
    `vt-lower-views`'s store form) and the updated value reaches the function's `return` through
    destination-passing ops."""
    written = []
    for use in arg.uses:
        op = _owner(use)
        if use.operand_number in destination_indices(op):
            written.append(op.results[list(destination_indices(op)).index(use.operand_number)])
        elif op.name == "tensor.extract_slice" and any(
                u.operand_number in destination_indices(_owner(u)) for u in op.results[0].uses):
            written.append(None)
    if not written:
        return False
    pending, seen = [arg], set()
    while pending:
        value = pending.pop()
        if value in seen:
            continue
        seen.add(value)
        for use in value.uses:
            op = _owner(use)
            if op.name == "func.return":
                return True
            indices = list(destination_indices(op))
            if use.operand_number in indices:
                pending.append(op.results[indices.index(use.operand_number)])
    return False


def copy_updated_arguments(func) -> list[int]:
    """Mark `func`'s arguments (`mark_writability`), then copy each read-only argument whose update is
    returned once at the entry, every use reading the copy; return the argument indices copied."""
    block = func.regions[0].blocks[0]
    first = next(iter(block.operations)).operation
    copied = []
    for i in sorted(mark_writability(func)):
        arg = block.arguments[i]
        if not isinstance(arg.type, ir.RankedTensorType) or not _returned_update(arg):
            continue
        uses = [(_owner(u), u.operand_number) for u in arg.uses]
        with func.context, first.location, ir.InsertionPoint(first):
            copy = ir.Operation.create("bufferization.alloc_tensor", results=[arg.type], operands=[arg],
                                       attributes={"operandSegmentSizes": ir.DenseI32ArrayAttr.get([0, 1, 0])})
        for op, number in uses:
            op.operands[number] = copy.results[0]
        copied.append(i)
    return copied


@register_pass
class CopyUpdatedArguments(Pass):
    name = "copy-updated-arguments"
    summary = "Copy a read-only argument whose update is returned once, at the entry, for producers to write into"
    description = __doc__

    def run(self, module) -> None:
        for op in module.regions[0].blocks[0].operations:
            op = op.operation
            if op.name == "func.func" and len(op.regions[0].blocks) and "sym_visibility" not in op.attributes:
                copy_updated_arguments(op)
