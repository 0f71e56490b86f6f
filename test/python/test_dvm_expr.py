"""The DVM template expressions (`vtmlir.dvm.expr`): rendering, parsing back and evaluation without
exec/eval, with Python's integer semantics (floor division and modulo of negatives)."""

from __future__ import annotations

import numpy as np
import pytest

from vtmlir.dvm.expr import (BinOp, Compare, Const, F64Bits, Field, Name, Neg, ParseError, evaluate, evaluator,
                             f64bits, parse)

TEXTS = ["((-((-s0_2)//_v5))*4)", "(s1_1%_v6)!=0", "_f64bits((1.0/_v5))", "((s0*s1)+(t0*-1))", "_v3.tm==16",
         "(((s0_0-1)*t0_0)+((s0_1-1)*t0_1))"]


@pytest.mark.parametrize("text", TEXTS)
def test_rendering_parses_back_to_the_same_tree(text):
    e = parse(text)
    assert str(e) == text and parse(str(e)) == e and e.size == len(text)


def test_nodes_compare_by_structure_and_constant_type():
    assert BinOp("+", Name("a"), Const(1)) == parse("(a+1)")
    assert Const(1) != Const(1.0) and Const(1) != Const(True)
    assert len({Const(1), Const(1.0), Const(True)}) == 3
    assert parse("(a*b)>=c").names() == {"a", "b", "c"}
    assert Field("_v3", "tile").names() == {"_v3"}


def test_evaluation_matches_python_on_random_integers():
    rng = np.random.default_rng(7)
    ops = ["+", "-", "*", "//", "%"]
    for _ in range(2000):
        a, b, c = (int(x) for x in rng.integers(-50, 50, 3))
        op1, op2 = rng.choice(ops, 2)
        if (op1 in ("//", "%") and b == 0) or (op2 in ("//", "%") and c == 0):
            continue
        text = f"((a{op1}b){op2}c)"
        want = {"+": int.__add__, "-": int.__sub__, "*": int.__mul__, "//": int.__floordiv__,
                "%": int.__mod__}
        expected = want[op2](want[op1](a, b), c)
        assert evaluate(parse(text), {"a": a, "b": b, "c": c}) == expected, text
        assert evaluate(Neg(parse(text)), {"a": a, "b": b, "c": c}) == -expected


def test_comparisons_floats_and_bits():
    env = {"x": 6, "y": 4}
    assert evaluate(parse("(x//y)>=1"), env) is True and evaluate(parse("x<y"), env) is False
    assert evaluate(F64Bits(parse("(1.0/x)")), env) == f64bits(1.0 / 6)
    assert evaluate(Compare("==", Const(2), Const(2)), {}) is True
    with pytest.raises(ZeroDivisionError):  # what the Python expression raises
        evaluate(parse("x//(y-4)"), env)
    f = evaluator(parse("(s0*2)+s1"), {"s0": 0, "s1": 1})
    assert f([3, 5]) == 11


def test_affine_spellings_of_imported_shapes():
    assert evaluate(parse("s0 floordiv 2 + 1"), {"s0": 9}) == 5
    assert evaluate(parse("s0 ceildiv 4"), {"s0": 9}) == 3
    assert evaluate(parse("s0 mod 4 * s1"), {"s0": 9, "s1": 3}) == 3
    assert evaluate(parse("s27 * s77"), {"s27": 3, "s77": 5}) == 15


@pytest.mark.parametrize("bad", ["a +", "(a", "a ** b", "f(a)", "a ; b", "1 2"])
def test_bad_text_is_a_parse_error(bad):
    with pytest.raises(ParseError, match="cannot parse"):
        parse(bad)
    with pytest.raises(KeyError, match="no value for"):
        evaluate(parse("a+b"), {"a": 1})
