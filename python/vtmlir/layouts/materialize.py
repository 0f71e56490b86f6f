"""`layout-materialize`: rewrite layout-annotated graph-level IR into its physical form.

After `layout-resolve` / `layout-select-ilp` every op carries `layout.required` / `layout.produced`
and every run-time conversion is a unit `vt.view? → layout.convert → vt.view?` over logical types
(docs/layouts.md). This pass makes the layouts real (VTensor §5: the PTensor a kernel runs on, and
the "transform" nodes of Fig. 7(c)):

- named linalg ops are generalised (`linalg-generalize-named-ops`, which keeps the layout
  attributes); each `linalg.generic` then reads and writes its operands in their physical layouts by
  composing every indexing map with the operand's layout map (`Layout.index_map() ∘ map`), and its
  results get the physical types. The iteration space and its order are the original ones, so every
  reduction (a convolution's c·kh·kw sum) accumulates in the same order: the results are *bitwise*
  those of the unmaterialised function;
- `tensor.pad` and `tensor.concat` (layout ANY) get permuted padding / concatenation dims;
- `layout.convert` becomes `linalg.transpose` (into a `tensor.empty` of the destination's physical
  shape); the unit's zero-copy `vt.view`s disappear (their operand is already the physical array);
- constant operands a kernel requires in another layout (weights, BN parameters, inits) are laid
  out from constants only: a `tensor.empty` or an element-wise fill of constants is re-created in the
  physical shape, anything else gets a `linalg.transpose` of the constant (no run-time input; a
  constant folder can evaluate it once);
- `layout.*` attributes are removed. The function's signature never changes (arguments and results
  are row-major), and the result holds no `vt`/`layout` op, so `vtmlir.compile` takes it.

Only permutation layouts are materialised. A blocked layout (NCHW16c) would need the blocked dim
split (`tensor.expand_shape`) before a transpose and floordiv/mod index maps in the kernels, which
linalg's shape inference does not accept; the pass fails on one naming the op (use a target whose
kernels use permutation layouts, e.g. `cpu-nhwc` or `cuda`).
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import linalg, tensor

from ..dialects import layout as layout_dialect
from ..dialects.affine_eval import compose_maps
from ..dialects.memory_layout import Layout
from ..passes.registry import Pass, PassFailure, register_pass
from .conventions import layout_label
from .resolve import constant_values, functions, top_level_ops

_LAYOUT_ATTRS = (layout_dialect.PRODUCED_LAYOUTS_ATTR, layout_dialect.REQUIRED_LAYOUTS_ATTR)


def _fail(op, message: str):
    raise PassFailure(f"layout-materialize: {message}", op.location)


def _check_permutation(op, layout, what: str) -> None:
    if isinstance(layout, Layout) and layout.blocks:
        _fail(op, f"cannot materialise the blocked layout {layout_label(layout)} of {what} of "
                  f"'{op.name}' (only permutation layouts are materialised)")


def _physical_type(logical: ir.RankedTensorType, layout: Layout) -> ir.RankedTensorType:
    return ir.RankedTensorType.get(layout.physical_shape(list(logical.shape)), logical.element_type)


def _transpose_to(value: ir.Value, src: Layout, dst: Layout, loc) -> ir.Value:
    """`value` (physical in `src`) as a physical array in `dst`, by `linalg.transpose`."""
    t = ir.RankedTensorType(value.type)
    logical = src.logical_shape(list(t.shape))
    out = dst.physical_shape(logical)
    # result dim i holds logical dim dst.perm[i], which sits at src.perm.index(...) in the source.
    permutation = [list(src.perm).index(d) for d in dst.perm]
    init = tensor.EmptyOp(out, t.element_type, loc=loc).result
    return linalg.transpose(value, outs=[init], permutation=permutation).results[0]


class _Materializer:
    def __init__(self, func):
        self.func = func
        self.constants = constant_values(func)
        self.relaid: dict = {}      # (value, layout) -> value laid out in layout
        self.converted: set = set()  # results of the transposes that replaced layout.converts

    # -- constants ---------------------------------------------------------------------------------

    def relay_constant(self, value: ir.Value, layout: Layout, before) -> ir.Value:
        key = (value, layout)
        if key in self.relaid:
            return self.relaid[key]
        owner = value.owner
        loc = before.location
        with ir.InsertionPoint(before):
            if not isinstance(owner, ir.Block) and owner.name == "tensor.empty" and not list(owner.operands):
                t = _physical_type(ir.RankedTensorType(value.type), layout)
                new = tensor.EmptyOp(list(t.shape), t.element_type, loc=loc).result
            elif not isinstance(owner, ir.Block) and self._is_constant_fill(owner):
                clone = owner.clone(ir.InsertionPoint(before))
                n_in = list(ir.DenseI32ArrayAttr(owner.attributes["operandSegmentSizes"]))[0]
                clone.operands[n_in] = self.relay_constant(owner.operands[n_in], layout, clone)
                maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(owner.attributes["indexing_maps"])]
                maps[n_in] = compose_maps(layout.index_map(), maps[n_in])
                clone.attributes["indexing_maps"] = ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps])
                for name in ("linalg.memoized_indexing_maps", *_LAYOUT_ATTRS):
                    if name in clone.attributes:
                        del clone.attributes[name]
                clone.results[0].set_type(clone.operands[n_in].type)
                new = clone.results[0]
            else:
                new = _transpose_to(value, Layout.identity(layout.rank), layout, loc)
        self.relaid[key] = new
        return new

    @staticmethod
    def _is_constant_fill(op) -> bool:
        """An element-wise generic that only broadcasts scalars into one init (a generalised fill)."""
        if op.name != "linalg.generic" or len(op.results) != 1:
            return False
        if "reduction" in str(op.attributes["iterator_types"]):
            return False
        n_in = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))[0]
        if len(op.operands) != n_in + 1:
            return False
        maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
        return all(len(maps[i].results) == 0 for i in range(n_in)) and maps[n_in] == ir.AffineMap.get_identity(
            maps[n_in].n_dims)

    # -- the rewrite -------------------------------------------------------------------------------

    def run(self) -> None:
        erase = []
        for op in top_level_ops(self.func):
            with op.location:
                if op.name == "vt.view":
                    self.drop_view(op)
                    erase.append(op)
                elif op.name == "layout.convert":
                    self.convert(op)
                    erase.append(op)
                elif layout_dialect.REQUIRED_LAYOUTS_ATTR in op.attributes:
                    self.rewrite(op)
        for op in reversed(erase):
            op.erase()
        # Constants re-laid above may have lost their last user: drop them (pure, compile-time).
        for op in reversed(top_level_ops(self.func)):
            if (op.results and all(r in self.constants and not list(r.uses) for r in op.results)
                    and op.name != "func.call"):
                op.erase()
        for op in top_level_ops(self.func):
            for name in _LAYOUT_ATTRS:
                if name in op.attributes:
                    del op.attributes[name]

    def drop_view(self, op) -> None:
        """A unit's view is zero-copy: its operand already is the array it names."""
        if len(op.operands) != 1:
            _fail(op, "a vt.view that is not part of a layout conversion unit is not materialised")
        users = [u.owner for u in op.results[0].uses]
        from_convert = op.operands[0] in self.converted
        if not from_convert and not all(u.name == "layout.convert" for u in users):
            _fail(op, "a vt.view that is not part of a layout conversion unit is not materialised")
        op.results[0].replace_all_uses_with(op.operands[0])

    def convert(self, op) -> None:
        src = Layout.from_attr(op.attributes["src_layout"])
        dst = Layout.from_attr(op.attributes["dst_layout"])
        _check_permutation(op, src, "the source")
        _check_permutation(op, dst, "the result")
        with ir.InsertionPoint(op):
            new = _transpose_to(op.operands[0], src, dst, op.location)
        op.results[0].replace_all_uses_with(new)
        self.converted.add(new)

    def rewrite(self, op) -> None:
        required = layout_dialect.required_layouts(op) or []
        produced = layout_dialect.produced_layouts(op) or []
        for i, want in enumerate(required):
            _check_permutation(op, want, f"operand {i}")
        for k, have in enumerate(produced):
            _check_permutation(op, have, f"result {k}")
        # Operands: constants are laid out here; run-time values already are (conversion units).
        for i, want in enumerate(required):
            if not isinstance(want, Layout) or want.is_identity:
                continue
            v = op.operands[i]
            if v in self.constants:
                op.operands[i] = self.relay_constant(v, want, op)
        permuted = any(isinstance(l, Layout) and not l.is_identity for l in required + produced)
        if not permuted:
            return
        if op.name == "linalg.generic":
            self.rewrite_generic(op, required)
        elif op.name == "tensor.pad":
            self.rewrite_pad(op, required[0])
        elif op.name == "tensor.concat":
            self.rewrite_concat(op, required)
        else:
            _fail(op, f"cannot materialise '{op.name}' in a non-row-major layout")
        for k, have in enumerate(produced):
            if k < len(op.results) and isinstance(have, Layout):
                r = op.results[k]
                r.set_type(_physical_type(ir.RankedTensorType(r.type), have))

    def rewrite_generic(self, op, required) -> None:
        maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
        for i, want in enumerate(required):
            if isinstance(want, Layout) and not want.is_identity:
                maps[i] = compose_maps(want.index_map(), maps[i])
        op.attributes["indexing_maps"] = ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps])
        if "linalg.memoized_indexing_maps" in op.attributes:
            del op.attributes["linalg.memoized_indexing_maps"]

    def rewrite_pad(self, op, layout) -> None:
        body = op.regions[0].blocks[0]
        if any(list(a.uses) for a in body.arguments):
            _fail(op, "cannot materialise a tensor.pad whose padding value depends on the index")
        for name in ("static_low", "static_high"):
            pads = list(ir.DenseI64ArrayAttr(op.attributes[name]))
            op.attributes[name] = ir.DenseI64ArrayAttr.get([pads[p] for p in layout.perm])
        if len(op.operands) != 1:
            _fail(op, "cannot materialise a tensor.pad with dynamic padding")

    def rewrite_concat(self, op, required) -> None:
        layout = next(l for l in required if isinstance(l, Layout))
        dim = ir.IntegerAttr(op.attributes["dim"]).value
        op.attributes["dim"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), list(layout.perm).index(dim))


def materialize_function(func) -> None:
    _Materializer(func).run()


@register_pass
class LayoutMaterialize(Pass):
    name = "layout-materialize"
    summary = "Rewrite layout-annotated ops to physical layouts and layout.convert to linalg.transpose"
    description = (
        "Generalises named linalg ops and composes each operand's indexing map with its permutation "
        "layout (iteration order unchanged: bitwise-identical results), permutes tensor.pad/concat, "
        "lays out constant operands from constants, turns layout.convert into linalg.transpose and "
        "drops the conversion units' vt.views and the layout attributes. Blocked layouts are refused."
    )

    def run(self, module) -> None:
        from ..passes import run_pipeline

        with module.context:
            run_pipeline(module, "builtin.module(func.func(linalg-generalize-named-ops))")
            for func in functions(module):
                materialize_function(func)
