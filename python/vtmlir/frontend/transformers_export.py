"""Exporting Hugging Face `transformers` models: their cache classes become pytrees.

A `PreTrainedModel` returns a `ModelOutput` (transformers registers those as pytree nodes itself)
holding a `DynamicCache`, and a decode step takes one (`past_key_values=`), or a `StaticCache`.
`torch.export` cannot flatten a class it does not know ("Found <class DynamicCache> in output, which
is not a known type"); transformers' exporter module registers every `Cache` subclass, and those of
the model's own module, as pytree nodes (`register_cache_pytrees_for_model`): vtmlir calls it before
exporting, and then exports the model like any module. Output flags (`use_cache=True`) are
non-tensor inputs, fixed at their example values like any other (`torch_calls`).

transformers' `DynamoExporter` is not used: it traces sliding-window cache layers as full ones so
that one exported graph serves every decode step, which leaves their token counter at 0 in the
returned cache; vtmlir compiles each shape on its own, so the plain trace -- which counts the tokens
-- is the right one.

Mixture-of-experts models (Mixtral, Qwen2-MoE, ...) run their experts through `grouped_mm` by
default: it counts the tokens per expert with `aten.histc` and calls an opaque custom op,
`transformers::grouped_mm_fallback`, neither of which torch-mlir knows. For the export vtmlir
switches the model to transformers' `batched_mm` experts (each token's chosen experts' weights
gathered, then one batched matmul: the same sums with static shapes, as transformers' own ExecuTorch
exporter does) and restores the user's choice afterwards (`exportable_experts`).

Cache inputs are flattened to their tensors like any other pytree input; the compiled function never
writes its inputs, so it returns the updated cache in the result (`out.past_key_values`) and leaves
the one passed in as it was (eager transformers updates the cache object in place).
"""

from __future__ import annotations

import contextlib

from ..errors import VtmlirError

# experts implementations that trace to ops torch-mlir imports (`batched_mm`: index + bmm; `eager`
# loops over experts with data-dependent shapes and `grouped_mm` calls an opaque custom op)
_EXPORTABLE_EXPERTS = "batched_mm"


def is_transformers_model(module) -> bool:
    """Whether `module` is (a subclass of) a transformers model class; imports nothing."""
    return any(cls.__module__.split(".", 1)[0] == "transformers" for cls in type(module).__mro__)


def register_cache_pytrees(model) -> None:
    """Register transformers' cache classes (those `model` may take or return) as pytree nodes."""
    try:
        # deferred: transformers is heavy; older versions lack this module (the except below)
        from transformers.exporters.exporter_dynamo import register_cache_pytrees_for_model
    except ImportError as err:
        raise VtmlirError(f"error: this transformers version cannot register its cache classes for "
                          f"torch.export ({err}); install the pinned one (pip install -e '.[test]')") from None
    register_cache_pytrees_for_model(model)


@contextlib.contextmanager
def exportable_experts(model):
    """Within the block, a transformers model's mixture-of-experts layers (if any) run the
    `batched_mm` implementation; the model's own setting is restored afterwards."""
    can_set = getattr(model, "_can_set_experts_implementation", None)
    current = getattr(getattr(model, "config", None), "_experts_implementation", None)
    if can_set is None or current in (None, _EXPORTABLE_EXPERTS) or not can_set():
        yield
        return
    model.set_experts_implementation(_EXPORTABLE_EXPERTS)
    try:
        yield
    finally:
        model.set_experts_implementation(current)
