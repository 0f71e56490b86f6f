"""`layout.convert` as a free VTC view: which conversions `layout-materialize` leaves as `vt.view`s.

A conversion from layout L1 to L2 is a mapping function in VTC's sense (VTC Def. 3): the L2
physical index maps to the logical index (L2's inverse) and on to the L1 physical index (L1's map),
`Layout.conversion_map` — a permutation, or floordiv/mod terms for a blocked side (VTC Eq. 2). So
instead of copying, `layout-materialize` can give the consumers a single-piece `vt.view` of the L1
array and let `vt-lower-views`'s `fold_views` compose that map into each consumer's indexing map:
nothing is copied and the consumer reads the L1 array directly. The arithmetic is untouched (only
indices change), so results stay bitwise identical.

Whether the view is the better choice depends on how the consumers read it. The decision
(`decide`), with VTC's contiguity analysis (`vtc.contiguity.classify`, Defs. 4–5, Thm. 1):

- every consumer must be a `linalg.generic` reading the converted value as an *input* (what
  `fold_views` folds); any other reader (`tensor.pad`, `tensor.concat`, `func.return`, an init)
  would make VTC gather it again, so the conversion stays a copy;
- a **Type I** view (fully contiguous: the L2 order is the L1 order in memory, e.g. nChw16c and
  NHWC of a 16-channel tensor, or NCHW and NHWC of a 1×1 map) is always taken (Thm. 1);
- a **Type II** view follows a cost rule in bytes (VTC's analytic model, `vtc.greedy`): the copy
  reads and writes the tensor once (2·B) and its consumers then read contiguously; the view moves
  nothing but each consumer read is strided, charged `factor`·(element bytes) per read of the
  consumer's loop nest (`factor` 1 for an incontiguous run, 0.25 for a partially contiguous one,
  VTC's penalties, plus 1 per floordiv/mod term of the map: the index arithmetic of a blocked side,
  which also stops LLVM vectorising the consumer's inner loop). The view is taken when
  Σ_consumers reads·factor·elt ≤ 2·B: one element-wise consumer or one reduction reading each
  element once through a permutation pays less than the copy; a convolution, which reads each input
  element kh·kw·F times, or any consumer reading through a blocked map keeps the copy.
  docs/layouts.md has the measurements behind the rule and the `views=` option (`auto` this rule,
  `always`, `never`).

Views that `fold_views` still cannot fold (a loop left without a bare occurrence for linalg's
shape inference) become the copy after all (`finish_views`), so the pass's output never holds a
`vt` op.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch_mlir import ir
from torch_mlir.dialects import tensor

from ..dialects import vt as vt_dialect
from ..dialects.memory_layout import Layout
from ..dialects.vt_mapping import MappingFunction
from ..ir_utils import walk_ops
from ..vtc import CPU_CACHE_LINE, classify, fold_views, loop_extents
from .blocked import physical_conversion
from .conventions import layout_label

VIEW_MODES = ("auto", "never", "always")

#: Copy cost per byte of the converted tensor: read once, written once.
COPY_FACTOR = 2.0
#: Per-read penalty of a view read through an incontiguous / partially contiguous mapping (VTC's
#: analytic cost model: `AnalyticCostModel.none_penalty` / `partial_penalty`).
INCONTIGUOUS_PENALTY = 1.0
PARTIAL_PENALTY = 0.25
#: Extra per-read penalty per floordiv/mod term of the view's map (a blocked side): index arithmetic
#: in the consumer's inner loop, which also keeps LLVM from vectorising it (measured: MobileNetV2's
#: nChw16c <-> nChw8c views into element-wise kernels ran 8-11 % slower than the copies).
DIVMOD_PENALTY = 1.0


@dataclass
class ConversionChoice:
    """How one run-time `layout.convert` was materialised."""

    src: str
    dst: str
    bytes: int
    contiguity: str       # VTC Def. 5: "full", "partial" or "none"
    consumers: int
    reads: int            # Σ over consumers of the loop-nest iterations reading the value
    view: bool            # True: folded into the consumers or a reshape, nothing copied
    reason: str


def _element_bytes(t: ir.RankedTensorType) -> int:
    width = getattr(t.element_type, "width", None)
    return max(1, (width or 32) // 8)


def _elements(t: ir.RankedTensorType) -> int:
    n = 1
    for e in t.shape:
        n *= e
    return n


def conversion_view(value: ir.Value, src: Layout, dst: Layout, loc) -> ir.Value:
    """A `vt.view` of `value` (a physical array in `src`) as the physical array in `dst`."""
    logical = src.logical_shape(list(ir.RankedTensorType(value.type).shape))
    mapping = MappingFunction.single(src.conversion_map(dst))
    return vt_dialect.view([value], mapping, dst.physical_shape(logical), loc=loc)


def _divmod_terms(mapping: MappingFunction) -> int:
    return sum(str(e).count("floordiv") + str(e).count(" mod ") for p in mapping.pieces for e in p.map.results)


def copy_choice(copy: ir.Value, src: Layout, dst: Layout) -> ConversionChoice:
    """The record of a conversion materialised as a copy without considering a view (`views=never`)."""
    t = ir.RankedTensorType(copy.type)
    return ConversionChoice(layout_label(src), layout_label(dst), _elements(t) * _element_bytes(t), "-",
                            len(list(copy.uses)), 0, False, "views=never")


def _consumer_reads(use) -> int | None:
    """Loop-nest iterations of the `linalg.generic` reading `use` as an input, None for any other reader."""
    owner = use.owner
    owner = owner.operation if hasattr(owner, "operation") else owner
    if owner.name != "linalg.generic":
        return None
    n_inputs = len(owner.operands) - len(owner.results)
    if use.operand_number >= n_inputs:
        return None
    try:
        extents = loop_extents(owner)
    except ValueError:
        return None
    n = 1
    for e in extents:
        n *= e
    return n


def decide(view_value: ir.Value, src: Layout, dst: Layout, mode: str) -> ConversionChoice:
    """View or copy for the conversion whose view is `view_value` (see the module docstring)."""
    view_op = view_value.owner
    source_type = ir.RankedTensorType(view_op.operands[0].type)
    t = ir.RankedTensorType(view_value.type)
    elt = _element_bytes(t)
    nbytes = _elements(t) * elt
    mapping = MappingFunction.from_attr(view_op.attributes["mapping"])
    try:
        contiguity = classify(mapping, list(t.shape), [list(source_type.shape)], elt, CPU_CACHE_LINE).contiguity
    except ValueError:
        contiguity = "none"
    uses = list(view_value.uses)
    reads = [_consumer_reads(u) for u in uses]
    choice = ConversionChoice(layout_label(src), layout_label(dst), nbytes, contiguity, len(uses),
                              sum(r for r in reads if r is not None), False, "")
    if mode == "never":
        choice.reason = "views=never"
    elif contiguity == "full":
        choice.view, choice.reason = True, "fully contiguous (VTC Thm. 1: type I): a reshape"
    elif not uses or any(r is None for r in reads):
        choice.reason = "a consumer is not a linalg.generic input (VTC would gather it)"
    elif mode == "always":
        choice.view, choice.reason = True, "views=always"
    else:
        factor = PARTIAL_PENALTY if contiguity == "partial" else INCONTIGUOUS_PENALTY
        factor += DIVMOD_PENALTY * _divmod_terms(mapping)
        view_cost = factor * choice.reads * elt
        choice.view = view_cost <= COPY_FACTOR * nbytes
        divmods = _divmod_terms(mapping)
        what = f"strided reads{f' with {divmods} floordiv/mod' if divmods else ''}"
        choice.reason = (f"type II ({contiguity}): {what} {view_cost:.0f} B "
                         f"{'<=' if choice.view else '>'} copy {COPY_FACTOR * nbytes:.0f} B")
    return choice


def finish_views(func, pending: list[tuple[ir.Value, Layout, Layout]], mode: str) -> list[ConversionChoice]:
    """Decide every pending conversion view of `func`: copies for the rejected ones, `fold_views`
    for the rest, and a copy for any view `fold_views` could not fold. Returns one choice each."""
    choices = []
    kept: dict = {}
    for value, src, dst in pending:
        choice = decide(value, src, dst, mode)
        choices.append(choice)
        if choice.view and choice.contiguity == "full":
            _reshape_instead(value)   # the same bytes in the same order: no consumer reads strided
        elif choice.view:
            kept[value] = (src, dst, choice)
        else:
            _copy_instead(value, src, dst)
    if kept:
        fold_views(func)
    for op in _views_in(func):
        value = op.results[0]
        if value not in kept:
            continue
        src, dst, choice = kept[value]
        choice.view = False
        choice.reason = "vt-lower-views could not fold it into a consumer"
        _copy_instead(value, src, dst)
    return choices


def _views_in(func) -> list:
    return walk_ops(func, "vt.view")


def _reshape_instead(view_value: ir.Value) -> None:
    """A fully contiguous view (VTC Def. 5, Type I) holds the source's bytes in the source's order:
    it is a reshape (`tensor.collapse_shape` to 1-D + `tensor.expand_shape`), which bufferizes to a
    view of the same buffer whatever the consumers are."""
    view_op = view_value.owner
    source = view_op.operands[0]
    src_t, dst_t = ir.RankedTensorType(source.type), ir.RankedTensorType(view_value.type)
    n = _elements(src_t)
    assert n == _elements(dst_t), "a layout conversion keeps the element count"
    i64 = ir.IntegerType.get_signless(64)

    def one_group(rank):
        return ir.ArrayAttr.get([ir.ArrayAttr.get([ir.IntegerAttr.get(i64, k) for k in range(rank)])])

    with ir.InsertionPoint(view_op), view_op.location:
        flat = tensor.CollapseShapeOp(ir.RankedTensorType.get([n], src_t.element_type), source,
                                      one_group(src_t.rank)).result
        out = tensor.ExpandShapeOp(dst_t, flat, one_group(dst_t.rank), [], list(dst_t.shape)).result
    view_value.replace_all_uses_with(out)
    view_op.erase()


def _copy_instead(view_value: ir.Value, src: Layout, dst: Layout) -> None:
    view_op = view_value.owner
    with ir.InsertionPoint(view_op), view_op.location:
        copy = physical_conversion(view_op.operands[0], src, dst, view_op.location)
    view_value.replace_all_uses_with(copy)
    view_op.erase()
