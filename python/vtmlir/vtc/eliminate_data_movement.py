"""`vt-eliminate-data-movement`: VTC Alg. 2 on every function's VTOG, then the rewrite.

Per function: build the VTOG (Alg. 1, vtog.py), run the global greedy (Alg. 2, greedy.py) with the
cost model (analytic by default), print the decision (edges chosen, estimated saving, stores), and
rewrite the IR: every tensor the points-to graph makes virtual loses its data-movement op and
becomes a `vt.view` of the tensors its chosen edges point to. Chains compose (VTC §4.1, F_new =
F_outer ∘ F_base): a view of a view is folded into one view of the physical tensors
(`MappingFunction.compose`); where the composition has no box-piece form the nested view is kept
(vt-lower-views folds it in turn).

Input-of-output (VTC §4.4 ScatterND rule 2, Fig. 3) is realised for the chains that end in a slice
update or a constant pad (stores.py): a computed tensor reaching `tensor.insert_slice` (the KV-cache
write) or `tensor.pad` only through one-to-one data movement becomes `vt.store_into` of the
producer's result into the destination, the chain's input-of-output mappings composed; the chain
disappears and vt-lower-views makes the producer write in place. These chains are planned before
the greedy and their ops kept out of it. Not realised: input-of-output edges whose chain does not
end in such an update (a transpose whose input alone could be written transposed: the greedy only
takes output-of-input edges in rewrite mode), and partial cover (residual storage).
`rewrite=false` runs the greedy over every VTOG edge and only prints the decision (the paper's full
search space; useful to see a conflict decide, Fig. 7).
"""

from __future__ import annotations

from torch_mlir import ir

from ..errors import VtmlirError
from ..ir_utils import walk_ops
from ..passes.registry import Option, Pass, register_pass, report_option
from . import catalogue as cat
from .contiguity import TARGETS
from .greedy import AnalyticCostModel, PointsToGraph, build_points_to_graph
from .concat_stores import apply_concat, insert_chain_ops, plan_concats
from .measured_cost import MeasuredCostModel
from .memory_check import fit
from .rewrite import compose_view_chains, rewrite_points_to
from .stores import apply_store, plan_stores
from .build_vtog import mapping_text, build_vtog

COST_MODELS = ("analytic",)


def realisable(edge) -> bool:
    """Edges the view rewrite can carry out (see the module docstring)."""
    c = edge.candidate
    return c.direction == cat.OUTPUT_OF_INPUT and not c.in_place


def eliminate(module, cost_model=None, rewrite: bool = True, memory_aware: bool = True) -> list[PointsToGraph]:
    """Alg. 2 + rewrite on every function of `module` (an ir.Module or its operation).

    With `rewrite`, the input-of-output chains ending in a slice update are planned first
    (stores.py: the producer will write into the destination); their ops are kept out of the
    greedy (they disappear), the greedy's output-of-input choice is rewritten to views, then the
    planned stores replace their insert_slices. Each returned PointsToGraph carries `stores`
    (StorePlans realised) and `stores_skipped` ((op, reason) pairs) for the report.

    `memory_aware` (with `rewrite`): the greedy's views may not raise the function's peak memory as
    the backend allocates it; nodes are kept physical until they do not (memory_check.py). The
    PointsToGraph then carries `memory` (a MemoryDecision)."""
    results = []
    for func in walk_ops(module, "func.func"):
        if not len(func.regions[0].blocks):
            continue
        plans, skipped, concats = [], [], []
        stored, concat_text = [], []
        if rewrite:   # input-of-output first: the greedy then sees the stores in place
            with func.context, ir.Location.unknown():
                plans, skipped = plan_stores(func, skip=insert_chain_ops(func))
                concats, concat_skipped = plan_concats(func, [p.value for p in plans],
                                                       getattr(cost_model, "kernel_launches", False))
                skipped += concat_skipped
                stored = [(p.text, p.mapping) for p in plans]
                concat_text = [c.report_lines() for c in concats]
                def follow(old, new):   # a concat planned to read a slice update now a store
                    for concat in concats:
                        concat.replace_value(old, new)

                for plan in plans:
                    apply_store(plan, on_replace=follow)
                for plan in concats:
                    apply_concat(plan)
        unit = cost_model.unit if cost_model else TARGETS["cpu"]
        graph = build_vtog(func, unit)
        ptg = build_points_to_graph(graph, cost_model, edge_filter=realisable if rewrite else None,
                                    require_cover=rewrite)
        memory, first = None, ptg
        if rewrite and memory_aware:
            def rerun(forbidden, graph=graph):
                return build_points_to_graph(graph, cost_model, require_cover=True,
                                             edge_filter=lambda e: realisable(e) and e.src not in forbidden)

            ptg, memory = fit(func, graph, ptg, rerun, unit)
        if rewrite:
            with func.context, ir.Location.unknown():
                rewrite_points_to(ptg)
                compose_view_chains(func)
        ptg.stores, ptg.stores_skipped, ptg.concat_stores = stored, skipped, concat_text
        ptg.memory = memory
        ptg.memory_lines = [] if memory is None else memory.lines(
            {n.id: n.name for n in graph.nodes},
            {n: ", ".join(f"e{e.id} {e.candidate.kind}" for e in es) for n, es in first.chosen.items()})
        results.append(ptg)
    return results


def report_text(ptg: PointsToGraph) -> str:
    """The greedy's decision, then the stores realised (input-of-output) and those not."""
    lines = [ptg.to_text().rstrip("\n")]
    lines += [f"  {line}" for line in getattr(ptg, "memory_lines", [])]
    for text, mapping in getattr(ptg, "stores", []):
        lines.append(f"  store {text}: producer writes into the destination, map "
                     f"{mapping_text(mapping)}")
    for text in getattr(ptg, "concat_stores", []):
        lines += [f"  {line}" for line in text]
    for where, why in getattr(ptg, "stores_skipped", []):
        lines.append(f"  keep {where}: {why}")
    return "\n".join(lines) + "\n"


@register_pass
class EliminateDataMovement(Pass):
    name = "vt-eliminate-data-movement"
    summary = "Replace data-movement ops by virtual tensors (VTC Alg. 2 + rewrite)"
    description = (
        "Builds every function's VTOG (vt-build-vtog), runs VTC's global greedy (Alg. 2) with a "
        "cost model (analytic: bytes saved minus a Defs. 4-5 contiguity penalty), prints the "
        "decision (edges chosen, estimated saving) and rewrites the IR: the chosen data-movement "
        "ops disappear and vt.view ops of the physical tensors take their place (chains composed). "
        "rewrite=false only prints the greedy's choice over all VTOG edges.")
    options = (
        report_option("the decision"),
        Option("cost-model", str, "analytic", "edge weights w(e): analytic or measured (kernels timed on the target)"),
        Option("target", str, "cpu", "transfer unit preset for Defs. 4-5: cpu (64 B) or cuda (128 B)"),
        Option("unit-bytes", int, 0, "minimal memory transfer unit in bytes (overrides target)"),
        Option("rewrite", bool, True, "rewrite the IR (false: print the decision only)"),
        Option("memory-aware", bool, True, "keep a data-movement op physical where its view would raise "
                                           "the peak memory the backend allocates (memory_check.py)"),
    )

    def run(self, module):
        models = list(dict.fromkeys(COST_MODELS + ("measured",)))
        if self.cost_model not in models:
            self.emit_error(module, f"vt-eliminate-data-movement: unknown cost model "
                                    f"'{self.cost_model}'; expected one of {', '.join(models)}")
            return
        if self.target not in TARGETS:
            self.emit_error(module, f"vt-eliminate-data-movement: unknown target '{self.target}' "
                                    f"(expected one of {', '.join(TARGETS)})")
            return
        if self.unit_bytes < 0:
            self.emit_error(module, "vt-eliminate-data-movement: unit-bytes must not be negative")
            return
        if self.cost_model == "measured":   # VTC Alg. 2 lines 6, 18-19: kernels timed on the target
            try:
                model = MeasuredCostModel("cuda" if self.target == "cuda" else "cpu", self.unit_bytes or None)
            except VtmlirError as err:
                self.emit_error(module, f"vt-eliminate-data-movement: {str(err).removeprefix('error: ')}")
                return
        else:
            model = AnalyticCostModel(self.unit_bytes or TARGETS[self.target], multi_piece_readers=True,
                                      kernel_launches=self.target == "cuda")
        graphs = eliminate(module, model, rewrite=self.rewrite, memory_aware=self.memory_aware)
        self.write_report(module, "".join(report_text(p) for p in graphs))
        return graphs
