"""TeMCO peak-memory analysis (`temco-analyze-peak-memory`, Song et al. ICPP'24 §2.2, Eq. 3–4)."""

from __future__ import annotations

import json
import struct

import pytest
import torch

import vtmlir
from vtmlir.frontend import parse_mlir
from vtmlir.models import get
from vtmlir.passes import parse_pipeline, run_pipeline
from vtmlir.temco.decompose import decompose_convs
from vtmlir.temco.analyze_peak_memory import analyze_peak_memory
from vtmlir.temco.plot import plot_memory

F32 = 4


def _conv_chain(c, c1, c2, bias=False):
    return torch.nn.Sequential(
        torch.nn.Conv2d(c, c1, 3, bias=bias), torch.nn.ReLU(), torch.nn.Conv2d(c1, c2, 3, bias=bias)
    ).eval()


def test_two_convs_around_an_activation_peak_at_2CHW_equation_3():
    """Fig. 3a / Eq. 3: MAX(CHW + C'H'W', 2C'H'W', C'H'W' + C''H''W'') — the activation's in + out."""
    torch.manual_seed(0)
    model = _conv_chain(4, 16, 4)
    x = torch.randn(1, 4, 10, 10)
    timeline = analyze_peak_memory(vtmlir.import_torch(model, x)).function("main")
    chw, c1hw, c2hw = 4 * 10 * 10 * F32, 16 * 8 * 8 * F32, 4 * 6 * 6 * F32
    assert [s.op for s in timeline.steps] == [
        "linalg.conv_2d_nchw_fchw",
        "linalg.generic",
        "linalg.conv_2d_nchw_fchw",
        "func.return",
    ]
    assert timeline.usage == [chw + c1hw, 2 * c1hw, c1hw + c2hw, c2hw]
    assert timeline.peak_bytes == max(chw + c1hw, 2 * c1hw, c1hw + c2hw) == 2 * c1hw
    assert timeline.weight_bytes == sum(p.numel() for p in model.parameters()) * F32


def test_decomposed_chain_follows_equation_4():
    """Fig. 3b / Eq. 4: the decomposed chain's steps are exactly the seven terms of Eq. 4, and the
    peak stays 2C'H'W' because the activation's tensors are restored to full size."""
    torch.manual_seed(0)
    model = _conv_chain(8, 16, 8)
    x = torch.randn(1, 8, 10, 10)
    module = vtmlir.import_torch(model, x)
    report = decompose_convs(module, rank_ratio=0.25)
    (r1, r2), (r3, r4) = [layer.ranks for layer in report.decomposed]
    assert (r1, r2, r3, r4) == (2, 4, 4, 2)
    c, cp, cpp = 8, 16, 8
    hw, hw1, hw2 = 10 * 10, 8 * 8, 6 * 6
    terms = [
        c * hw + r1 * hw,
        r1 * hw + r2 * hw1,
        r2 * hw1 + cp * hw1,
        2 * cp * hw1,
        cp * hw1 + r3 * hw1,
        r3 * hw1 + r4 * hw2,
        r4 * hw2 + cpp * hw2,
    ]
    timeline = analyze_peak_memory(module).function("main")
    assert timeline.usage == [t * F32 for t in terms] + [cpp * hw2 * F32]
    assert timeline.peak_bytes == 2 * cp * hw1 * F32


@pytest.fixture(scope="module")
def resnet_block():
    model, inputs = get("resnet_basic_block").build(batch=1)
    return model, inputs, str(vtmlir.import_torch(model, *inputs))


def test_resnet_basic_block_peak_by_hand(resnet_block):
    """Stride-2 BasicBlock 16→32 on 1x16x16x16: the importer emits the downsample branch first, so its
    result (1x32x8x8, the skip connection) is live while conv1 pads the input (1x16x18x18): the peak
    is input + padded input + skip."""
    model, inputs, text = resnet_block
    timeline = analyze_peak_memory(parse_mlir(text, "block.mlir")).function("main")
    x, padded, skip = 16 * 16 * 16 * F32, 16 * 18 * 18 * F32, 32 * 8 * 8 * F32
    assert timeline.peak_bytes == x + padded + skip
    assert timeline.peak_step.op == "tensor.pad"
    assert sorted(b.bytes for b in timeline.peak_buffers()) == sorted([x, padded, skip])
    skip_buffer = max(timeline.peak_buffers(), key=lambda b: b.distance)
    assert skip_buffer.bytes == skip and skip_buffer.distance > 20  # a skip connection (Alg. 1 l. 18)
    # Weights apart: conv weights and the BatchNorm parameters and running statistics.
    weights = sum(p.numel() for p in model.parameters()) + sum(
        b.numel() for name, b in model.named_buffers() if not name.endswith("num_batches_tracked")
    )
    assert timeline.weight_bytes == weights * F32
    # Every step's memory is at least the op's own inputs + output, never more than all buffers.
    assert all(s.live_bytes <= sum(b.bytes for b in timeline.buffers) for s in timeline.steps)
    assert timeline.usage[-1] == 32 * 8 * 8 * F32  # only the result is live at the return


def test_decomposition_lowers_the_resnet_block_peak_but_not_below_the_skip(resnet_block):
    _, _, text = resnet_block
    original = analyze_peak_memory(parse_mlir(text, "block.mlir")).function("main")
    module = parse_mlir(text, "block.mlir")
    decompose_convs(module, rank_ratio=0.1)
    decomposed = analyze_peak_memory(module).function("main")
    assert decomposed.peak_bytes < original.peak_bytes
    assert decomposed.weight_bytes < original.weight_bytes
    # The input, the conv1 output restored by its lconv, and the BN result are still full size (§2.3).
    assert decomposed.peak_bytes >= 16 * 16 * 16 * F32 + 2 * 32 * 8 * 8 * F32


def test_pass_report_json_and_png_plot(resnet_block, tmp_path):
    _, _, text = resnet_block
    module = parse_mlir(text, "block.mlir")
    before = str(module)
    out, png = tmp_path / "report.json", tmp_path / "memory.png"
    pipeline = parse_pipeline(f"temco-analyze-peak-memory{{json=true report={out} plot={png}}}")
    results = run_pipeline(module, pipeline)
    assert str(module) == before  # an analysis: the IR is unchanged
    data = json.loads(out.read_text())
    (fn,) = data["functions"]
    assert fn["peak_bytes"] == max(fn["usage"]) == results.report("temco-analyze-peak-memory").peak_bytes
    raw = png.read_bytes()
    assert raw[:8] == b"\x89PNG\r\n\x1a\n" and raw[12:16] == b"IHDR"
    assert struct.unpack(">II", raw[16:24]) == (800, 420)


def test_plot_of_two_timelines(tmp_path):
    path = tmp_path / "two.png"
    plot_memory([("original", [1, 5 << 20, 3 << 20]), ("decomposed", [1, 2 << 20])], str(path))
    assert path.read_bytes()[:4] == b"\x89PNG"
