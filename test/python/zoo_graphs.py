"""Graph-level modules of zoo models for the memory tests (test_temco_measure.py,
test_codegen_fuse_neighbours.py): as imported, or with TeMCO's decomposed convolutions."""

from __future__ import annotations

import torch

import vtmlir
from vtmlir.models import get
from vtmlir.temco import decompose_convs


def zoo_graph(name: str, decomposed: bool):
    """(model, inputs, module) of zoo model `name` at batch 1, its convolutions Tucker-decomposed
    (ranks 0.1 of the channels, TeMCO's lconv/core/fconv) if `decomposed`."""
    torch.manual_seed(0)
    model, inputs = get(name).build(batch=1)
    module = vtmlir.import_torch(model, *inputs)
    if decomposed:
        decompose_convs(module, 0.1, True)
    return model, inputs, module
