"""Semantics on every TeMCO evaluation model (issue 5 point 6): Skip-Opt+Fusion computes the
decomposed model's output.

Batch 1 and the smallest image each topology allows (`temco_nets.TEMCO_MODELS`' test size). Each
model costs two JIT compiles of a few hundred loop nests: the suite runs the cheapest model of each
family `test_temco_fuse.py` does not cover (it runs VGG-11, UNet-small and two ResNet BasicBlocks);
the other six (VGG-16, ResNet-18/34/50, DenseNet-121, UNet: 15-240 s each here) are checked by
`benchmarks/temco_memory.py` (`max_abs_diff` vs decomposed) and passed this test when listed in
`SUITE_MODELS` (all 10, 2026-11-22). The decomposed model is the reference (TeMCO §4.4: the optimisations preserve the
decomposed model's semantics); fp32 tolerance, bit-identical in practice.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import vtmlir
from vtmlir.models import TEMCO_ZOO
from vtmlir.models.temco_nets import TEMCO_MODELS
from vtmlir.temco import decompose_convs
from vtmlir.temco.fuse import fuse_activations
from vtmlir.temco.measure import measure_peak_memory
from vtmlir.temco.remat import remat_skip_connections


SUITE_MODELS = ["temco_alexnet", "temco_densenet_small"]


@pytest.mark.parametrize("name", SUITE_MODELS)
def test_skip_opt_fusion_computes_the_decomposed_model(name):
    torch.manual_seed(0)
    model, (x,) = TEMCO_ZOO[name].builder(batch=1, size=TEMCO_MODELS[name][2])
    decomposed = vtmlir.import_torch(model, x)
    decompose_convs(decomposed, 0.1, True)
    optimised = vtmlir.as_module(str(decomposed))
    remat_skip_connections(optimised)
    (report,) = fuse_activations(optimised)
    assert report.groups, report.to_text()
    want, _ = measure_peak_memory(str(decomposed), x, opt_level=0)
    got, _ = measure_peak_memory(str(optimised), x, opt_level=0)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
