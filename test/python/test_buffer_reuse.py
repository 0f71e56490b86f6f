"""Regression tests for buffer reuse in the CPU backend (issue 19, point 2).

Chained layers used to be wrong while each layer alone was right: `memref-alloc-at-first-use` split
a buffer that one-shot bufferization reused for a second value (layer 2's packed QKV into layer 1's
QKV buffer, `cse` having merged the two `tensor.empty`s) but left layer 2 reading through layer 1's
view chain (collapse → subview → collapse), i.e. from the old buffer, freed at the split: a use after
free whose result depended on what `malloc` handed out next (different errors per compile). And an
elementwise op written in place into an input buffer that dies at it read that buffer a second time
through a view in its payload (a flipped row), after overwriting it.
"""

from __future__ import annotations

import hashlib

import pytest
import torch

import vtmlir


def _encoder(layers: int, seed: int = 0):
    torch.manual_seed(seed)
    layer = torch.nn.TransformerEncoderLayer(d_model=32, nhead=2, dim_feedforward=64, dropout=0.0,
                                             batch_first=True)
    return torch.nn.TransformerEncoder(layer, num_layers=layers, enable_nested_tensor=False).eval()


@pytest.mark.parametrize("layers", [1, 3])
def test_chained_attention_layers_match_eager(layers):
    # nn.MultiheadAttention packs q/k/v in one projection, like GPT-2's c_attn and ViT's encoder.
    model = _encoder(layers)
    x = torch.randn(1, 9, 32)
    with torch.no_grad():
        want = model(x)
    compiled = vtmlir.compile(model, x)
    torch.testing.assert_close(compiled(x), want, rtol=1e-5, atol=1e-5)


class _FlipRowOfTransposedClone(torch.nn.Module):
    """An in-place row update on a transposed clone: the update reads the row it overwrites."""

    def forward(self, x):
        t = x.permute(1, 0)
        u = t.clone()
        u[-12] = t[-12].flip(0)
        return u.narrow(1, 1, 1).clone()


def test_in_place_update_that_reads_its_own_row():
    x = torch.randn(2, 48)
    model = _FlipRowOfTransposedClone()
    compiled = vtmlir.compile(model, x)
    assert torch.equal(compiled(x), model(x))


def test_compiles_are_deterministic():
    """The same model gives the same IR at every stage and the same bits, compile after compile and
    call after call (a use of freed or uninitialised memory shows up as differing bits)."""
    model = _encoder(3)
    x = torch.randn(1, 9, 32)
    first = vtmlir.compile(model, x)
    second = vtmlir.compile(model, x)
    assert list(first.stages) == list(second.stages)
    for stage in first.stages:
        assert hashlib.sha256(first.stages[stage].encode()).digest() == \
            hashlib.sha256(second.stages[stage].encode()).digest(), stage
    outs = [first(x), first(x), second(x)]
    assert all(torch.equal(outs[0], o) for o in outs[1:])
