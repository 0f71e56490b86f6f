"""Concat in the input-of-output direction (VTC §4.4, Fig. 11; `vtc/concat_stores.py`).

Producers write straight into the concat's buffer; another reader of a stored element reads the
buffer through a view. Checked on YOLOv11's C3K2 (the paper's Fig. 11 workload, test size) and on
the insert_slice-chain form of a concat: bitwise identical to the unoptimised pipeline, fewer
data-movement kernels, lower peak memory, and the PTX path assembles.
"""

import numpy as np
import pytest
import torch

import vtmlir
from vtmlir.frontend import as_module
from vtmlir.ir_utils import walk_ops
from vtmlir.models import get
from vtmlir.models.vtc_workloads import SMALL_SIZES
from vtmlir.passes.vt_stats import DATA_MOVEMENT, classify
from vtmlir.vtc.eliminate_data_movement import eliminate, report_text

PASS = "vt-eliminate-data-movement"


def _data_movement_kernels(kernels_ir: str) -> int:
    module = as_module(kernels_ir)   # kept alive while its ops are inspected
    return sum(1 for op in walk_ops(module) if op.name.startswith("linalg.")
               and (k := classify(op)) is not None and k[0] == DATA_MOVEMENT)


@pytest.fixture(scope="module")
def c3k2():
    model, inputs = get("vtc_yolo_c3k2").builder(batch=1, seed=0, **SMALL_SIZES["vtc_yolo_c3k2"])
    return model, inputs, vtmlir.import_torch(model, *inputs)


def test_c3k2_producers_write_the_concat_buffer(c3k2):
    """cv1 (both chunk halves, one store with two pieces) and the bottleneck write the buffer
    cv2 reads; the bottleneck's input half is read back from the buffer through a view."""
    _, _, graph = c3k2
    module = as_module(str(graph))
    (ptg,) = eliminate(module.operation)
    text = report_text(ptg)
    assert "concat-store tensor.concat" in text and "2 producer(s) write into the concat buffer" in text
    assert "the concat buffer is needed: linalg.conv_2d_nchw_fchw reads it" in text
    assert not walk_ops(module, "tensor.concat")
    stores = walk_ops(module, "vt.store_into")
    buffers = [s for s in stores if list(s.results[0].type.shape) == [1, 12, 8, 8]]
    assert len(buffers) == 2
    assert any(any(v == buffers[0].results[0] for v in view.operands)
               for view in walk_ops(module, "vt.view"))


def _copies_into(kernels_ir: str, shape: str) -> int:
    """Copy kernels (linalg.copy) whose destination is a view of a buffer of type `shape`."""
    from vtmlir.passes.memref_elide_temporary_copies import root_of

    module = as_module(kernels_ir)
    return sum(1 for op in walk_ops(module, "linalg.copy") if str(root_of(op.operands[1]).type) == shape)


def test_c3k2_bitwise_fewer_copies_producers_write_the_concat_buffer(c3k2):
    """Every producer writes its channels of the concat buffer itself: cv1 both chunk halves and
    the bottleneck its residual add, which reads channels 4..8 of that buffer and writes 8..12 --
    one-shot bufferization gives it a temporary and a copy, `memref-elide-temporary-copies`
    removes them. Without the pass the concat copies all three parts in."""
    model, inputs, graph = c3k2
    plain = vtmlir.compile(graph, opt_level=0, llvm_opt_level=0)
    optimised = vtmlir.compile(graph, pipeline=PASS, opt_level=0, llvm_opt_level=0)
    assert torch.equal(plain(*inputs), optimised(*inputs))
    with torch.no_grad():
        torch.testing.assert_close(optimised(*inputs), model(*inputs), atol=1e-4, rtol=1e-4)
    assert _data_movement_kernels(optimised.stages["kernels"]) < \
        _data_movement_kernels(plain.stages["kernels"])
    concat = "memref<1x12x8x8xf32>"
    assert _copies_into(plain.stages["kernels"], concat) == 3
    assert _copies_into(optimised.stages["kernels"], concat) == 0


def test_c3k2_without_elision_the_residual_add_is_copied(c3k2, monkeypatch):
    """The temporary `memref-elide-temporary-copies` removes is there without it (one copy into the
    concat buffer), and the results are the same."""
    from vtmlir.backend import bufferize

    _, inputs, graph = c3k2
    with_elision = vtmlir.compile(graph, pipeline=PASS, opt_level=0, llvm_opt_level=0)
    monkeypatch.setattr(bufferize, "GRAPH_TO_KERNELS",
                        bufferize.GRAPH_TO_KERNELS.replace("memref-elide-temporary-copies, ", ""))
    without = vtmlir.compile(graph, pipeline=PASS, opt_level=0, llvm_opt_level=0)
    assert _copies_into(without.stages["kernels"], "memref<1x12x8x8xf32>") == 1
    assert torch.equal(with_elision(*inputs), without(*inputs))


INSERT_CHAIN = """
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @main(%x: tensor<2x4xf32>, %y: tensor<2x3xf32>) -> tensor<2x7xf32> {
  %e0 = tensor.empty() : tensor<2x4xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<2x4xf32>) outs(%e0 : tensor<2x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<2x4xf32>
  %e = tensor.empty() : tensor<2x7xf32>
  %i0 = tensor.insert_slice %a into %e[0, 0] [2, 4] [1, 1] : tensor<2x4xf32> into tensor<2x7xf32>
  %i1 = tensor.insert_slice %y into %i0[0, 4] [2, 3] [1, 1] : tensor<2x3xf32> into tensor<2x7xf32>
  return %i1 : tensor<2x7xf32>
}
"""


def test_insert_slice_chain_concat_bitwise():
    """torch.cat as insert_slices into one empty: the exp writes its box of the result, the
    argument is copied into the other."""
    x = torch.randn(2, 4)
    y = torch.randn(2, 3)
    plain = vtmlir.compile(INSERT_CHAIN, opt_level=0)(x, y)
    exe = vtmlir.compile(INSERT_CHAIN, pipeline=PASS)
    assert '"vt.store_into"' in exe.stages["optimized"]
    assert "tensor.insert_slice" not in exe.stages["optimized"]
    out = exe(x, y)
    assert torch.equal(plain, out)
    np.testing.assert_array_equal(out[:, 4:].numpy(), y.numpy())
    np.testing.assert_allclose(out[:, :4].numpy(), np.exp(x.numpy()), rtol=1e-6)


def test_c3k2_after_pass_compiles_to_ptx_every_kernel_assembles(c3k2):
    """The PTX path takes the producers re-indexed into the concat buffer: ptxas sm_80."""
    _, _, graph = c3k2
    exe = vtmlir.compile(graph, target="cuda", chip="sm_80", pipeline=PASS)
    assert '"vt.store_into"' in exe.stages["optimized"] and '"vt.' not in exe.stages["vt-lowered"]
    cubins = exe.assemble("sm_80")
    assert exe.kernels and set(cubins) == set(exe.ptx)
    assert all(c[:4] == b"\x7fELF" for c in cubins.values())


FAN_OUT = """
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @main(%x: tensor<2x4xf32>, %y: tensor<1x4xf32>, %cache: tensor<3x16xf32>) -> tensor<3x16xf32> {
  %e0 = tensor.empty() : tensor<2x4xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<2x4xf32>) outs(%e0 : tensor<2x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<2x4xf32>
  %c = tensor.concat dim(0) %a, %y : (tensor<2x4xf32>, tensor<1x4xf32>) -> tensor<3x4xf32>
  %u = tensor.insert_slice %c into %cache[0, 5] [3, 4] [1, 1] : tensor<3x4xf32> into tensor<3x16xf32>
  return %u : tensor<3x16xf32>
}
"""

PARTIAL = """
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @main(%x: tensor<2x8xf32>, %y: tensor<2x3xf32>) -> (tensor<2x7xf32>, tensor<2x4xf32>) {
  %e0 = tensor.empty() : tensor<2x8xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<2x8xf32>) outs(%e0 : tensor<2x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<2x8xf32>
  %lo = tensor.extract_slice %a[0, 0] [2, 4] [1, 1] : tensor<2x8xf32> to tensor<2x4xf32>
  %hi = tensor.extract_slice %a[0, 4] [2, 4] [1, 1] : tensor<2x8xf32> to tensor<2x4xf32>
  %c = tensor.concat dim(1) %lo, %y : (tensor<2x4xf32>, tensor<2x3xf32>) -> tensor<2x7xf32>
  %e1 = tensor.empty() : tensor<2x4xf32>
  %n = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%hi : tensor<2x4xf32>) outs(%e1 : tensor<2x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = arith.negf %v : f32
    linalg.yield %s : f32
  } -> tensor<2x4xf32>
  return %c, %n : tensor<2x7xf32>, tensor<2x4xf32>
}
"""


@pytest.mark.parametrize("text, shapes", [
    (FAN_OUT, [(2, 4), (1, 4), (3, 16)]),      # stores fanning out through a concat
    (PARTIAL, [(2, 8), (2, 3)]),               # partial cover: the rest in residual storage
], ids=["fan-out", "partial-cover"])
def test_fan_out_and_partial_cover_bitwise(text, shapes):
    g = torch.Generator().manual_seed(1)
    args = [torch.randn(*s, generator=g) for s in shapes]
    exe = vtmlir.compile(text, pipeline=PASS)
    assert "tensor.concat" not in exe.stages["optimized"]
    assert exe.stages["optimized"].count('"vt.store_into"') == 2
    for a, b in zip(_outs(vtmlir.compile(text, opt_level=0)(*args)), _outs(exe(*args))):
        assert torch.equal(a, b)


def _outs(out):
    return list(out) if isinstance(out, (list, tuple)) else [out]


RESHAPED_CONCAT = """
func.func @main(%x: tensor<4x8xf32>, %w: tensor<8x6xf32>, %y: tensor<4x2xf32>) -> tensor<2x2x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x6xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x6xf32>) -> tensor<4x6xf32>
  %a = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x6xf32>) outs(%acc : tensor<4x6xf32>) -> tensor<4x6xf32>
  %c = tensor.concat dim(1) %a, %y : (tensor<4x6xf32>, tensor<4x2xf32>) -> tensor<4x8xf32>
  %r = tensor.expand_shape %c [[0, 1], [2]] output_shape [2, 2, 8] : tensor<4x8xf32> into tensor<2x2x8xf32>
  return %r : tensor<2x2x8xf32>
}
"""


def test_concat_returned_through_a_reshape_is_stored_into_the_out_parameter():
    """A reshaped concat that is returned needs the concat's buffer (a reshape is zero-copy): the
    matmul writes its channels of it and the argument is copied in; after bufferization that buffer
    is the caller's out-parameter itself (`memref-elide-temporary-copies` after the out-parameters
    undoes the reshape on it): one copy kernel, the argument's, instead of three."""
    module = as_module(RESHAPED_CONCAT)
    (ptg,) = eliminate(module.operation)
    assert "the concat buffer is needed: func.return reads it (through tensor.expand_shape)" in report_text(ptg)
    plain = vtmlir.compile(RESHAPED_CONCAT, opt_level=0)
    exe = vtmlir.compile(RESHAPED_CONCAT, pipeline=PASS)
    x, w, y = torch.randn(4, 8), torch.randn(8, 6), torch.randn(4, 2)
    assert torch.equal(plain(x, w, y), exe(x, w, y))
    kernels = as_module(exe.stages["kernels"])
    assert len(walk_ops(kernels, "linalg.copy")) == 1
    assert len(walk_ops(as_module(plain.stages["kernels"]), "linalg.copy")) == 2   # the concat's
    assert not walk_ops(kernels, "memref.alloc")
