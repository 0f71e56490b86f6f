"""`layout-materialize`: rewrite layout-annotated graph-level IR into its physical form.

After `layout-resolve` / `layout-select-ilp` every op carries `layout.required` / `layout.produced`
and every run-time conversion is a unit `vt.view? → layout.convert → vt.view?` over logical types
(docs/layouts.md). This pass makes the layouts real (VTensor §5: the PTensor a kernel runs on, and
the "transform" nodes of Fig. 7(c)):

- named linalg ops are generalised (`linalg-generalize-named-ops`, which keeps the layout
  attributes); each `linalg.generic` then reads and writes its operands in their physical layouts
  (`blocked.physical_generic`): maps composed with permutation layouts, loops split for blocked ones
  (c -> c/16, c%16 in place). Reductions keep their order, so results are *bitwise* those of the
  unmaterialised function; with `loop-order=output` (default) the parallel loops are then reordered
  to walk the output in memory order (`blocked.order_loops_for_output`, still bitwise);
- `tensor.pad` and `tensor.concat` (layout ANY) get physical padding / concatenation dims;
- `layout.convert` becomes `linalg.transpose` (permutations) or `tensor.expand_shape` +
  `linalg.transpose` / `linalg.transpose` + `tensor.collapse_shape` (blocked sides); the unit's
  zero-copy `vt.view`s disappear (their operand is already the physical array);
- constant operands a kernel requires in another layout are laid out at compile time: an
  `arith.constant` (dense or dense_resource) is replaced by a constant holding the physical array
  (no run-time transpose of weights), a `tensor.empty` or a single-output generic computed from
  constants (a fill) is re-created writing the physical layout; anything else gets a transpose of
  the constant;
- `layout.*` attributes are removed. The function's signature never changes (arguments and results
  are row-major), and the result holds no `vt`/`layout` op, so `vtmlir.compile` takes it.

What cannot be materialised (a blocked dim indexed by a sum of loops, nested blocks on one dim, a
pad of a blocked dim, an unknown op in a non-row-major layout) fails naming the op (docs/layouts.md).
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import tensor

from ..dialects import layout as layout_dialect
from ..dialects.memory_layout import Layout
from ..passes.registry import Option, Pass, PassFailure, register_pass
from .blocked import BlockedLayoutError, physical_conversion, physical_generic, physical_pads, physical_type
from .conventions import layout_label
from .resolve import constant_values, functions, top_level_ops

_LAYOUT_ATTRS = (layout_dialect.PRODUCED_LAYOUTS_ATTR, layout_dialect.REQUIRED_LAYOUTS_ATTR)


def _fail(op, message: str):
    raise PassFailure(f"layout-materialize: {message}", op.location)


def _blocked_names(layouts) -> str:
    names = sorted({layout_label(l) for l in layouts if isinstance(l, Layout) and l.blocks})
    return ", ".join(names) or "row-major/permutation"


class _Materializer:
    def __init__(self, func, *, output_order: bool = True):
        self.func = func
        self.output_order = output_order
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
                t = physical_type(ir.RankedTensorType(value.type), layout)
                new = tensor.EmptyOp(list(t.shape), t.element_type, loc=loc).result
            elif not isinstance(owner, ir.Block) and self._is_single_output_generic(owner):
                # Computed from constants (a fill, a BN parameter fold): the same kernel writes its
                # result in `layout` (its output map composed, or its loops split for a blocked one).
                clone = owner.clone(ir.InsertionPoint(before))
                n_in = list(ir.DenseI32ArrayAttr(owner.attributes["operandSegmentSizes"]))[0]
                clone.operands[n_in] = self.relay_constant(owner.operands[n_in], layout, clone)
                try:
                    physical_generic(clone, [None] * n_in + [layout], output_order=self.output_order)
                except BlockedLayoutError as e:
                    _fail(owner, f"cannot lay out the constant computed by '{owner.name}' in "
                                 f"{layout_label(layout)}: {e}")
                for name in _LAYOUT_ATTRS:
                    if name in clone.attributes:
                        del clone.attributes[name]
                clone.results[0].set_type(clone.operands[n_in].type)
                new = clone.results[0]
            elif (folded := self._fold_constant(owner, layout)) is not None:
                new = folded
            else:
                new = physical_conversion(value, Layout.identity(layout.rank), layout, loc)
        self.relaid[key] = new
        return new

    @staticmethod
    def _fold_constant(owner, layout: Layout) -> ir.Value | None:
        """An `arith.constant` (dense or dense_resource) laid out at compile time: a new constant
        holding the physical array, so no run-time transpose of weights remains (issue 4: "constant
        operands are converted at compile time"). None when `owner` is not such a constant."""
        if isinstance(owner, ir.Block) or owner.name != "arith.constant":
            return None
        from ..temco.weights import constant_array, make_constant

        array = constant_array(owner)
        if array is None:
            return None
        element_type = ir.RankedTensorType(owner.results[0].type).element_type
        return make_constant(layout.physical_array(array), element_type)

    @staticmethod
    def _is_single_output_generic(op) -> bool:
        """A `linalg.generic` with one init and one result (a generalised fill, an element-wise op)."""
        if op.name != "linalg.generic" or len(op.results) != 1:
            return False
        n_in = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))[0]
        return len(op.operands) == n_in + 1

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
        with ir.InsertionPoint(op):
            new = physical_conversion(op.operands[0], src, dst, op.location)
        op.results[0].replace_all_uses_with(new)
        self.converted.add(new)

    def rewrite(self, op) -> None:
        required = layout_dialect.required_layouts(op) or []
        produced = layout_dialect.produced_layouts(op) or []
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
            try:
                physical_generic(op, [l if isinstance(l, Layout) else None for l in required],
                                 output_order=self.output_order)
            except BlockedLayoutError as e:
                _fail(op, f"cannot materialise the blocked layout {_blocked_names(required)} of "
                          f"'{op.name}': {e}")
        elif op.name == "tensor.pad":
            self.rewrite_pad(op, required[0])
        elif op.name == "tensor.concat":
            self.rewrite_concat(op, required)
        else:
            _fail(op, f"cannot materialise '{op.name}' in a non-row-major layout")
        for k, have in enumerate(produced):
            if k < len(op.results) and isinstance(have, Layout):
                r = op.results[k]
                r.set_type(physical_type(ir.RankedTensorType(r.type), have))

    def rewrite_pad(self, op, layout) -> None:
        body = op.regions[0].blocks[0]
        if any(list(a.uses) for a in body.arguments):
            _fail(op, "cannot materialise a tensor.pad whose padding value depends on the index")
        for name in ("static_low", "static_high"):
            pads = physical_pads(list(ir.DenseI64ArrayAttr(op.attributes[name])), layout)
            if pads is None:
                _fail(op, f"cannot materialise a tensor.pad of a blocked dim in {layout_label(layout)}")
            op.attributes[name] = ir.DenseI64ArrayAttr.get(pads)
        for _ in layout.blocks:  # the region takes one index per physical dim (unused: checked above)
            body.add_argument(ir.IndexType.get(), op.location)
        if len(op.operands) != 1:
            _fail(op, "cannot materialise a tensor.pad with dynamic padding")

    def rewrite_concat(self, op, required) -> None:
        layout = next(l for l in required if isinstance(l, Layout))
        dim = ir.IntegerAttr(op.attributes["dim"]).value
        op.attributes["dim"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), list(layout.perm).index(dim))


def materialize_function(func, *, output_order: bool = True) -> None:
    _Materializer(func, output_order=output_order).run()


@register_pass
class LayoutMaterialize(Pass):
    name = "layout-materialize"
    summary = "Rewrite layout-annotated ops to physical (permutation or blocked) layouts; layout.convert to copies"
    description = (
        "Generalises named linalg ops, composes each operand's indexing map with its permutation "
        "layout or splits the loops of blocked dims (reduction order unchanged: bitwise-identical "
        "results), re-lays tensor.pad/concat, folds constant operands into constants in their "
        "layout, turns layout.convert into (expand_shape +) linalg.transpose (+ collapse_shape) and "
        "drops the conversion units' vt.views and the layout attributes."
    )

    options = (Option("loop-order", str, "output",
                      "'output': kernels in a non-row-major layout walk their output in memory order "
                      "(reductions keep their order); 'logical': the original loop order"),)

    def run(self, module) -> None:
        from ..passes import run_pipeline

        if self.loop_order not in ("output", "logical"):
            self.emit_error(module, f"layout-materialize: loop-order must be 'output' or 'logical', "
                                    f"got '{self.loop_order}'")
            return
        with module.context:
            run_pipeline(module, "builtin.module(func.func(linalg-generalize-named-ops))")
            for func in functions(module):
                materialize_function(func, output_order=self.loop_order == "output")
