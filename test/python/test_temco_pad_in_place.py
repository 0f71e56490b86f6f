"""temco-pad-in-place: producers write into the padded buffer's interior, so the measured internal
peak drops where a pad copy sat at the peak (decomposed and fused AlexNet: the first lconv's output
and its padded copy), with bitwise the same output. With `where=peak` (the default) only the pads
whose in-place build lowers the peak are rewritten; the others stay copies (no strided interior to
write, no time spent for no memory)."""

from __future__ import annotations

import numpy as np
import pytest

import vtmlir
from vtmlir.ir_utils import walk_ops
from vtmlir.models import TEMCO_ZOO
from vtmlir.temco import decompose_convs
from vtmlir.temco.fuse_activation import fuse_activations
from vtmlir.backend.cpu.peak_memory import measure_peak_memory
from vtmlir.temco.pad_in_place import pad_in_place


@pytest.fixture(scope="module")
def alexnet():
    model, inputs = TEMCO_ZOO["temco_alexnet"].builder(batch=1, seed=0)
    graph = vtmlir.import_torch(model, *inputs)
    decompose_convs(graph, 0.1, True)
    fuse_activations(graph)
    before, stats = measure_peak_memory(str(graph), *inputs, opt_level=0)
    return graph, inputs, np.asarray(before), stats.peak_internal_bytes


def _rewritten(graph, where):
    module = vtmlir.as_module(str(graph))
    lines = pad_in_place(module, where)
    return module, [line for line in lines if " @" not in line]


def test_alexnet_pads_built_in_place_lower_the_peak_bitwise(alexnet):
    graph, inputs, before, peak_before = alexnet
    rewritten, lines = _rewritten(graph, "all")
    assert len(lines) == len(walk_ops(graph, "tensor.pad")) > 0
    assert not walk_ops(rewritten, "tensor.pad")
    after, stats_after = measure_peak_memory(str(rewritten), *inputs, opt_level=0)
    assert np.array_equal(before, np.asarray(after))
    assert stats_after.peak_internal_bytes < peak_before


def test_only_the_pad_at_the_peak_is_built_in_place(alexnet):
    """AlexNet's peak is the first lconv's 63x63 output and its padded copy; the four later pads
    (7x7 and 3x3 maps) are far below it. where=peak builds that one pad in place and reaches the
    measured peak of every pad in place; the others stay tensor.pad."""
    graph, inputs, before, peak_before = alexnet
    everywhere, _ = _rewritten(graph, "all")
    _, stats_all = measure_peak_memory(str(everywhere), *inputs, opt_level=0)
    rewritten, lines = _rewritten(graph, "peak")
    assert len(lines) == 1 and "tensor<1x1x63x63xf32> into tensor<1x1x67x67xf32>" in lines[0]
    assert len(walk_ops(rewritten, "tensor.pad")) == len(walk_ops(graph, "tensor.pad")) - 1
    after, stats = measure_peak_memory(str(rewritten), *inputs, opt_level=0)
    assert np.array_equal(before, np.asarray(after))
    assert stats.peak_internal_bytes == stats_all.peak_internal_bytes < peak_before


def test_no_pad_is_rewritten_where_none_lowers_the_peak(alexnet):
    """Decomposed AlexNet after the one pad at its peak is built in place: what remains are pads
    whose in-place build cannot lower the peak any more, so a second run rewrites nothing."""
    graph, _, _, _ = alexnet
    once, _ = _rewritten(graph, "peak")
    twice = vtmlir.as_module(str(once))
    lines = pad_in_place(twice, "peak")
    assert len(lines) == 1 and "no pad lowers it" in lines[0]
    assert str(twice) == str(once)
