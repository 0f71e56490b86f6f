"""The virtual tensor opportunity graph (VTC Def. 6, Alg. 1) and the `vt-build-vtog` analysis pass.

Nodes are the tensors of one graph-level function: its arguments and the tensor results of its ops
(Alg. 1 lines 1–5). An edge `u → v` says "u can be made a virtual tensor of v by eliminating one
data-movement op" (Def. 6); edges come from the catalogue's rules (catalogue.py, VTC §4.4) and each
carries its mapping (u's index → v's index) over the *region* of u it covers, so a split source or a
concat result can point at several tensors, one region each. Graph inputs and outputs must stay
physical (Alg. 1 line 10): no edge leaves them. Here the graph inputs are the function arguments and
tensor constants (weights are parameters: making them virtual would be constant folding, not VTC).

Conflict sets (Alg. 1 lines 12–13, Fig. 7): two outgoing edges of u conflict when their regions of u
overlap — choosing both would map one index of u to two physical places, breaking the one-to-one
property of a virtual tensor's mapping. Edges whose regions are disjoint (the pieces of a concat
result, the slices of a split) compose into one multi-piece mapping and do not conflict.

Not conflicts, and left to the greedy (Alg. 2): cycles (u → v and v → u both chosen leaves no
storage; Alg. 2 only adds edges into the anchored set, which rules them out) and a node whose chosen
edges do not cover all of it (the rest stays physical, a residual the rewrite materialises).

Every edge is also classified (Thm. 1 / Defs. 4–5, contiguity.py) for the transfer unit given.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from torch_mlir import ir

from ..errors import format_location
from ..ir_types import element_bits
from ..ir_utils import walk_ops
from ..passes.registry import Option, Pass, register_pass, report_option
from . import catalogue as cat
from .contiguity import TARGETS, Profitability, TransferUnit, classify

_CONSTANT_OPS = {"arith.constant", "ml_program.global_load_const"}
_NOT_NODES = {"tensor.empty", "bufferization.alloc_tensor"}


@dataclass
class Node:
    id: int
    value: ir.Value
    name: str
    type: str
    role: str          # "input", "constant", "output", "" (intermediate)
    producer: str      # op name, or "arg"

    @property
    def must_be_physical(self) -> bool:
        return self.role in ("input", "constant", "output")


@dataclass
class Edge:
    id: int
    src: int           # the tensor that becomes virtual
    dst: int           # the tensor it points to
    candidate: cat.Candidate
    profit: Profitability | None

    @property
    def label(self) -> str:
        return f"e{self.id}"


@dataclass
class Dropped:
    src: str
    dst: str
    kind: str
    direction: str
    reason: str


@dataclass
class VTOG:
    """VTC Def. 6 for one function, with conflict sets S(v) (Alg. 1)."""

    function: str
    nodes: list[Node] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    conflicts: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    dropped: list[Dropped] = field(default_factory=list)
    rejected: list[tuple[str, str, str, str]] = field(default_factory=list)  # (op, kind, rule, why)
    data_movement_ops: int = 0
    # Mappings composed for the greedy and their contiguity, by edge and the mapping of its target:
    # pure functions of these, shared by every run of Alg. 2 on this VTOG (the memory check reruns
    # it once per virtual node and round; greedy.GreedyState.composed, AnalyticCostModel.weight).
    compositions: dict = field(default_factory=dict, repr=False, compare=False)
    # Per edge, the edges it conflicts with (from `conflicts`, which `build_vtog` fills once): Alg. 2
    # asks `compatible` for every subset MAXEDGES weighs, in every rerun of the memory check; a scan
    # of all the function's pairs per question made DenseNet-169's compile minutes long.
    _conflicting: dict[int, frozenset[int]] | None = field(default=None, repr=False, compare=False)

    def node(self, value) -> Node | None:
        for n in self.nodes:
            if n.value == value:
                return n
        return None

    def by_name(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def out_edges(self, node: int) -> list[Edge]:
        return [e for e in self.edges if e.src == node]

    def in_edges(self, node: int) -> list[Edge]:
        return [e for e in self.edges if e.dst == node]

    def conflict_pairs(self) -> list[tuple[int, int]]:
        return [p for pairs in self.conflicts.values() for p in pairs]

    def conflicting_edges(self, edge: int) -> frozenset[int]:
        """The edges in a conflict set with `edge` (an id)."""
        if self._conflicting is None:
            partners: dict[int, set[int]] = {}
            for a, b in self.conflict_pairs():
                partners.setdefault(a, set()).add(b)
                partners.setdefault(b, set()).add(a)
            self._conflicting = {e: frozenset(others) for e, others in partners.items()}
        return self._conflicting.get(edge, frozenset())

    def compatible(self, edges) -> bool:
        """No two of `edges` (Edge or id) are in a conflict set: they may be chosen together."""
        ids = {e.id if isinstance(e, Edge) else e for e in edges}
        return not any(self.conflicting_edges(e) & ids for e in ids)

    # -- dumps ---------------------------------------------------------------------------------------

    def to_text(self) -> str:
        names = {n.id: n.name for n in self.nodes}
        lines = [f"vtog @{self.function}: {len(self.nodes)} nodes, {len(self.edges)} edges, "
                 f"{len(self.conflict_pairs())} conflicts, {self.data_movement_ops} data-movement ops"]
        for n in self.nodes:
            role = f" [{n.role}]" if n.role else ""
            lines.append(f"  node {n.name} : {n.type} = {n.producer}{role}")
        for e in self.edges:
            c = e.candidate
            cover = "full" if c.full else "partial"
            extra = " in-place" if c.in_place else ""
            profit = f" {e.profit}" if e.profit else ""
            lines.append(f"  edge {e.label}: {names[e.src]} -> {names[e.dst]} {c.kind} {c.direction} "
                         f"{cover}{extra}{profit} map {mapping_text(c.mapping)}")
        for nid, pairs in self.conflicts.items():
            body = ", ".join(f"(e{a}, e{b})" for a, b in pairs)
            lines.append(f"  S({names[nid]}) = {{{body}}}")
        for d in self.dropped:
            lines.append(f"  kept-physical {d.src} -> {d.dst} {d.kind} {d.direction}: {d.reason}")
        for op, kind, rule, why in self.rejected:
            lines.append(f"  not-virtualisable {op} {kind} {rule}: {why}")
        return "\n".join(lines) + "\n"

    def to_dot(self) -> str:
        conflicts_of: dict[int, list[str]] = {}
        for nid, pairs in self.conflicts.items():
            conflicts_of[nid] = [f"e{a}×e{b}" for a, b in pairs]
        out = [f'digraph "vtog_{self.function}" {{', "  rankdir=LR;", '  node [shape=box, fontname="monospace"];']
        for n in self.nodes:
            label = f"{n.name}\\n{n.type}\\n{n.producer}"
            if n.id in conflicts_of:
                label += "\\nS: " + " ".join(conflicts_of[n.id])
            style = ', style=filled, fillcolor="gray80"' if n.must_be_physical else ""
            out.append(f'  n{n.id} [label="{_dot_escape(label)}"{style}];')
        for e in self.edges:
            c = e.candidate
            typ = f"\\ntype {e.profit.type}" if e.profit else ""
            style = "" if c.full else ", style=dashed"
            color = ', color="red"' if self.conflicting_edges(e.id) else ""
            out.append(f'  n{e.src} -> n{e.dst} [label="{e.label} {c.kind}\\n{c.direction}{typ}"'
                       f"{style}{color}];")
        out.append("}")
        return "\n".join(out) + "\n"


def _dot_escape(text: str) -> str:
    return text.replace('"', '\\"')


def mapping_text(m) -> str:
    parts = []
    for p in m.pieces:
        box = " ".join(f"{lo}<=d{d}<{hi}" for d, lo, hi in p.ranges)
        parts.append(f"{p.map}" + (f" on {box}" if box else ""))
    return " | ".join(parts)


def element_bytes(value) -> int:
    bits = element_bits(ir.RankedTensorType(value.type).element_type) or 8
    return max(1, (bits + 7) // 8)


def _regions_overlap(a, b, shape) -> bool:
    for p in a.pieces:
        for q in b.pieces:
            if all(max(p.extent(d, shape)[0], q.extent(d, shape)[0])
                   < min(p.extent(d, shape)[1], q.extent(d, shape)[1]) for d in range(len(shape))):
                return True
    return False


def _is_ranked_tensor(t) -> bool:
    return isinstance(t.maybe_downcast() if hasattr(t, "maybe_downcast") else t, ir.RankedTensorType)


def build_vtog(func, unit: TransferUnit | int = TARGETS["cuda"]) -> VTOG:
    """VTC Alg. 1 on one `func.func` (an `ir.Operation` / OpView)."""
    func = func.operation
    with func.context, ir.Location.unknown():
        return _build_vtog(func, unit)


def _build_vtog(func, unit) -> VTOG:
    state = ir.AsmState(func)
    graph = VTOG(ir.StringAttr(func.attributes["sym_name"]).value)
    block = func.regions[0].blocks[0]
    index: dict = {}

    def add(value, role, producer) -> Node:
        key = _key(value)
        if key in index:
            return graph.nodes[index[key]]
        node = Node(len(graph.nodes), value, value.get_name(state), str(value.type), role, producer)
        index[key] = node.id
        graph.nodes.append(node)
        return node

    # Alg. 1 lines 1-5: I, O and every op output.
    outputs = set()
    for op in block.operations:
        if op.operation.name == "func.return":
            outputs = {_key(v) for v in op.operation.operands}
    for arg in block.arguments:
        if _is_ranked_tensor(arg.type):
            add(arg, "input", "arg")
    ops = []
    for op in block.operations:
        op = op.operation
        ops.append(op)
        if op.name in _NOT_NODES or op.name == "func.return":
            continue
        role = "constant" if op.name in _CONSTANT_OPS else ""
        for r in op.results:
            if _is_ranked_tensor(r.type):
                add(r, role, op.name)
    for n in graph.nodes:
        if _key(n.value) in outputs:
            n.role = "output" if n.role == "" else n.role

    # Alg. 1 lines 6-11: edges from the catalogue's rules.
    for op in ops:
        analysis = cat.analyse(op)
        if analysis is None:
            continue
        graph.data_movement_ops += 1
        where = f"{op.name}@{_loc(op)}"
        for rule, why in analysis.rejected:
            graph.rejected.append((where, analysis.kind, rule, why))
        for c in analysis.candidates:
            u = add(c.virtual, "", c.virtual.owner.name if not isinstance(c.virtual.owner, ir.Block) else "arg")
            v = add(c.physical, "", c.physical.owner.name if not isinstance(c.physical.owner, ir.Block) else "arg")
            if u.must_be_physical:
                graph.dropped.append(Dropped(u.name, v.name, c.kind, c.direction,
                                             f"{u.name} is a graph {u.role} (Alg. 1 line 10)"))
                continue
            try:
                profit = classify(c.mapping, c.virtual_shape, [c.physical_shape],
                                  element_bytes(c.virtual), unit)
            except ValueError:
                profit = None
            graph.edges.append(Edge(len(graph.edges), u.id, v.id, c, profit))

    # Alg. 1 lines 12-13: conflict sets.
    out_of: dict[int, list[Edge]] = {}
    for e in graph.edges:
        out_of.setdefault(e.src, []).append(e)
    for n in graph.nodes:
        out = out_of.get(n.id, [])
        shape = list(ir.RankedTensorType(n.value.type).shape)
        pairs = [(a.id, b.id) for a, b in itertools.combinations(out, 2)
                 if _regions_overlap(a.candidate.mapping, b.candidate.mapping, shape)]
        if pairs:
            graph.conflicts[n.id] = pairs
    return graph


def _key(value):
    """Values hash and compare by the underlying MLIR value."""
    return value


def _loc(op) -> str:
    return format_location(op.location)


def build_vtogs(module, unit: TransferUnit | int = TARGETS["cuda"]) -> list[VTOG]:
    """One VTOG per `func.func` with a body in `module`."""
    return [build_vtog(f, unit) for f in walk_ops(module, "func.func") if len(f.regions[0].blocks)]


@register_pass
class BuildVTOG(Pass):
    name = "vt-build-vtog"
    summary = "Build the virtual tensor opportunity graph and conflict sets (VTC Alg. 1)"
    description = (
        "Analysis: for every function, the tensors (nodes), the virtual-tensor opportunities of "
        "its data-movement ops (edges u -> v: u can be a virtual tensor of v, from the catalogue of "
        "docs/vtc.md), each edge's mapping, region and Type I/II class, and the conflict set S(u) "
        "of every node (outgoing edges whose regions of u overlap). Graph inputs, constants and "
        "outputs stay physical. Prints text (report=) and optionally Graphviz DOT. The IR "
        "is unchanged.")
    options = (
        report_option("the text dump"),
        Option("dot", str, "", "also write the VTOG as Graphviz DOT to this path"),
        Option("target", str, "cuda", "transfer unit preset for Defs. 4-5: cuda (128 B) or cpu (64 B)"),
        Option("unit-bytes", int, 0, "minimal memory transfer unit in bytes (overrides target)"),
    )

    def run(self, module):
        if self.unit_bytes < 0:
            self.emit_error(module, "vt-build-vtog: unit-bytes must not be negative (0 = the target's unit)")
            return
        if self.target not in TARGETS:
            self.emit_error(module, f"vt-build-vtog: unknown target '{self.target}' "
                                    f"(expected one of {', '.join(TARGETS)})")
            return
        unit = self.unit_bytes or TARGETS[self.target]
        graphs = build_vtogs(module, unit)
        text = "".join(g.to_text() for g in graphs)
        if self.write_report(module, text) and self.dot:
            self.write_report(module, "".join(g.to_dot() for g in graphs), self.dot)
        return graphs
