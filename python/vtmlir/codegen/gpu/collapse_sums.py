"""`codegen-gpu-collapse-sums`: a matrix-vector product summed over several loops becomes one sum.

A decode step's o-projection reads the attention heads unflattened: `out[n] += W[n, h, d] x[h, d]`,
a sum over two loops (heads x head dimension), which the `gemv` schedule (one sum over the innermost
loop: `codegen/gpu/matvec.py`) does not take -- it fell to `threads`, one output per thread, in one
block of 256 threads for a 256-wide layer (and in f16 to a tensor-core kernel on 16 padded rows).
Where every operand reads those loops as consecutive dimensions, contiguous together
(`matvec.sum_loops`), `collapse_shape` views make them one dimension and the generic one loop over
their row-major product: the same terms, summed in the same order (bitwise the naive mapping); the
gemv schedule then takes it. Runs on the kernel level after the unit loops are folded, before
`codegen-gpu-split-reductions`.
"""

from __future__ import annotations

from ...passes.registry import Pass, register_pass
from ..decompose_convolutions import merge_loops
from ..kernels import Kernel, classify
from .attach_schedule import rewrite_top_level_generics
from .matvec import matvec_problem, sum_loops


def collapse_sum(kernel: Kernel) -> bool:
    """Rewrite a matvec whose sum runs over several loops (`sum_loops`) into one over a single loop:
    the operands that read them viewed through `memref.collapse_shape` (contiguous: no copy), the
    loops' row-major order kept -- the same terms summed in the same order, bitwise. False where
    there is nothing to collapse."""
    loops = sum_loops(kernel)
    if isinstance(loops, str) or len(loops) < 2 or loops != list(range(loops[0], kernel.rank)) \
            or matvec_problem(kernel):
        return False
    merge_loops(kernel.op, kernel.maps, [loops])
    return True


def collapse_sums(module_op) -> int:
    """`collapse_sum` on every kernel of the module's functions; returns how many it rewrote."""
    return rewrite_top_level_generics(module_op, lambda op: collapse_sum(classify(op)))


@register_pass
class CollapseSums(Pass):
    name = "codegen-gpu-collapse-sums"
    summary = "A matrix-vector product summed over several contiguous loops -> one sum loop (collapse_shape views)"
    description = ("Kernel level (memrefs, unit loops folded). An o-projection reading the heads unflattened "
                   "(out[n] += W[n, h, d] x[h, d]) becomes out[n] += W'[n, r] x'[r] over collapse_shape views: "
                   "a matvec the gemv schedule takes; the same sum in the same order.")

    def run(self, module):
        collapse_sums(module)
