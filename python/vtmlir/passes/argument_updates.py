"""Arguments a compiled function updates: read-only by default, donated on request.

Bufferization (`one-shot-bufferize` with function boundaries) treats every argument of a function as
writable unless it carries `bufferization.writable = false`, so a decode layer's KV-cache update
(`tensor.insert_slice %k into %k_cache`) overwrote the caller's cache tensor. A compiled function is
a value to the user -- `compiled(x, k_cache, v_cache)` must leave the caller's tensors as they were
-- unless the caller *donates* an argument (`vtmlir.compile(..., donate=(1, 2))`, as JAX's
`donate_argnums`; in IR the argument attribute `vtmlir.donated`). Two passes around
`one-shot-bufferize`:

`copy-updated-arguments` (before it) marks every tensor argument of a public function read-only
(`bufferization.writable = false`) except the donated ones (`= true`). A read-only argument whose
update is returned needs a copy; one-shot would make it at the update -- inside the decode layer's
attention block (VTC Fig. 2's frame 2), and too late for the update's producer to write into it
(`eliminate-empty-tensors` points the producer at the read-only argument: a temporary and a second
copy). So the pass copies such an argument once at the function's entry
(`bufferization.alloc_tensor() copy(%arg)`) and lets every use read the copy: producers write
straight into it, and as it is returned, `buffer-results-to-out-params{hoist-static-allocs}` makes it
the caller's out-parameter -- one copy kernel per updated argument, before any compute.

`drop-donated-results` (after it): a result that is a donated argument updated in place *is* that
argument after bufferization (the function returns the block argument). The pass removes it from the
results, so `buffer-results-to-out-params` makes no out-parameter and no copy for it -- the cache
exists once (VTC Table 2's decode setting updates it in place) -- and records where every original
result lives in `vtmlir.result_arguments` on the function: the donated argument's index, or -1 for
an out-parameter (in order). A donated result that bufferization could not compute in place (another
reader of the old value after the update) stays an out-parameter: correct, without the saving.

The executable hands back the donated input array as that result (`CpuExecutable`): the values equal
the non-donated run bitwise (the same kernels compute the same elements); the donated input's memory
holds the result afterwards, so the caller must not use its old value.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch_mlir import ir

from ..errors import VtmlirError
from ..ir_utils import destination_indices
from .registry import Pass, register_pass

WRITABLE = "bufferization.writable"
DONATED = "vtmlir.donated"   # kept after bufferization, which drops `bufferization.writable`
RESULT_ARGUMENTS = "vtmlir.result_arguments"


def _arg_attrs(func) -> list[dict]:
    n = len(func.regions[0].blocks[0].arguments)
    if "arg_attrs" not in func.attributes:
        return [{} for _ in range(n)]
    return [{a.name: a.attr for a in ir.DictAttr(d)} for d in ir.ArrayAttr(func.attributes["arg_attrs"])]


def donate_arguments(func, donate: Sequence[int]) -> None:
    """Mark the `donate`d arguments of `func` `vtmlir.donated`; a VtmlirError names an index that is
    no tensor argument."""
    attrs = _arg_attrs(func)
    args = func.regions[0].blocks[0].arguments
    name = ir.StringAttr(func.attributes["sym_name"]).value
    for i in donate:
        if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < len(args):
            raise VtmlirError(f"error: donate={tuple(donate)}: @{name} has {len(args)} arguments; "
                              f"{i!r} is not an argument index")
        if not isinstance(args[i].type, ir.RankedTensorType):
            raise VtmlirError(f"error: donate={tuple(donate)}: argument {i} of @{name} is a "
                              f"{args[i].type}, not a tensor")
    with func.context:
        for i in donate:
            attrs[i][DONATED] = ir.UnitAttr.get()
        func.attributes["arg_attrs"] = ir.ArrayAttr.get([ir.DictAttr.get(d) for d in attrs])


def mark_writability(func) -> set[int]:
    """`bufferization.writable` on every tensor argument of `func`: true where `vtmlir.donated`,
    false elsewhere. Returns the read-only argument indices."""
    attrs = _arg_attrs(func)
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
        if hash(value) in seen:
            continue
        seen.add(hash(value))
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


def result_arguments(func) -> list[int] | None:
    """`vtmlir.result_arguments` of a bufferized function (None when `drop-donated-results` left no
    record: nothing was donated)."""
    if RESULT_ARGUMENTS not in func.attributes:
        return None
    return list(ir.DenseI64ArrayAttr(func.attributes[RESULT_ARGUMENTS]))


def drop_donated_results(func) -> list[int] | None:
    """Drop the results of bufferized `func` that are one of its donated (`vtmlir.donated`) arguments;
    return and record `vtmlir.result_arguments`. None (and no record) when no argument is donated."""
    if not len(func.regions) or not len(func.regions[0].blocks):
        return None
    writable = {i for i, d in enumerate(_arg_attrs(func)) if DONATED in d}
    if not writable:
        return None
    block = func.regions[0].blocks[0]
    ret = [op.operation for op in block.operations][-1]
    if ret.name != "func.return" or len(func.regions[0].blocks) != 1:
        return None
    sources = []
    for v in ret.operands:
        arg = v if isinstance(v.owner, ir.Block) else None
        sources.append(arg.arg_number if arg is not None and arg.owner == block
                       and arg.arg_number in writable else -1)
    kept = [v for v, s in zip(ret.operands, sources) if s < 0]
    if len(kept) != len(sources):
        with ret.location, ir.InsertionPoint(ret):
            ir.Operation.create("func.return", operands=kept)
        ret.erase()
        ftype = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
        results = [t for t, s in zip(ftype.results, sources) if s < 0]
        func.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(list(ftype.inputs), results))
        if "res_attrs" in func.attributes:
            res = [a for a, s in zip(ir.ArrayAttr(func.attributes["res_attrs"]), sources) if s < 0]
            func.attributes["res_attrs"] = ir.ArrayAttr.get(res)
    func.attributes[RESULT_ARGUMENTS] = ir.DenseI64ArrayAttr.get(sources)
    return sources


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


@register_pass
class DropDonatedResults(Pass):
    name = "drop-donated-results"
    summary = "After bufferization, return a donated (writable) argument in place: no out-parameter, no copy"
    description = __doc__

    def run(self, module) -> None:
        for op in module.regions[0].blocks[0].operations:
            if op.operation.name == "func.func" and "sym_visibility" not in op.attributes:
                drop_donated_results(op.operation)
