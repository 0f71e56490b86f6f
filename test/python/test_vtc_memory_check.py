"""VTC's memory check (`vtc/memory_check.fit`): which views it keeps physical, and at what cost,
on a peak model where one view raises the peak alone and others only together."""

from __future__ import annotations

from dataclasses import dataclass

from vtmlir.vtc import memory_check

LIMIT = 100


@dataclass
class _Choice:
    """The part of a points-to graph `fit` reads: the virtual nodes and the estimated saving."""

    chosen: dict

    def virtual_nodes(self) -> list[int]:
        return sorted(self.chosen)

    @property
    def total_saving(self) -> float:
        return float(sum(10 + n for n in self.chosen))   # node n saves 10 + n


def _peak(chosen) -> int:
    """Node 9 as a view raises the peak by 50 on its own; nodes 2, 5 and 7 raise it by 10 when two
    of them are views (the plateau: keeping any one of them physical changes nothing)."""
    return LIMIT + 50 * (9 in chosen) + 10 * (len({2, 5, 7} & set(chosen)) >= 2)


class _Evaluator:
    def __init__(self, func, graph, unit):
        self.count = 0

    def peak(self, chosen) -> int:
        self.count += 1
        return _peak(chosen)


class _Graph:
    nodes = list(range(10))


def test_views_that_raise_the_peak_together_are_found_by_bisection(monkeypatch):
    monkeypatch.setattr(memory_check, "Evaluator", _Evaluator)

    def rerun(forbidden):
        return _Choice({n: [] for n in range(10) if n not in forbidden})

    ptg, decision = memory_check.fit(None, _Graph(), rerun(set()), rerun, None)
    assert decision.rejected == [(9, 160, 110)]          # the round that lowers the peak
    assert decision.rejected_together == [([5, 2], 110, LIMIT)]
    assert ptg.virtual_nodes() == [0, 1, 3, 4, 6, 7, 8] and decision.peak == LIMIT
    # limit and first choice 2, rounds of 10 and 9, then 7 for the bisections (3 to find node 5, 1 for
    # it alone, 2 to find node 2, 1 for both); a round per node kept would have run 8 + 7 + 6 + 5
    # more and kept nodes 0 and 1 physical too
    assert decision.evaluations == 28
    lines = decision.lines({n: f"%v{n}" for n in range(10)}, {})
    assert any(line.startswith("keep-physical %v5, %v2: no one of the views alone") for line in lines)
