"""`layout-hoist`: layout hoisting optimisation (VTensor §5.2, LHO; the placement of Fig. 4(b)).

Naive resolution (`layout-resolve`, Fig. 8) inserts one conversion unit per mismatching *use*
(docs/layouts.md: `vt.view? → layout.convert → vt.view?`). At a branch node — a value with several
users — the users that require the same layout then each convert the same tensor. The paper hoists
those conversions "up before the branch node" when all of its successors are conversions from one
VTensor to one required layout; vtmlir applies the rule to every group of them (a branch whose other
users read the unconverted value still shares one conversion per required layout), and places the
shared conversion right after the producer (Fig. 4(b): outside the operator, next to the tensor's
definition), so it dominates every user.

Before sharing, conversions that feed conversions are folded (a "transform" node reading another,
which hand-written IR, or IR from other passes, can contain): `convert(convert(v, A→B), B→A)` is
`v` and the pair is removed; `convert(convert(v, A→B), B→C)` becomes `convert(v, A→C)`.

The units compute the identity, so the rewrite never changes what the function computes. The report
counts conversion units before and after (and how many were shared or cancelled); the byte count is
the traffic of the run-time conversions left (`conversion_bytes`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torch_mlir import ir

from ..ir_utils import symbol_name
from ..passes.registry import Pass, register_pass, report_option
from .resolve import ConversionUnit, build_conversion, conversion_bytes, conversion_units, functions


@dataclass
class HoistReport:
    function: str
    conversions_before: int
    conversions: int
    bytes_before: int
    bytes: int
    shared: int = 0        # units removed because another unit of the same value and layout serves them
    cancelled: int = 0     # A→B→A pairs removed
    fused: int = 0         # A→B→C chains made A→C


@dataclass
class LayoutHoistReport:
    functions: list[HoistReport] = field(default_factory=list)

    def totals(self) -> dict:
        keys = ("conversions_before", "conversions", "bytes_before", "bytes", "shared", "cancelled", "fused")
        return {k: sum(getattr(f, k) for f in self.functions) for k in keys}

    def to_text(self) -> str:
        lines = ["layout-hoist report"]
        for f in self.functions:
            lines.append(f"func @{f.function}: conversions {f.conversions_before} -> {f.conversions}, bytes "
                         f"{f.bytes_before} -> {f.bytes}; {f.shared} shared, {f.cancelled} cancelled, "
                         f"{f.fused} fused")
        return "\n".join(lines) + "\n"


def _unit_bytes(units: list[ConversionUnit]) -> int:
    return sum(conversion_bytes(u.base) for u in units)


def _unit_of_output(units: list[ConversionUnit]) -> dict:
    """Map from each unit output value to its unit."""
    out = {}
    for u in units:
        for o in u.outputs:
            out[o] = u
    return out


def _insertion_point_after(value) -> ir.InsertionPoint:
    """Right after `value`'s definition (the block start for a block argument)."""
    owner = value.owner
    block = owner if isinstance(owner, ir.Block) else owner.operation.block
    ops = list(block.operations)
    if isinstance(owner, ir.Block):
        return ir.InsertionPoint(ops[0]) if ops else ir.InsertionPoint(block)
    for i, o in enumerate(ops):
        if o.operation == owner.operation:
            return ir.InsertionPoint(ops[i + 1]) if i + 1 < len(ops) else ir.InsertionPoint(block)
    raise AssertionError("the producer is not in its own block")


def fold_chains(func) -> tuple[int, int]:
    """Fold conversions of conversions (module docstring). Returns (cancelled, fused)."""
    cancelled = fused = 0
    changed = True
    while changed:
        changed = False
        units = conversion_units(func)
        of_output = _unit_of_output(units)
        for outer in units:
            inner = of_output.get(outer.base)
            if inner is None or inner.dst != outer.src:
                continue
            if outer.dst == inner.src:
                replacement = inner.base
                cancelled += 1
            else:
                with outer.convert.location, ir.InsertionPoint(outer.convert):
                    replacement = build_conversion(inner.base, inner.src, outer.dst, loc=outer.convert.location)
                fused += 1
            for o in outer.outputs:
                o.replace_all_uses_with(replacement)
            outer.erase()
            if not any(list(o.uses) for o in inner.outputs):
                inner.erase()
            changed = True
            break  # the unit list is stale: rescan
    return cancelled, fused


def share_conversions(func) -> int:
    """One conversion per (value, source layout, required layout), placed right after the value's
    definition; returns how many units were removed."""
    groups: dict = {}
    order = []
    units = conversion_units(func)
    outputs = _unit_of_output(units)
    for u in units:
        if u.base in outputs:
            continue  # a chain fold_chains left (mismatched layouts): erasing the inner unit would free its base
        key = (u.base, u.src, u.dst)
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(u)
    removed = 0
    # Each shared unit goes right after its value's definition; inserting the last group first keeps
    # the units of one value in the order of their first use.
    for key in reversed(order):
        units = groups[key]
        if len(units) < 2:
            continue
        base, src, dst = key
        loc = units[0].convert.location
        with loc, _insertion_point_after(base):
            shared = build_conversion(base, src, dst, loc=loc)
        for u in units:
            for o in u.outputs:
                o.replace_all_uses_with(shared)
            u.erase()
        removed += len(units) - 1
    return removed


def hoist_function(func) -> tuple[int, int, int]:
    """LHO over one function: (shared, cancelled, fused)."""
    cancelled, fused = fold_chains(func)
    shared = share_conversions(func)
    return shared, cancelled, fused


@register_pass
class LayoutHoist(Pass):
    name = "layout-hoist"
    summary = "Hoist and share a value's identical layout conversions; cancel A->B->A (VTensor §5.2 LHO)"
    description = (
        "Runs on IR with conversion units (after layout-resolve). Conversions of one value to one "
        "layout requested by several users (a branch node) become one conversion right after the "
        "producer; a conversion of a conversion is folded (A->B->A removed, A->B->C made A->C). "
        "Units compute the identity, so results never change."
    )
    options = (report_option("the conversion report"),)

    def run(self, module):
        with module.context:
            report = LayoutHoistReport()
            for func in functions(module):
                before = conversion_units(func)
                n0, b0 = len(before), _unit_bytes(before)
                shared, cancelled, fused = hoist_function(func)
                after = conversion_units(func)
                report.functions.append(HoistReport(symbol_name(func), n0, len(after), b0, _unit_bytes(after),
                                                    shared, cancelled, fused))
            self.write_report(module, report.to_text())
            return report
