"""`temco-remat-skip` (TeMCO §3.1, Algs. 1-2): numerics, the peak it saves, and its decisions."""

from __future__ import annotations

import functools

import pytest
import torch

import vtmlir
from vtmlir.models import get
from vtmlir.temco import analyze_peak_memory, decompose_convs
from vtmlir.backend.cpu.peak_memory import measure_peak_memory
from vtmlir.temco.remat_skip import is_lconv, remat_skip_connections


class Fig7Block(torch.nn.Module):
    """The paper's Fig. 7: b = relu(conv1(x)) feeds conv2 and, three layers later, the add."""

    def __init__(self, c=16):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(c, c, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(c, c, 3, padding=1)
        self.conv3 = torch.nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x):
        b = torch.relu(self.conv1(x))
        return torch.relu(self.conv3(torch.relu(self.conv2(b))) + b)


class ResidualNet(torch.nn.Module):
    """Two Fig. 7 blocks, then a BatchNorm'd identity-shortcut block (whose skip is not restorable)."""

    def __init__(self, c=16):
        super().__init__()
        self.blocks = torch.nn.Sequential(Fig7Block(c), Fig7Block(c))
        self.conv = torch.nn.Conv2d(c, c, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(c)

    def forward(self, x):
        y = self.blocks(x)
        return torch.relu(self.bn(self.conv(y)) + y)


@functools.lru_cache(maxsize=None)
def _decomposed_text(model_cls) -> str:
    """The decomposed model as text (torch.export is the slow part: once per model class)."""
    torch.manual_seed(0)
    model, x = model_cls().eval(), torch.randn(1, 16, 8, 8)
    module = vtmlir.import_torch(model, x)
    decompose_convs(module, 0.1, True)
    return str(module)


def _decomposed(model_cls):
    torch.manual_seed(1)
    return vtmlir.as_module(_decomposed_text(model_cls)), torch.randn(1, 16, 8, 8)


@pytest.mark.parametrize("model_cls", [Fig7Block, ResidualNet])
def test_remat_matches_the_decomposed_model_and_lowers_the_analysed_peak(model_cls):
    module, x = _decomposed(model_cls)
    decomposed_text = str(module)
    before = analyze_peak_memory(module).function("main")
    (report,) = remat_skip_connections(module)
    assert module.operation.verify()
    after = analyze_peak_memory(module).function("main")

    assert report.rematerialized, report.to_text()
    assert after.peak_bytes < before.peak_bytes
    # Every rematerialized skip now keeps its reduced tensor (an lconv's input) instead.
    for skip in report.rematerialized:
        assert skip.reduced_bytes < skip.bytes and skip.restore[0] == "linalg.conv_2d_nchw_fchw"

    want, _ = measure_peak_memory(decomposed_text, x)
    got, _ = measure_peak_memory(str(module), x)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_fig7_restore_list_and_the_reduced_skip():
    module, _ = _decomposed(Fig7Block)
    (report,) = remat_skip_connections(module)
    (skip,) = report.skips
    # FindReduced(b) = [conv1.lconv, relu] (Alg. 2; Fig. 7); b is 16 channels, a2 is R2 = 2.
    assert skip.decision == "rematerialized"
    assert skip.restore == ["linalg.conv_2d_nchw_fchw", "linalg.generic"]
    assert (skip.bytes, skip.reduced_bytes) == (16 * 64 * 4, 2 * 64 * 4)
    # The paper's default threshold: FLOPs of the original conv1 (2*N*F*H*W*C*kh*kw).
    assert skip.flops_threshold == 2 * 16 * 64 * 16 * 9
    lconvs = [op for op in _ops(module) if op.name == "linalg.conv_2d_nchw_fchw" and is_lconv(op)]
    assert len(lconvs) == 4  # 3 decomposed convs + the clone


def test_overhead_thresholds_and_unrestorable_skips():
    text = _decomposed_text(ResidualNet)
    strict = vtmlir.as_module(text)
    (report,) = remat_skip_connections(strict, flops_threshold=1)
    assert report.skips and not report.rematerialized
    assert all("FLOPs" in s.decision or "FindReduced" in s.decision or "peak" in s.decision for s in report.skips)
    assert str(strict) == str(vtmlir.as_module(text))  # nothing rewritten

    # The zoo's ResNet basic block: its skip is the downsampled input, not restorable from an lconv.
    block, inputs = get("resnet_basic_block").build(batch=1)
    module = vtmlir.import_torch(block, *inputs)
    decompose_convs(module, 0.1, True)
    (report,) = remat_skip_connections(module)
    assert report.skips and not report.rematerialized
    assert "function argument" in report.skips[0].decision


def test_pass_in_a_pipeline_through_compile():
    text = _decomposed_text(Fig7Block)
    _, x = _decomposed(Fig7Block)
    plain = vtmlir.compile(text, opt_level=0)(x)
    remat = vtmlir.compile(text, pipeline="temco-remat-skip{distance-threshold=5}")
    assert "temco.role" in remat.stages["optimized"]
    torch.testing.assert_close(remat(x), plain, rtol=1e-5, atol=1e-6)


def _ops(module):
    from vtmlir.ir_utils import walk_ops

    return walk_ops(module.operation)
