"""VTC data-movement catalogue (Def. 2, §4.4): every F checked against the op's numpy semantics.

For random shapes we write the op as graph-level IR, let the catalogue give F and the inverse
mappings, then (1) gather the output through F from the inputs and compare with the result numpy
computes from the op's definition, (2) check every input-of-output candidate: in_j[y] == out[G(y)]
on the region it covers.
"""

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from torch_mlir import ir

from vtmlir.context import make_context
from vtmlir.ir_utils import walk_ops
from vtmlir.vtc import (
    CATALOGUE,
    IN_PLACE,
    INPUT_OF_OUTPUT,
    OUTPUT_OF_INPUT,
    analyse,
)

CTX = make_context()
FAST = settings(max_examples=20, deadline=None)


def ty(shape):
    return "tensor<" + "x".join(map(str, shape)) + ("x" if shape else "") + "f32>"


def analyse_text(body: str, args: list, result_shape) -> tuple:
    sig = ", ".join(f"%a{i}: {ty(s)}" for i, s in enumerate(args))
    text = f"func.func @f({sig}) -> {ty(result_shape)} {{\n{body}\n  return %r : {ty(result_shape)}\n}}"
    with CTX, ir.Location.unknown():
        module = ir.Module.parse(text)
        ops = [op for op in walk_ops(module) if analyse(op) is not None]
        assert len(ops) == 1, text
        return module, analyse(ops[0])


def gather(mapping, shape, inputs):
    out = np.empty(shape, dtype=np.float64)
    for x in itertools.product(*[range(e) for e in shape]):
        j, y = mapping.apply(x)
        out[x] = inputs[j][y]
    return out


def check(analysis, inputs, expected):
    """F reproduces the op; every inverse candidate reads back its input from the result."""
    assert analysis.mapping is not None, analysis.mapping_error
    with CTX:
        got = gather(analysis.mapping, expected.shape, inputs)
        np.testing.assert_array_equal(got, expected)
        for c in analysis.candidates:
            if c.direction == INPUT_OF_OUTPUT:
                j = [i for i, v in enumerate(analysis.inputs) if v == c.virtual]
                src = inputs[j[0]] if len(j) == 1 else None
                if src is None:  # the same value feeds several operands: check via its own pieces
                    continue
                for y in itertools.product(*[range(e) for e in src.shape]):
                    if any(p.covers(y) for p in c.mapping.pieces):
                        _, x = c.mapping.apply(y)
                        assert src[y] == expected[x], (c.kind, y, x)
            elif c.direction == OUTPUT_OF_INPUT and not c.in_place:
                j = [i for i, v in enumerate(analysis.inputs) if v == c.physical][0]
                for x in itertools.product(*[range(e) for e in expected.shape]):
                    if any(p.covers(x) for p in c.mapping.pieces):
                        _, y = c.mapping.apply(x)
                        assert expected[x] == inputs[j][y]


def rand(shape, seed=0):
    return np.random.default_rng(seed).permutation(int(np.prod(shape))).reshape(shape).astype(np.float64)


shapes = st.lists(st.integers(1, 4), min_size=1, max_size=4)


@FAST
@given(shapes, st.data())
def test_transpose(shape, data):
    perm = data.draw(st.permutations(range(len(shape))))
    out = [shape[p] for p in perm]
    body = (f"  %e = tensor.empty() : {ty(out)}\n"
            f"  %r = linalg.transpose ins(%a0 : {ty(shape)}) outs(%e : {ty(out)}) "
            f"permutation = [{', '.join(map(str, perm))}]")
    _, a = analyse_text(body, [shape], out)
    x = rand(shape)
    check(a, [x], np.transpose(x, perm))
    assert {c.direction for c in a.candidates} == {OUTPUT_OF_INPUT, INPUT_OF_OUTPUT}


def _affine(n, results):
    return f"affine_map<({', '.join(f'd{i}' for i in range(n))}) -> ({', '.join(results)})>"


def _generic_reference(x, in_map, out_map, loop_shape, out_shape):
    """linalg.generic semantics: out[out_map(l)] = in[in_map(l)] for every loop point l."""
    out = np.full(out_shape, np.nan)
    for l in itertools.product(*[range(e) for e in loop_shape]):
        out[tuple(l[k] for k in out_map)] = x[tuple(0 if k is None else l[k] for k in in_map)]
    return out


@FAST
@given(shapes, st.data())
def test_generic_permutation_and_broadcast(loop_shape, data):
    n = len(loop_shape)
    out_perm = data.draw(st.permutations(range(n)))
    # The input reads a subset of the loops (broadcast), in any order, plus unit dims read at 0.
    kept = data.draw(st.lists(st.sampled_from(range(n)), unique=True, max_size=n))
    unit = data.draw(st.booleans())
    in_map = list(kept) + ([None] if unit else [])
    in_shape = [loop_shape[k] for k in kept] + ([1] if unit else [])
    out_shape = [loop_shape[k] for k in out_perm]
    if not in_shape:
        in_shape, in_map = [1], [None]
    in_res = [("0" if k is None else f"d{k}") for k in in_map]
    maps = f"[{_affine(n, in_res)}, {_affine(n, [f'd{k}' for k in out_perm])}]"
    iters = ", ".join(['"parallel"'] * n)
    body = (f"  %e = tensor.empty() : {ty(out_shape)}\n"
            f"  %r = linalg.generic {{indexing_maps = {maps}, iterator_types = [{iters}]}} "
            f"ins(%a0 : {ty(in_shape)}) outs(%e : {ty(out_shape)}) {{\n"
            f"  ^bb0(%i: f32, %o: f32):\n    linalg.yield %i : f32\n  }} -> {ty(out_shape)}")
    _, a = analyse_text(body, [in_shape], out_shape)
    x = rand(in_shape)
    check(a, [x], _generic_reference(x, in_map, out_perm, loop_shape, out_shape))


def test_generic_with_compute_is_not_data_movement():
    body = (f"  %e = tensor.empty() : {ty([4])}\n"
            "  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],"
            ' iterator_types = ["parallel"]} ins(%a0 : tensor<4xf32>) outs(%a1 : tensor<4xf32>) {\n'
            "  ^bb0(%i: f32, %o: f32):\n    %s = arith.addf %i, %o : f32\n    linalg.yield %s : f32\n"
            "  } -> tensor<4xf32>")
    with CTX, ir.Location.unknown():
        m = ir.Module.parse("func.func @f(%a0: tensor<4xf32>, %a1: tensor<4xf32>) -> tensor<4xf32> {\n"
                            + body + "\n  return %r : tensor<4xf32>\n}")
        assert all(analyse(op) is None for op in walk_ops(m))


@FAST
@given(shapes, st.data())
def test_broadcast(out_shape, data):
    n = len(out_shape)
    dims = sorted(data.draw(st.lists(st.sampled_from(range(n)), unique=True, max_size=n - 1)))
    in_shape = [e for i, e in enumerate(out_shape) if i not in dims]
    body = (f"  %e = tensor.empty() : {ty(out_shape)}\n"
            f"  %r = linalg.broadcast ins(%a0 : {ty(in_shape)}) outs(%e : {ty(out_shape)}) "
            f"dimensions = [{', '.join(map(str, dims))}]")
    _, a = analyse_text(body, [in_shape], out_shape)
    x = rand(in_shape)
    check(a, [x], np.broadcast_to(np.expand_dims(x, tuple(dims)), out_shape))


groups_strategy = st.lists(st.lists(st.integers(1, 3), min_size=1, max_size=3), min_size=1, max_size=3)


def _reassociation(groups):
    out, k = [], 0
    for g in groups:
        out.append(list(range(k, k + len(g))))
        k += len(g)
    return "[" + ", ".join("[" + ", ".join(map(str, g)) + "]" for g in out) + "]"


@FAST
@given(groups_strategy)
def test_expand_shape(groups):
    fine = [e for g in groups for e in g]
    coarse = [int(np.prod(g)) for g in groups]
    body = (f"  %r = tensor.expand_shape %a0 {_reassociation(groups)} output_shape "
            f"[{', '.join(map(str, fine))}] : {ty(coarse)} into {ty(fine)}")
    _, a = analyse_text(body, [coarse], fine)
    x = rand(coarse)
    check(a, [x], x.reshape(fine))


@FAST
@given(groups_strategy)
def test_collapse_shape(groups):
    fine = [e for g in groups for e in g]
    coarse = [int(np.prod(g)) for g in groups]
    body = f"  %r = tensor.collapse_shape %a0 {_reassociation(groups)} : {ty(fine)} into {ty(coarse)}"
    _, a = analyse_text(body, [fine], coarse)
    x = rand(fine)
    check(a, [x], x.reshape(coarse))


@st.composite
def slices(draw):
    big = draw(st.lists(st.integers(1, 6), min_size=1, max_size=3))
    offsets, sizes, strides = [], [], []
    for e in big:
        stride = draw(st.integers(1, 2))
        off = draw(st.integers(0, e - 1))
        size = draw(st.integers(1, (e - 1 - off) // stride + 1))
        offsets.append(off)
        sizes.append(size)
        strides.append(stride)
    drop = [i for i, s in enumerate(sizes) if s == 1 and draw(st.booleans())]
    if len(drop) == len(sizes):
        drop = drop[1:]
    return big, offsets, sizes, strides, drop


def _slice_np(offsets, sizes, strides):
    return tuple(slice(o, o + s * st_ - (st_ - 1), st_) for o, s, st_ in zip(offsets, sizes, strides))


def _attr(vals):
    return ", ".join(map(str, vals))


@FAST
@given(slices())
def test_extract_slice(params):
    big, offsets, sizes, strides, drop = params
    small = [s for i, s in enumerate(sizes) if i not in drop]
    body = (f"  %r = tensor.extract_slice %a0[{_attr(offsets)}] [{_attr(sizes)}] [{_attr(strides)}] "
            f": {ty(big)} to {ty(small)}")
    _, a = analyse_text(body, [big], small)
    x = rand(big)
    check(a, [x], x[_slice_np(offsets, sizes, strides)].reshape(small))
    has_inverse = any(c.direction == INPUT_OF_OUTPUT for c in a.candidates)
    assert has_inverse == all(s == 1 or n == 1 for s, n in zip(strides, sizes))


@FAST
@given(slices())
def test_insert_slice(params):
    big, offsets, sizes, strides, drop = params
    small = [s for i, s in enumerate(sizes) if i not in drop]
    body = (f"  %r = tensor.insert_slice %a0 into %a1[{_attr(offsets)}] [{_attr(sizes)}] "
            f"[{_attr(strides)}] : {ty(small)} into {ty(big)}")
    _, a = analyse_text(body, [small, big], big)
    src, dest = rand(small, 1) + 1000, rand(big, 2)
    expected = dest.copy()
    expected[_slice_np(offsets, sizes, strides)] = src.reshape(
        expected[_slice_np(offsets, sizes, strides)].shape)
    unit_strides = all(s == 1 or n == 1 for s, n in zip(strides, sizes))
    if unit_strides:
        check(a, [src, dest], expected)
    else:
        assert a.mapping is None and "lattice" in a.mapping_error
    # ScatterND rule 2 (source -> result) exists for any strides; rule 1 (in place) when dest is
    # used once.
    rule2 = [c for c in a.candidates if c.direction == INPUT_OF_OUTPUT and c.virtual == a.inputs[0]]
    assert len(rule2) == 1
    with CTX:
        for y in itertools.product(*[range(e) for e in small]):
            assert src[y] == expected[rule2[0].mapping.apply(y)[1]]
    assert any(c.direction == IN_PLACE and c.in_place for c in a.candidates)


@FAST
@given(st.lists(st.integers(1, 3), min_size=1, max_size=3), st.data())
def test_concat(shape, data):
    dim = data.draw(st.integers(0, len(shape) - 1))
    extents = data.draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
    shapes_ = [[e if i == dim else s for i, s in enumerate(shape)] for e in extents]
    out = list(shape)
    out[dim] = sum(extents)
    operands = ", ".join(f"%a{i}" for i in range(len(shapes_)))
    body = (f"  %r = tensor.concat dim({dim}) {operands} : "
            f"({', '.join(ty(s) for s in shapes_)}) -> {ty(out)}")
    _, a = analyse_text(body, shapes_, out)
    xs = [rand(s, i) + 100 * i for i, s in enumerate(shapes_)]
    check(a, xs, np.concatenate(xs, axis=dim))
    # One output-of-input edge per operand; their regions partition the result (compatible edges).
    outs = [c for c in a.candidates if c.direction == OUTPUT_OF_INPUT]
    assert len(outs) == len(xs) and all(c.full == (len(xs) == 1) for c in outs)


def test_dynamic_slice_is_not_virtualisable_and_says_why():
    text = """func.func @f(%a: tensor<8x4xf32>, %i: index) -> tensor<2x4xf32> {
      %r = tensor.extract_slice %a[%i, 0] [2, 4] [1, 1] : tensor<8x4xf32> to tensor<2x4xf32>
      return %r : tensor<2x4xf32>
    }"""
    with CTX, ir.Location.unknown():
        m = ir.Module.parse(text)
        (op,) = walk_ops(m, "tensor.extract_slice")
        a = analyse(op)
        assert a.mapping is None and "dynamic offsets" in a.mapping_error
        assert not a.candidates and any("no symbols" in why for _, why in a.rejected)


def test_in_place_needs_dest_to_be_dead():
    text = """func.func @f(%s: tensor<1x4xf32>, %d: tensor<8x4xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>) {
      %e = tensor.empty() : tensor<8x4xf32>
      %c = linalg.copy ins(%d : tensor<8x4xf32>) outs(%e : tensor<8x4xf32>) -> tensor<8x4xf32>
      %r = tensor.insert_slice %s into %c[3, 0] [1, 4] [1, 1] : tensor<1x4xf32> into tensor<8x4xf32>
      return %r, %c : tensor<8x4xf32>, tensor<8x4xf32>
    }"""
    with CTX, ir.Location.unknown():
        m = ir.Module.parse(text)
        (op,) = walk_ops(m, "tensor.insert_slice")
        a = analyse(op)
        assert not any(c.direction == IN_PLACE for c in a.candidates)
        assert any(rule == IN_PLACE and "2 uses" in why for rule, why in a.rejected)


@st.composite
def pads(draw):
    shape = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
    low = [draw(st.integers(0, 2)) for _ in shape]
    high = [draw(st.integers(0, 2)) for _ in shape]
    return shape, low, high


@given(pads())
@FAST
def test_pad(params):
    """Constant pad: the interior is a partial output-of-input view of the input (the border is the
    padding value, no tensor's element), the input a full input-of-output view of the result."""
    shape, low, high = params
    out = [s + lo + hi for s, lo, hi in zip(shape, low, high)]
    body = (f"  %c = arith.constant -1.0 : f32\n"
            f"  %r = tensor.pad %a0 low{low} high{high} {{\n"
            f"  ^bb0({', '.join(f'%i{k}: index' for k in range(len(shape)))}):\n"
            f"    tensor.yield %c : f32\n"
            f"  }} : {ty(shape)} to {ty(out)}")
    x = rand(shape)
    expected = np.pad(x, list(zip(low, high)), constant_values=-1.0)
    _, a = analyse_text(body, [shape], out)
    assert a.kind == "pad" and a.mapping is None and "border" in a.mapping_error
    with CTX:
        (interior,) = [c for c in a.candidates if c.direction == OUTPUT_OF_INPUT]
        assert interior.full == (not any(low + high))
        for idx in itertools.product(*[range(e) for e in out]):
            inside = all(lo <= i < lo + s for i, lo, s in zip(idx, low, shape))
            assert any(p.covers(idx) for p in interior.mapping.pieces) == inside
            if inside:
                assert expected[idx] == x[interior.mapping.apply(idx)[1]]
        (inv,) = [c for c in a.candidates if c.direction == INPUT_OF_OUTPUT]
        assert inv.full
        for y in itertools.product(*[range(e) for e in shape]):
            assert x[y] == expected[inv.mapping.apply(y)[1]]


def test_pad_with_index_dependent_value_is_not_virtualisable():
    body = ("  %r = tensor.pad %a0 low[1] high[0] {\n"
            "  ^bb0(%i: index):\n"
            "    %v = arith.index_cast %i : index to i32\n"
            "    %f = arith.sitofp %v : i32 to f32\n"
            "    tensor.yield %f : f32\n"
            "  } : tensor<2xf32> to tensor<3xf32>")
    _, a = analyse_text(body, [[2]], [3])
    assert not a.candidates
    assert any("computed per index" in why for _, why in a.rejected)


def test_scatter_from_index_put_is_not_virtualisable_and_says_why():
    """What torch-mlir makes of `x.index_copy(1, idx, src)` (vtmlir.import_torch, indices
    linearised by the importer) and of `x[idx] = y`: tm_tensor.scatter, whose positions are the
    values of a tensor operand."""
    # every vtmlir context has the TMTensor dialect loaded (context.py), so the op parses as printed
    text = """func.func @f(%x: tensor<2x5xf32>, %upd: tensor<4x1x1xf32>, %idx: tensor<4x2xi64>) -> tensor<2x5xf32> {
      %r = tm_tensor.scatter {dimension_map = array<i64: 0, 1>} unique_indices(true)
          ins(%upd, %idx : tensor<4x1x1xf32>, tensor<4x2xi64>) outs(%x : tensor<2x5xf32>) {
      ^bb0(%a: f32, %b: f32):
        tm_tensor.yield %a : f32
      } -> tensor<2x5xf32>
      return %r : tensor<2x5xf32>
    }"""
    ctx = make_context()
    with ctx, ir.Location.unknown():
        m = ir.Module.parse(text)
        (op,) = walk_ops(m, "tm_tensor.scatter")
        a = analyse(op)
    assert a.kind == "scatter" and a.mapping is None and not a.candidates
    assert "indices operand" in a.mapping_error
    assert len(a.rejected) == 3   # output-of-input and both input-of-output directions


def test_catalogue_is_one_table():
    names = [e.op_name for e in CATALOGUE]
    for op in ("linalg.transpose", "linalg.generic", "linalg.broadcast", "tensor.expand_shape",
               "tensor.collapse_shape", "tensor.extract_slice", "tensor.insert_slice", "tensor.concat",
               "tensor.pad", "tm_tensor.scatter"):
        assert op in names
    for e in CATALOGUE:
        assert e.rules and {r.direction for r in e.rules} >= {OUTPUT_OF_INPUT, INPUT_OF_OUTPUT}
