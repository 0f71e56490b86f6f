"""Models users bring from transformers and torchvision (`vtmlir.models.library`, issue 19): each
imports, compiles for the CPU and matches eager PyTorch; a compiled transformers model returns the
same `ModelOutput` (with its `DynamicCache`) as the eager one.

The default run keeps the small configs (about a minute on 2 cores); the full-size torchvision
networks are `slow` (`pytest -m slow`). Skipped when the test dependencies (pinned transformers and
torchvision, `pip install -e '.[test]'`) are not installed.
"""

from __future__ import annotations

import copy
import importlib.util

import pytest
import torch
from torch.utils import _pytree as pytree

import vtmlir
from vtmlir.models.library import LIBRARY_MODELS, import_transformers

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None or importlib.util.find_spec("torchvision") is None,
    reason="needs the test dependencies transformers and torchvision (pip install -e '.[test]')")

# Relative error bound (max |compiled - eager| / max |eager| per output leaf): fp32 throughout; the
# compiled reductions (softmax, layer norm, matmul) add in another order than PyTorch's kernels.
_REL_TOL = 2e-6
_REL_TOL_FULL_SIZE = 1e-5  # 20 to 120 layers deep


def _max_rel_err(got, want) -> float:
    got_leaves, want_leaves = pytree.tree_leaves(got), pytree.tree_leaves(want)
    assert len(got_leaves) == len(want_leaves)
    worst = 0.0
    for g, w in zip(got_leaves, want_leaves):
        assert isinstance(g, torch.Tensor) and g.shape == w.shape and g.dtype == w.dtype
        worst = max(worst, (g - w).abs().max().item() / max(w.abs().max().item(), 1e-6))
    return worst


def _check(name: str, tolerance: float = _REL_TOL):
    model, args, kwargs = LIBRARY_MODELS[name].build(batch=1, seed=0)
    compiled = vtmlir.compile(model, *args, kwargs=copy.deepcopy(kwargs))
    got = compiled(*args, **copy.deepcopy(kwargs))
    with torch.no_grad():
        want = model(*args, **copy.deepcopy(kwargs))
    assert type(got) is type(want)
    assert pytree.tree_structure(got) == pytree.tree_structure(want)
    assert _max_rel_err(got, want) <= tolerance
    return compiled, got


_FAST = [n for n, spec in LIBRARY_MODELS.items() if not spec.slow]
_SLOW = [n for n, spec in LIBRARY_MODELS.items() if spec.slow]
# Over a minute each to compile on the 2-core machine: in `pytest -m slow` (the suite's 15 minutes).
_SLOW_SMALL = {"swin_small", "mixtral", "mobilevit"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in _SLOW_SMALL else n
                                  for n in _FAST])
def test_library_model_matches_eager(name):
    _check(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", _SLOW)
def test_full_size_torchvision_model_matches_eager(name):
    _check(name, _REL_TOL_FULL_SIZE)


def test_causal_lm_returns_its_model_output_and_cache():
    compiled, out = _check("qwen2")
    transformers = import_transformers()
    assert isinstance(out, transformers.modeling_outputs.CausalLMOutputWithPast)
    assert isinstance(out.past_key_values, transformers.DynamicCache)
    assert out.logits.shape == (1, 8, 128)


def test_mixture_of_experts_imports_with_batched_experts():
    """transformers runs experts through `grouped_mm` (aten.histc and an opaque custom op, which
    torch-mlir cannot import); vtmlir exports them as `batched_mm` and leaves the model's own
    choice as it was."""
    model, args, kwargs = LIBRARY_MODELS["mixtral"].build()
    before = model.config._experts_implementation
    compiled = vtmlir.compile(model, *args, opt_level=0)
    assert model.config._experts_implementation == before == "grouped_mm"
    with torch.no_grad():
        want = model(*args).logits
    assert _max_rel_err(compiled(*args).logits, want) <= _REL_TOL


def test_decode_step_leaves_the_cache_passed_in_unchanged():
    model, args, kwargs = LIBRARY_MODELS["llama_decode"].build()
    cache = kwargs["past_key_values"]
    before = [t.clone() for t in pytree.tree_leaves(cache)]
    compiled = vtmlir.compile(model, *args, kwargs=kwargs)
    out = compiled(*args, **kwargs)
    assert all(torch.equal(a, b) for a, b in zip(before, pytree.tree_leaves(cache)))
    assert out.past_key_values.get_seq_length() == 9


def test_a_call_must_match_the_compiled_input_form():
    model, args, kwargs = LIBRARY_MODELS["llama_decode"].build()
    compiled = vtmlir.compile(model, *args, kwargs=kwargs)
    with pytest.raises(vtmlir.VtmlirError, match="takes inputs of the form"):
        compiled(*args, past_key_values=kwargs["past_key_values"])
    with pytest.raises(vtmlir.VtmlirError, match="was the constant True"):
        compiled(*args, past_key_values=kwargs["past_key_values"], use_cache=False)
    with pytest.raises(vtmlir.VtmlirError, match="must have shape"):
        compiled(torch.zeros(1, 2, dtype=torch.long), **kwargs)


def test_an_input_vtmlir_cannot_pass_is_named():
    class Holder:
        def __init__(self, t):
            self.t = t

    class Reads(torch.nn.Module):
        def forward(self, x, holder):
            return x + holder.t

    with pytest.raises(vtmlir.VtmlirError, match="input argument 1 is a Holder"):
        vtmlir.compile(Reads(), torch.ones(2), Holder(torch.ones(2)))


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n, spec in LIBRARY_MODELS.items() if spec.library == "transformers"])
def test_transformers_model_assembles_for_cuda(name):
    model, args, kwargs = LIBRARY_MODELS[name].build()
    compiled = vtmlir.compile(model, *args, kwargs=kwargs, target="cuda")
    assert compiled.call_spec is not None and compiled.kernels
    assert len(compiled.assemble("sm_80")) == len(compiled.kernels)
