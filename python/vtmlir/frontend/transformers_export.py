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

Cache inputs are flattened to their tensors like any other pytree input; the compiled function never
writes its inputs, so it returns the updated cache in the result (`out.past_key_values`) and leaves
the one passed in as it was (eager transformers updates the cache object in place).
"""

from __future__ import annotations

from ..errors import VtmlirError


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
