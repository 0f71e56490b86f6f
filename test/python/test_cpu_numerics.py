"""Every model-zoo model compiled for the CPU matches PyTorch eager within fp32 tolerance."""

from __future__ import annotations

import pytest
import torch

import vtmlir
from vtmlir.models import ZOO


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


@pytest.mark.parametrize("name", list(ZOO))
def test_zoo_model_matches_pytorch(name):
    model, inputs = ZOO[name].build(batch=2, seed=1)
    compiled = vtmlir.compile(model, *inputs)
    kernels = compiled.stages["kernels"]
    assert kernels.count("memref.alloc(") == kernels.count("memref.dealloc "), "every intermediate is freed"
    got = _as_tuple(compiled(*inputs))
    with torch.no_grad():
        want = _as_tuple(model(*inputs))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)


def test_numpy_inputs_give_torch_outputs():
    model, inputs = ZOO["mlp"].build(batch=1, seed=0)
    compiled = vtmlir.compile(model, *inputs)
    out = compiled(*[x.numpy() for x in inputs])
    assert isinstance(out, torch.Tensor)
    with torch.no_grad():
        torch.testing.assert_close(out, model(*inputs), rtol=1e-4, atol=1e-4)
