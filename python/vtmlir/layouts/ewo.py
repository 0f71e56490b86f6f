"""Element-wise optimisation (VTensor §5.2, EWO): choose layouts for flexible ops by an ILP (HiGHS).

The paper gives every non-constant node a candidate set — element-wise ops with broadcast
{LB, NHWC, NCHW} (LB dropped when the broadcast operand cannot be held in it), other element-wise
ops {their inputs' layout, NHWC, NCHW}, everything else its `required_layout` — a 0/1 vector x_i
with one 1, a cost C_ij[m][k] = 1 when the layouts of the edge's two ends differ, and minimises
Σ x_iᵀ C_ij x_j. vtmlir goes beyond it in three ways:

1. **Bytes, not counts**: a conversion costs the bytes of the tensor it converts (what `vt-stats`
   counts for a `layout.convert`), so converting a 1×2048×7×7 tensor outweighs a 1×64×56×56 one
   correctly and a network's conversions are compared by traffic.
2. **Constants are free**: weights, BN parameters and anything computed from constants only are laid
   out at compile time, so their edges are not in the problem (§5.2 applies this only to broadcast
   constants, after the ILP).
3. **Shared conversions**: a value converted to layout k once serves every consumer that wants k
   (one `layout.convert`, what LHO achieves by hoisting, §5.2), so the model has a variable
   c_{v,k} per (value, layout) instead of one per edge; `share=False` gives the per-edge model.

Candidate sets: flexible ops (conventions with `flexible=True`) get the target's per-rank candidates
(NCHW, NHWC for rank 4), their resolved layout, and — propagated to a fixpoint through chains of
flexible ops — every layout a neighbouring op produces or requires, filtered by what the op accepts;
other ops keep the variant resolution chose.

Linearisation (exact for 0/1 x): with P_{v,k} = Σ{x_{i,a} : candidate a of v's producer produces
k} and R_{u,k} = Σ{x_{j,b} : candidate b of use u's consumer requires k},

    minimise Σ_{v,k} bytes(v)·c_{v,k}
    s.t.     Σ_a x_{n,a} = 1                      for every node n with ≥ 2 candidates
             c_{v,k} ≥ R_{u,k} − P_{v,k}          for every use u of v and layout k
             x ∈ {0,1}, 0 ≤ c ≤ 1

(nodes with one candidate contribute constants). `solve_bruteforce` enumerates all assignments of
the same `EwoProblem`, for the tests.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..dialects.memory_layout import Layout
from ..errors import VtmlirError
from .conventions import KernelSite, Target
from .resolve import (
    Decision,
    Resolution,
    any_decision,
    applicable_variants,
    captured_results,
    conversion_bytes,
    keeps_captured_row_major,
)

# -- the abstract problem ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    """One choice for a node: a layout key per operand it requires (None: no requirement) and per
    result it produces."""

    label: str
    requires: tuple[Hashable | None, ...]
    produces: tuple[Hashable | None, ...]
    cost: float = 0.0   # the kernel's own cost in this choice (the time model; 0: layout-neutral)


@dataclass
class EwoValue:
    """A run-time tensor: produced by `producer` (node index, result index) or fixed in `fixed`
    (function arguments); read by `uses` (node index, operand index); converting it costs `cost`,
    or `pair_cost(src, dst)` where given (the time model: a conversion's cost depends on both ends)."""

    cost: float
    uses: list[tuple[int, int]]
    producer: tuple[int, int] | None = None
    fixed: Hashable | None = None
    pair_cost: Callable[[Hashable, Hashable], float] | None = None

    def conversion_cost(self, src, dst) -> float:
        return self.cost if self.pair_cost is None else self.pair_cost(src, dst)


@dataclass
class EwoProblem:
    nodes: list[list[Candidate]]
    values: list[EwoValue]
    share: bool = True

    def produced(self, value: EwoValue, choice: Sequence[int]):
        if value.producer is None:
            return value.fixed
        n, r = value.producer
        return self.nodes[n][choice[n]].produces[r]

    def cost(self, choice: Sequence[int]) -> float:
        """Objective of an assignment (one candidate index per node): the kernels' own costs plus
        the conversions'."""
        total = sum(self.nodes[n][a].cost for n, a in enumerate(choice))
        for v in self.values:
            have = self.produced(v, choice)
            wants = [self.nodes[j][choice[j]].requires[p] for j, p in v.uses]
            wants = [w for w in wants if w is not None and w != have]
            total += sum(v.conversion_cost(have, w) for w in (dict.fromkeys(wants) if self.share else wants))
        return total

    def conversions(self, choice: Sequence[int]) -> int:
        n = 0
        for v in self.values:
            have = self.produced(v, choice)
            wants = [self.nodes[j][choice[j]].requires[p] for j, p in v.uses]
            wants = [w for w in wants if w is not None and w != have]
            n += len(set(wants)) if self.share else len(wants)
        return n


@dataclass
class EwoSolution:
    choice: list[int]
    objective: float
    variables: int = 0
    integer_variables: int = 0
    constraints: int = 0
    solve_seconds: float = 0.0
    status: str = ""


def solve_bruteforce(problem: EwoProblem) -> EwoSolution:
    """Enumerate every assignment (test oracle; exponential)."""
    best, best_cost = None, None
    for choice in itertools.product(*[range(len(c)) for c in problem.nodes]):
        c = problem.cost(choice)
        if best_cost is None or c < best_cost:
            best, best_cost = list(choice), c
    return EwoSolution(best or [], best_cost or 0.0, status="enumerated")


#: When HiGHS stops: within this relative gap of the optimum (the time model's own error is larger,
#: docs/layouts.md), or after this many branch-and-bound nodes with the best solution found -- bounds
#: that do not depend on the machine's speed, as a time limit does. The layout zoo's ResNets and
#: MobileNetV2 solve at the root; Inception proved optimality only after 60 s (a compile at opt level 2
#: failed its layout step), now 0.6 % from it after 4.4 s; transformers' MobileNetV2 (35 convolutions
#: with explicit pads) needed 4527 nodes and 58 s, now about 9 % from it after 300 nodes.
MIP_GAP = 0.01
MAX_NODES = 300


def solve_ilp(problem: EwoProblem, *, time_limit: float = 60.0, max_nodes: int = MAX_NODES) -> EwoSolution:
    """Solve `problem` with HiGHS (highspy): to within `MIP_GAP` of the optimum, or the best solution
    found within `max_nodes` branch-and-bound nodes or `time_limit` seconds (the status then says so,
    with the gap)."""
    import highspy  # deferred: highspy is heavy; loaded on first use

    t0 = time.perf_counter()
    cols_cost: list[float] = []
    cols_int: list[int] = []
    x: dict[tuple[int, int], int] = {}
    for n, cands in enumerate(problem.nodes):
        if len(cands) > 1:
            for a in range(len(cands)):
                x[(n, a)] = len(cols_cost)
                cols_cost.append(cands[a].cost)
                cols_int.append(1)
    rows: list[tuple[float, float, dict[int, float]]] = []
    for n, cands in enumerate(problem.nodes):
        if len(cands) > 1:
            rows.append((1.0, 1.0, {x[(n, a)]: 1.0 for a in range(len(cands))}))

    def indicator(node: int, test) -> tuple[float, dict[int, float]]:
        """Σ x_{node,a} over candidates a passing `test`, as (constant, linear terms)."""
        cands = problem.nodes[node]
        if len(cands) == 1:
            return (1.0 if test(cands[0]) else 0.0), {}
        return 0.0, {x[(node, a)]: 1.0 for a, c in enumerate(cands) if test(c)}

    def new_col(cost: float) -> int:
        cols_cost.append(cost)
        cols_int.append(0)
        return len(cols_cost) - 1

    for v in problem.values:
        if not v.uses or (v.pair_cost is None and v.cost <= 0):
            continue
        layouts = []
        for j, p in v.uses:
            for c in problem.nodes[j]:
                k = c.requires[p]
                if k is not None and k not in layouts:
                    layouts.append(k)
        if v.producer is None:
            sources = [v.fixed]
        else:
            n, r = v.producer
            sources = list(dict.fromkeys(c.produces[r] for c in problem.nodes[n]))
        for k in layouts:
            # One conversion to k per source layout s it can come from (a single one when its cost does
            # not depend on s): c_{v,s,k} >= R_{u,k} + P_{v,s} - 1 for every use u.
            if v.pair_cost is None:
                pairs = [(None, v.cost)]
            else:
                pairs = [(s, v.pair_cost(s, k)) for s in sources if s != k]
            for s, cost in pairs:
                if cost <= 0:
                    continue
                if v.producer is None:
                    hit = (v.fixed == s) if s is not None else (v.fixed != k)
                    p_const, p_terms = (1.0 if hit else 0.0), {}
                else:
                    n, r = v.producer
                    test = (lambda c, r=r, s=s: c.produces[r] == s) if s is not None else \
                        (lambda c, r=r, k=k: c.produces[r] != k)
                    p_const, p_terms = indicator(n, test)
                if p_const == 0.0 and not p_terms:
                    continue  # the producer never produces s (or always produces k): never converted
                shared_col = None
                for j, p in v.uses:
                    r_const, r_terms = indicator(j, lambda c, p=p, k=k: c.requires[p] == k)
                    if r_const == 0.0 and not r_terms:
                        continue
                    if problem.share:
                        if shared_col is None:
                            shared_col = new_col(cost)
                        col = shared_col
                    else:
                        col = new_col(cost)
                    # c - R - P >= R_const + P_const - 1
                    terms = {col: 1.0}
                    for i, coef in r_terms.items():
                        terms[i] = terms.get(i, 0.0) - coef
                    for i, coef in p_terms.items():
                        terms[i] = terms.get(i, 0.0) - coef
                    rows.append((r_const + p_const - 1.0, highspy.kHighsInf, terms))

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", float(time_limit))
    h.setOptionValue("mip_rel_gap", MIP_GAP)
    h.setOptionValue("mip_max_nodes", int(max_nodes))
    ncols = len(cols_cost)
    if ncols:
        h.addVars(ncols, np.zeros(ncols), np.ones(ncols))
        h.changeColsCost(ncols, np.arange(ncols, dtype=np.int32), np.array(cols_cost, dtype=np.float64))
        ints = [i for i in range(ncols) if cols_int[i]]
        if ints:
            h.changeColsIntegrality(len(ints), np.array(ints, dtype=np.int32),
                                    np.array([highspy.HighsVarType.kInteger] * len(ints)))
        for lo, hi, terms in rows:
            idx = np.array(list(terms), dtype=np.int32)
            val = np.array([terms[i] for i in terms], dtype=np.float64)
            h.addRow(lo, hi, len(idx), idx, val)
        h.run()
        model_status = h.getModelStatus()
        status = h.modelStatusToString(model_status)
        limits = (highspy.HighsModelStatus.kSolutionLimit, highspy.HighsModelStatus.kTimeLimit,
                  highspy.HighsModelStatus.kIterationLimit)
        if model_status in limits and h.getInfo().primal_solution_status == highspy.SolutionStatus.kSolutionStatusFeasible:
            status += f" (best found, gap {h.getInfo().mip_gap:.1%})"
        elif model_status != highspy.HighsModelStatus.kOptimal:
            raise VtmlirError(f"error: layout ILP not solved to optimality: {status}")
        values = list(h.getSolution().col_value)
    else:
        status, values = "trivial", []
    choice = []
    for n, cands in enumerate(problem.nodes):
        if len(cands) == 1:
            choice.append(0)
        else:
            choice.append(max(range(len(cands)), key=lambda a: values[x[(n, a)]]))
    elapsed = time.perf_counter() - t0
    return EwoSolution(choice, problem.cost(choice), variables=ncols, integer_variables=sum(cols_int),
                       constraints=len(rows), solve_seconds=elapsed, status=status)


# -- from a resolved function to a problem and back ---------------------------------------------------


@dataclass
class EwoModel:
    """An `EwoProblem` built from a `Resolution`, with the decisions each candidate stands for."""

    resolution: Resolution
    problem: EwoProblem
    decisions: list[list[Decision]] = field(default_factory=list)  # per entry, per candidate

    def initial_choice(self) -> list[int]:
        """The candidate index of each node's current (resolved) decision."""
        out = []
        for i, (_, d) in enumerate(self.resolution.entries):
            out.append(next(a for a, c in enumerate(self.decisions[i]) if c == d))
        return out

    def row_major_choice(self) -> list[int] | None:
        """Every node's all-row-major candidate (None where a node has none: the graph cannot stay
        as it is)."""
        out = []
        for cands in self.decisions:
            a = next((a for a, d in enumerate(cands)
                      if all(l is None or l.is_identity for l in list(d.operands) + list(d.results))), None)
            if a is None:
                return None
            out.append(a)
        return out

    def apply(self, choice: Sequence[int]) -> None:
        for i, a in enumerate(choice):
            self.resolution.replace(i, self.decisions[i][a])


def _decision_candidate(d: Decision, cost: float = 0.0) -> Candidate:
    return Candidate(d.variant, tuple(d.operands), tuple(d.results), cost)


def build_model(res: Resolution, target: Target, *, share: bool = True, kernel_cost=None,
                conversion_cost=None) -> EwoModel:
    """Candidate sets (module docstring) and the problem over `res`'s run-time values.

    With `kernel_cost(site, decision)` (the time model, `vtmlir.layouts.costs`) the kernels with
    variants are choices too: every applicable variant (convolutions in nChw16c, nChw8c, NHWC or
    NCHW) is a candidate costing what that kernel takes in it; with `conversion_cost(value, src,
    dst)` a conversion costs that instead of its bytes."""
    entries = res.entries
    sites = [KernelSite(op) for op, _ in entries]
    flexible = [conv is not None and conv.flexible and conv.any is not None for conv in res.conventions]
    index_of_value = {}
    for i, (op, _) in enumerate(entries):
        for k, r in enumerate(op.results):
            index_of_value[r] = (i, k)

    # Candidate layouts of flexible nodes, propagated to a fixpoint through neighbours.
    layouts: list[list[Layout]] = []
    for i, (op, d) in enumerate(entries):
        if not flexible[i]:
            layouts.append([])
            continue
        rank = sites[i].result_types[0].rank
        init = target.candidate_layouts(rank) + [d.results[0]]
        layouts.append([])
        for l in init:
            if l is not None and l not in layouts[i] and any_decision(res.conventions[i], sites[i], l):
                layouts[i].append(l)

    def offered(i) -> list[Layout]:
        if flexible[i]:
            return layouts[i]
        d = entries[i][1]
        return [l for l in list(d.operands) + list(d.results) if l is not None]

    users: dict[int, set[int]] = {i: set() for i in range(len(entries))}
    producers: dict[int, set[int]] = {i: set() for i in range(len(entries))}
    for j, (op, _) in enumerate(entries):
        for v in op.operands:
            if v in res.constants or v not in index_of_value:
                continue
            i = index_of_value[v][0]
            users[i].add(j)
            producers[j].add(i)
    changed = True
    while changed:
        changed = False
        for i in range(len(entries)):
            if not flexible[i]:
                continue
            for nb in sorted(users[i] | producers[i]):
                for l in offered(nb):
                    if l not in layouts[i] and l.rank == layouts[i][0].rank \
                            and any_decision(res.conventions[i], sites[i], l) is not None:
                        layouts[i].append(l)
                        changed = True

    decisions: list[list[Decision]] = []
    for i, (op, d) in enumerate(entries):
        captured = captured_results(op)
        if flexible[i]:
            cands = [any_decision(res.conventions[i], sites[i], l) for l in layouts[i]]
            cands = [c for c in cands if c is not None]
            if d not in cands:
                cands.insert(0, d)
            decisions.append(cands)
        elif kernel_cost is not None and res.conventions[i] is not None and res.conventions[i].variants:
            cands = [vd for _, vd in applicable_variants(res.conventions[i], sites[i])]
            if d not in cands:
                cands.insert(0, d)
            decisions.append(cands)
        else:
            decisions.append([d])
        # results read inside another op's region stay row-major (resolved so: `d` is kept)
        decisions[-1] = [c for c in decisions[-1] if keeps_captured_row_major(c, captured)]
    if kernel_cost is None:
        nodes = [[_decision_candidate(c) for c in cands] for cands in decisions]
    else:
        nodes = [[_decision_candidate(c, kernel_cost(sites[i], c)) for c in cands]
                 for i, cands in enumerate(decisions)]

    values: list[EwoValue] = []
    by_value: dict = {}
    for j, (op, _) in enumerate(entries):
        for p, v in enumerate(op.operands):
            if v in res.constants or res.produced(v) is None:
                continue
            if v not in by_value:
                pair = None if conversion_cost is None else \
                    (lambda src, dst, v=v: conversion_cost(v, src, dst))
                if v in index_of_value:
                    ev = EwoValue(conversion_bytes(v), [], producer=index_of_value[v], pair_cost=pair)
                else:
                    ev = EwoValue(conversion_bytes(v), [], fixed=res.produced(v), pair_cost=pair)
                by_value[v] = ev
                values.append(ev)
            by_value[v].uses.append((j, p))
    return EwoModel(res, EwoProblem(nodes, values, share), decisions)
