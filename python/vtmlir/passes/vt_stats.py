"""`vt-stats`: count compute vs data-movement ops at graph level and the bytes data movement costs.

This is vtmlir's measure of data movement: later passes (virtual tensors, layout resolution) are
judged by how much they shrink its numbers, and benchmarks call `collect_stats` directly.

Classification (graph level = linalg-on-tensors + tensor + vt + layout, docs/design.md §3):

- **data-movement** — ops whose only job is to move elements: `linalg.transpose`, `linalg.broadcast`,
  `linalg.copy`, a `linalg.generic` whose body only yields inputs through permutation / projection /
  broadcast maps (all loops parallel), `tensor.extract_slice`, `tensor.insert_slice`, `tensor.concat`,
  `tensor.pad`, `tensor.reshape`, `tensor.gather`/`scatter`, `layout.convert`, and `vt.*` ops other
  than `vt.view` and `vt.store_into`. Bytes = result elements × element size (`insert_slice`/`scatter`: the inserted
  source only).
- **view** — zero-copy reinterpretations, listed but moving 0 bytes: `tensor.expand_shape`,
  `tensor.collapse_shape`, `vt.view` (a virtual tensor is read through its mapping by its consumers;
  that is the whole point of VTC, so a transpose turned into a `vt.view` stops costing bytes) and
  `vt.store_into` (its producer writes straight into the destinations: the store is folded into the
  producer's kernel, it is not a copy of its own).
- **compute** — every other `linalg` op (matmul, conv, reductions, elementwise generics, fill) and
  `arith`/`math` ops on tensors.
- **other** — remaining ops producing tensors (calls, `tensor.from_elements`, ...), listed for honesty.

Bookkeeping (`arith.constant`, `tensor.empty`, `func.return`, casts, scalar ops, linalg bodies) is
ignored. Dynamic shapes: bytes are unknown (`None`, printed `?`) and counted in `dynamic`.

The pass leaves the IR unchanged unless `annotate=true`, which adds `vt.stats.kind` (and
`vt.stats.bytes` where defined) attributes to every classified op, handy for FileCheck.
"""

from __future__ import annotations

import json as _json
from dataclasses import asdict, dataclass, field

from torch_mlir import ir

from ..errors import format_location
from ..ir_types import shaped_bytes
from ..ir_utils import iterator_kinds, nested_ops, symbol_name
from .registry import Option, Pass, register_pass, report_option

COMPUTE = "compute"
DATA_MOVEMENT = "data-movement"
VIEW = "view"
OTHER = "other"
KINDS = (COMPUTE, DATA_MOVEMENT, VIEW, OTHER)

_DATA_MOVEMENT_OPS = {
    "linalg.transpose": "transpose",
    "linalg.broadcast": "broadcast",
    "linalg.copy": "copy",
    "tensor.extract_slice": "slice",
    "tensor.insert_slice": "insert-slice",
    "tensor.concat": "concat",
    "tensor.pad": "pad",
    "tensor.reshape": "reshape",
    "tensor.gather": "gather",
    "tensor.scatter": "scatter",
    "layout.convert": "layout-convert",
}
_VIEW_OPS = {
    "tensor.expand_shape": "reshape",
    "tensor.collapse_shape": "reshape",
    "vt.view": "virtual",
    "vt.store_into": "mapped-store",
}
# Ops whose bytes are those of their first operand (the slice written), not of the full result.
_SOURCE_SIZED = {"tensor.insert_slice", "tensor.scatter"}
_BOOKKEEPING = {
    "arith.constant",
    "tensor.empty",
    "tensor.cast",
    "tensor.dim",
    "tensor.rank",
    "bufferization.alloc_tensor",
    "func.return",
    "func.func",
    "scf.yield",
    "ml_program.global_load_const",
    "torch_c.from_builtin_tensor",
    "torch_c.to_builtin_tensor",
}


@dataclass
class OpStat:
    """One classified op."""

    function: str
    op: str
    kind: str
    category: str
    bytes: int | None
    location: str


@dataclass
class FunctionStats:
    name: str
    ops: list[OpStat] = field(default_factory=list)

    def count(self, kind: str) -> int:
        return sum(1 for o in self.ops if o.kind == kind)

    @property
    def compute(self) -> int:
        return self.count(COMPUTE)

    @property
    def data_movement(self) -> int:
        return self.count(DATA_MOVEMENT)

    @property
    def view(self) -> int:
        return self.count(VIEW)

    @property
    def other(self) -> int:
        return self.count(OTHER)

    @property
    def bytes_moved(self) -> int:
        """Bytes moved by data-movement ops with static shapes."""
        return sum(o.bytes or 0 for o in self.ops if o.kind == DATA_MOVEMENT)

    @property
    def dynamic(self) -> int:
        """Data-movement ops whose bytes are unknown (dynamic shapes)."""
        return sum(1 for o in self.ops if o.kind == DATA_MOVEMENT and o.bytes is None)

    def summary(self) -> dict:
        return {
            "compute": self.compute,
            "data_movement": self.data_movement,
            "view": self.view,
            "other": self.other,
            "bytes_moved": self.bytes_moved,
            "dynamic": self.dynamic,
        }


@dataclass
class StatsReport:
    """What `vt-stats` measured, per function and in total."""

    functions: list[FunctionStats] = field(default_factory=list)

    @property
    def ops(self) -> list[OpStat]:
        return [o for f in self.functions for o in f.ops]

    def function(self, name: str) -> FunctionStats:
        for f in self.functions:
            if f.name == name:
                return f
        raise KeyError(name)

    def totals(self) -> dict:
        total = FunctionStats("<total>", self.ops)
        return {**total.summary(), "functions": len(self.functions)}

    @property
    def bytes_moved(self) -> int:
        return self.totals()["bytes_moved"]

    def count(self, kind: str) -> int:
        return sum(f.count(kind) for f in self.functions)

    def to_dict(self) -> dict:
        return {
            "functions": [
                {"name": f.name, **f.summary(), "ops": [asdict(o) for o in f.ops]} for f in self.functions
            ],
            "totals": self.totals(),
        }

    def to_json(self, indent: int | None = 2) -> str:
        return _json.dumps(self.to_dict(), indent=indent)

    def to_text(self) -> str:
        lines = ["vt-stats report"]
        for f in self.functions:
            lines.append(f"func @{f.name}: {_summary_text(f.summary())}")
            for o in f.ops:
                size = "-" if o.kind in (COMPUTE, OTHER) else ("? bytes" if o.bytes is None else f"{o.bytes} bytes")
                lines.append(f"  {o.kind:<14} {o.category:<14} {o.op:<24} {size:<14} {o.location}".rstrip())
        lines.append(f"total: {_summary_text(self.totals())} in {len(self.functions)} function(s)")
        return "\n".join(lines) + "\n"

    def __str__(self) -> str:
        return self.to_text()


def _summary_text(s: dict) -> str:
    text = (
        f"{s['compute']} compute, {s['data_movement']} data-movement, {s['view']} view, {s['other']} other; "
        f"{s['bytes_moved']} bytes moved"
    )
    if s["dynamic"]:
        text += f" (+{s['dynamic']} dynamic)"
    return text


# -- classification ------------------------------------------------------------------------------


def classify(op) -> tuple[str, str] | None:
    """`(kind, category)` of one graph-level op, or None for bookkeeping."""
    op = op.operation
    name = op.name
    if name in _BOOKKEEPING:
        return None
    if name in _DATA_MOVEMENT_OPS:
        return DATA_MOVEMENT, _DATA_MOVEMENT_OPS[name]
    if name in _VIEW_OPS:
        return VIEW, _VIEW_OPS[name]
    if name.startswith("vt."):
        return DATA_MOVEMENT, "virtual"
    if name == "linalg.generic":
        movement = _generic_data_movement(op)
        if movement:
            return DATA_MOVEMENT, movement
        return COMPUTE, "reduction" if "reduction" in _iterator_types(op) else "elementwise"
    if name.startswith("linalg."):
        if name in ("linalg.yield", "linalg.index"):
            return None
        return COMPUTE, name[len("linalg.") :]
    if not any(_is_tensor(r.type) for r in op.results):
        return None
    if name.startswith(("arith.", "math.")):
        return COMPUTE, "elementwise"
    return OTHER, name.split(".", 1)[-1]


def _iterator_types(op) -> list[str]:
    return iterator_kinds(op) if "iterator_types" in op.attributes else []


def _generic_data_movement(op) -> str | None:
    """'transpose' / 'broadcast' / 'copy' if the generic only moves input elements, else None."""
    if "reduction" in _iterator_types(op):
        return None
    block = op.regions[0].blocks[0]
    body = list(block.operations)
    if len(body) != 1 or body[0].operation.name != "linalg.yield":
        return None
    n_outputs = len(op.results) if len(op.results) else 1
    n_inputs = len(op.operands) - n_outputs
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    category = "copy"
    for out_index, value in enumerate(body[0].operation.operands):
        if not isinstance(value.owner, ir.Block):
            return None
        arg = ir.BlockArgument(value)
        if arg.owner != block or arg.arg_number >= n_inputs:
            return None
        in_map, out_map = maps[arg.arg_number], maps[n_inputs + out_index]
        if not all(_is_dim_or_zero(e) for e in in_map.results) or not out_map.is_permutation:
            return None
        read_dims = [e.position for e in in_map.results if isinstance(e, ir.AffineDimExpr)]
        if len(read_dims) != len(set(read_dims)):
            return None  # a diagonal read (one loop indexing two dims) is not pure data movement
        if in_map == out_map:
            continue
        if in_map.is_permutation and out_map.is_permutation:
            category = "transpose" if category == "copy" else category
        else:
            category = "broadcast"
    return category


def _is_dim_or_zero(expr) -> bool:
    if isinstance(expr, ir.AffineDimExpr):
        return True
    return isinstance(expr, ir.AffineConstantExpr) and expr.value == 0


def _is_tensor(t) -> bool:
    try:
        t = t.maybe_downcast()
    except (AttributeError, ValueError, TypeError):
        pass
    return isinstance(t, (ir.RankedTensorType, ir.UnrankedTensorType))


def op_bytes(op, kind: str) -> int | None:
    op = op.operation
    if kind == VIEW:
        return 0
    if kind != DATA_MOVEMENT:
        return None
    if op.name in _SOURCE_SIZED:
        return shaped_bytes(op.operands[0].type)
    total = 0
    for result in op.results:
        size = shaped_bytes(result.type)
        if size is None:
            return None
        total += size
    return total


# -- collection ------------------------------------------------------------------------------------


def collect_stats(module, annotate: bool = False) -> StatsReport:
    """Measure `module` (an `ir.Module`, its operation, or any op holding `func.func`s)."""
    root = module.operation
    report = StatsReport()
    for func in _functions(root):
        stats = FunctionStats(symbol_name(func))
        _visit_regions(func, stats, annotate)
        report.functions.append(stats)
    return report


def _functions(root) -> list:
    found = []

    def visit(op):
        if op.name == "func.func":
            found.append(op)
            return ir.WalkResult.SKIP
        return ir.WalkResult.ADVANCE

    root.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def _visit_regions(parent, stats: FunctionStats, annotate: bool) -> None:
    # Linalg payloads are scalar bodies, not graph-level ops: not entered.
    for op in nested_ops(parent, descend=lambda o: not o.name.startswith("linalg.")):
        result = classify(op)
        if result is None:
            continue
        kind, category = result
        size = op_bytes(op, kind)
        stats.ops.append(OpStat(stats.name, op.name, kind, category, size, format_location(op.location)))
        if annotate:
            with op.context:
                op.attributes["vt.stats.kind"] = ir.StringAttr.get(kind)
                if size is not None and kind != COMPUTE:
                    op.attributes["vt.stats.bytes"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), size)


# -- the pass --------------------------------------------------------------------------------------


@register_pass
class VtStats(Pass):
    name = "vt-stats"
    summary = "Count compute vs data-movement ops and the bytes data movement moves"
    description = (
        "Classifies every graph-level op (linalg-on-tensors, tensor, vt, layout) as compute, "
        "data-movement or view, and prints per-function counts and a per-op list with locations and "
        "bytes moved (result elements x element size). The IR is left unchanged unless annotate=true."
    )
    options = (
        Option("json", bool, False, "print the report as JSON instead of text"),
        report_option("the report"),
        Option("annotate", bool, False, "add vt.stats.kind / vt.stats.bytes attributes to the classified ops"),
    )

    def run(self, module):
        report = collect_stats(module, annotate=self.annotate)
        self.write_report(module, report.to_json() + "\n" if self.json else report.to_text())
        return report
