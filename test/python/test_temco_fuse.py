"""`temco-fuse-activation` (TeMCO §3.2–3.3) on the evaluation models, the CUDA path, and the
measured-vs-analysed peak (issue 5 points 2, 4, 6).

- Semantics: on every TEMCO_ZOO model (small images, batch 1) the Skip-Opt+Fusion model computes the
  decomposed model's output (fp32 tolerance; in practice bit-identical) and really fuses something.
- Memory: the fused model's measured internal peak is below the decomposed one's on models whose
  peak sits in an lconv-activation-fconv sequence, and the measured peak agrees with
  `temco-analyze-peak-memory(as_compiled)` (same tensors, up to 64 B alignment per allocation).
- CUDA: a fused group is one kernel with thread-local tile buffers, and its PTX assembles (ptxas).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import vtmlir
from vtmlir.models import TEMCO_ZOO
from vtmlir.temco import analyze_peak_memory, decompose_convs
from vtmlir.temco.fuse_activation import fuse_activations
from vtmlir.backend.cpu.peak_memory import measure_peak_memory
from vtmlir.temco.remat_skip import remat_skip_connections

# Every model is a JIT compile of hundreds of loop nests: the suite checks the two cheapest models of
# the families whose fusion differs (plain chains with pooling: VGG; concat splits and skips: UNet);
# benchmarks/temco_memory.py checks max_abs_diff of Skip-Opt+Fusion vs decomposed on all 10 models.
TEST_SIZES = {"temco_vgg11": 32, "temco_unet_small": 16}
_CACHE: dict = {}


def _variants(name):
    if name not in _CACHE:
        torch.manual_seed(0)
        model, (x,) = TEMCO_ZOO[name].builder(batch=1, size=TEST_SIZES[name])
        decomposed = vtmlir.import_torch(model, x)
        decompose_convs(decomposed, 0.1, True)
        fused = vtmlir.as_module(str(decomposed))
        remat_skip_connections(fused)
        (report,) = fuse_activations(fused)
        want, stats_dec = measure_peak_memory(str(decomposed), x, opt_level=0)
        got, stats_fused = measure_peak_memory(str(fused), x, opt_level=0)
        _CACHE[name] = (decomposed, fused, report, (want, stats_dec), (got, stats_fused))
    return _CACHE[name]


@pytest.mark.parametrize("name", list(TEST_SIZES))
def test_skip_opt_fusion_matches_decomposed(name):
    _, fused, report, (want, _), (got, _) = _variants(name)
    assert report.groups, report.to_text()
    assert "scf.forall" in str(fused)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", list(TEST_SIZES))
def test_fusion_lowers_the_measured_peak_and_agrees_with_the_analysis(name):
    """The full-size intermediates are gone (VGG: §4.2's 'fully benefits'), and the measured peak is
    the analysed one (`as_compiled`: after the compiler's elementwise fusion) up to allocation
    alignment (64 B per live allocation)."""
    decomposed, fused, _, (_, before), (_, after) = _variants(name)
    assert after.peak_internal_bytes < 0.6 * before.peak_internal_bytes
    for module, stats in ((decomposed, before), (fused, after)):
        analysed = analyze_peak_memory(module, as_compiled=True).function("main").peak_internal_bytes
        assert abs(stats.peak_internal_bytes - analysed) <= 0.03 * analysed + 1024, (stats, analysed)


def test_fused_group_is_one_cuda_kernel_and_assembles():
    from vtmlir.backend.cuda import compile_cuda

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(4, 16, 3, padding=1), torch.nn.SiLU(),
                                torch.nn.Conv2d(16, 4, 3, padding=1)).eval()
    x = torch.randn(1, 4, 8, 8)
    module = vtmlir.import_torch(model, x)
    decompose_convs(module, 0.25, True)
    (report,) = fuse_activations(module, tile_width=4)
    assert len(report.groups) == 1
    exe = compile_cuda(module, chip="sm_80")
    # one kernel holds the whole group: its tile buffers (1x16x1x4) live in thread-local memory, and
    # its grid is the tile loop: H=8 rows x W/4=2 column tiles (the unit batch dim folded away)
    fused = [k for k in exe.kernels if ".local" in k.ptx]
    assert len(fused) == 1, [(k.name, k.iteration_space) for k in exe.kernels]
    assert int(np.prod(fused[0].iteration_space)) == 16
    assert exe.assemble("sm_80")[fused[0].name]


def test_padded_pool_group_is_one_cuda_kernel_per_channel_tile():
    """The stem pool (lconv -> BN -> ReLU -> -inf pad -> 3x3/2 max-pool, output returned) roots a
    channel-tiled group: one kernel, one thread per (image, channel), tile buffers thread-local."""
    from vtmlir.backend.cuda import compile_cuda

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1, bias=False), torch.nn.BatchNorm2d(8),
                                torch.nn.ReLU(), torch.nn.MaxPool2d(3, 2, 1)).eval()
    module = vtmlir.import_torch(model, torch.randn(1, 3, 8, 8))
    decompose_convs(module, 0.25, True)
    (report,) = fuse_activations(module, tile_width=4)
    assert [g.kind for g in report.groups] == ["lconv-act-pool"], report.to_text()
    exe = compile_cuda(module, chip="sm_80")
    fused = [k for k in exe.kernels if ".local" in k.ptx]
    assert len(fused) == 1, [(k.name, k.iteration_space) for k in exe.kernels]
    assert int(np.prod(fused[0].iteration_space)) == 8
    assert exe.assemble("sm_80")[fused[0].name]


def test_bad_option_is_a_diagnostic():
    from vtmlir.errors import VtmlirError
    from vtmlir.passes import run_pipeline

    module = vtmlir.as_module("func.func @f() { return }")
    with pytest.raises(VtmlirError, match="tile-width must be >= 0"):
        run_pipeline(module, "builtin.module(temco-fuse-activation{tile-width=-1})")


def _decompose_and_fuse(model, x):
    """(decomposed at rank ratio 0.25, fused with 4-wide tiles, the fusion report)."""
    decomposed = vtmlir.import_torch(model, x)
    decompose_convs(decomposed, 0.25, True)
    fused = vtmlir.as_module(str(decomposed))
    (report,) = fuse_activations(fused, tile_width=4)
    return decomposed, fused, report


def test_block_output_is_an_elementwise_root_written_in_place():
    """A ResNet block output (the next block's fconv input and identity skip) stays full-size, but
    lconv -> BatchNorm -> skip add -> ReLU runs per tile and overwrites the skip tile by tile: one
    full-size tensor per block instead of the lconv output, the skip and the result."""
    from vtmlir.models.resnet import BasicBlock

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(),
                                BasicBlock(16, 16), BasicBlock(16, 16), torch.nn.AdaptiveAvgPool2d(1)).eval()
    x = torch.randn(2, 3, 8, 8)
    decomposed, fused, report = _decompose_and_fuse(model, x)
    roots = [g for g in report.groups if g.kind == "lconv-act"]
    assert len(roots) == 3 and sum(g.in_place for g in roots) == 2, report.to_text()
    assert str(fused).count('temco.fused = "lconv-act"') == 3
    want, before = measure_peak_memory(str(decomposed), x, opt_level=0)
    got, after = measure_peak_memory(str(fused), x, opt_level=0)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
    full = 2 * 16 * 8 * 8 * 4
    # decomposed: the skip and the lconv output (and the sum) are full-size together; fused: one
    # full-size tensor plus the reduced (rank 0.25: R = 4 channels) ones
    assert after.peak_internal_bytes < 2 * full <= before.peak_internal_bytes
    analysed = analyze_peak_memory(fused, as_compiled=True).function("main").peak_internal_bytes
    assert abs(after.peak_internal_bytes - analysed) <= 0.03 * analysed + 1024


def test_bottleneck_expanding_conv_joins_the_block_output_group():
    """ResNet-50's Bottleneck: lconv -> BN -> ReLU -> expanding 1x1 conv -> BN -> skip add -> ReLU.
    The block output's group (found first: consumers first) takes the expanding conv as a leaf, so
    that conv must not become a group of its own afterwards (its init was cloned for the first
    group, which once hid that it was taken: tile-and-fuse then stopped early in every block)."""
    from vtmlir.models.resnet import Bottleneck

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(),
                                Bottleneck(32, 8), Bottleneck(32, 8), torch.nn.AdaptiveAvgPool2d(1)).eval()
    x = torch.randn(2, 3, 8, 8)
    decomposed, fused, report = _decompose_and_fuse(model, x)
    assert report.groups and all(g.complete for g in report.groups), report.to_text()
    assert not any("stopped early" in s for s in report.skipped), report.to_text()
    # the two block outputs overwrite their skip tile by tile, the expanding conv inside
    assert sum(g.in_place for g in report.groups if g.kind == "lconv-act") == 2, report.to_text()
    # the 1x1 convs rooting a group of their own are the cores' fconvs (R1 = 2 channels), never
    # the expanding conv (32 channels)
    assert [g.tile[1] for g in report.groups if g.kind == "lconv-act-fconv"] == [2, 2], report.to_text()
    want, before = measure_peak_memory(str(decomposed), x, opt_level=0)
    got, after = measure_peak_memory(str(fused), x, opt_level=0)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
    assert after.peak_internal_bytes < before.peak_internal_bytes


def test_add_of_lconvs_is_merged_into_one_lconv_of_the_block_output_group():
    """TeMCO §3.3, last paragraph (Fig. 9c -> 9a): with the downsample conv decomposed too
    (skip-pointwise off), a stride-2 BasicBlock ends in bn2(lconv2(core2)) + bn_d(lconv_d(core_d)).
    temco-merge-lconvs folds both BatchNorms into the weights and makes it one lconv over the
    concatenated core outputs, so the block output's group is that lconv and the ReLU. Not bitwise
    (the summation order changes): fp32 tolerance against the decomposed model; the peak is not
    raised (fusion already read both lconvs tile by tile)."""
    from vtmlir.models._spec import randomize_batchnorm
    from vtmlir.models.resnet import BasicBlock
    from vtmlir.temco.fold_weight_ops import fold_weight_ops

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(),
                                BasicBlock(16, 32, stride=2), torch.nn.AdaptiveAvgPool2d(1)).eval()
    randomize_batchnorm(model, torch.Generator().manual_seed(0))
    x = torch.randn(2, 3, 8, 8)
    decomposed = vtmlir.import_torch(model, x)
    fold_weight_ops(decomposed)  # BatchNorm's 1/sqrt(var+eps) as constants, as in the benchmark
    decompose_convs(decomposed, 0.25, False)
    fused, root_ops = {}, {}
    for merge in (False, True):
        fused[merge] = vtmlir.as_module(str(decomposed))
        remat_skip_connections(fused[merge])
        (report,) = fuse_activations(fused[merge], tile_width=4, merge_lconvs=merge)
        assert report.lconv_merges == int(merge), report.to_text()
        (root,) = [g for g in report.groups if g.kind == "lconv-act"]
        root_ops[merge] = root.ops
    # unmerged: both lconvs and both BatchNorms per tile; merged: one lconv (the ReLU is the root)
    assert root_ops[False].count("conv_2d_nchw_fchw") == 2 and len(root_ops[False]) > 2, root_ops
    assert root_ops[True] == ["conv_2d_nchw_fchw"], root_ops
    assert str(fused[True]).count("tensor.concat") == 1
    want, before = measure_peak_memory(str(decomposed), x, opt_level=0)
    got, after = measure_peak_memory(str(fused[True]), x, opt_level=0)
    unmerged, after_unmerged = measure_peak_memory(str(fused[False]), x, opt_level=0)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(unmerged), np.asarray(want), rtol=1e-5, atol=1e-5)
    assert after.peak_internal_bytes <= after_unmerged.peak_internal_bytes < before.peak_internal_bytes


def test_where_peak_fuses_only_the_groups_that_hold_the_peak():
    """`where=peak`: a group is fused only where leaving it unfused would raise the internal peak
    above what every group fused and every pad built in place reach. VGG-11's peak is in its first,
    largest block: the later groups stay unfused (their kernels unchanged), the measured peak after
    `temco-pad-in-place` is the one of fusing everything, and the output is the same."""
    from vtmlir.temco.pad_in_place import pad_in_place

    decomposed, _, report_all, (want, _), _ = _variants("temco_vgg11")
    torch.manual_seed(0)
    _, (x,) = TEMCO_ZOO["temco_vgg11"].builder(batch=1, size=TEST_SIZES["temco_vgg11"])
    peaks, groups = {}, {}
    for where in ("all", "peak"):
        module = vtmlir.as_module(str(decomposed))
        remat_skip_connections(module)
        (report,) = fuse_activations(module, where=where)
        pad_in_place(module)
        groups[where] = report
        got, stats = measure_peak_memory(str(module), x, opt_level=0)
        peaks[where] = stats.peak_internal_bytes
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
    assert len(groups["all"].groups) == len(report_all.groups)
    assert 0 < len(groups["peak"].groups) < len(groups["all"].groups), groups["peak"].to_text()
    assert sum("the peak" in s for s in groups["peak"].skipped) == len(groups["all"].groups) - len(groups["peak"].groups)
    assert peaks["peak"] == peaks["all"]
