"""temco-pad-in-place: producers write into the padded buffer's interior, so the measured internal
peak drops where a pad copy sat at the peak (decomposed and fused AlexNet: the first lconv's output
and its padded copy), with bitwise the same output."""

from __future__ import annotations

import numpy as np

import vtmlir
from vtmlir.ir_utils import walk_ops
from vtmlir.models import TEMCO_ZOO
from vtmlir.temco import decompose_convs
from vtmlir.temco.fuse_activation import fuse_activations
from vtmlir.backend.cpu.peak_memory import measure_peak_memory
from vtmlir.temco.pad_in_place import pad_in_place


def test_alexnet_pads_built_in_place_lower_the_peak_bitwise():
    model, inputs = TEMCO_ZOO["temco_alexnet"].builder(batch=1, seed=0)
    graph = vtmlir.import_torch(model, *inputs)
    decompose_convs(graph, 0.1, True)
    fuse_activations(graph)
    rewritten = vtmlir.as_module(str(graph))
    lines = pad_in_place(rewritten)
    assert len(lines) == len(walk_ops(graph, "tensor.pad")) > 0
    assert not walk_ops(rewritten, "tensor.pad")
    before, stats_before = measure_peak_memory(str(graph), *inputs, opt_level=0)
    after, stats_after = measure_peak_memory(str(rewritten), *inputs, opt_level=0)
    assert np.array_equal(np.asarray(before), np.asarray(after))
    assert stats_after.peak_internal_bytes < stats_before.peak_internal_bytes
