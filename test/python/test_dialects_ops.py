"""vt / layout ops built from Python: builders, accessors, verifiers, layout attributes."""

import pytest
from torch_mlir import ir
from torch_mlir.dialects import func

from vtmlir.context import make_context
from vtmlir.dialects import (
    PRODUCED_LAYOUTS_ATTR,
    REQUIRED_LAYOUTS_ATTR,
    ConvertOp,
    Layout,
    MappingFunction,
    Piece,
    StoreIntoOp,
    ViewOp,
)
from vtmlir.dialects import layout as layout_d
from vtmlir.dialects import vt as vt_d
from vtmlir.frontend.source import parse_mlir
from vtmlir.errors import VtmlirError


@pytest.fixture()
def ctx():
    c = make_context()
    with c, ir.Location.unknown():
        yield c


def t(*shape, elt=None):
    return ir.RankedTensorType.get(list(shape), elt or ir.F32Type.get())


def amap(text):
    return ir.AffineMapAttr(ir.Attribute.parse(f"affine_map<{text}>")).value


def build(arg_types, body):
    module = ir.Module.create()
    with ir.InsertionPoint(module.body):
        func.FuncOp.from_py_func(*arg_types, name="f")(body)
    return module


def test_qkv_store_and_view(ctx):
    """The fused QKV projection writes Q and the K/V caches in place (VTC Fig. 3)."""
    qkv_map = MappingFunction([
        Piece(0, amap("(d0, d1) -> (0, d1)"), ((1, 0, 8),)),
        Piece(1, amap("(d0, d1) -> (5, d1 - 8)"), ((1, 8, 12),)),
        Piece(2, amap("(d0, d1) -> (5, d1 - 12)"), ((1, 12, 16),)),
    ])

    def body(qkv, q, kc, vc):
        updated = vt_d.store_into(qkv, [q, kc, vc], qkv_map)
        k_view = vt_d.view([updated[1]], MappingFunction.permutation([1, 0]), [4, 16])
        return updated + [k_view]

    m = build([t(1, 16), t(1, 8), t(16, 4), t(16, 4)], body)
    assert m.operation.verify()
    ops = list(m.body.operations[0].regions[0].blocks[0].operations)
    store, view = ops[0], ops[1]
    assert isinstance(store, StoreIntoOp) and isinstance(view, ViewOp)
    assert len(store.dests) == 3 and len(store.updated) == 3
    assert list(store.operation.attributes["operandSegmentSizes"]) == [1, 1, 2, 0, 0, 0, 0, 0, 0]
    assert store.mapping_function == qkv_map
    assert view.mapping_function.apply([3, 10]) == (0, (10, 3))
    # The printed IR re-parses and verifies in a fresh context.
    assert str(parse_mlir(str(m))) == str(m)


def test_view_concat_heterogeneous_sources(ctx):
    concat = MappingFunction([
        Piece(0, amap("(d0, d1) -> (d0, d1)"), ((0, 0, 2),)),
        Piece(1, amap("(d0, d1) -> (d0 - 2, d1)"), ((0, 2, 5),)),
        Piece(2, amap("(d0, d1) -> (d0 - 5, d1)"), ((0, 5, 8),)),
    ])
    m = build([t(2, 4), t(3, 4), t(3, 4)],
              lambda a, b, c: vt_d.view([a, b, c], concat, [8, 4]))
    assert m.operation.verify()
    view = m.body.operations[0].regions[0].blocks[0].operations[0]
    assert list(view.operation.attributes["operandSegmentSizes"]) == [1, 2, 0, 0, 0, 0, 0, 0]
    assert len(view.sources) == 3


def test_too_many_type_runs(ctx):
    shapes = [t(i + 1, 4) for i in range(9)]
    with pytest.raises(ValueError, match="at most 8"):
        build(shapes, lambda *xs: vt_d.view(list(xs), MappingFunction.identity(2), [1, 4]))


def test_verifier_reports_at_location(ctx):
    bad = MappingFunction.single(amap("(d0, d1) -> (d0, d1 + 1)"))
    m = build([t(2, 4)], lambda a: vt_d.view([a], bad, [2, 4]))
    with pytest.raises(ir.MLIRError) as info:
        m.operation.verify()
    messages = [d.message for d in info.value.error_diagnostics]
    assert any("outside source #0 (dim 1 has size 4)" in msg for msg in messages), messages


def test_convert_builder_and_layout_attrs(ctx):
    def body(x):
        y = layout_d.convert(x, Layout.from_name("NCHW"), Layout.from_name("NCHW16c"))
        z = layout_d.convert(y, Layout.from_name("NCHW16c"), Layout.from_name("NHWC"))
        layout_d.set_produced_layouts(z.owner, [Layout.from_name("NHWC")])
        layout_d.set_required_layouts(z.owner, [Layout.from_name("NCHW16c")])
        return z

    m = build([t(1, 32, 7, 7)], body)
    assert m.operation.verify()
    ops = list(m.body.operations[0].regions[0].blocks[0].operations)
    assert isinstance(ops[0], ConvertOp)
    assert ir.RankedTensorType(ops[0].result.type).shape == [1, 2, 7, 7, 16]
    assert ir.RankedTensorType(ops[1].result.type).shape == [1, 7, 7, 32]
    assert ops[1].src == Layout.from_name("NCHW16c") and ops[1].dst == Layout.from_name("NHWC")
    assert layout_d.produced_layouts(ops[1]) == [Layout.from_name("NHWC")]
    assert layout_d.required_layouts(ops[1]) == [Layout.from_name("NCHW16c")]
    assert PRODUCED_LAYOUTS_ATTR in str(m) and REQUIRED_LAYOUTS_ATTR in str(m)


def test_required_any_on_foreign_op(ctx):
    text = """
    func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
      %0 = arith.addf %a, %a {layout.required = ["any", "any"],
                              layout.produced = [{perm = array<i64: 0>}]} : tensor<4xf32>
      return %0 : tensor<4xf32>
    }"""
    m = parse_mlir(text)
    add = m.body.operations[0].regions[0].blocks[0].operations[0]
    assert layout_d.required_layouts(add) == ["any", "any"]
    assert layout_d.produced_layouts(add) == [Layout.identity(1)]


def test_parse_error_names_problem():
    text = """
    func.func @f(%a: tensor<4x30xf32>) -> tensor<4x2x16xf32> {
      %0 = "layout.convert"(%a) {src_layout = {perm = array<i64: 0, 1>},
          dst_layout = {perm = array<i64: 0, 1>, block_dims = array<i64: 1>, block_sizes = array<i64: 16>}}
          : (tensor<4x30xf32>) -> tensor<4x2x16xf32>
      return %0 : tensor<4x2x16xf32>
    }"""
    with pytest.raises(VtmlirError, match=r"in.mlir:3:12: .*not divisible by its block 16"):
        parse_mlir(text, "in.mlir")
