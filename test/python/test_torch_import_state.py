"""Importing what real models hold (issue 19, without transformers or torchvision): non-persistent
buffers, lifted tensors inside list operands, specialised non-tensor inputs, structured results, and
the exact GELU tanh approximation."""

from __future__ import annotations

import pytest
import torch

import vtmlir


class RotaryLike(torch.nn.Module):
    """A non-persistent buffer (rotary `inv_freq`, a causal mask table): lifted by torch.export but
    kept out of the state dict ("Could not find state mapping for buffer")."""

    def __init__(self):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, 8, 2).float() / 8)), persistent=False)
        self.register_buffer("mask", torch.tril(torch.ones(6, 6, dtype=torch.bool)), persistent=False)

    def forward(self, x):
        freqs = torch.outer(torch.arange(6, dtype=torch.float32), self.inv_freq)
        scores = x @ x.transpose(-1, -2) + freqs.sum()
        return scores.masked_fill(~self.mask, float("-inf")).softmax(-1)


class IndexByBuffer(torch.nn.Module):
    """`table[index_buffer]`: the buffer sits in the list operand of aten.index.Tensor (Swin's
    relative position bias), which the frozen import used to refuse as a heterogeneous list."""

    def __init__(self):
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(9, 2))
        self.register_buffer("index", torch.randint(0, 9, (4, 4)))

    def forward(self, x):
        return x + self.table[self.index].permute(2, 0, 1)


class Structured(torch.nn.Module):
    def forward(self, x, extra=None, scale=2, flag=True):
        y = x * scale
        if extra is not None:
            y = y + extra["bias"]
        return {"y": y, "pair": (y.sum(-1), None), "flag": flag}


@pytest.mark.parametrize("model, x", [(RotaryLike(), torch.randn(1, 6, 4)), (IndexByBuffer(), torch.randn(2, 4, 4))])
def test_module_state_is_imported(model, x):
    compiled = vtmlir.compile(model, x)
    torch.testing.assert_close(compiled(x), model(x), rtol=1e-6, atol=1e-6)


def test_results_keep_the_module_structure_and_constants():
    model = Structured()
    x, bias = torch.randn(3, 4), torch.randn(4)
    compiled = vtmlir.compile(model, x, {"bias": bias}, kwargs={"scale": 3})
    got = compiled(x, {"bias": bias}, scale=3)
    want = model(x, {"bias": bias}, scale=3)
    assert set(got) == {"y", "pair", "flag"} and got["flag"] is True and got["pair"][1] is None
    torch.testing.assert_close(got["y"], want["y"])
    torch.testing.assert_close(got["pair"][0], want["pair"][0])
    assert compiled.signature.inputs[1].shape == (4,)  # tensors only: the int and the bool are not passed
    with pytest.raises(vtmlir.VtmlirError, match="was the constant 3"):
        compiled(x, {"bias": bias}, scale=4)
    with pytest.raises(vtmlir.VtmlirError, match="takes inputs of the form"):
        compiled(x, bias, scale=3)


def test_a_module_compiled_from_mlir_takes_no_keyword_inputs():
    compiled = vtmlir.compile(vtmlir.import_torch(Structured(), torch.randn(2)))
    with pytest.raises(vtmlir.VtmlirError, match="keyword inputs"):
        compiled(torch.randn(2), scale=2)


def test_gelu_tanh_approximation_is_exact():
    # torch-mlir's own lowering uses sqrt(2/pi) = 0.797724 (5e-5 off on inputs of size 3).
    class Gelu(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.gelu(x, approximate="tanh")

    x = torch.randn(64, 128) * 3
    got = vtmlir.compile(Gelu(), x)(x).double()
    reference = Gelu()(x.double())
    assert (got - reference).abs().max().item() < 1e-6
