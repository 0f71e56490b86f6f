"""`codegen-split-checks`: the importer's per-element `cf.assert`s become small kernels of their own.

torch-mlir guards some divisions with a `cf.assert` in a `linalg.generic` body (BatchNorm's
`sqrt(var + eps) != 0`); `linalg-fuse-elementwise-ops` copies such a check into every consumer, so
the normalisation kernel itself holds an assert and the vectoriser refuses it, and standalone check
kernels (no outputs) loop over the whole activation although the condition reads one value per channel.

For each generic with a `cf.assert` in its body, this pass builds a check kernel that loops only over
the dimensions the asserted conditions depend on (the union of the dimensions of the inputs they read:
BatchNorm's channels), holding a copy of the ops that compute the conditions and the asserts, placed
before the op; the asserts are removed from the op (a check-only op is removed whole). The same
conditions are checked on the same values, before the computation instead of interleaved with it: an
input that fails still aborts with the same message. A dimension of extent 1 is read at index 0 whatever
its expression (a BatchNorm's `[C, 1, 1]` variance over a 1x1 image, fused into the convolution
after it, is read as `(c, oh + kh, ow + kw)`). A check that reads an output, an index, another
window or anything but pure arith/math ops is left where it is.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import linalg

from ..passes.registry import Pass, register_pass
from .bodies import backward_slice, clone_ops, iterator_attr, unit_results
from .kernels import indexing_maps_of, rewrite_generics


def split_checks(op) -> bool:
    """Move the asserts of `op` (a linalg.generic) into a check kernel over the dimensions they read."""
    op = op.operation
    block = op.regions[0].blocks[0]
    asserts = [o.operation for o in block.operations if o.operation.name == "cf.assert"]
    if not asserts:
        return False
    found = backward_slice(block, [v for a in asserts for v in a.operands])
    maps = indexing_maps_of(op)
    n_inputs = len(op.opview.inputs)
    if found is None or maps is None or any(a >= n_inputs for a in found[1]):
        return False
    ops, args = found
    args = sorted(args)
    results = {a: unit_results(op.operands[a], maps[a]) for a in args}
    dims = sorted({e.position for a in args for e in results[a] if isinstance(e, ir.AffineDimExpr)})
    if any(not (isinstance(e, ir.AffineDimExpr) or isinstance(e, ir.AffineConstantExpr))
           for a in args for e in results[a]):
        return False
    renumber = {d: i for i, d in enumerate(dims)}
    new_maps = [ir.AffineMap.get(len(dims), 0, [ir.AffineDimExpr.get(renumber[e.position])
                                                if isinstance(e, ir.AffineDimExpr) else e
                                                for e in results[a]]) for a in args]
    with op.location, ir.InsertionPoint(op):
        check = linalg.GenericOp([], [op.operands[a] for a in args], [],
                                 ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in new_maps]),
                                 ir.ArrayAttr.get([iterator_attr(op.context, "parallel")] * len(dims)))
        body = check.regions[0].blocks.append(*[block.arguments[a].type for a in args])
        mapping = {block.arguments[a]: body.arguments[i] for i, a in enumerate(args)}
        with ir.InsertionPoint(body):
            clone_ops(ops + asserts, mapping)
            linalg.YieldOp([])
    for a in asserts:
        a.erase()
    if not op.opview.outputs:
        op.erase()  # only checks: all of them moved
    return True


def split_all_checks(module_op) -> int:
    """Split the checks of every kernel; returns how many kernels had some."""
    return rewrite_generics(module_op, split_checks)


@register_pass
class SplitChecks(Pass):
    name = "codegen-split-checks"
    summary = "Move per-element cf.assert checks out of linalg kernels into check kernels over the dimensions they read"

    def run(self, module):
        split_all_checks(module)
