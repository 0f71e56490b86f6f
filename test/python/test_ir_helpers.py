"""The IR layer's shared helpers (ir_utils, ir_types, errors.format_location): typed, never printed."""

from __future__ import annotations

from torch_mlir import ir

from vtmlir.context import make_context
from vtmlir.dialects.vt import float_type
from vtmlir.errors import format_location
from vtmlir.ir_types import element_bits, shaped_bytes
from vtmlir.ir_utils import all_parallel, iterator_kinds, iterator_type, symbol_name, walk_ops

_REDUCE = """
#map = affine_map<(d0, d1) -> (d0, d1)>
#map1 = affine_map<(d0, d1) -> (d0)>
func.func @rowsum(%a: tensor<4x8xf32>, %o: tensor<4xf32>) -> tensor<4xf32> {
  %r = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "reduction"]}
      ins(%a : tensor<4x8xf32>) outs(%o : tensor<4xf32>) {
  ^bb0(%x: f32, %y: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}
"""


def test_iterator_types_are_compared_as_attributes():
    with make_context():
        module = ir.Module.parse(_REDUCE)
        generic = walk_ops(module.operation, "linalg.generic")[0]
        assert iterator_kinds(generic) == ["parallel", "reduction"]
        assert not all_parallel(generic)
        generic.attributes["iterator_types"] = ir.ArrayAttr.get([iterator_type("parallel")] * 2)
        assert all_parallel(generic)
        assert symbol_name(walk_ops(module.operation, "func.func")[0]) == "rowsum"


def test_type_sizes():
    with make_context(), ir.Location.unknown():
        assert element_bits(ir.IndexType.get()) == 64
        assert element_bits(ir.ComplexType.get(ir.F32Type.get())) == 64
        assert element_bits(float_type(3, 2)) == 6
        assert element_bits(ir.NoneType.get()) is None
        assert shaped_bytes(ir.RankedTensorType.get([3, 5], ir.IntegerType.get_signless(4))) == 8
        assert shaped_bytes(ir.RankedTensorType.get([ir.ShapedType.get_dynamic_size()], ir.F32Type.get())) is None
        assert shaped_bytes(ir.F32Type.get()) is None


def test_one_location_formatter():
    with make_context():
        file = ir.Location.file("model.py", 3, 7)
        assert format_location(file) == "model.py:3:7"
        assert format_location(ir.Location.callsite(file, [ir.Location.file("torch.py", 9, 1)])) == "model.py:3:7"
        assert format_location(ir.Location.name("relu", file)) == "model.py:3:7"
        assert format_location(ir.Location.unknown(), "<module>") == "<module>"
