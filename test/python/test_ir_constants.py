"""`vtmlir.ir_constants`: constant elements attributes read through the bindings -- dense (with
splats and bf16) and dense_resource blobs (from the module's bytecode), bit for bit."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from torch_mlir import ir

from vtmlir.errors import VtmlirError
from vtmlir.ir_constants import _bytecode_blobs, elements_array, is_dense_resource, numpy_dtype, resource_blob

TYPES = [(np.float32, lambda: ir.F32Type.get()), (np.float16, lambda: ir.F16Type.get()),
         (np.float64, lambda: ir.F64Type.get()), (np.int8, lambda: ir.IntegerType.get_signless(8)),
         (np.int64, lambda: ir.IntegerType.get_signless(64)), (np.uint8, lambda: ir.IntegerType.get_unsigned(8))]


@pytest.mark.parametrize("dtype, mlir_type", TYPES, ids=[t[0].__name__ for t in TYPES])
@pytest.mark.parametrize("shape", [(1,), (3, 5), (2, 3, 64, 65)])
def test_dense_resource_blobs_read_back_bitwise(dtype, mlir_type, shape):
    rng = np.random.default_rng(len(shape))
    data = (rng.standard_normal(shape) * 100).astype(dtype)
    with ir.Context(), ir.Location.unknown():
        ttype = ir.RankedTensorType.get(list(shape), mlir_type())
        attr = ir.DenseResourceElementsAttr.get_from_buffer(data, 'w "odd" key.0', ttype)
        assert is_dense_resource(attr)
        got = elements_array(attr)
        assert got.dtype == data.dtype and got.shape == data.shape
        assert got.tobytes() == data.tobytes()
        assert resource_blob(attr) == data.tobytes()


def test_a_module_with_several_resources_lists_each_blob_by_key():
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.create()
        for i in range(3):
            data = np.full((i + 1,), i, np.int32)
            attr = ir.DenseResourceElementsAttr.get_from_buffer(
                data, f"blob{i}", ir.RankedTensorType.get([i + 1], ir.IntegerType.get_signless(32)))
            module.operation.attributes[f"a{i}"] = attr
        import io

        buf = io.BytesIO()
        module.operation.write_bytecode(buf)
        blobs = _bytecode_blobs(buf.getvalue())
    assert blobs == {f"blob{i}": np.full((i + 1,), i, np.int32).tobytes() for i in range(3)}


def test_dense_splat_and_bf16_constants():
    with ir.Context():
        assert elements_array(ir.Attribute.parse("dense<[[1, 2], [3, 4]]> : tensor<2x2xi32>")).tolist() == [[1, 2], [3, 4]]
        splat = elements_array(ir.Attribute.parse("dense<2.5> : tensor<2x3xf32>"))
        assert splat.shape == (2, 3) and (splat == 2.5).all() and splat.dtype == np.float32
        bf16 = elements_array(ir.Attribute.parse("dense<[1.0, 2.5, -3.0, 1.0e30]> : tensor<4xbf16>"))
        want = np.array([1.0, 2.5, -3.0, 1.0e30], np.float32).astype(ml_dtypes.bfloat16)
        assert bf16.dtype == np.dtype(ml_dtypes.bfloat16) and bf16.tobytes() == want.tobytes()
        assert elements_array(ir.Attribute.parse("dense<[true, false]> : tensor<2xi1>")).tolist() == [True, False]
        assert elements_array(ir.Attribute.parse("1.0 : f32")) is None  # not an elements attribute
        assert not is_dense_resource(ir.Attribute.parse("dense<1.0> : tensor<2xf32>"))
        with pytest.raises(VtmlirError, match="element type"):
            numpy_dtype(ir.Type.parse("complex<f32>"))
