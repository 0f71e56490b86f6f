"""`codegen-trim-window-inputs`: a window kernel reads its input through a view of exactly the rows
and columns its windows reach.

A strided window may leave the last rows of its (padded) input unread: MobileNetV2's last 3x3
stride-2 depthwise convolution over a 2x2 image, padded to 4x4, reads rows 0..2 for its one output
row. Upstream's `linalg-fold-unit-extent-dims` (the GPU schedule stage) then drops the unit output
loop and rewrites `2 * oh + kh` into `kh`, a plain dimension whose extent (3, the filter's) no
longer matches the input's (4): the op fails to verify, and the model did not compile for CUDA at
any opt level. Here every input dimension read by a window expression (a sum of at least two loops
with positive coefficients, `s * oh + d * kh + c`) whose largest index is below its extent is
sliced to that index (`memref.subview` at 0: the same elements at the same addresses), so the
shapes stay consistent whatever folds the loops later.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import memref

from ..ir_utils import walk_ops
from ..passes.registry import Pass, register_pass
from .decompose_convolutions import linear_terms
from .delinearize_loops import subview_type
from .kernels import indexing_maps_of, loop_ranges_of


def _reached(expr, ranges: list[int]) -> int | None:
    """The largest index a window expression of the loops reaches, or None for any other expression."""
    found = linear_terms(expr)
    if found is None:
        return None
    terms, const = found
    if len(terms) < 2 or const < 0 or any(c <= 0 for c in terms.values()):
        return None
    return const + sum(c * (ranges[d] - 1) for d, c in terms.items())


def trim_window_inputs(module_op) -> int:
    """Slice the over-long window inputs of every generic under `module_op`; returns how many."""
    count = 0
    for op in walk_ops(module_op, "linalg.generic"):
        maps = indexing_maps_of(op)
        if maps is None or not all(isinstance(v.type, ir.MemRefType) and ir.MemRefType(v.type).has_static_shape
                                   for v in op.operands):
            continue
        ranges = loop_ranges_of(op, maps)
        if ranges is None:
            continue
        for index, (value, amap) in enumerate(zip(list(op.opview.inputs), maps)):
            shape = list(ir.MemRefType(value.type).shape)
            sizes = list(shape)
            for j, expr in enumerate(amap.results):
                reached = _reached(expr, ranges)
                if reached is not None and reached + 1 < shape[j]:
                    sizes[j] = reached + 1
            if sizes == shape:
                continue
            zeros = [0] * len(shape)
            with op.location, ir.InsertionPoint(op):
                op.operands[index] = memref.subview(
                    value, zeros, sizes, [1] * len(shape),
                    result_type=subview_type(ir.MemRefType(value.type), zeros, sizes, []))
            count += 1
    return count


@register_pass
class TrimWindowInputs(Pass):
    name = "codegen-trim-window-inputs"
    summary = "Slice each window kernel's input to the rows and columns its windows reach"

    def run(self, module):
        trim_window_inputs(module)
