"""VTC Alg. 2: the iterative global greedy that turns a VTOG into a points-to graph.

Alg. 2 (VTC §5): start with every node that has no outgoing edge anchored (physical); repeatedly,
for every unanchored node v, MAXEDGES(v, A) picks a conflict-free set of v's outgoing edges into the
anchored set A with the largest sum of weights w(e) (Eq. 4: the marginal saving of adding e to the
chosen set C); the node with the largest sum is anchored with those edges, and the weights of the
edges into it are recomputed (Alg. 2 lines 18–19). MAXEDGES may return the empty set (saving 0):
the node is then anchored physical, exactly as in Alg. 2 where `max_saving` starts at −∞ and a node
without usable edges scores 0. The loop stops when every node is anchored or the best saving is
negative (line 14).

Edges only point into A, so the chosen edges never form a cycle, and a node's chosen edges are
conflict-free (S(v), Alg. 1): the points-to graph is a forest of mappings that compose
(F_outer ∘ F_base) from each virtual tensor down to physical ones.

w(e) comes from a pluggable `CostModel`. `AnalyticCostModel` (the default) estimates bytes of memory
traffic instead of profiling (the paper profiles; a measured mode is not implemented yet):

    w(e) = saved − contiguity penalty − materialisation + unblocked

* saved: the data-movement op stops reading and writing the region of the virtual tensor the edge
  covers: 2 × region bytes when vt-stats counts the op as moving data, 0 for a reshape (already a
  zero-copy view after bufferization).
* contiguity penalty (Defs. 4–5, Thm. 1 via `contiguity.classify` on the mapping composed down to
  physical tensors): Type I costs nothing; Type II partially contiguous costs `partial_penalty` ×
  region bytes per reader, incontiguous `none_penalty` × region bytes per reader (a reader walks the
  physical tensor in the wrong order).
* materialisation: a reader that cannot read through the mapping (a returned value, a non-linalg
  op, an init operand, any reader of a multi-piece view — see vt-lower-views) forces the view to be
  gathered again: 2 × region bytes. A reader that is itself a catalogued data-movement op with an
  edge back to v is not charged: it may become a view itself (composition).
* unblocked: when the edge's target t is already virtual and v's op could not read t through a
  mapping, anchoring v as a view removes the gather of t that keeping v physical would need.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from torch_mlir import ir

from ..dialects.vt_mapping import MappingCompositionError, MappingFunction, Piece
from ..passes.vt_stats import DATA_MOVEMENT, classify as stats_classify
from . import catalogue as cat
from .contiguity import CPU_CACHE_LINE, Profitability, TransferUnit, classify
from .build_vtog import VTOG, Edge, element_bytes

#: Brute-force MAXEDGES up to this many candidate edges per node (2^k subsets); beyond, greedy.
MAX_EXACT_EDGES = 10


# -- cost models ------------------------------------------------------------------------------------


@dataclass
class Weight:
    """w(e) of one edge in the current state, with its parts (printed in the decision)."""

    value: float
    saved: int = 0
    penalty: float = 0.0
    materialise: int = 0
    unblocked: int = 0
    profit: Profitability | None = None
    mapping: MappingFunction | None = None      # the edge's mapping composed down to physical tensors
    sources: list = field(default_factory=list)  # node ids the composed mapping reads


class CostModel:
    """w(e) = ℓ(C ∪ {e}) − ℓ(C) (VTC Eq. 4). Subclasses implement `weight`."""

    name = "abstract"
    #: what `Weight.value` counts, printed with the estimated saving ("B" bytes, "ns" time).
    weight_unit = "B"
    #: Every kernel is a launch of its own (CUDA): a reader split at a view's pieces costs a launch
    #: per piece, which the concat's input-of-output direction avoids (concat_stores.split_reader).
    #: On the CPU a split is one more loop nest in the same function.
    kernel_launches = False

    def weight(self, state: "GreedyState", edge: Edge) -> Weight:  # pragma: no cover - interface
        raise NotImplementedError


class AnalyticCostModel(CostModel):
    """Bytes of memory traffic saved minus a contiguity penalty (see the module docstring)."""

    name = "analytic"

    def __init__(self, unit: TransferUnit | int = CPU_CACHE_LINE, partial_penalty: float = 0.25,
                 none_penalty: float = 1.0, multi_piece_readers: bool = False,
                 kernel_launches: bool = False):
        self.unit = unit
        self.kernel_launches = kernel_launches
        self.partial_penalty = partial_penalty
        self.none_penalty = none_penalty
        # Whether linalg readers of a multi-piece view read it without a gather (vt-lower-views
        # splits their loop range at piece boundaries; the pass sets True).
        self.multi_piece_readers = multi_piece_readers

    def weight(self, state: "GreedyState", edge: Edge) -> Weight:
        g = state.graph
        c = edge.candidate
        v = g.nodes[edge.src]
        elt = element_bytes(v.value)
        region = cat.region_elements(c.mapping, c.virtual_shape) * elt
        moves = op_moves_bytes(c.op)
        saved = 2 * region if moves else 0
        mapping, sources = state.composed(edge)
        profit = None
        penalty = 0.0
        readers = readers_excluding(v.value, c.op)
        if mapping is not None:
            key = ("classify", edge.id, mapping.pieces, tuple(sources), elt, self.unit)
            if key not in g.compositions:
                try:
                    g.compositions[key] = classify(
                        mapping, c.virtual_shape,
                        [list(ir.RankedTensorType(g.nodes[s].value.type).shape) for s in sources], elt, self.unit)
                except ValueError:
                    g.compositions[key] = None
            profit = g.compositions[key]
        factor = 0.0 if profit is None or profit.type == "I" else (
            self.partial_penalty if profit.contiguity == "partial" else self.none_penalty)
        # Output-of-input: every reader walks the mapping. Input-of-output: the one producer writes
        # through it (its other readers are charged by the gather term below if they cannot read it).
        walkers = max(1, len(readers)) if c.direction == cat.OUTPUT_OF_INPUT else 1
        penalty = factor * region * walkers
        multi = mapping is None or len(mapping.pieces) > 1 or not c.full
        blocked = [u for u in readers
                   if not can_read_view(u, v.value, multi, state.edges, self.multi_piece_readers)]
        materialise = 2 * region if blocked else 0
        unblocked = 0
        t = edge.dst
        if state.virtual.get(t) and c.direction == cat.OUTPUT_OF_INPUT and not _is_linalg_reader(c.op, g.nodes[t].value):
            unblocked = 2 * cat.region_elements(MappingFunction.identity(len(c.physical_shape)),
                                             c.physical_shape) * elt
        value = saved - penalty - materialise + unblocked
        return Weight(value, saved, penalty, materialise, unblocked, profit, mapping, sources)




def op_moves_bytes(op) -> bool:
    kind = stats_classify(op)
    return kind is not None and kind[0] == DATA_MOVEMENT


def readers_excluding(value, exclude) -> list:
    """Ops reading `value`, without the data-movement op the edge eliminates."""
    out = []
    for use in value.uses:
        owner = use.owner
        owner = owner.operation if hasattr(owner, "operation") else owner
        if exclude is not None and owner == exclude:
            continue
        out.append((owner, use.operand_number))
    return out


def _is_linalg_reader(op, value) -> bool:
    """`op` is a linalg structured op reading `value` as an input (not an init): it can read through
    a single-piece mapping once generalized (vt-lower-views folds the map into its indexing map)."""
    op = op.operation
    if not op.name.startswith("linalg.") or op.name in ("linalg.yield", "linalg.index"):
        return False
    n_inits = num_inits(op)
    n_in = len(op.operands) - n_inits
    return any(op.operands[i] == value for i in range(n_in))


def num_inits(op) -> int:
    """DPS inits of a linalg op: one per tensor result."""
    return len(op.results)


def can_read_view(use, value, multi_piece: bool, edges: list[Edge], split_readers: bool = False) -> bool:
    """Whether reader `use` reads a view of `value` without a gather: a linalg input (vt-lower-views
    folds a single-piece mapping into its indexing map; with `split_readers` a reader of a
    multi-piece view, once generalized, has its loop range split at the pieces — or, where the
    split dim is a reduction loop, the view is gathered, which this estimate does not charge), or
    a data-movement op that may itself become a view (it has a usable edge back to `value` among
    `edges`, the ones the greedy may choose)."""
    owner, operand = use
    if owner.name == "func.return":
        return False
    if owner.name.startswith("linalg.") and (not multi_piece or split_readers):
        n_in = len(owner.operands) - num_inits(owner)
        if operand < n_in:
            return True
    # A catalogued data-movement reader that may itself become a view of `value` (composition).
    if cat.entry_for(owner) is not None:
        for e in edges:
            c = e.candidate
            if c.op == owner and c.direction == cat.OUTPUT_OF_INPUT and c.physical == value and c.full:
                return True
    return False


# -- Alg. 2 --------------------------------------------------------------------------------------------


@dataclass
class Choice:
    """One iteration of Alg. 2: node anchored, edges chosen, saving; rejected conflicting edges."""

    node: int
    edges: list[int]
    saving: float
    weights: dict[int, Weight]
    conflicting: list[int] = field(default_factory=list)


class GreedyState:
    def __init__(self, graph: VTOG, edges: list[Edge]):
        self.graph = graph
        self.edges = edges
        self.anchored: set[int] = set()
        self.chosen: dict[int, list[Edge]] = {}
        self.virtual: dict[int, bool] = {}
        self.out_edges: dict[int, list[Edge]] = {}
        for e in edges:
            self.out_edges.setdefault(e.src, []).append(e)
        # An anchored node's mapping never changes (its edges are chosen once, into nodes anchored
        # before it): computed once, when it is anchored, a chain of views costs one composition per
        # link instead of recomposing (recursively) the whole chain below at every query.
        self._mappings: dict[int, tuple[MappingFunction | None, list[int]]] = {}

    def anchor(self, node: int, picked: list[Edge]) -> None:
        """Anchor `node` with its chosen edges (Alg. 2 line 16) and record its composed mapping."""
        self.anchored.add(node)
        self.chosen[node] = picked
        self.virtual[node] = bool(picked)
        self._mappings[node] = self._compute_mapping(node)

    def mapping_of(self, node: int) -> tuple[MappingFunction | None, list[int]]:
        """The composed mapping of an anchored node down to physical nodes (identity if physical)."""
        if node in self._mappings:
            return self._mappings[node]
        return self._compute_mapping(node)

    def _compute_mapping(self, node: int) -> tuple[MappingFunction | None, list[int]]:
        if not self.virtual.get(node):
            rank = len(ir.RankedTensorType(self.graph.nodes[node].value.type).shape)
            return MappingFunction.identity(rank), [node]
        pieces, sources = [], []
        for e in self.chosen[node]:
            m, srcs = self.composed(e)
            if m is None:
                return None, []
            base = len(sources)
            sources += srcs
            pieces += [Piece(p.source + base, p.map, p.ranges) for p in m.pieces]
        return MappingFunction(pieces), sources

    def composed(self, edge: Edge) -> tuple[MappingFunction | None, list[int]]:
        """Edge mapping (v's region → t) composed with t's mapping (t → physical): F_t ∘ F_e."""
        base, sources = self.mapping_of(edge.dst)
        if base is None:
            return None, []
        if not self.virtual.get(edge.dst):
            return edge.candidate.mapping, [edge.dst]
        key = ("compose", edge.id, base.pieces, tuple(sources))   # pieces in order: so is the result
        if key not in self.graph.compositions:
            try:
                m = base.compose(edge.candidate.mapping, shape=edge.candidate.virtual_shape, at=0)
            except (MappingCompositionError, ValueError):
                self.graph.compositions[key] = None, []
            else:
                m, kept = m.drop_unused_sources()
                self.graph.compositions[key] = m, [sources[i] for i in kept]
        m, srcs = self.graph.compositions[key]
        return m, list(srcs)


def _covers(edges: list[Edge], shape) -> bool:
    total = 1
    for e in shape:
        total *= e
    return sum(cat.region_elements(e.candidate.mapping, shape) for e in edges) == total


def max_edges(state: GreedyState, node: int, weights: dict[int, Weight],
              require_cover: bool) -> tuple[list[Edge], float, list[int]]:
    """MAXEDGES(v, C(v), A): conflict-free edges of v into A with the largest sum of w(e).

    With `require_cover` only sets covering all of v count (the rewrite keeps no residual storage
    for a partly virtual tensor); the empty set (v stays physical) always counts, with saving 0.
    Also returns the usable edges left out because they conflict with the chosen ones."""
    g = state.graph
    usable = [e for e in state.out_edges.get(node, ()) if e.dst in state.anchored]
    shape = list(ir.RankedTensorType(g.nodes[node].value.type).shape)
    best: tuple[list[Edge], float] = ([], 0.0)
    if len(usable) <= MAX_EXACT_EDGES:
        subsets = (list(s) for k in range(1, len(usable) + 1) for s in itertools.combinations(usable, k))
    else:   # greedy by weight, keeping conflict-freedom
        order = sorted(usable, key=lambda e: -weights[e.id].value)
        picked: list[Edge] = []
        for e in order:
            if g.compatible(picked + [e]):
                picked.append(e)
        subsets = iter([picked])
    for s in subsets:
        if not g.compatible(s):
            continue
        if require_cover and not _covers(s, shape):
            continue
        if any(weights[e.id].mapping is None for e in s):
            continue
        total = sum(weights[e.id].value for e in s)
        if total > best[1]:
            best = (s, total)
    chosen_ids = {e.id for e in best[0]}
    usable_ids = {e.id for e in usable}
    conflicting = sorted({b for a in chosen_ids for b in g.conflicting_edges(a)
                          if b not in chosen_ids and b in usable_ids})
    return best[0], best[1], conflicting


@dataclass
class PointsToGraph:
    graph: VTOG
    choices: list[Choice]
    chosen: dict[int, list[Edge]]
    total_saving: float
    cost_model: str
    unit: str = "B"

    def virtual_nodes(self) -> list[int]:
        return [n for n, es in self.chosen.items() if es]

    def to_text(self) -> str:
        g = self.graph
        names = {n.id: n.name for n in g.nodes}
        chosen = [c for c in self.choices if c.edges]
        lines = [f"points-to @{g.function}: {len(chosen)} virtual tensors, "
                 f"{sum(len(c.edges) for c in chosen)} edges, estimated saving "
                 f"{self.total_saving:.0f} {self.unit} (cost model {self.cost_model})"]
        for c in chosen:
            for eid in c.edges:
                e = g.edges[eid]
                w = c.weights[eid]
                prof = f" {w.profit}" if w.profit else ""
                lines.append(f"  choose e{eid}: {names[e.src]} -> {names[e.dst]} {e.candidate.kind} "
                             f"{e.candidate.direction} w={w.value:.0f} (saved {w.saved}, penalty "
                             f"{w.penalty:.0f}, gather {w.materialise}, unblocked {w.unblocked}){prof}")
            for eid in c.conflicting:
                e = g.edges[eid]
                lines.append(f"  reject e{eid}: {names[e.src]} -> {names[e.dst]} {e.candidate.kind} "
                             f"{e.candidate.direction}: conflicts with chosen "
                             f"{', '.join(f'e{x}' for x in c.edges)} in S({names[c.node]})")
        return "\n".join(lines) + "\n"


def build_points_to_graph(graph: VTOG, cost_model: CostModel | None = None,
                          edge_filter=None, require_cover: bool = True) -> PointsToGraph:
    """VTC Alg. 2 on one VTOG. `edge_filter(edge) -> bool` restricts the edges the greedy may choose
    (the rewrite passes the edges it can realise); the others are ignored."""
    if not graph.nodes:
        return PointsToGraph(graph, [], {}, 0.0, (cost_model or AnalyticCostModel()).name)
    with graph.nodes[0].value.type.context:
        return _build_points_to_graph(graph, cost_model, edge_filter, require_cover)


def _build_points_to_graph(graph, cost_model, edge_filter, require_cover) -> PointsToGraph:
    model = cost_model or AnalyticCostModel()
    edges = [e for e in graph.edges if edge_filter is None or edge_filter(e)]
    state = GreedyState(graph, edges)
    has_out = {e.src for e in edges}
    for n in graph.nodes:                       # Alg. 2 lines 2-4
        if n.id not in has_out:
            state.anchored.add(n.id)
    choices: list[Choice] = []
    total = 0.0
    all_nodes = {n.id for n in graph.nodes}
    weights = {e.id: model.weight(state, e) for e in edges}   # line 6
    into: dict[int, list[Edge]] = {}
    for e in edges:
        into.setdefault(e.dst, []).append(e)
    # MAXEDGES(v) depends only on v's edges into anchored nodes and their weights: it is computed
    # again only for the sources of edges into the node just anchored (each step then costs the
    # nodes it touches, not every node: a chain of 1000 slices is quadratic otherwise).
    best_of = {n.id: max_edges(state, n.id, weights, require_cover) for n in graph.nodes
               if n.id not in state.anchored}
    while state.anchored != all_nodes:          # line 8
        best = None
        for n in graph.nodes:                    # line 10
            if n.id in state.anchored:
                continue
            p, s, conflicting = best_of[n.id]
            if best is None or s > best[2]:
                best = (n.id, p, s, conflicting)
        if best is None or best[2] < 0:         # line 14
            break
        node, picked, saving, conflicting = best
        state.anchor(node, picked)               # line 16
        del best_of[node]
        total += saving
        choices.append(Choice(node, [e.id for e in picked], saving,
                              {e.id: weights[e.id] for e in picked}, conflicting))
        # Lines 18-19: re-weigh the edges into the newly anchored node (their composed mapping,
        # and so contiguity, and the gather/unblocked terms depend on whether it is virtual).
        for e in into.get(node, ()):
            weights[e.id] = model.weight(state, e)
        for src in {e.src for e in into.get(node, ())}:
            if src not in state.anchored:
                best_of[src] = max_edges(state, src, weights, require_cover)
    return PointsToGraph(graph, choices, state.chosen, total, model.name, model.weight_unit)
