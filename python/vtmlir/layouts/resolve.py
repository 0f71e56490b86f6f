"""Layout resolution (VTensor §5.1, Fig. 8) and the IR form of resolved layouts.

Representation (graph level, decided here; see docs/layouts.md):

- Ops stay layout-oblivious and every SSA tensor value keeps its *logical* type. Where a value is
  stored is an attribute: `layout.produced` on its defining op (one layout per result; function
  arguments are row-major). What a kernel wants is `layout.required` (one entry per operand, "any"
  for non-tensor operands) — VTensor's `produced_layout` / `required_layout` (§5.1).
- A conversion is explicit. `layout.convert` works on *physical* arrays, so a conversion of value
  %v from L1 to L2 is the unit

      %p = vt.view(%v) {L1 physical -> logical}   // only when L1 is not row-major; zero-copy
      %c = layout.convert %p {src_layout = L1, dst_layout = L2}
      %w = vt.view(%c) {logical -> L2 physical}   // only when L2 is not row-major; zero-copy

  and the consumer reads %w, which has %v's logical type. The unit computes the identity, so the
  IR means exactly what it meant before (bitwise); `layout-materialize` later folds the views into
  the kernels' index maps and turns each convert into a transpose or a free view.
- Constants (weights, BN parameters, `tensor.empty`/`linalg.fill` inits, and anything computed only
  from constants) have no layout of their own: a consumer's `layout.required` says which layout
  the constant is to be laid out in at compile time, at no run-time cost. No conversion is
  inserted for them.

`resolve_function` is Fig. 8: ops in program (= topological) order; each op's convention
(`conventions.Target`) picks a variant by priority and guideline, or ANY: the result inherits the
first non-constant aligned input's produced layout (Fig. 8 lines 10–16). Aligned operands of an ANY
op must share its layout (the broadcast-compatibility rule of §5.2), so a second input in another
layout gets a conversion. `func.return` requires row-major results (the function's ABI).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torch_mlir import ir

from ..dialects import layout as layout_dialect
from ..dialects import vt as vt_dialect
from ..dialects.memory_layout import Layout
from ..dialects.vt_mapping import MappingFunction
from ..ir_types import shaped_bytes
from ..ir_utils import symbol_name
from ..passes.registry import Option, Pass, register_pass
from .conventions import (
    KernelConvention,
    KernelSite,
    Target,
    Variant,
    elementwise_roles,
    get_target,
    layout_label,
    layout_named,
)
from .report import JSON_OPTION, REPORT_OPTION, TARGET_OPTION, FunctionLayoutReport, LayoutReport

CONSTANT_SOURCES = {"arith.constant", "tensor.empty", "ml_program.global_load_const",
                    "bufferization.alloc_tensor"}


def _ranked(t) -> ir.RankedTensorType | None:
    try:
        return ir.RankedTensorType(t)
    except ValueError:
        return None


def _rank(value) -> int | None:
    t = _ranked(value.type)
    return t.rank if t is not None else None


def top_level_ops(func) -> list:
    """The ops of `func`'s body (none for a declaration)."""
    func = getattr(func, "operation", func)
    if not func.regions or not len(func.regions[0].blocks):
        return []
    return [op.operation for op in func.regions[0].blocks[0].operations]


def functions(module) -> list:
    root = getattr(module, "operation", module)
    return [op for op in root.regions[0].blocks[0].operations if op.operation.name == "func.func"]


def constant_values(func) -> set:
    """Values computable at compile time: constants and results of ops on constants only."""
    const: set = set()
    for op in top_level_ops(func):
        if op.name in CONSTANT_SOURCES or (
                op.name not in ("func.call", "func.return") and len(op.operands) > 0
                and all(v in const for v in op.operands)):
            const.update(op.results)
    return const


# -- decisions ----------------------------------------------------------------------------------------


@dataclass
class Decision:
    """The layouts one op runs with: required per operand (None: not a tensor), produced per result."""

    convention: str
    variant: str
    operands: list[Layout | None]
    results: list[Layout | None]


def _layout_for(name: str | None, value_type, dims: str | None) -> Layout | None:
    t = _ranked(value_type)
    if t is None:
        return None
    return layout_named(name, t.rank, dims)


def variant_decision(conv: KernelConvention, variant: Variant, site: KernelSite) -> Decision | None:
    """The layouts `variant` gives `site`'s operands/results, or None if one cannot hold its shape."""
    op = site.op
    operands = []
    for i, v in enumerate(op.operands):
        name = variant.operands[i] if i < len(variant.operands) else None
        dims = conv.operand_dims[i] if i < len(conv.operand_dims) else None
        try:
            operands.append(_layout_for(name, v.type, dims))
        except ValueError:
            return None
    results = []
    for k, r in enumerate(op.results):
        if variant.results is not None:
            name = variant.results[k] if k < len(variant.results) else None
            dims = conv.result_dims[k] if conv.result_dims and k < len(conv.result_dims) else None
            results.append(_layout_for(name, r.type, dims))
        else:
            j = site.num_inputs + k
            results.append(operands[j] if j < len(operands) else _layout_for(None, r.type, None))
    for i, layout in enumerate(operands):
        shape = site.operand_shape(i)
        if layout is not None and (layout.rank != len(shape) or layout.check_shape(shape)):
            return None
    return Decision(conv.name, variant.name, operands, results)


def any_decision(conv: KernelConvention, site: KernelSite, layout: Layout) -> Decision | None:
    """The layouts of an ANY op running in `layout` (aligned operands and results in it, broadcast
    operands row-major), or None if the op does not accept it."""
    accepts = conv.any.accepts if conv.any is not None else None
    if any(t is None or t.rank != layout.rank for t in site.result_types):
        return None
    if accepts is not None and not accepts(site, layout):
        return None
    roles = elementwise_roles(site)
    operands = []
    for i, t in enumerate(site.operand_types):
        if t is None:
            operands.append(None)
        elif (roles[i] == "aligned") if roles is not None else t.rank == layout.rank:
            operands.append(layout)
        else:
            operands.append(Layout.identity(t.rank))
    return Decision(conv.name, f"any:{_label(layout)}", operands, [layout] * len(site.result_types))


def _label(layout: Layout) -> str:
    return layout_label(layout)


def applicable_variants(conv: KernelConvention, site: KernelSite) -> list[tuple[Variant, Decision]]:
    """Variants whose `when` holds and whose layouts hold the shapes, highest priority first."""
    out = []
    for v in sorted(conv.variants, key=lambda v: -v.priority):
        if v.when is not None and not v.when(site):
            continue
        d = variant_decision(conv, v, site)
        if d is not None:
            out.append((v, d))
    return out


def identity_decision(site: KernelSite, name: str = "default") -> Decision:
    ops = [_layout_for(None, v.type, None) for v in site.op.operands]
    res = [_layout_for(None, r.type, None) for r in site.op.results]
    return Decision(name, "row-major", ops, res)


def is_layout_node(op) -> bool:
    """Ops layout resolution decides: those producing ranked tensors, and `func.return`."""
    return op.name == "func.return" or any(_ranked(r.type) is not None for r in op.results)


@dataclass
class Resolution:
    """Fig. 8's outcome for one function: a decision per op and the produced layout of each value.

    Decisions are kept as a list of (op, decision) in program order: an `ir.Operation`'s hash changes
    when its attributes or operands change, so ops are never dictionary keys here; values are."""

    func: object
    entries: list = field(default_factory=list)      # [(ir.Operation, Decision)] in program order
    conventions: list = field(default_factory=list)  # KernelConvention per entry (None: return)
    constants: set = field(default_factory=set)
    _produced: dict = field(default_factory=dict)    # ir.Value -> Layout

    def add(self, op, decision: Decision, convention: KernelConvention | None) -> None:
        self.entries.append((op, decision))
        self.conventions.append(convention)
        self.record(op, decision)

    def record(self, op, decision: Decision) -> None:
        for k, r in enumerate(op.results):
            if decision.results[k] is not None:
                self._produced[r] = decision.results[k]

    def replace(self, index: int, decision: Decision) -> None:
        op = self.entries[index][0]
        self.entries[index] = (op, decision)
        self.record(op, decision)

    def produced(self, value) -> Layout | None:
        """Layout `value` is stored in (None for constants and non-tensors)."""
        if value in self.constants:
            return None
        rank = _rank(value)
        if rank is None:
            return None
        return self._produced.get(value, Layout.identity(rank))

    def conversions(self) -> list[tuple[object, int, Layout, Layout]]:
        """Run-time conversions this resolution needs, one per use: (op, operand index, src, dst)."""
        out = []
        for op, d in self.entries:
            for i, v in enumerate(op.operands):
                want = d.operands[i]
                have = self.produced(v)
                if want is not None and have is not None and want != have:
                    out.append((op, i, have, want))
        return out

    def shared_conversions(self) -> set:
        """Distinct (value, layout) pairs converted at run time (one conversion each when shared)."""
        return {(op.operands[i], dst) for op, i, _, dst in self.conversions()}

    def conversion_bytes(self, *, share: bool) -> int:
        if share:
            return sum(conversion_bytes(v) for v, _ in self.shared_conversions())
        return sum(conversion_bytes(op.operands[i]) for op, i, _, _ in self.conversions())

    def laid_out(self) -> int:
        """Kernels run in a non-row-major layout (an operand, constants included, or a result)."""
        return sum(1 for _, d in self.entries
                   if any(l is not None and not l.is_identity for l in list(d.operands) + list(d.results)))

    def constant_conversions(self) -> int:
        """Constant operands required in a non-row-major layout (laid out at compile time)."""
        n = 0
        for op, d in self.entries:
            for i, v in enumerate(op.operands):
                if v in self.constants and d.operands[i] is not None and not d.operands[i].is_identity:
                    n += 1
        return n


def captured_results(op) -> set[int]:
    """Indices of `op`'s results read by an op layout resolution does not decide: one inside another
    op's region (a gather: `tensor.extract` in the body of an interpolation's `linalg.generic`) or
    one without tensor results (a scalar `tensor.extract`). Such a read indexes the value logically
    and gets no conversion, so those results stay row-major."""
    out = set()
    for k, r in enumerate(op.results):
        for use in r.uses:
            owner = use.owner.operation if hasattr(use.owner, "operation") else use.owner
            parent = owner.parent
            if (parent is not None and parent.name != "func.func") or not is_layout_node(owner):
                out.add(k)
                break
    return out


def keeps_captured_row_major(decision: Decision, captured: set[int]) -> bool:
    """Whether `decision` leaves the results `captured` (`captured_results`) row-major."""
    return all(decision.results[k] is None or decision.results[k].is_identity for k in captured)


def resolve_function(func, target: Target) -> Resolution:
    """VTensor's layout resolving algorithm (Fig. 8) over one `func.func`. A result read inside
    another op's region or by an op without tensor results stays row-major (`captured_results`)."""
    res = Resolution(func, constants=constant_values(func))
    for op in top_level_ops(func):
        if not is_layout_node(op):
            continue
        if op.name != "func.return" and all(r in res.constants for r in op.results):
            continue  # computed at compile time: no kernel, no layout of its own
        site = KernelSite(op)
        if op.name == "func.return":
            res.add(op, identity_decision(site, "return"), None)
            continue
        conv = target.convention_for(site)
        decision = choose(conv, site, res)
        if not keeps_captured_row_major(decision, captured_results(op)):
            decision = identity_decision(site)
        res.add(op, decision, conv)
    return res


def choose(conv: KernelConvention, site: KernelSite, res: Resolution) -> Decision:
    """Fig. 8 line 9 (InvokeLibGuideline) and lines 10–16 (ANY inherits)."""
    if conv.any is not None:
        rank = site.result_types[0].rank if site.result_types and site.result_types[0] else None
        if rank is not None and rank in conv.default:
            d = any_decision(conv, site, layout_named(conv.default[rank], rank))
            if d is not None:
                return d
        roles = elementwise_roles(site)
        for i, v in enumerate(site.op.operands[:site.num_inputs]):
            if v in res.constants or (roles is not None and roles[i] != "aligned"):
                continue
            have = res.produced(v)
            if have is None or have.rank != rank:
                continue
            d = any_decision(conv, site, have)
            if d is not None:
                return d
            break  # the first input's layout is not accepted: fall back to row-major
        if rank is not None:
            d = any_decision(conv, site, Layout.identity(rank))
            if d is not None:
                return d
        return identity_decision(site, conv.name)
    if conv.variants:
        applicable = applicable_variants(conv, site)
        if conv.guideline is not None:
            picked = conv.guideline(site, [v for v, _ in applicable])
            for v, d in applicable:
                if v is picked:
                    return d
        if applicable:
            return applicable[0][1]
    return identity_decision(site, conv.name)


# -- IR: attributes and conversion units ---------------------------------------------------------------


def _logical_type(value) -> ir.RankedTensorType:
    return ir.RankedTensorType(value.type)


def build_conversion(value, src: Layout, dst: Layout, *, loc=None):
    """Insert (at the current insertion point) the unit converting logical `value` from `src` to
    `dst`; returns the logical-typed result."""
    t = _logical_type(value)
    logical = list(t.shape)
    x = value
    if not src.is_identity:
        x = vt_dialect.view([x], MappingFunction.single(src.logical_index_map()),
                            src.physical_shape(logical), loc=loc)
    c = layout_dialect.convert(x, src, dst, loc=loc)
    if not dst.is_identity:
        c = vt_dialect.view([c], MappingFunction.single(dst.index_map()), logical, loc=loc)
    return c


def _single_map(view_op) -> ir.AffineMap | None:
    try:
        mf = MappingFunction.from_attr(view_op.attributes["mapping"])
    except Exception:  # noqa: BLE001 - anything malformed is simply not one of our units
        return None
    if len(mf.pieces) != 1 or mf.pieces[0].source != 0 or getattr(mf.pieces[0], "dims", None):
        return None
    return mf.pieces[0].map


@dataclass
class ConversionUnit:
    """One conversion unit in the IR (module docstring): `base` (logical) converted from `src` to
    `dst`; `outputs` are the logical-typed values its users read (the post views' results, or the
    convert's result when `dst` is row-major)."""

    convert: object                 # the layout.convert ir.Operation
    base: object                    # the logical value converted
    src: Layout
    dst: Layout
    pre: object | None              # the vt.view physical-of-src (None when src is row-major)
    posts: list                     # the vt.views logical-of-dst (empty when dst is row-major)
    outputs: list

    def erase(self) -> None:
        """Erase the unit (its outputs must have no users left)."""
        for p in self.posts:
            p.erase()
        self.convert.erase()
        if self.pre is not None and not list(self.pre.results[0].uses):
            self.pre.erase()


def conversion_unit(op) -> ConversionUnit | None:
    """The conversion unit around the `layout.convert` `op`, or None if `op` is not part of one."""
    if op.name != "layout.convert":
        return None
    try:
        src, dst = Layout.from_attr(op.attributes["src_layout"]), Layout.from_attr(op.attributes["dst_layout"])
    except Exception:  # noqa: BLE001 - a malformed convert is not one of our units
        return None
    source = op.operands[0]
    pre = None
    if src.is_identity:
        base = source
    else:
        owner = source.owner
        if isinstance(owner, ir.Block) or owner.name != "vt.view" or len(owner.operands) != 1:
            return None
        if _single_map(owner) != src.logical_index_map():
            return None
        pre, base = owner, owner.operands[0]
    result = op.results[0]
    if dst.is_identity:
        posts, outs = [], [result]
    else:
        posts = [u.owner for u in result.uses]
        if not posts or any(p.name != "vt.view" or _single_map(p) != dst.index_map() for p in posts):
            return None
        outs = [p.results[0] for p in posts]
    if any(o.type != base.type for o in outs):
        return None
    return ConversionUnit(op, base, src, dst, pre, posts, outs)


def conversion_units(func) -> list[ConversionUnit]:
    """Every conversion unit of `func`, in program order."""
    units = []
    for op in top_level_ops(func):
        unit = conversion_unit(op)
        if unit is not None:
            units.append(unit)
    return units


def strip_conversions(func) -> int:
    """Remove every conversion unit (see the module docstring) from `func`, rewiring its users to the
    unconverted value, and drop `layout.produced`/`layout.required` attributes. Returns the number of
    units removed. Units compute the identity, so this never changes what the function computes."""
    removed = 0
    # One unit at a time, in program order: a unit's base may be an earlier unit's output, which
    # erasing that unit replaces, so each unit is only identified once the units before it are gone
    # (a list computed up front would hold erased values). Only its own unit erases a convert.
    for convert in [op for op in top_level_ops(func) if op.name == "layout.convert"]:
        unit = conversion_unit(convert)
        if unit is None:
            continue
        for o in unit.outputs:
            o.replace_all_uses_with(unit.base)
        unit.erase()
        removed += 1
    for op in top_level_ops(func):
        for name in (layout_dialect.PRODUCED_LAYOUTS_ATTR, layout_dialect.REQUIRED_LAYOUTS_ATTR):
            if name in op.attributes:
                del op.attributes[name]
    return removed


def apply_resolution(res: Resolution, *, share: bool = False) -> int:
    """Write `res` into the IR: `layout.required`/`layout.produced` on every decided op and a
    conversion unit per run-time mismatch — one per use (Fig. 8 / Fig. 7(c)), or with `share` one
    per (value, layout), placed before its first user. Returns the number of units inserted."""
    inserted = 0
    shared: dict = {}
    for op, d in res.entries:
        with op.context, op.location:
            layout_dialect.set_required_layouts(op, d.operands)
            if op.name != "func.return":
                if any(r is not None for r in d.results):
                    layout_dialect.set_produced_layouts(
                        op, [r if r is not None else Layout.identity(0) for r in d.results])
            for i, v in enumerate(list(op.operands)):
                want = d.operands[i]
                have = res.produced(v)
                if want is None or have is None or want == have:
                    continue
                key = (v, want)
                if share and key in shared:
                    op.operands[i] = shared[key]
                    continue
                with ir.InsertionPoint(op):
                    new = build_conversion(v, have, want, loc=op.location)
                inserted += 1
                if share:
                    shared[key] = new
                op.operands[i] = new
    return inserted


def resolve_module(module, target: Target, pass_name: str, *, share: bool, choose=None,
                   keep_row_major: bool = False) -> LayoutReport:
    """The loop of `layout-resolve` and `layout-select-ilp` over the functions of `module`: remove the
    conversion units an earlier run left, resolve (Fig. 8), let `choose(resolution)` change the
    resolved layouts (the ILP's choice; it returns its `FunctionLayoutReport` fields from
    `ilp_variables` on), insert the conversions and report each function's before/after figures.
    `keep_row_major`: a function whose every kernel ends up row-major is left exactly as it was (no
    attribute, no conversion)."""
    report = LayoutReport(pass_name, target.name)
    for func in functions(module):
        strip_conversions(func)
        res = resolve_function(func, target)
        naive, naive_bytes = len(res.conversions()), res.conversion_bytes(share=False)
        solver_figures = choose(res) if choose is not None else ()
        after_bytes, relaid = res.conversion_bytes(share=share), res.constant_conversions()
        laid_out = res.laid_out()
        n = 0 if keep_row_major and not laid_out else apply_resolution(res, share=share)
        report.functions.append(FunctionLayoutReport(
            symbol_name(func), naive, naive_bytes, n, after_bytes, relaid, *solver_figures, laid_out=laid_out))
    return report


def conversion_bytes(value) -> int:
    """Bytes a run-time conversion of `value` moves (its elements times element size, like vt-stats)."""
    return shaped_bytes(value.type) or 0


@register_pass
class LayoutResolve(Pass):
    name = "layout-resolve"
    summary = "Resolve produced/required layouts (VTensor Fig. 8) and insert layout.convert where they differ"
    description = (
        "Walks each function in topological order; every op gets the layouts of the kernel the "
        "target's convention table picks (priority, guideline; ANY inherits the first input's), as "
        "layout.required / layout.produced attributes. Where a value is produced in another layout "
        "than a use requires, a conversion (vt.view? -> layout.convert -> vt.view?) is inserted "
        "before that use; constant operands are laid out at compile time instead."
    )
    options = (TARGET_OPTION, REPORT_OPTION, JSON_OPTION,
               Option("share", bool, False, "one conversion per (value, layout) instead of one per use"))

    def run(self, module):
        with module.context:
            return self._run(module)

    def _run(self, module):
        report = resolve_module(module, get_target(self.target), self.name, share=self.share)
        self.write_report(module, report.to_json() + "\n" if self.json else report.to_text())
        return report
