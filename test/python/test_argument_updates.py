"""Arguments a compiled function updates (`passes/argument_updates.py`, `compile(..., donate=...)`).

Without donation no input is ever written (the KV caches of a decode layer were overwritten by the
in-place cache update before arguments were read-only); with donation a result that is a donated
argument updated in place lives in that argument's memory: no out-parameter, no copy kernel, the
same values bitwise.
"""

import numpy as np
import pytest
import torch

import vtmlir
from vtmlir.errors import VtmlirError
from vtmlir.frontend import as_module
from vtmlir.ir_utils import walk_ops
from vtmlir.models import get
from vtmlir.models.vtc_workloads import SMALL_SIZES

PASS = "vt-eliminate-data-movement"


@pytest.fixture(scope="module")
def llama():
    model, inputs = get("vtc_llama3_decode").builder(batch=1, seed=0, **SMALL_SIZES["vtc_llama3_decode"])
    return model, inputs, vtmlir.import_torch(model, *inputs)


def _cache_copies(kernels_ir: str, cache_type: str) -> int:
    module = as_module(kernels_ir)
    return sum(1 for op in walk_ops(module, "linalg.copy") if str(op.operands[1].type) == cache_type)


@pytest.mark.parametrize("pipeline", [None, PASS])
def test_inputs_are_never_written_without_donation(llama, pipeline):
    model, inputs, graph = llama
    before = [t.clone() for t in inputs]
    exe = vtmlir.compile(graph, pipeline=pipeline)
    out = exe(*inputs)
    assert all(torch.equal(a, b) for a, b in zip(before, inputs))
    assert exe.aliases == {}
    with torch.no_grad():
        for a, b in zip(out, model(*inputs)):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    # each cache is copied once into its out-parameter, at the entry (before any compute)
    cache = f"memref<{'x'.join(map(str, inputs[1].shape))}xf32>"
    assert _cache_copies(exe.stages["kernels"], cache) == 2


@pytest.mark.parametrize("pipeline", [None, PASS])
def test_donated_caches_are_updated_in_place_bitwise(llama, pipeline):
    _, inputs, graph = llama
    reference = vtmlir.compile(graph, pipeline=pipeline, track_memory=True)
    expected = reference(*inputs)
    exe = vtmlir.compile(graph, pipeline=pipeline, donate=(1, 2), track_memory=True)
    assert exe.aliases == {1: 1, 2: 2}
    caches = [inputs[1].clone(), inputs[2].clone()]
    out = exe(inputs[0], *caches)
    assert all(torch.equal(a, b) for a, b in zip(expected, out))
    # the results are the donated tensors themselves, updated
    assert out[1].data_ptr() == caches[0].data_ptr() and out[2].data_ptr() == caches[1].data_ptr()
    assert torch.equal(caches[0], expected[1]) and not torch.equal(caches[0], inputs[1])
    cache = f"memref<{'x'.join(map(str, inputs[1].shape))}xf32>"
    assert _cache_copies(exe.stages["kernels"], cache) == 0
    donated, plain = exe.memory_stats(), reference.memory_stats()
    cache_bytes = 2 * inputs[1].numel() * 4
    assert plain.output_bytes - donated.output_bytes == cache_bytes
    assert donated.peak_bytes <= plain.peak_bytes - cache_bytes


def test_donating_an_input_also_passed_elsewhere_copies_it():
    """The same tensor as two arguments, one donated: the donated one is written, so it gets its
    own memory first; the other argument keeps its values."""
    text = """
func.func @main(%c: tensor<4xf32>, %x: tensor<4xf32>) -> tensor<4xf32> {
  %s = tensor.extract_slice %x[0] [2] [1] : tensor<4xf32> to tensor<2xf32>
  %u = tensor.insert_slice %s into %c[2] [2] [1] : tensor<2xf32> into tensor<4xf32>
  return %u : tensor<4xf32>
}"""
    exe = vtmlir.compile(text, donate=0)
    assert exe.aliases == {0: 0}
    t = torch.arange(4, dtype=torch.float32)
    out = exe(t, t)
    assert torch.equal(out, torch.tensor([0.0, 1.0, 0.0, 1.0]))
    assert torch.equal(t, torch.arange(4, dtype=torch.float32))


def test_donated_result_not_computable_in_place_stays_an_out_parameter():
    """The old value of the donated argument is read after the update: bufferization copies, the
    result stays an ordinary out-parameter, and the values are still right."""
    text = """
#id = affine_map<(d0) -> (d0)>
func.func @main(%c: tensor<4xf32>, %x: tensor<2xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %u = tensor.insert_slice %x into %c[0] [2] [1] : tensor<2xf32> into tensor<4xf32>
  %e = tensor.empty() : tensor<4xf32>
  %d = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%u, %c : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.subf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %u, %d : tensor<4xf32>, tensor<4xf32>
}"""
    c, x = np.arange(4, dtype=np.float32), np.array([10.0, 20.0], dtype=np.float32)
    expected = vtmlir.compile(text)(c.copy(), x)
    exe = vtmlir.compile(text, donate=[0])
    assert exe.aliases == {}
    out = exe(c.copy(), x)
    assert all(torch.equal(a, b) for a, b in zip(expected, out))
    assert torch.equal(out[1], torch.tensor([10.0, 19.0, 0.0, 0.0]))


@pytest.mark.parametrize("donate, message", [
    ((5,), "@main has 2 arguments; 5 is not an argument index"),
    ((0, 0), "names an argument twice"),
    ("x", "is not an argument index"),
    (1.5, "donate must be an argument index or a sequence of them"),
])
def test_bad_donate_is_a_clear_error(donate, message):
    text = """
func.func @main(%c: tensor<4xf32>, %x: tensor<4xf32>) -> tensor<4xf32> {
  return %c : tensor<4xf32>
}"""
    with pytest.raises(VtmlirError, match=message):
        vtmlir.compile(text, donate=donate)


def test_donated_cache_on_cuda_is_read_back_from_its_device_buffer(llama):
    """The PTX path: the donated caches are updated in their own device buffers (no out-parameter,
    no cache copy kernel) and the host program reads the results back from them; every kernel
    assembles. (Running it needs a GPU; the host program is checked here.)"""
    _, inputs, graph = llama
    exe = vtmlir.compile(graph, target="cuda", pipeline=PASS, donate=(1, 2))
    program = exe.host_program
    assert len(program.outputs) == 1
    assert program.result_buffers == [program.outputs[0], program.inputs[1], program.inputs[2]]
    assert "results [" in str(program)
    plain = vtmlir.compile(graph, target="cuda", pipeline=PASS)
    assert len(plain.host_program.outputs) == 3 and plain.host_program.results is None
    assert len(exe.kernels) == len(plain.kernels) - 2      # the two cache copies into out-parameters
    cubins = exe.assemble("sm_80")
    assert set(cubins) == set(exe.ptx)
