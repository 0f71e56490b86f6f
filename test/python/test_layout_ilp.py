"""layout-select-ilp's ILP (VTensor §5.2 EWO, HiGHS) against brute-force enumeration.

Random small graphs (seeded, ≤ 8 nodes, 2–3 candidates each) in both cost models: shared
conversions (one per value and layout, vtmlir's default) and one per use (the paper's per-edge C_ij);
and in the time model's form (`cost=time`): a cost per candidate (the kernel's time in that layout)
and a conversion cost that depends on both of its layouts.
"""

from __future__ import annotations

import random

import pytest

from vtmlir.layouts.ewo import Candidate, EwoProblem, EwoValue, solve_bruteforce, solve_ilp

LAYOUTS = ("NCHW", "NHWC", "NCHW16c")


def random_problem(rng: random.Random, share: bool, timed: bool = False) -> EwoProblem:
    """A random DAG: each node reads 1–3 earlier values (node results or fixed arguments); each
    candidate requires a random layout per operand and produces one per result. `timed`: each
    candidate has a cost of its own and each value a conversion cost per (source, target) pair."""
    n_nodes = rng.randint(2, 8)
    n_args = rng.randint(1, 2)
    values = [EwoValue(float(rng.choice([1, 2, 4, 64, 1000])), [], fixed=rng.choice(LAYOUTS))
              for _ in range(n_args)]
    nodes = []
    for n in range(n_nodes):
        reads = [rng.randrange(len(values)) for _ in range(rng.randint(1, 3))]
        n_results = rng.randint(1, 2)
        cands = []
        for a in range(rng.randint(2, 3) if rng.random() < 0.8 else 1):
            requires = tuple(rng.choice(LAYOUTS + (None,)) for _ in reads)
            produces = tuple(rng.choice(LAYOUTS) for _ in range(n_results))
            cost = float(rng.choice([0, 5, 40, 300])) if timed else 0.0
            cands.append(Candidate(f"c{a}", requires, produces, cost))
        nodes.append(cands)
        for p, v in enumerate(reads):
            values[v].uses.append((n, p))
        for r in range(n_results):
            values.append(EwoValue(float(rng.choice([1, 3, 16, 256])), [], producer=(n, r)))
    if timed:
        for v in values:
            table = {(a, b): float(rng.choice([1, 7, 50, 900])) for a in LAYOUTS for b in LAYOUTS}
            v.pair_cost = lambda src, dst, table=table: table[(src, dst)]
    return EwoProblem(nodes, values, share)


@pytest.mark.parametrize("share", [True, False], ids=["shared", "per-use"])
def test_ilp_optimum_equals_brute_force(share):
    rng = random.Random(20261122 + share)
    for _ in range(120):
        problem = random_problem(rng, share)
        exact = solve_bruteforce(problem)
        ilp = solve_ilp(problem)
        assert ilp.objective == pytest.approx(exact.objective), problem
        assert problem.cost(ilp.choice) == pytest.approx(exact.objective)
        assert len(ilp.choice) == len(problem.nodes)


@pytest.mark.parametrize("share", [True, False], ids=["shared", "per-use"])
def test_time_model_ilp_optimum_equals_brute_force(share):
    rng = random.Random(20261126 + share)
    for _ in range(120):
        problem = random_problem(rng, share, timed=True)
        exact = solve_bruteforce(problem)
        ilp = solve_ilp(problem)
        assert ilp.objective == pytest.approx(exact.objective), problem
        assert problem.cost(ilp.choice) == pytest.approx(exact.objective)


def test_time_model_weighs_kernels_against_conversions():
    # x (NCHW argument) -> conv (NCHW: 100, blocked: 30) -> returned in NCHW. Converting in and out
    # costs 40 + 20: blocked wins (90 < 100); at 50 + 30 it loses (110 > 100) and nothing changes.
    def problem(into, back):
        conv = [Candidate("nchw", ("NCHW",), ("NCHW",), 100.0), Candidate("blocked", ("NCHW16c",), ("NCHW16c",), 30.0)]
        ret = [Candidate("return", ("NCHW",), ())]
        pair = {("NCHW", "NCHW16c"): into, ("NCHW16c", "NCHW"): back}
        x = EwoValue(0.0, [(0, 0)], fixed="NCHW", pair_cost=lambda s, d: pair[(s, d)])
        y = EwoValue(0.0, [(1, 0)], producer=(0, 0), pair_cost=lambda s, d: pair[(s, d)])
        return EwoProblem([conv, ret], [x, y])
    assert solve_ilp(problem(40.0, 20.0)).choice == [1, 0] and solve_ilp(problem(40.0, 20.0)).objective == 90.0
    assert solve_ilp(problem(50.0, 30.0)).choice == [0, 0] and solve_ilp(problem(50.0, 30.0)).objective == 100.0


def test_shared_conversion_counts_once_per_layout():
    # One value in NCHW read by three nodes; two want NHWC, one wants NCHW16c.
    v = EwoValue(10.0, [(0, 0), (1, 0), (2, 0)], fixed="NCHW")
    nodes = [[Candidate("a", ("NHWC",), ())], [Candidate("b", ("NHWC",), ())],
             [Candidate("c", ("NCHW16c",), ())]]
    assert EwoProblem(nodes, [v], share=True).cost([0, 0, 0]) == 20.0
    assert EwoProblem(nodes, [v], share=False).cost([0, 0, 0]) == 30.0
    assert solve_ilp(EwoProblem(nodes, [v], share=True)).objective == 20.0


def test_ilp_picks_the_layout_that_moves_fewer_bytes():
    # x (NCHW, 100 bytes) -> elementwise e (NCHW or NHWC) -> y (4 bytes) -> conv wanting NHWC.
    x = EwoValue(100.0, [(0, 0)], fixed="NCHW")
    e = [Candidate("nchw", ("NCHW",), ("NCHW",)), Candidate("nhwc", ("NHWC",), ("NHWC",))]
    conv = [Candidate("conv", ("NHWC",), ("NHWC",))]
    y = EwoValue(4.0, [(1, 0)], producer=(0, 0))
    solution = solve_ilp(EwoProblem([e, conv], [x, y]))
    assert solution.choice == [0, 0] and solution.objective == 4.0
    assert solution.variables >= 2 and solution.constraints >= 1 and solution.status == "Optimal"
