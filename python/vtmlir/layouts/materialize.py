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
  `linalg.transpose` / `linalg.transpose` + `tensor.collapse_shape` (blocked sides) — or, with
  `views=auto|always`, a free VTC view folded into its consumers' indexing maps or a reshape
  (`views.py`: VTC contiguity + a bytes cost rule decide); the unit's zero-copy `vt.view`s
  disappear (their operand is already the physical array);
- constant operands a kernel requires in another layout are laid out at compile time: an
  `arith.constant` (dense or dense_resource) is replaced by a constant holding the physical array
  (no run-time transpose of weights), a `tensor.empty` or a single-output generic computed from
  constants (a fill) is re-created writing the physical layout, any other constant subgraph is
  evaluated (lowbit's `ConstantEvaluator`) into a constant; only what cannot be evaluated gets a
  run-time transpose of the constant;
- `layout.*` attributes are removed. The function's signature never changes (arguments and results
  are row-major), and the result holds no `vt`/`layout` op, so `vtmlir.compile` takes it.

What cannot be materialised (a blocked dim indexed by a sum of loops, nested blocks on one dim, a
pad of a blocked dim, an unknown op in a non-row-major layout) fails naming the op (docs/layouts.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torch_mlir import ir
from torch_mlir.dialects import tensor

from ..dialects import layout as layout_dialect
from ..dialects.memory_layout import Layout
from ..ir_constants import constant_array, make_constant
from ..ir_utils import symbol_name
from ..passes import run_pipeline
from ..passes.registry import Option, Pass, PassFailure, register_pass, report_option
from .blocked import BlockedLayoutError, physical_conversion, physical_generic, physical_pads, physical_type
from .conventions import layout_label
from .resolve import constant_values, functions, top_level_ops
from .views import VIEW_MODES, conversion_view, copy_choice, finish_views

_LAYOUT_ATTRS = (layout_dialect.PRODUCED_LAYOUTS_ATTR, layout_dialect.REQUIRED_LAYOUTS_ATTR)


def _fail(op, message: str):
    raise PassFailure(f"layout-materialize: {message}", op.location)


def _blocked_names(layouts) -> str:
    names = sorted({layout_label(l) for l in layouts if isinstance(l, Layout) and l.blocks})
    return ", ".join(names) or "row-major/permutation"


class _Materializer:
    def __init__(self, func, *, output_order: bool = True, views: str = "never"):
        self.func = func
        self.output_order = output_order
        self.views = views
        self.constants = constant_values(func)
        self.relaid: dict = {}      # (value, layout) -> value laid out in layout
        self.converted: set = set()  # results of the transposes (or views) that replaced layout.converts
        self.pending_views: list = []  # (view result, src, dst): decided once the consumers are rewritten
        self.choices: list = []        # views.ConversionChoice per run-time conversion
        self.constants_folded = 0
        self.evaluator = None          # lowbit.evaluate.ConstantEvaluator, made on first need
        self.constants_at_run_time = 0

    # -- constants ---------------------------------------------------------------------------------

    def relay_constant(self, value: ir.Value, layout: Layout, before, *, count: bool = True) -> ir.Value:
        """`value` (computable at compile time) laid out in `layout`, as cheaply as the IR allows: a
        `tensor.empty` re-made, a single-output generic (a fill, a BN fold) re-run writing `layout`,
        an `arith.constant` or any other constant subgraph evaluated into a new constant; only what
        cannot be evaluated gets a run-time transpose."""
        key = (value, layout)
        if key in self.relaid:
            return self.relaid[key]
        owner = value.owner
        loc = before.location
        at_compile_time = True
        with ir.InsertionPoint(before):
            if not isinstance(owner, ir.Block) and owner.name == "tensor.empty" and not list(owner.operands):
                t = physical_type(ir.RankedTensorType(value.type), layout)
                new = tensor.EmptyOp(list(t.shape), t.element_type, loc=loc).result
            elif not isinstance(owner, ir.Block) and self._is_single_output_generic(owner):
                # Computed from constants (a fill, a BN parameter fold): the same kernel writes its
                # result in `layout` (its output map composed, or its loops split for a blocked one).
                clone = owner.clone(ir.InsertionPoint(before))
                n_in = list(ir.DenseI32ArrayAttr(owner.attributes["operandSegmentSizes"]))[0]
                clone.operands[n_in] = self.relay_constant(owner.operands[n_in], layout, clone, count=False)
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
            elif (evaluated := self._evaluate_constant(value, layout)) is not None:
                new = evaluated
            else:
                new = physical_conversion(value, Layout.identity(layout.rank), layout, loc)
                at_compile_time = False
        if count:
            if at_compile_time:
                self.constants_folded += 1
            else:
                self.constants_at_run_time += 1
        self.relaid[key] = new
        return new

    def _evaluate_constant(self, value: ir.Value, layout: Layout) -> ir.Value | None:
        """Any other constant subgraph (reshapes, slices, concats of weights, multi-result generics)
        evaluated at compile time with lowbit's interpreter and stored as a constant in `layout`
        (issue 4: constant operands converted at compile time). None when the interpreter cannot
        evaluate it (an op it does not know, a reduction): the caller transposes at run time."""
        from ..lowbit import ConstantEvaluator, EvaluationError  # deferred: lowbit imports torch (heavy)

        if self.evaluator is None:
            self.evaluator = ConstantEvaluator()
        try:
            array = self.evaluator(value)
        except EvaluationError:
            return None
        element_type = ir.RankedTensorType(value.type).element_type
        return make_constant(layout.physical_array(array), element_type)

    @staticmethod
    def _fold_constant(owner, layout: Layout) -> ir.Value | None:
        """An `arith.constant` (dense or dense_resource) laid out at compile time: a new constant
        holding the physical array, so no run-time transpose of weights remains (issue 4: "constant
        operands are converted at compile time"). None when `owner` is not such a constant."""
        if isinstance(owner, ir.Block) or owner.name != "arith.constant":
            return None

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
        if self.pending_views:
            self.choices = finish_views(self.func, self.pending_views, self.views)

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
            if self.views == "never":
                new = physical_conversion(op.operands[0], src, dst, op.location)
            else:   # a free VTC view, decided (view or copy) once its consumers are physical
                new = conversion_view(op.operands[0], src, dst, op.location)
                self.pending_views.append((new, src, dst))
        op.results[0].replace_all_uses_with(new)
        self.converted.add(new)
        if self.views == "never":
            self.choices.append(copy_choice(new, src, dst))

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


@dataclass
class MaterializeReport:
    """Per function: run-time conversions (free views / copies) and constant re-layouts."""

    function: str
    choices: list = field(default_factory=list)   # views.ConversionChoice per run-time conversion
    constants_folded: int = 0    # constants re-laid at compile time (new constants, re-made kernels)
    constants_at_run_time: int = 0  # constants left to a run-time transpose

    @property
    def views(self) -> int:
        return sum(c.view for c in self.choices)

    @property
    def copies(self) -> int:
        return sum(not c.view for c in self.choices)


@dataclass
class LayoutMaterializeReport:
    functions: list[MaterializeReport] = field(default_factory=list)

    def totals(self) -> dict:
        return {
            "conversions": sum(len(f.choices) for f in self.functions),
            "views": sum(f.views for f in self.functions),
            "copies": sum(f.copies for f in self.functions),
            "view_bytes_saved": sum(c.bytes for f in self.functions for c in f.choices if c.view),
            "constants_folded": sum(f.constants_folded for f in self.functions),
            "constants_at_run_time": sum(f.constants_at_run_time for f in self.functions),
        }

    def to_text(self) -> str:
        lines = ["layout-materialize report"]
        for f in self.functions:
            lines.append(f"func @{f.function}: {len(f.choices)} run-time conversions, {f.views} free views, "
                         f"{f.copies} copies; constants re-laid at compile time {f.constants_folded}, "
                         f"at run time {f.constants_at_run_time}")
            for c in f.choices:
                lines.append(f"  {c.src} -> {c.dst} ({c.bytes} B, {c.consumers} consumers, {c.reads} reads, "
                             f"contiguity {c.contiguity}): {'view' if c.view else 'copy'}, {c.reason}")
        return "\n".join(lines) + "\n"


def materialize_function(func, *, output_order: bool = True, views: str = "never") -> MaterializeReport:
    m = _Materializer(func, output_order=output_order, views=views)
    m.run()
    return MaterializeReport(symbol_name(func), m.choices, m.constants_folded, m.constants_at_run_time)


@register_pass
class LayoutMaterialize(Pass):
    name = "layout-materialize"
    summary = "Rewrite layout-annotated ops to physical (permutation or blocked) layouts; layout.convert to copies or free views"
    description = (
        "Generalises named linalg ops, composes each operand's indexing map with its permutation "
        "layout or splits the loops of blocked dims (reduction order unchanged: bitwise-identical "
        "results), re-lays tensor.pad/concat, folds constant operands (and constant subgraphs) into "
        "constants in their layout, turns layout.convert into (expand_shape +) linalg.transpose "
        "(+ collapse_shape) or, where the consumers can read through it, a VTC view folded into "
        "their indexing maps, and drops the conversion units' vt.views and the layout attributes."
    )

    options = (Option("loop-order", str, "output",
                      "'output': kernels in a non-row-major layout walk their output in memory order "
                      "(reductions keep their order); 'logical': the original loop order"),
               Option("views", str, "auto",
                      "layout.convert as a free VTC view folded into its consumers: 'auto' (VTC "
                      "contiguity + bytes cost rule), 'always' (wherever the consumers can fold it), "
                      "'never' (always a copy)"),
               report_option("one line per conversion"))

    def run(self, module):
        if self.loop_order not in ("output", "logical"):
            self.emit_error(module, f"layout-materialize: loop-order must be 'output' or 'logical', "
                                    f"got '{self.loop_order}'")
            return
        if self.views not in VIEW_MODES:
            self.emit_error(module, f"layout-materialize: views must be one of {', '.join(VIEW_MODES)}, "
                                    f"got '{self.views}'")
            return
        with module.context:
            run_pipeline(module, "builtin.module(func.func(linalg-generalize-named-ops))")
            report = LayoutMaterializeReport()
            for func in functions(module):
                report.functions.append(materialize_function(
                    func, output_order=self.loop_order == "output", views=self.views))
            self.write_report(module, report.to_text())
            return report
