"""Weight-only quantisation (vtmlir.lowbit.quantize): the torch dequantisation equals a numpy
reference bit for bit, the error stays within half a step, and quantised models compiled by
vtmlir.compile match the PyTorch reference dequantise-then-matmul."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import vtmlir
from vtmlir.lowbit import LowBitType, QuantizedLinear, all_types, quantize, quantize_weight, unpack_bits


def reference_dequantize(qlinear: QuantizedLinear) -> torch.Tensor:
    """W' from the packed bytes with numpy only: §6.1 unpack, the type's values by formula
    (ldexp of the bit fields, not the decoder's table), zero points, scales."""
    t = qlinear.dtype_spec
    n_out, k = qlinear.out_features, qlinear.in_features
    codes = unpack_bits(qlinear.packed.numpy(), t.bits, n_out * k).astype(np.int64).reshape(n_out, k)
    if t.kind == "uint":
        values = codes.astype(np.float64)
    elif t.kind == "int":
        values = np.where(codes >= 2 ** (t.bits - 1), codes - 2**t.bits, codes).astype(np.float64)
    else:
        sign = np.where(codes >> (t.bits - 1), -1.0, 1.0)
        e = (codes >> t.mantissa) & (2**t.exponent - 1)
        m = codes & (2**t.mantissa - 1)
        bias = 2 ** (t.exponent - 1) - 1
        values = sign * np.where(e == 0, np.ldexp(m / 2**t.mantissa, 1 - bias), np.ldexp(1 + m / 2**t.mantissa, e - bias))
    g = qlinear.group_size
    values = values.reshape(n_out, k // g, g)
    if qlinear.zeros is not None:
        values = values - qlinear.zeros.numpy()[..., None]
    return torch.from_numpy((values * qlinear.scales.numpy()[..., None]).reshape(n_out, k).astype(np.float32))


@pytest.mark.parametrize("t", all_types(), ids=lambda t: t.name)
def test_torch_dequantization_is_bit_exact(t):
    torch.manual_seed(t.bits)
    linear = nn.Linear(48, 5)
    q = QuantizedLinear.from_linear(linear, t, group_size=16)
    assert q.packed.numel() == (5 * 48 * t.bits + 7) // 8  # compact: 240 codes, no gaps
    w = q.dequantized_weight()
    assert torch.equal(w, reference_dequantize(q))
    assert torch.equal(w, torch.from_numpy(q.quantized_weight().dequantize()))
    # Quantisation error per group: at most half a step (ints) / half the coarsest gap (floats).
    err = (w - linear.weight.detach()).abs().reshape(5, 3, 16)
    scales = q.scales.unsqueeze(-1)
    if t.kind == "float":
        bound = scales * np.diff(t.finite_values()).max() / 2
    else:
        bound = scales / 2 * (1 + 1e-5)
    assert torch.all(err <= bound + 1e-7)


def test_group_statistics():
    w = torch.tensor([[-1.0, 0.5, 2.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    qi = quantize_weight(w, "i4", group_size=2)
    assert np.allclose(qi.scales, [[1 / 7, 2 / 7], [1, 1]])
    assert qi.zeros is None
    qu = quantize_weight(w, "u2", group_size=4)
    assert np.allclose(qu.scales[0], 1.0) and qu.zeros[0, 0] == 1  # range [-1, 2] in 3 steps, zero at code 1
    assert np.array_equal(qu.dequantize()[0], [-1.0, 1.0, 2.0, 1.0])  # 0.5 → 1 step (half to even: 1.5 → 2 → 1.0)
    qf = quantize_weight(w, "e2m1", group_size=None)
    assert qf.group_size == 4 and np.allclose(qf.scales[0], 2 / 6)
    with pytest.raises(ValueError, match="multiple of group_size"):
        quantize_weight(w, "i4", group_size=3)


def test_quantize_replaces_linears_and_keeps_the_original():
    model = nn.Sequential(nn.Linear(32, 16), nn.ReLU(), nn.Sequential(nn.Linear(16, 8, bias=False)))
    q = quantize(model, "e3m2", group_size=16)
    assert isinstance(model[0], nn.Linear) and isinstance(q[0], QuantizedLinear) and isinstance(q[2][0], QuantizedLinear)
    assert q[2][0].bias is None and q[0].dtype_spec == LowBitType.float(3, 2)
    partial = quantize(model, "u4", group_size=16, include=lambda name: name == "2.0")
    assert isinstance(partial[0], nn.Linear) and isinstance(partial[2][0], QuantizedLinear)
    assert "dtype=f6e3m2" in repr(q)
    # 4 bits per weight + one f32 scale per 16 weights (+ one byte zero point for unsigned).
    assert partial[2][0].weight_bytes() == 16 * 8 // 2 + 4 * 8 + 8


@pytest.mark.parametrize("dtype", ["u4", "i3", "e3m2", "f8e4m3", "u1", "e1m1"])
def test_compiled_quantized_model_matches_pytorch_reference(dtype):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 24), nn.ReLU(), nn.Linear(24, 8))
    q = quantize(model, dtype, group_size=8).eval()
    x = torch.randn(3, 64)
    compiled = vtmlir.compile(q, x)
    out = compiled(x)
    with torch.no_grad():
        h = torch.relu(nn.functional.linear(x, reference_dequantize(q[0]), q[0].bias))
        ref = nn.functional.linear(h, reference_dequantize(q[2]), q[2].bias)
        assert torch.allclose(q(x), ref, rtol=1e-5, atol=1e-5)
    assert torch.allclose(out, ref, rtol=1e-5, atol=1e-5)
    # The packed bytes reach the compiled graph as an i8/ui8 constant, not as float weights.
    assert "xi8>" in compiled.stages["graph"] or "xui8>" in compiled.stages["graph"]
