"""TeMCO Tucker-2 decomposition (`temco-decompose`, Song et al. ICPP'24 §2.1): math, weights, numerics."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import vtmlir
from vtmlir.errors import VtmlirError
from vtmlir.frontend import parse_mlir
from vtmlir.ir_utils import walk_ops
from vtmlir.passes import parse_pipeline, run_pipeline
from vtmlir.temco.decompose import LAYER_ATTR, ROLE_ATTR, decompose_convs
from vtmlir.temco.tucker import relative_error, tucker2_decompose, tucker2_ranks
from vtmlir.ir_constants import constant_array


class SmallConvNet(torch.nn.Module):
    """Padded 3x3 conv with bias, strided dilated 3x3 conv without bias, 1x1 conv."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(4, 8, 3, padding=1)
        self.c2 = torch.nn.Conv2d(8, 12, 3, stride=2, padding=2, dilation=2, bias=False)
        self.c3 = torch.nn.Conv2d(12, 6, 1)

    def forward(self, x):
        return self.c3(torch.relu(self.c2(torch.relu(self.c1(x)))))


@pytest.fixture(scope="module")
def small_net():
    torch.manual_seed(0)
    model = SmallConvNet().eval()
    x = torch.randn(2, 4, 9, 9)
    text = str(vtmlir.import_torch(model, x))
    return model, x, text


def _decomposed_weights(module) -> dict[int, dict[str, np.ndarray]]:
    """temco.layer -> role -> weight read back from the IR."""
    layers: dict[int, dict[str, np.ndarray]] = {}
    for conv in walk_ops(module, "linalg.conv_2d_nchw_fchw"):
        if ROLE_ATTR in conv.attributes:
            role = str(conv.attributes[ROLE_ATTR]).strip('"')
            layer = int(str(conv.attributes[LAYER_ATTR]).split(":")[0])
            layers.setdefault(layer, {})[role] = constant_array(conv.operands[1].owner)
    return layers


# -- the decomposition itself --------------------------------------------------------------------


def test_tucker2_full_rank_is_exact_and_truncation_is_hosvd():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((6, 5, 3, 3))
    full = tucker2_decompose(w, (5, 6))
    assert relative_error(w, full.reconstruct()) < 1e-12
    errors = [relative_error(w, tucker2_decompose(w, (r, r)).reconstruct()) for r in (1, 2, 3, 4, 5)]
    assert all(a >= b - 1e-12 for a, b in zip(errors, errors[1:])) and errors[-1] < 0.5
    # Shapes of the fconv / core / lconv weights (Fig. 2b).
    f = tucker2_decompose(w, (2, 3))
    assert f.first.shape == (2, 5, 1, 1) and f.core.shape == (3, 2, 3, 3) and f.last.shape == (6, 3, 1, 1)


def test_tucker2_error_of_a_diagonal_pointwise_weight_by_hand():
    w = np.diag([3.0, 1.0])[:, :, None, None]
    assert relative_error(w, tucker2_decompose(w, (1, 1)).reconstruct()) == pytest.approx(1 / np.sqrt(10))


def test_ranks_follow_the_ratio_with_at_least_one():
    assert tucker2_ranks((64, 32, 3, 3), 0.1) == (4, 7)
    assert tucker2_ranks((16, 3, 3, 3), 0.1) == (1, 2)
    assert tucker2_ranks((8, 4, 3, 3), 1.0) == (4, 8)
    assert tucker2_ranks((2, 64, 1, 1), 1.0) == (2, 2)  # capped by the unfolding's rank


def test_dense_resource_weights_read_back_exactly(small_net):
    model, _, text = small_net
    module = parse_mlir(text, "net.mlir")
    values = [constant_array(op) for op in walk_ops(module, "arith.constant")]
    shapes = {v.shape: v for v in values if v is not None and v.ndim == 4}
    for conv in (model.c1, model.c2, model.c3):
        np.testing.assert_array_equal(shapes[tuple(conv.weight.shape)], conv.weight.detach().numpy())


# -- the rewrite and its numerics ------------------------------------------------------------------


def test_full_rank_decomposition_matches_the_original(small_net):
    model, x, text = small_net
    module = parse_mlir(text, "net.mlir")
    report = decompose_convs(module, rank_ratio=1.0)
    assert [layer.ranks for layer in report.decomposed] == [(4, 8), (8, 12)]
    assert [layer.skipped for layer in report.skipped] == ["pointwise (1x1) conv"]
    assert all(layer.relative_error < 1e-6 for layer in report.decomposed)
    roles = [str(c.attributes[ROLE_ATTR]).strip('"') for c in walk_ops(module, "linalg.conv_2d_nchw_fchw") if ROLE_ATTR in c.attributes]
    assert roles == ["fconv", "core", "lconv"] * 2
    out = vtmlir.compile(module, opt_level=0)(x)
    expected = model(x).detach()
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


def test_truncated_decomposition_computes_the_reconstructed_model(small_net):
    """At ratio 0.1 the compiled model is the original with Ŵ in place of W: the output error comes
    only from the reported reconstruction error."""
    model, x, text = small_net
    module = parse_mlir(text, "net.mlir")
    report = decompose_convs(module, rank_ratio=0.1)
    assert [layer.ranks for layer in report.decomposed] == [(1, 1), (1, 2)]
    layers = _decomposed_weights(module)
    approx = SmallConvNet().eval()
    approx.load_state_dict(model.state_dict())
    for index, conv in enumerate((approx.c1, approx.c2)):
        w = layers[index]
        w_hat = np.einsum("oihw,fo,ic->fchw", w["core"], w["lconv"][:, :, 0, 0], w["fconv"][:, :, 0, 0])
        err = relative_error(conv.weight.detach().numpy(), w_hat)
        assert err == pytest.approx(report.decomposed[index].relative_error, rel=1e-5)
        conv.weight.data = torch.from_numpy(w_hat.astype(np.float32))
    out = vtmlir.compile(module, opt_level=0)(x)
    torch.testing.assert_close(out, approx(x).detach(), rtol=1e-4, atol=1e-5)


def test_single_conv_output_error_tracks_the_reconstruction_error():
    """For one conv without padding or bias on i.i.d. inputs, E‖conv(x, W−Ŵ)‖² ∝ ‖W−Ŵ‖²: the relative
    output error is the reported relative weight error, up to sampling noise."""
    torch.manual_seed(1)
    conv = torch.nn.Conv2d(16, 32, 3, bias=False).eval()
    x = torch.randn(4, 16, 18, 18)
    module = vtmlir.import_torch(conv, x)
    report = decompose_convs(module, rank_ratio=0.25)
    (layer,) = report.decomposed
    assert layer.ranks == (4, 8) and 0.2 < layer.relative_error < 1.0
    out = vtmlir.compile(module, opt_level=0)(x)
    ref = conv(x).detach()
    out_error = float((out - ref).norm() / ref.norm())
    assert out_error == pytest.approx(layer.relative_error, rel=0.1)


def test_pass_through_a_pipeline_keeps_the_report_and_validates_options(small_net):
    _, _, text = small_net
    module = parse_mlir(text, "net.mlir")
    pipeline = parse_pipeline("temco-decompose{rank-ratio=0.5 skip-pointwise=false}, canonicalize")
    report = run_pipeline(module, pipeline).report("temco-decompose")
    assert len(report.decomposed) == 3 and not report.skipped
    assert "layer 2   conv 6x12x1x1" in report.to_text()
    with pytest.raises(VtmlirError, match=r"rank-ratio must be in \(0, 1\], got 1.5"):
        run_pipeline(parse_mlir(text, "net.mlir"), "temco-decompose{rank-ratio=1.5}")
