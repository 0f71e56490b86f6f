"""Implied-guard removal (`implied_guards.prune`): a template drops the guards that the guards
before it imply, and admits exactly the shapes (with exactly the words) it admitted with all of
them -- including the bad configurations `test_dvm_safety.py` checks, which run with pruning on."""

from __future__ import annotations

import numpy as np
import pytest

from vtmlir.dvm import Target, template
from vtmlir.dvm.expr import TARGET, Const, Name, TilingCall, parse
from vtmlir.dvm.implied_guards import prune
from vtmlir.dvm.template import _params, prebuild, templates_of
from vtmlir.dvm.workloads import addmm, layernorm

SMALL = Target(cores=3, vector_bytes=32, local_memory_bytes=16 * 1024)


def guards(stmts):
    return [str(a) for kind, a, _ in stmts if kind == "guard"]


def G(*conds):
    return [("guard", parse(c), None) for c in conds]


def S(var, expr):
    return [("set", var, parse(expr))]


@pytest.mark.parametrize("before, implied", [
    (G("x>1"), "x>=1"),
    (G("x>1"), "x!=1"),
    (G("t==1"), "t>=0"),
    (G("a==b"), "b==a"),
    (G("a>=b"), "(b-a)<=0"),
    (G("s>=1", "u>=1"), "(s*u)>=0"),
    (G("s>=1", "t>=0", "u>=1", "w>=0"), "(1+(((s-1)*t)+((u-1)*w)))>=0"),
    (G("x>=0", "x!=0"), "x>=1"),
    (G("v>=1"), "(-((-s)//v))*v>=s"),  # a ceiling division covers s
    (G("v>=1"), "((-((-s)//v))-1)*v<s"),  # ... and its last block starts inside s
    (G("p>=1", "q>=1") + S("_v0", "((-(p*4))//32)") + S("_v1", "((-(q*4))//32)"),
     "(p*4)<=(((-_v0)*32)+((-_v1)*32))"),  # slots rounded up to 32 bytes hold their tiles
])
def test_implied_guards_are_dropped(before, implied):
    assert guards(prune(before + G(implied))) == guards(before)


@pytest.mark.parametrize("before, kept", [
    (G("x>1"), "x>2"),
    (G("t>=0"), "t>=1"),
    (G("a>=b"), "a>b"),
    (G("s>=1"), "(s*u)>=0"),  # u may be negative
    (S("_v0", "(s/2)") + G("_v0>1"), "_v0>=2"),  # a float: 1.5 > 1 but not >= 2
    (G("x>1"), "(x//y)>=0"),  # y may be 0: evaluating it raises, which is kept
    (G("v>=1"), "(-((-s)//v))*v>s"),
    ([("set", "_v3", TilingCall("tile_vector", ((Name("s0_0"),), frozenset(), Const(2), Const(4), TARGET)))]
     + S("_v4", "_v3.tile") + G("_v4>=1"), "_v4>=2"),
])
def test_guards_not_implied_are_kept(before, kept):
    assert guards(prune(before + G(kept))) == guards(before) + [str(parse(kept))]


CASES = [
    (addmm, lambda m, k: [(m, 40), (m, k), (k, 40)], {"m": [1, 2, 5, 8, 9, 40], "k": [1, 300, 700]},
     lambda rng: [(m, 40), (m, k), (k, 40)] if (m := int(rng.integers(1, 60)), k := int(rng.integers(1, 900))) else None),
    (layernorm, lambda b, s: [(b, s, 64), (64,), (64,)], {"b": [1, 3], "s": [1, 2, 9, 70]},
     lambda rng: [(int(rng.integers(1, 5)), int(rng.integers(1, 90)), 64), (64,), (64,)]),
]


@pytest.mark.parametrize("make, shapes_of, points, draw", CASES, ids=["addmm", "layernorm"])
def test_a_pruned_template_set_fills_exactly_as_the_traced_one(monkeypatch, make, shapes_of, points, draw):
    """The same templates built with and without pruning: far fewer guards, and on random shapes
    and strides -- inside the prebuilt structures, outside them, and invalid ones (negative or
    mismatched strides, sizes that disagree) -- the same template, tiling and words, or the same
    refusal."""
    sets = {}
    for prune_on in (False, True):
        monkeypatch.setattr(template, "PRUNE_IMPLIED_GUARDS", prune_on)
        g = make()
        prebuild(g, shapes_of, points, SMALL, native=False)
        (sets[prune_on],) = templates_of(g).values()
    full, pruned = sets[False], sets[True]
    kept = sum(len(guards(t.stmts)) for t in pruned.templates)
    traced = sum(len(guards(t.stmts)) for t in full.templates)
    assert traced == sum(t.traced_guards for t in pruned.templates)
    assert kept <= 0.75 * traced, (kept, traced)
    rng = np.random.default_rng(7)
    admitted = 0
    for _ in range(300):
        shapes = draw(rng)
        strides = [tuple(int(x) for x in rng.integers(-2, 3, len(s))) if rng.random() < 0.3 else None
                   for s in shapes]
        strides = [st or tuple(int(np.prod(s[d + 1:])) for d in range(len(s))) for st, s in zip(strides, shapes)]
        if rng.random() < 0.1:
            shapes[0] = (shapes[0][0] + 1,) + shapes[0][1:]  # sizes that disagree
        params = _params(shapes, strides)
        template.forget_last_tiling()
        try:
            want = full.fill(*params)
        except Exception as err:  # the traced guards raise (a tiling error): so must the pruned
            with pytest.raises(type(err)):
                template.forget_last_tiling()
                pruned.fill(*params)
            continue
        template.forget_last_tiling()
        got = pruned.fill(*params)
        assert (want is None) == (got is None), (shapes, strides)
        if want is not None:
            admitted += 1
            assert got[0] == want[0] and got[1] == want[1] and got[3] == want[3]
            assert np.array_equal(got[2], want[2])
    assert admitted > 50  # most draws land in a prebuilt structure
