"""The `layout` dialect: memory layouts (VTensor) — and, later, register layouts (Tilus §4).

Defined in Python with `torch_mlir.dialects.ext`. Layout values are attributes (see
`memory_layout.Layout` for the encoding); tensor types stay physical shapes, so a tensor in NHWC has
type `tensor<NxHxWxCxf32>` and its layout says how that maps back to the logical NCHW order.

Ops:
- `layout.convert` — the materialised conversion of a tensor held in `src_layout` into `dst_layout`:
  result[dst.apply(l)] = source[src.apply(l)] for every logical index l. Pure.

- `layout.reinterpret` — Tilus `View` (§3, Fig. 2(c), Table 1): a register tile (`src_layout`, a
  register layout) viewed at no cost as another element type and register layout (`dst_layout`):
  every thread keeps its bits (register 0 first, compactly, §6.1 order). Valid iff both layouts use
  the same threads and bits per thread agree (`register_layout.reinterpret_error`). Pure.

Attributes other passes put on any op (names exported as constants):
- `layout.produced` (`PRODUCED_LAYOUTS_ATTR`): array, one layout per result — the physical layout the
  op's results are produced in (VTensor `produced_layout`);
- `layout.required` (`REQUIRED_LAYOUTS_ATTR`): array, one entry per operand — the layout the op's
  kernel requires, or the string "any" (`ANY_LAYOUT`, VTensor `LAYOUT::ANY`).

Register layouts (issue 6) live in `register_layout.py`; their decoder sits in front of the memory
one in `memory_layout.LAYOUT_DECODERS`, so `layout_from_attr` returns either kind.
`layout.convert` stays the memory-level conversion.

No `from __future__ import annotations` here: `ext` reads the annotations as real objects.
"""

from collections.abc import Sequence

from torch_mlir import ir
from torch_mlir.dialects import ext
from torch_mlir.dialects.ext import Operand, Result

from ..errors import LocatedError
from ._ext_support import fail, guarded_verifier, missing_attribute, ranked_shape
from .memory_layout import Layout, LayoutFormatError, layout_from_attr
from .register_layout import RegisterLayout, reinterpret_error
from .vt import element_bits

PRODUCED_LAYOUTS_ATTR = "layout.produced"
REQUIRED_LAYOUTS_ATTR = "layout.required"
ANY_LAYOUT = "any"


class LayoutDialect(ext.Dialect, name="layout"):
    pass


def _decode(op, attr, which: str) -> Layout | None:
    try:
        layout = layout_from_attr(attr)
    except LayoutFormatError as e:
        fail(op, f"invalid {which}: {e}")
        return None
    if not isinstance(layout, Layout):
        fail(op, f"{which} must be a memory layout, got {attr}")
        return None
    return layout


class ConvertOp(LayoutDialect.Operation, name="convert", traits=[ext.Pure]):
    """result (in dst_layout) holds the same logical tensor as source (in src_layout)."""

    source: Operand[ir.RankedTensorType]
    src_layout: ir.DictAttr
    dst_layout: ir.DictAttr
    result: Result[ir.RankedTensorType]

    @property
    def src(self) -> Layout:
        return Layout.from_attr(self.src_layout)

    @property
    def dst(self) -> Layout:
        return Layout.from_attr(self.dst_layout)

    @guarded_verifier
    def verify_invariants(op) -> bool:
        if missing_attribute(op, "src_layout", "dst_layout"):
            return False
        src = _decode(op, op.src_layout, "src_layout")
        if src is None:
            return False
        dst = _decode(op, op.dst_layout, "dst_layout")
        if dst is None:
            return False
        if src.rank != dst.rank:
            return fail(op, f"src_layout has logical rank {src.rank} but dst_layout has {dst.rank}")
        src_shape = ranked_shape(op.source)
        result_shape = ranked_shape(op.result)
        if src_shape is None or result_shape is None:
            return fail(op, "source and result must be ranked tensors")
        src_elt = ir.RankedTensorType(op.source.type).element_type
        res_elt = ir.RankedTensorType(op.result.type).element_type
        if src_elt != res_elt:
            return fail(op, f"result element type {res_elt} differs from source element type {src_elt}")
        if len(src_shape) != src.physical_rank:
            return fail(op, f"source has rank {len(src_shape)} but src_layout has physical rank "
                            f"{src.physical_rank}")
        try:
            logical = src.logical_shape(src_shape)
        except ValueError as e:
            return fail(op, f"source does not fit src_layout: {e}")
        error = dst.check_shape(logical)
        if error:
            return fail(op, f"dst_layout cannot hold the logical shape {_fmt(logical)}: {error}")
        expected = dst.physical_shape(logical)
        if len(result_shape) != len(expected) or any(
                a >= 0 and b >= 0 and a != b for a, b in zip(result_shape, expected)):
            return fail(op, f"result shape {_fmt(result_shape)} does not match {_fmt(expected)} "
                            f"(logical shape {_fmt(logical)} in dst_layout)")
        return True


def _decode_register(op, attr, which: str) -> RegisterLayout | None:
    try:
        layout = layout_from_attr(attr)
    except LayoutFormatError as e:
        fail(op, f"invalid {which}: {e}")
        return None
    if not isinstance(layout, RegisterLayout):
        fail(op, f"{which} must be a register layout, got {attr}")
        return None
    return layout


class ReinterpretOp(LayoutDialect.Operation, name="reinterpret", traits=[ext.Pure]):
    """result (dst element type, dst_layout) holds source's per-thread bits (Tilus View)."""

    source: Operand[ir.RankedTensorType]
    src_layout: ir.DictAttr
    dst_layout: ir.DictAttr
    result: Result[ir.RankedTensorType]

    @property
    def src(self) -> RegisterLayout:
        return RegisterLayout.from_attr(self.src_layout)

    @property
    def dst(self) -> RegisterLayout:
        return RegisterLayout.from_attr(self.dst_layout)

    @guarded_verifier
    def verify_invariants(op) -> bool:
        if missing_attribute(op, "src_layout", "dst_layout"):
            return False
        src = _decode_register(op, op.src_layout, "src_layout")
        if src is None:
            return False
        dst = _decode_register(op, op.dst_layout, "dst_layout")
        if dst is None:
            return False
        src_shape, result_shape = ranked_shape(op.source), ranked_shape(op.result)
        if src_shape is None or result_shape is None:
            return fail(op, "source and result must be ranked tensors")
        if tuple(src_shape) != src.shape:
            return fail(op, f"source shape {_fmt(src_shape)} differs from src_layout shape "
                            f"{_fmt(src.shape)}")
        if tuple(result_shape) != dst.shape:
            return fail(op, f"result shape {_fmt(result_shape)} differs from dst_layout shape "
                            f"{_fmt(dst.shape)}")
        bits = []
        for what, value in (("source", op.source), ("result", op.result)):
            elt = ir.RankedTensorType(value.type).element_type
            try:
                # Register bits of scalar ints, floats and `!vt.float` only: `index` has no fixed
                # width in registers and a complex value is a pair.
                n = None if isinstance(elt, (ir.IndexType, ir.ComplexType)) else element_bits(elt)
            except ValueError as e:
                return fail(op, f"{what} element type: {e}")
            if n is None:
                return fail(op, f"{what} element type {elt} has no bit width")
            bits.append(n)
        error = reinterpret_error(src, bits[0], dst, bits[1])
        if error:
            return fail(op, f"cannot reinterpret: {error}")
        return True


def _fmt(shape: Sequence[int]) -> str:
    return "[" + ", ".join(str(e) if e >= 0 else "?" for e in shape) + "]"


# -- builders and attribute helpers ------------------------------------------------------------


def convert(source: ir.Value, src: Layout, dst: Layout, *, loc=None, ip=None) -> ir.Value:
    """Build `layout.convert`, inferring the result shape from the layouts."""
    t = ir.RankedTensorType(source.type)
    logical = src.logical_shape(list(t.shape))
    result_type = ir.RankedTensorType.get(dst.physical_shape(logical), t.element_type)
    return ConvertOp(source, src.to_attr(), dst.to_attr(), result_type, loc=loc, ip=ip).result


def reinterpret(source: ir.Value, src: RegisterLayout, dst: RegisterLayout, element_type: ir.Type,
                *, loc=None, ip=None) -> ir.Value:
    """Build `layout.reinterpret` of `source` (in `src`) as `element_type` in `dst`."""
    result_type = ir.RankedTensorType.get(list(dst.shape), element_type)
    return ReinterpretOp(source, src.to_attr(), dst.to_attr(), result_type, loc=loc, ip=ip).result


def _layout_entry(layout: Layout | str | None) -> ir.Attribute:
    if layout is None or layout == ANY_LAYOUT:
        return ir.StringAttr.get(ANY_LAYOUT)
    return layout.to_attr()


def set_produced_layouts(op, layouts: Sequence[Layout]) -> None:
    """Record the layouts `op`'s results are produced in (one per result)."""
    op = getattr(op, "operation", op)
    op.attributes[PRODUCED_LAYOUTS_ATTR] = ir.ArrayAttr.get([l.to_attr() for l in layouts])


def set_required_layouts(op, layouts: Sequence[Layout | str | None]) -> None:
    """Record the layouts `op` requires of its operands (one per operand; None/"any" = ANY)."""
    op = getattr(op, "operation", op)
    op.attributes[REQUIRED_LAYOUTS_ATTR] = ir.ArrayAttr.get([_layout_entry(l) for l in layouts])


def _read(op, name: str) -> list | None:
    op = getattr(op, "operation", op)
    if name not in op.attributes:
        return None
    out = []
    try:
        for a in ir.ArrayAttr(op.attributes[name]):
            if isinstance(a, ir.StringAttr) and a.value == ANY_LAYOUT:
                out.append(ANY_LAYOUT)
            else:
                out.append(layout_from_attr(a))
    except (LayoutFormatError, ValueError, TypeError) as err:  # a discardable attribute: nothing verified it
        raise LocatedError(f"malformed '{name}' attribute of '{op.name}': {err}", op.location) from None
    return out


def produced_layouts(op) -> list | None:
    """Layouts recorded under `layout.produced`, or None."""
    return _read(op, PRODUCED_LAYOUTS_ATTR)


def required_layouts(op) -> list | None:
    """Layouts (or "any") recorded under `layout.required`, or None."""
    return _read(op, REQUIRED_LAYOUTS_ATTR)
