"""Measured internal-tensor peak (TeMCO §4.2; issue 5 point 2): the CPU runtime's counting allocator.

The measured peak must equal the replay of the kernel-level IR's allocations exactly, free everything
it allocates, leave the results unchanged, and relate to temco-analyze-peak-memory as documented in
`vtmlir.backend.cpu.peak_memory` (frees at block end, bufferization's fill copies, fusion).
"""

from __future__ import annotations

import pytest
import torch

from vtmlir.backend.bufferize import bufferize
from vtmlir.backend.cpu import compile_cpu
from vtmlir.backend.cpu.lower import cpu_stages
from vtmlir.context import make_context
from vtmlir.errors import VtmlirError
from vtmlir.frontend import as_module
from vtmlir.passes import run_pipeline
from vtmlir.signature import find_entry, signature_of
from vtmlir.temco import analyze_peak_memory
from vtmlir.passes.memref_alloc_at_first_use import sink_allocations
from vtmlir.backend.cpu.peak_memory import kernel_allocation_timeline, measure_peak_memory
from zoo_graphs import zoo_graph

MODELS = ["resnet_basic_block", "conv_bn_relu_residual", "mlp"]


@pytest.mark.parametrize("decomposed", [False, True], ids=["original", "decomposed"])
@pytest.mark.parametrize("name", MODELS)
def test_measured_peak_equals_the_kernel_ir_replay(name, decomposed):
    model, inputs, module = zoo_graph(name, decomposed)
    text = str(module)
    expected = compile_cpu(*_fresh(text))(*inputs)
    got, stats = measure_peak_memory(text, *inputs)

    # Same results as the default (untracked) lowering, bit for bit.
    for g, e in zip(_tuple(got), _tuple(expected)):
        assert torch.equal(g, e)
    # Every allocation is freed; bytes match the replay of the bufferized IR exactly.
    kernels = as_module(text, context=make_context())
    bufferize(kernels)
    # The CPU lowering's kernel-level steps (memref-alloc-at-first-use, then code generation's
    # rewrites, which add buffers of their own: a prologue split from its contraction; and the
    # schedule's, which frees a fused group's buffers after the group).
    run_pipeline(kernels, dict(cpu_stages())["schedule"])
    replay = kernel_allocation_timeline(kernels, "main")
    assert stats.live_internal_bytes == 0
    assert stats.allocations == stats.frees == replay.allocations
    assert stats.peak_internal_bytes == replay.peak_bytes
    assert stats.timeline == replay.usage
    # Weights, inputs and outputs apart.
    report = analyze_peak_memory(as_module(text, context=make_context())).function("main")
    assert stats.input_bytes == sum(x.numel() * x.element_size() for x in inputs)
    assert stats.output_bytes == sum(o.numel() * o.element_size() for o in _tuple(got))
    assert 0 < stats.weight_bytes <= report.weight_bytes


@pytest.mark.parametrize("name", ["resnet_basic_block", "conv_bn_relu_residual"])
def test_measured_peak_against_the_analysis(name):
    """The runtime frees at block end: its internal peak is every allocation at once. It lies between
    the analysis' peak without the caller's arrays and the sum of the analysis' internal buffers plus
    one copy of each shared fill (bufferization) and 64 bytes alignment per allocation."""
    for decomposed in (False, True):
        _, inputs, module = zoo_graph(name, decomposed)
        timeline = analyze_peak_memory(module).function("main")
        _, stats = measure_peak_memory(str(module), *inputs)
        internal = [b for b in timeline.buffers if b.kind != "input"]
        upper = sum(b.bytes for b in internal) + max(b.bytes for b in internal) + 64 * stats.allocations
        lower = timeline.peak_bytes - stats.input_bytes - stats.output_bytes
        assert lower <= stats.peak_internal_bytes <= upper, (decomposed, lower, stats, upper)


def test_decomposition_lowers_the_measured_peak():
    _, inputs, original = zoo_graph("resnet_basic_block", False)
    _, _, decomposed = zoo_graph("resnet_basic_block", True)
    _, before = measure_peak_memory(str(original), *inputs)
    _, after = measure_peak_memory(str(decomposed), *inputs)
    assert after.peak_internal_bytes < before.peak_internal_bytes
    assert after.weight_bytes < before.weight_bytes


def test_untracked_executable_refuses_memory_stats():
    _, inputs, module = zoo_graph("mlp", False)
    exe = compile_cpu(*_fresh(str(module)))
    with pytest.raises(VtmlirError, match="track_memory"):
        exe.memory_stats()
    assert "_mlir_memref_to_llvm_alloc" not in exe.stages["llvm"]
    tracked = compile_cpu(*_fresh(str(module)), track_memory=True)
    assert "_mlir_memref_to_llvm_alloc" in tracked.stages["llvm"]
    with pytest.raises(VtmlirError, match="no call"):
        tracked.memory_stats()
    tracked(*inputs)
    first = tracked.memory_stats()
    tracked(*inputs)  # a second call is measured on its own
    assert tracked.memory_stats().to_dict() == first.to_dict()


def _fresh(text):
    graph = as_module(text, context=make_context())
    return graph, signature_of(find_entry(graph, None)), {}


def _tuple(x):
    return x if isinstance(x, tuple) else (x,)
