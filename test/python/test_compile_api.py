"""`vtmlir.compile` inputs, stages and error reporting (no tracebacks for user mistakes)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import vtmlir
from vtmlir import VtmlirError

ADD_MLIR = """
func.func @main(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %e = tensor.empty() : tensor<2x3xf32>
  %r = linalg.add ins(%a, %b : tensor<2x3xf32>, tensor<2x3xf32>) outs(%e : tensor<2x3xf32>) -> tensor<2x3xf32>
  return %r : tensor<2x3xf32>
}
"""


class AddMul(torch.nn.Module):
    def forward(self, x, y):
        return x * y + x, (x - y).sum(dim=1)


def test_mlir_text_compiles_and_runs():
    compiled = vtmlir.compile(ADD_MLIR)
    a, b = np.ones((2, 3), np.float32), np.full((2, 3), 2.0, np.float32)
    np.testing.assert_array_equal(compiled(a, b).numpy(), a + b)
    assert str(compiled.signature) == "@main(tensor<2x3xf32>, tensor<2x3xf32>) -> (tensor<2x3xf32>)"
    assert list(compiled.stages) == ["graph", "kernels", "schedule", "vectors", "loops", "llvm"]
    assert "llvm.func" in compiled.stages["llvm"]


def test_mlir_file_and_ir_module_inputs(tmp_path):
    path = tmp_path / "add.mlir"
    path.write_text(ADD_MLIR)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert np.array_equal(vtmlir.compile(str(path))(a, a).numpy(), 2 * a)
    module = vtmlir.parse_mlir(ADD_MLIR)
    before = str(module)
    assert np.array_equal(vtmlir.compile(module)(a, a).numpy(), 2 * a)
    assert str(module) == before, "compile must not modify the caller's module"


def test_multiple_results_and_pipeline():
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    compiled = vtmlir.compile(AddMul(), x, y, pipeline="canonicalize, cse")
    got = compiled(x, y)
    want = AddMul()(x, y)
    assert isinstance(got, tuple) and len(got) == 2
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)
    assert "optimized" in compiled.stages


class ReturnsOneTensorTwice(torch.nn.Module):
    def forward(self, x):
        y = torch.relu(x) * 2
        return y, y, torch.relu(x) * 2    # the third equals y after cse: one buffer, three results


def test_a_tensor_returned_twice_gets_a_buffer_per_result():
    """`hoist-static-allocs` crashed inside MLIR on a buffer returned twice; each result now gets a
    buffer of its own (memref-distinct-returned-buffers)."""
    x = torch.randn(4, 8)
    a, b, c = vtmlir.compile(ReturnsOneTensorTwice(), x)(x)
    want = torch.relu(x) * 2
    assert torch.equal(a, want) and torch.equal(b, want) and torch.equal(c, want)
    assert len({a.data_ptr(), b.data_ptr(), c.data_ptr()}) == 3


@pytest.mark.parametrize(
    "args, message",
    [
        ((np.ones((2, 3), np.float32),), "takes 2 inputs, got 1"),
        ((np.ones((2, 3), np.float64), np.ones((2, 3), np.float32)), "input 0 of @main must have dtype float32"),
        ((np.ones((3, 2), np.float32), np.ones((2, 3), np.float32)), "input 0 of @main must have shape tensor<2x3xf32>"),
        (("nope", np.ones((2, 3), np.float32)), "input 0 is a str"),
    ],
)
def test_wrong_inputs_are_clear_errors(args, message):
    compiled = vtmlir.compile(ADD_MLIR)
    with pytest.raises(VtmlirError, match=message):
        compiled(*args)


def test_bad_sources_are_clear_errors(tmp_path):
    with pytest.raises(VtmlirError, match=r"<string>:2:\d+: error"):
        vtmlir.compile("func.func @main() {\n  %0 = arith.bogus\n}")
    with pytest.raises(VtmlirError, match="no such file"):
        vtmlir.compile(str(tmp_path / "missing.mlir"))
    with pytest.raises(VtmlirError, match="unknown target 'tpu'"):
        vtmlir.compile(ADD_MLIR, target="tpu")
    with pytest.raises(VtmlirError, match="no function @nope"):
        vtmlir.compile(ADD_MLIR, entry="nope")
    with pytest.raises(VtmlirError, match="expected an nn.Module"):
        vtmlir.compile(42)


STORE_MLIR = """
func.func @main(%v: tensor<2x4xf32>, %d: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %0 = "vt.store_into"(%v, %d) {mapping = [{source = 0 : i64, map = affine_map<(d0, d1) -> (d0 + 1, d1)>}],
                                 operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0>,
                                 resultSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}
"""

CONVERT_MLIR = """
func.func @main(%x: tensor<2x4xf32>) -> tensor<4x2xf32> {
  %0 = "layout.convert"(%x) {src_layout = {perm = array<i64: 0, 1>}, dst_layout = {perm = array<i64: 1, 0>}}
      : (tensor<2x4xf32>) -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}
"""


def test_store_into_writes_the_destination_through_its_mapping():
    v, d = torch.randn(2, 4), torch.randn(4, 4)
    expected = d.clone()
    expected[1:3] = v
    assert torch.equal(vtmlir.compile(STORE_MLIR)(v, d), expected)


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_ops_without_lowering_are_named_with_location(target):
    with pytest.raises(vtmlir.UnsupportedOpError, match=r"<string>:3:\d+: error: cannot compile 'layout.convert'") as info:
        vtmlir.compile(CONVERT_MLIR, target=target)
    assert info.value.op_name == "layout.convert"


def test_torch_level_module_is_refused_with_advice():
    torch_level = vtmlir.import_torch(torch.nn.Linear(4, 4), torch.randn(2, 4), output_type="torch")
    with pytest.raises(vtmlir.UnsupportedOpError, match="at torch level; vtmlir.compile needs linalg-on-tensors"):
        vtmlir.compile(torch_level)


def test_dynamic_shapes_on_cuda_refuse_an_unknown_chip_before_any_work():
    batch = torch.export.Dim("batch", min=2, max=64)
    args = (torch.nn.Linear(4, 4), torch.randn(2, 4))
    # On the CPU a dynamic graph runs through DVM's native VM (test_compose_opt_levels.py, slow), on
    # CUDA through its PTX VM (test_dvm_cuda.py).
    with pytest.raises(VtmlirError, match="unsupported CUDA chip 'sm_999'"):
        vtmlir.compile(*args, dynamic_shapes={"input": {0: batch}}, target="cuda", chip="sm_999")


def test_unknown_cuda_chip_is_refused_before_any_work():
    with pytest.raises(VtmlirError, match="unsupported CUDA chip 'sm_999'"):
        vtmlir.compile(ADD_MLIR, target="cuda", chip="sm_999")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_other_float_types_run_on_the_cpu(dtype):
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).to(dtype)
    x = torch.randn(3, 8, dtype=dtype)
    got = vtmlir.compile(model, x)(x)
    assert got.dtype == dtype
    with torch.no_grad():
        want = model(x)
    # vtmlir accumulates in the element type; torch accumulates half types in fp32.
    tol = {torch.float16: 1e-2, torch.bfloat16: 5e-2, torch.float64: 1e-12}[dtype]
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)


def test_integer_inputs_embedding():
    model = torch.nn.Embedding(10, 4)
    ids = torch.tensor([[1, 2, 9]])
    with torch.no_grad():
        torch.testing.assert_close(vtmlir.compile(model, ids)(ids), model(ids))
