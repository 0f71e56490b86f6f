"""`codegen-order-window-taps`: a sliding-window kernel's filter taps become its outer reductions.

A convolution sums each output over its input channels and its filter taps. The decompositions of
`codegen-decompose-convolutions` (im2col panels, per-tap contractions) sum the taps outer and the
channels inner: `K = (kh, kw, c)`. Every other route sums in the kernel's loop
order -- kept loops, a contraction schedule (its reduction dimensions one by one, outermost first),
the per-tap split's inner generic -- and linalg's convolutions put the channels first
(`(n, f, oh, ow, c, kh, kw)`). Which route a convolution takes depends on how its operands are read:
a VTC view folded into it (`vt-lower-views`: the channels of a concat buffer read as `c mod 3`, a
slice at an offset) hides it from linalg's convolution matcher, and it kept its loops, summing the
channels outer; a delinearised view can make a stride = kernel convolution a contraction. The
same convolution then differed by the rounding of a reordered f32 sum from the pipeline that
copied the view (fuzz seed 2611 case 5490: 1-2 ulp from opt level 0 under `EXACT_SCHEDULES`,
although data-movement optimisations must be bitwise identical).

So before any of those passes choose a route, this pass puts each window kernel's taps first among
its reduction loops, in their order, and its other reductions after them, in theirs; parallel loops
keep their places. Every route then sums taps outer, channels inner, whatever views the kernel reads.
(The CPU's kernel preparation; the GPU's im2col sums `K = (c, kh, kw)`, and its pipeline has no
bitwise comparison between data-movement variants.)

A tap is a reduction loop that an input's index adds to a loop of the output (`2 * oh + kh`, also
under a view's `mod`/`floordiv`) and that another input reads as a plain dimension (the filter, a
pooling's window shape). A linear index that mixes only reductions (`h * 16 + d`, heads merged by a
view) has none. linalg's convolutions change only their loop order (the decompositions take
dimensions by role); a kernel whose reductions are all taps (pooling) or none is left as it is.

Limit: a window as wide as its stride, without padding, is also a reshape and a contraction. A
contraction that reads a folded reshape so (`out[b, f] = sum x[a * B + b, c] * w[f, c, a]`) is
ordered as a convolution, taps first, where the pipeline that copies the reshape sums in the loops'
order: where those put `c` before `a`, the two differ by a reordered sum.
"""

from __future__ import annotations

from torch_mlir import ir

from ..dialects.affine_eval import used_dims
from ..ir_utils import iterator_kinds
from ..passes.registry import Pass, register_pass
from .kernels import indexing_maps_of, rewrite_generics


def window_taps(op, maps: list[ir.AffineMap], kinds: list[str]) -> list[int]:
    """The tap loops of a generic (see the module docstring), in loop order."""
    n_inputs = len(op.opview.inputs)
    out_dims = {d for m in maps[n_inputs:] for e in m.results for d in used_dims(e)}
    plain = [{e.position for e in m.results if isinstance(e, ir.AffineDimExpr)} for m in maps[:n_inputs]]
    taps = set()
    for i, amap in enumerate(maps[:n_inputs]):
        for expr in amap.results:
            dims = used_dims(expr)
            if not any(kinds[d] == "parallel" and d in out_dims for d in dims):
                continue
            taps |= {d for d in dims if kinds[d] == "reduction"
                     and any(d in plain[j] for j in range(n_inputs) if j != i)}
    return sorted(taps)


def order_taps(op) -> bool:
    """Put the taps of one generic on memrefs first among its reductions; False if already so."""
    op = op.operation
    maps = indexing_maps_of(op)
    if maps is None or not all(isinstance(v.type, ir.MemRefType) for v in op.operands):
        return False  # the kernel level only (as the passes that choose the routes)
    kinds = iterator_kinds(op)
    taps = window_taps(op, maps, kinds)
    slots = [d for d, kind in enumerate(kinds) if kind == "reduction"]
    order = taps + [d for d in slots if d not in taps]
    if order == slots:
        return False
    new_of = list(range(len(kinds)))
    for slot, d in zip(slots, order):
        new_of[d] = slot
    with op.context:
        moved = ir.AffineMap.get(len(kinds), 0, [ir.AffineDimExpr.get(new_of[d]) for d in range(len(kinds))])
        op.attributes["indexing_maps"] = ir.ArrayAttr.get(
            [ir.AffineMapAttr.get(ir.AffineMap.get(m.n_dims, m.n_symbols, [e.compose(moved) for e in m.results]))
             for m in maps])
        i64 = ir.IntegerType.get_signless(64)
        for inner in op.regions[0].blocks[0].operations:
            if inner.operation.name == "linalg.index":  # the body's loop indices follow their loops
                dim = ir.IntegerAttr(inner.operation.attributes["dim"]).value
                inner.operation.attributes["dim"] = ir.IntegerAttr.get(i64, new_of[dim])
    if "linalg.memoized_indexing_maps" in op.attributes:  # (the old maps, cached by linalg)
        del op.attributes["linalg.memoized_indexing_maps"]
    return True


def order_window_taps(module_op) -> int:
    """Order the taps of every window kernel first; returns how many kernels changed."""
    return rewrite_generics(module_op, order_taps)


@register_pass
class OrderWindowTaps(Pass):
    name = "codegen-order-window-taps"
    summary = "Make the filter taps of every sliding-window kernel its outer reduction loops (taps outer, channels inner)"

    def run(self, module):
        order_window_taps(module)
