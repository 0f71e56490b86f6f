"""Memory-aware Alg. 2: the greedy's views may not raise the peak memory.

VTC's Alg. 2 weighs memory traffic only (Eq. 4, §5.2): it never sees that a view keeps its physical
sources alive. A virtual tensor is read from its sources (Def. 3), so a source buffer lives until
the last reader of every view composed from it, where the data-movement op it replaces would have
let it die right after the op. Across a phase that allocates more, that raises the peak (ShuffleNet:
unit 1's channel shuffle as a view keeps unit 1's concat buffer allocated through unit 2's branch,
where the peak is). Table 2 of the paper reports peak memory savings; a data-movement optimiser that
raises the peak is not what a user who cares about memory wants.

The check, per function, after the greedy (`fit`):

1. The peak of the function as the backend will allocate it, with the chosen points-to graph and
   without any of the greedy's views (the stores of §4 are in both: they are planned before the
   greedy). A candidate is evaluated on a copy of the module: rewritten to views (`eliminate`'s
   rewrite), lowered (`vt-lower-views`: folded views, split loops, views materialised by their
   producers), bufferized by the backend's own pipeline (`backend/bufferize.GRAPH_TO_KERNELS`:
   results computed in their out-parameters, buffer reuse, elided temporaries), allocations placed at
   their first use (`memref-alloc-at-first-use`, the CPU lowering's first stage), and replayed in
   program order (`backend.cpu.peak_memory.kernel_allocation_timeline`, whose peak equals the runtime's
   measured internal peak: test_temco_measure.py). Inputs, outputs and weights are the same in
   both, so internal peaks compare totals.

   Why not the graph-level `temco-analyze-peak-memory`: it cannot see what bufferization does
   with out-parameters (the unoptimised ShuffleNet computes unit 1's shuffle in the out-parameter,
   which is free until the last kernel writes it) nor which views `vt-lower-views` materialises;
   on ShuffleNet (small) it gave every variant the same peak with inputs and outputs (2880 B), and
   its internal peak ranked the greedy's full choice (2752 B) *below* the unoptimised graph
   (2880 B) where the runtime measured 2944 B against 1856 B.

2. When the views raise it, Alg. 2 is run again with one virtual node forced physical (its edges
   removed, Alg. 2 lines 2-4: it starts anchored), for every virtual node of the current choice; the
   run with the lowest peak wins (ties: the larger estimated saving), its node stays physical, and
   this repeats until the peak is at most the limit. It terminates: with every node physical the
   peak is the limit itself. Each rejection is reported with both peaks.

   When a round lowers nothing (some views raise the peak together, none alone: a 2-layer
   Mixtral's attention), the nodes to keep physical together are searched by bisection over that
   round's order (lowest peak, then largest saving, first; `_needed_together`): about log2(views)
   evaluations per node kept, where each further round would evaluate every view again to keep one
   node (the Mixtral ran 670 evaluations, 88 s, and ended past the budget with no views).

Costs: two evaluations per function when the views do not raise the peak (one backend
bufferization of the function each: a fraction of a second at the benchmark sizes), plus one per
virtual node and round when they do. `memory-aware=false` turns the check off. Allocations inside
loops or branches (which the replay does not model) skip the check, with the reason reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torch_mlir import ir

from ..errors import VtmlirError
from ..ir_utils import copy_module, symbol_name, walk_ops
from ..passes import run_pipeline
from .greedy import PointsToGraph
from .lower_views import lower_views
from .rewrite import compose_view_chains, rewrite_points_to
from .build_vtog import build_vtog


@dataclass
class MemoryDecision:
    """What the check found for one function (printed under the points-to graph)."""

    limit: int | None = None             # peak without the greedy's views (bytes)
    peak: int | None = None              # peak of the points-to graph finally chosen
    first_peak: int | None = None        # peak of Alg. 2's unconstrained choice
    rejected: list[tuple[int, int, int]] = field(default_factory=list)   # (node, peak with, peak without)
    # (nodes, peak with, peak without): nodes kept physical together (none alone lowered the peak)
    rejected_together: list[tuple[list[int], int, int]] = field(default_factory=list)
    skipped: str | None = None           # why no check ran
    evaluations: int = 0
    over_budget: str | None = None       # why the views were dropped unchecked (`MAX_NODE_EVALUATIONS`)

    def lines(self, names: dict[int, str], first_edges: dict[int, str]) -> list[str]:
        if self.skipped:
            return [f"memory: not checked ({self.skipped})"]
        out = []
        for node, with_it, without in self.rejected:
            out.append(f"keep-physical {names[node]} ({first_edges.get(node, '')}): as a view it keeps its "
                       f"sources allocated until its last reader; peak {with_it} B with it virtual, "
                       f"{without} B without (limit {self.limit} B)")
        for nodes, with_them, without in self.rejected_together:
            out.append(f"keep-physical {', '.join(names[n] for n in nodes)}: no one of the views alone raises "
                       f"the peak, together they keep their sources allocated; peak {with_them} B with them "
                       f"virtual, {without} B without (limit {self.limit} B)")
        kept = len(self.rejected) + sum(len(nodes) for nodes, _, _ in self.rejected_together)
        tail = f"; Alg. 2's choice alone: {self.first_peak} B, {kept} node(s) kept physical" if kept else ""
        if self.over_budget:
            tail += f"; {self.over_budget}"
        out.append(f"memory: peak {self.peak} B with the chosen views, {self.limit} B without any{tail} "
                   f"({self.evaluations} bufferized evaluations)")
        return out


def _copy_module(func) -> ir.Module:
    copy = copy_module(func)
    if copy is None:
        raise VtmlirError("the function is not inside a module")
    return copy


def backend_peak(module: ir.Module, function: str) -> int:
    """Internal peak (bytes) of `@function` as the backend allocates it: views lowered, bufferized,
    allocations at first use, replayed in program order (see the module docstring)."""
    # The backend (bufferization, the allocation replay) only when a check runs: importing the CPU
    # backend loads the JIT's runtime libraries, which `import vtmlir` should not pay for.
    from ..backend.bufferize import bufferize
    from ..backend.cpu.peak_memory import kernel_allocation_timeline

    lower_views(module)
    bufferize(module)
    run_pipeline(module, "builtin.module(memref-alloc-at-first-use)",
                 what="placing allocations for the memory check")
    try:
        return kernel_allocation_timeline(module, function).peak_bytes
    except ValueError as err:
        raise VtmlirError(str(err)) from None


def function_named(module: ir.Module, name: str):
    """The one defined `func.func @name` of `module` (an error if there is none or several)."""
    funcs = [f for f in walk_ops(module.operation, "func.func")
             if len(f.regions[0].blocks) and symbol_name(f) == name]
    if len(funcs) != 1:
        raise VtmlirError(f"@{name} is not unique in its module")
    return funcs[0]


def peak_of_edited_copy(op, function: str, edit) -> int:
    """Backend peak of `@function` after `edit(copy)` rewrote a copy of the module that is or
    encloses `op`: how a pass weighs a rewrite by the memory it would leave, without touching the
    original (VTC's memory check, TeMCO's pads and groups `where=peak`)."""
    copy = _copy_module(op)
    edit(copy)
    return backend_peak(copy, function)


class Evaluator:
    """Peaks of points-to graphs of one function, each on a fresh copy of the module."""

    def __init__(self, func, graph, unit):
        self.func = func
        self.name = symbol_name(func)
        self.graph = graph
        self.unit = unit
        self.count = 0

    def peak(self, chosen: dict[int, list]) -> int:
        """The peak with the views of `chosen` (node id -> edges of `self.graph`)."""
        self.count += 1

        def rewrite(copy: ir.Module) -> None:
            if not chosen:
                return
            func = function_named(copy, self.name)
            graph = build_vtog(func, self.unit)
            if [(n.name, n.type) for n in graph.nodes] != [(n.name, n.type) for n in self.graph.nodes] or \
                    [(e.src, e.dst) for e in graph.edges] != [(e.src, e.dst) for e in self.graph.edges]:
                raise VtmlirError("the copied function's VTOG differs from the original's")
            ptg = PointsToGraph(graph, [], {n: [graph.edges[e.id] for e in es] for n, es in chosen.items()},
                                0.0, "")
            with func.context, ir.Location.unknown():
                rewrite_points_to(ptg)
                compose_view_chains(func)

        return peak_of_edited_copy(self.func, self.name, rewrite)


#: The check's bound, in evaluations times VTOG nodes (an evaluation bufferizes and replays the
#: whole function: its cost grows with the graph). A round evaluates every view of the current
#: choice; one that would pass the bound keeps no view instead (the peak is then the limit). The
#: test models stay within it; DenseNet-169 at batch 8 (7340 nodes, an evaluation 10-20 s) ran for
#: more than 10 minutes before it.
MAX_NODE_EVALUATIONS = 200_000


def _without_views(graph, ptg):
    """`ptg` with no node virtual (every tensor physical: the unoptimised graph's peak)."""
    return PointsToGraph(graph, [], {}, 0.0, ptg.cost_model, ptg.unit)


def _needed_together(order, forbidden, rerun, evaluator, limit) -> tuple:
    """(nodes, points-to graph, peak): a small set of `order`'s nodes that, kept physical with
    `forbidden`, bring the peak to at most `limit`; all of `order` when even that does not (the
    caller's next round goes on from there). Each node of the set is the last of the shortest prefix
    of the rest (found by bisection) that still brings the peak down, so the set costs about
    log2(len(order)) evaluations per node, where a round costs one per view."""
    def evaluate(nodes):
        candidate = rerun(forbidden | set(nodes))
        return candidate, (evaluator.peak(candidate.chosen) if candidate.virtual_nodes() else limit)

    best = evaluate(order)   # (points-to graph, peak) of `needed` + `rest[:hi]` below
    if best[1] > limit:
        return list(order), *best
    needed, rest = [], list(order)
    while rest:
        if needed:
            alone = evaluate(needed)
            if alone[1] <= limit:
                return needed, *alone
        lo, hi = 0, len(rest)   # rest[:lo] with `needed` is above the limit, rest[:hi] is not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            trial = evaluate(needed + rest[:mid])
            if trial[1] <= limit:
                hi, best = mid, trial
            else:
                lo = mid
        needed.append(rest[hi - 1])
        rest = rest[:hi - 1]
    return needed, *best


def fit(func, graph, ptg, rerun, unit) -> tuple:
    """Check Alg. 2's choice `ptg` against the peak without the greedy's views and keep nodes
    physical until the peak is not raised (module docstring). `rerun(forbidden)` runs Alg. 2 with
    the nodes in `forbidden` kept physical. Returns (points-to graph, MemoryDecision)."""
    decision = MemoryDecision()
    if not ptg.virtual_nodes():
        decision.skipped = "no views chosen"
        return ptg, decision
    evaluator = Evaluator(func, graph, unit)
    try:
        decision.limit = evaluator.peak({})
        peak = decision.first_peak = evaluator.peak(ptg.chosen)
        forbidden: set[int] = set()
        while peak > decision.limit:
            virtual = ptg.virtual_nodes()
            if (evaluator.count + len(virtual)) * len(graph.nodes) > MAX_NODE_EVALUATIONS:
                # A round would evaluate every view again: past the budget, no view stays unchecked.
                decision.over_budget = (f"a round of {len(virtual)} evaluations of {len(graph.nodes)} nodes is past "
                                        f"the budget ({MAX_NODE_EVALUATIONS} node evaluations): no views")
                ptg, peak = _without_views(graph, ptg), decision.limit
                break
            trials = []
            for node in virtual:
                candidate = rerun(forbidden | {node})
                trials.append((evaluator.peak(candidate.chosen) if candidate.virtual_nodes() else decision.limit,
                               -candidate.total_saving, node, candidate))
            trials.sort(key=lambda t: (t[0], t[1], t[2]))
            best_peak, _, node, best = trials[0]
            if best_peak < peak:
                decision.rejected.append((node, peak, best_peak))
                forbidden.add(node)
                ptg, peak = best, best_peak
                continue
            # A plateau: no view alone raises the peak, some raise it together.
            kept, best, best_peak = _needed_together([t[2] for t in trials], forbidden, rerun, evaluator,
                                                     decision.limit)
            decision.rejected_together.append((kept, peak, best_peak))
            forbidden.update(kept)
            ptg, peak = best, best_peak
    except (VtmlirError, ValueError) as err:   # e.g. allocations inside loops: not replayed
        decision.skipped = f"evaluation failed: {str(err).removeprefix('error: ').splitlines()[0]}"
        decision.evaluations = evaluator.count
        return ptg, decision
    decision.peak = peak
    decision.evaluations = evaluator.count
    return ptg, decision
