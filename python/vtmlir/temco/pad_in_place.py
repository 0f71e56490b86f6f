"""`temco-pad-in-place`: a padded tensor is built around its source instead of copied from it.

TeMCO measures the internal peak (§4, Table 3). After decomposition and fusion, the peak of
AlexNet sits at a `tensor.pad`: the first lconv's output and its padded copy for the next conv are
live together, since one-shot bufferization gives the pad a new buffer and copies the source into
it. DenseNet's stem is the same (the 7x7 conv's output and its -inf-padded copy for max-pool).

This pass rewrites each `tensor.pad` whose value does not depend on the position (a constant or a
value from outside the pad) and whose shapes are static into

    %e = tensor.empty() ; %f = linalg.fill ins(%value) outs(%e) ;
    %r = tensor.insert_slice %source into %f[low...][source sizes][1...]

Then `eliminate-empty-tensors` (in backend/bufferize.py) lets the producer of `%source` compute
straight into the interior of the padded buffer, so source and copy are never both live. The result
is bitwise the same: the same values at the same positions.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import linalg, tensor

from ..ir_utils import walk_ops
from ..passes.registry import Pass, register_pass, report_option
from ..errors import format_location


def pad_value(pad):
    """The value `pad` yields if it is the same everywhere (defined outside the pad), else None."""
    body = pad.regions[0].blocks[0]
    value = list(body.operations)[-1].operands[0]
    if any(value == arg for arg in body.arguments):
        return None
    owner = value.owner
    if not isinstance(owner, ir.Block) and owner.operation.parent == pad:
        return None
    return value


def pad_in_place(module) -> list[str]:
    """Rewrite every eligible `tensor.pad` under `module`; returns one report line per rewrite."""
    lines = []
    for pad in walk_ops(module, "tensor.pad"):
        source, result = pad.operands[0], pad.results[0]
        src_type = ir.RankedTensorType(source.type)
        res_type = ir.RankedTensorType(result.type)
        value = pad_value(pad)
        # More operands than the source: dynamic low/high amounts, whose offsets are not static.
        if value is None or len(pad.operands) > 1 or not (src_type.has_static_shape and res_type.has_static_shape):
            continue
        low = list(ir.DenseI64ArrayAttr(pad.attributes["static_low"]))
        with ir.InsertionPoint(pad), pad.location:
            empty = tensor.EmptyOp(list(res_type.shape), res_type.element_type)
            filled = linalg.fill(value, outs=[empty.result])
            inserted = tensor.InsertSliceOp(source, filled, [], [], [], low, list(src_type.shape),
                                            [1] * src_type.rank)
        result.replace_all_uses_with(inserted.result)
        lines.append(f"temco-pad-in-place: {format_location(pad.location)}: {src_type} into {res_type}\n")
        pad.erase()
    return lines


@register_pass
class TemcoPadInPlace(Pass):
    name = "temco-pad-in-place"
    summary = "Build padded tensors around their source (fill + insert_slice) so the producer writes in place"
    description = (
        "Rewrites tensor.pad with a position-independent value and static shapes into tensor.empty + "
        "linalg.fill + tensor.insert_slice; eliminate-empty-tensors then puts the source's producer in "
        "the padded buffer's interior, so the source and its padded copy are never live together."
    )
    options = (report_option("one line per rewritten pad"),)

    def run(self, module) -> None:
        self.write_report(module, "".join(pad_in_place(module)))
