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
    assert list(compiled.stages) == ["graph", "kernels", "loops", "llvm"]
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
