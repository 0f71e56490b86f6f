"""The torch frontend: levels, dialects in the context, and errors that name the op."""

from __future__ import annotations

import pytest
import torch

import vtmlir
from vtmlir import UnsupportedOpError, VtmlirError
from vtmlir.ir_utils import walk_ops


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x):
        return torch.relu(self.linear(x)).transpose(0, 1)


class UsesFFT(torch.nn.Module):
    def forward(self, x):
        return torch.fft.fft(x).real


def test_linalg_level_is_default_and_context_has_vtmlir_dialects():
    module = vtmlir.import_torch(Block(), torch.randn(4, 8))
    names = {op.name for op in walk_ops(module)}
    assert "linalg.matmul" in names or "linalg.generic" in names
    assert not any(n.startswith("torch.") for n in names)
    assert module.context.is_dialect_loaded("vt") and module.context.is_dialect_loaded("layout")


def test_torch_level_on_request():
    module = vtmlir.import_torch(Block(), torch.randn(4, 8), output_type="torch")
    assert "torch.aten." in str(module)


def test_unsupported_op_is_named_with_its_source_line():
    with pytest.raises(UnsupportedOpError) as info:
        vtmlir.import_torch(UsesFFT(), torch.randn(8))
    assert info.value.op_name == "torch.aten.fft_fft"
    assert "test_frontend.py:" in str(info.value) and "unsupported op 'torch.aten.fft_fft'" in str(info.value)


def test_bad_arguments():
    with pytest.raises(VtmlirError, match="unknown output_type"):
        vtmlir.import_torch(Block(), torch.randn(4, 8), output_type="tosa")
    with pytest.raises(VtmlirError, match="expects a torch.nn.Module"):
        vtmlir.import_torch("not a module")
    with pytest.raises(VtmlirError, match="torch.export could not trace Block"):
        vtmlir.import_torch(Block(), torch.randn(4, 5))  # wrong inner dim


def test_dynamic_shapes_import_with_question_marks():
    batch = torch.export.Dim("batch", min=2, max=64)
    module = vtmlir.import_torch(Block(), torch.randn(4, 8), dynamic_shapes={"x": {0: batch}})
    assert "tensor<?x8xf32>" in str(module)
