"""`memref-distinct-returned-buffers`: every result of a public function gets a buffer of its own.

A function may return one buffer several times: `return x, x` in the user's model, or two equal
results merged by `cse` (the same conversion of the same codes for two types). Upstream
`buffer-results-to-out-params{hoist-static-allocs}` replaces a returned `memref.alloc` by its
out-parameter once per result and erases the alloc, so a second result of the same alloc is left
pointing at an erased op (a segfault inside MLIR). Without hoisting, the out-parameters are copies
anyway; this pass makes that explicit: each repeated result becomes a fresh buffer copied from the
first (`memref.copy`, which `buffer-results-to-out-params` then turns into its out-parameter).
Runs right before `buffer-results-to-out-params` (backend/bufferize.py).
"""

from __future__ import annotations

from torch_mlir import ir

from .registry import Pass, register_pass


def distinct_returned_buffers(func) -> int:
    """Give each repeated memref result of `func`'s `return`s a copy of its own; return how many."""
    copies = 0
    for block in func.regions[0].blocks:
        ret = [op.operation for op in block.operations][-1]
        if ret.name != "func.return":
            continue
        seen = set()
        for i, value in enumerate(list(ret.operands)):
            if not isinstance(value.type, ir.MemRefType):
                continue
            if value not in seen:
                seen.add(value)
                continue
            with ret.location, ir.InsertionPoint(ret):
                t = ir.MemRefType(value.type)
                dynamic = [ir.Operation.create("memref.dim", results=[ir.IndexType.get()], operands=[
                               value, ir.Operation.create("arith.constant", results=[ir.IndexType.get()],
                                                          attributes={"value": ir.IntegerAttr.get(
                                                              ir.IndexType.get(), d)}).result]).result
                           for d, n in enumerate(t.shape) if n == ir.ShapedType.get_dynamic_size()]
                fresh = ir.Operation.create(
                    "memref.alloc", results=[ir.MemRefType.get(t.shape, t.element_type)], operands=dynamic,
                    attributes={"operandSegmentSizes": ir.DenseI32ArrayAttr.get([len(dynamic), 0])}).result
                ir.Operation.create("memref.copy", operands=[value, fresh])
            ret.operands[i] = fresh
            copies += 1
    return copies


@register_pass
class DistinctReturnedBuffers(Pass):
    name = "memref-distinct-returned-buffers"
    summary = "Copy a buffer returned more than once, so every result has a buffer of its own"
    description = __doc__

    def run(self, module) -> None:
        for op in module.regions[0].blocks[0].operations:
            op = op.operation
            if op.name == "func.func" and len(op.regions[0].blocks) and "sym_visibility" not in op.attributes:
                distinct_returned_buffers(op)
