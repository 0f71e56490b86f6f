"""`unshare-fill-inits` in the bufferize pipeline (python/vtmlir/passes/unshare_fill_inits.py).

`cse` merges the constant fills of one shape; bufferization then copies the shared fill into every
op that writes into it, in the middle of chains VTC made copy-free. With the pass each writer gets
its own fill: Gemma-2's frame 2 (between the q/k/v projections and probs·V) keeps no data-movement
kernel, results stay bitwise identical and no measured peak grows.
"""

import pytest
import torch

import vtmlir
from vtmlir.backend import bufferize
from vtmlir.models import get
from vtmlir.models.vtc_workloads import SMALL_SIZES

PASS = "vt-eliminate-data-movement"


def _compile(graph, pipeline, unshare: bool, monkeypatch):
    if not unshare:
        monkeypatch.setattr(bufferize, "GRAPH_TO_KERNELS",
                            bufferize.GRAPH_TO_KERNELS.replace("unshare-fill-inits, ", ""))
    exe = vtmlir.compile(graph, pipeline=pipeline, track_memory=True, opt_level=0, llvm_opt_level=0)
    monkeypatch.undo()
    return exe


def test_pipeline_runs_it_between_cse_and_empty_tensor_elimination():
    text = bufferize.GRAPH_TO_KERNELS
    assert text.index("cse)") < text.index("unshare-fill-inits") < text.index("eliminate-empty-tensors")


@pytest.mark.parametrize("name", ["vtc_gemma2_decode", "vtc_yolo_c3k2"])
def test_frame2_copies_and_peaks(name, monkeypatch, load_benchmark):
    model, inputs = get(name).builder(batch=1, seed=0, **SMALL_SIZES[name])
    graph = vtmlir.import_torch(model, *inputs)
    results, peaks, kernels = {}, {}, {}
    for unshare in (False, True):
        exe = _compile(graph, PASS, unshare, monkeypatch)
        out = exe(*inputs)
        results[unshare] = list(out) if isinstance(out, (list, tuple)) else [out]
        peaks[unshare] = exe.memory_stats().peak_internal_bytes
        kernels[unshare] = exe.stages["kernels"]
    assert all(torch.equal(a, b) for a, b in zip(results[False], results[True]))
    assert peaks[True] <= peaks[False]
    if name == "vtc_gemma2_decode":
        bench = load_benchmark("vtc")  # its frame-2 kernel classification
        layers = bench.attention_layers(str(graph))
        assert len(bench.frame2_kernels(kernels[False], layers)) > 0  # the copies of the shared fill
        assert bench.frame2_kernels(kernels[True], layers) == []
        assert peaks[True] < peaks[False]
