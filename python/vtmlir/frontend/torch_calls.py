"""How a function compiled from an `nn.Module` is called from Python: the module's own input and
output structure (pytrees), not a flat list of tensors.

`torch.export` flattens the example `(args, kwargs)` into leaves (a pytree, `in_spec`) and the
module's result likewise (`out_spec`); each leaf is a graph input or output. The leaves that are
tensors become the arguments and results of the compiled MLIR function, in leaf order; the others
(`None`, `use_cache=True`, an int) were specialised by the export: they are not passed at all, and a
call must give the same values again. A `TorchCallSpec` records both trees and those constants, and
maps a call's `(args, kwargs)` to the function's tensor arguments and its tensor results back to
the module's structure: a Hugging Face model returns its `ModelOutput` (e.g. `CausalLMOutputWithPast`
with a `DynamicCache`), a module returning a dict returns a dict.

Results that `torch.export` places before the module's own outputs (updated buffers, mutated
inputs) are not part of the module's result: the compiled function returns the module's outputs,
which are the last results of the MLIR function.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import VtmlirError


@dataclass
class TorchCallSpec:
    """The Python calling convention of one exported module (see the module docstring).

    `in_spec`/`out_spec`: the pytrees of `(args, kwargs)` and of the result; `input_constants` and
    `output_constants` map a leaf index to the value it was specialised to.
    """

    in_spec: Any
    out_spec: Any
    input_constants: dict[int, Any] = field(default_factory=dict)
    output_constants: dict[int, Any] = field(default_factory=dict)

    @property
    def num_results(self) -> int:
        """How many leaves of the result come from the compiled function (the rest are constants)."""
        return self.out_spec.num_leaves - len(self.output_constants)

    def __post_init__(self):
        import torch  # deferred: torch is heavy; loaded on first use

        self._positional = self._plain_positional()
        self._tensor = torch.Tensor
        # returned as it is (one tensor), else how many trailing results form the returned tuple
        self._returns = None if self.out_spec.is_leaf() else self.out_spec.num_leaves

    def _plain_positional(self) -> int | None:
        """n when the export took n positional tensors and nothing else, and returned one tensor or
        a tuple of them (the common module): then `call_compiled` passes and returns them as they
        are, without flattening the trees (None otherwise)."""
        # deferred: torch is heavy; loaded on first use
        import torch
        from torch.utils import _pytree as pytree

        if self.input_constants or self.output_constants:
            return None
        n = self.in_spec.num_leaves
        leaves = [torch.empty(0) for _ in range(n)]
        if pytree.tree_structure((tuple(leaves), {})) != self.in_spec:
            return None
        out = self.out_spec
        if not (out.is_leaf() or pytree.tree_structure(tuple(leaves[:out.num_leaves])) == out):
            return None
        return n

    def flatten(self, args: tuple, kwargs: dict) -> list:
        """The compiled function's arguments for a call with `args` and `kwargs`; a VtmlirError when
        the call's structure or a specialised value differs from the export's."""
        from torch.utils import _pytree as pytree  # deferred: torch is heavy; loaded on first use

        kwargs = _in_exported_order(dict(kwargs), self.in_spec)
        leaves, spec = pytree.tree_flatten((tuple(args), kwargs))
        if spec != self.in_spec:
            raise VtmlirError(
                f"error: the compiled module takes inputs of the form {describe(self.in_spec)}, "
                f"got {describe(spec)}; compile it again for these inputs")
        tensors = []
        for i, leaf in enumerate(leaves):
            if i in self.input_constants:
                expected = self.input_constants[i]
                if not _same_constant(leaf, expected):
                    raise VtmlirError(
                        f"error: input leaf {i} was the constant {expected!r} when the module was compiled "
                        f"(torch.export specialises non-tensor inputs), got {leaf!r}; compile it again")
            else:
                tensors.append(leaf)
        return tensors

    def unflatten(self, results: tuple) -> Any:
        """The module's result from the compiled function's results (the last `num_results` of
        them, see the module docstring)."""
        from torch.utils import _pytree as pytree  # deferred: torch is heavy; loaded on first use

        results = tuple(results)
        if len(results) < self.num_results:
            raise VtmlirError(f"error: the compiled function returned {len(results)} results, the module "
                              f"{self.num_results}")
        produced = iter(results[len(results) - self.num_results:])
        leaves = [self.output_constants[i] if i in self.output_constants else next(produced)
                  for i in range(self.out_spec.num_leaves)]
        return pytree.tree_unflatten(leaves, self.out_spec)


def call_compiled(executable, args: tuple, kwargs: dict):
    """`executable(*args, **kwargs)` for both backends: with a `call_spec` (compiled from an
    `nn.Module`) the module's own structure in and out; otherwise flat tensors in, and one tensor or
    a tuple of them out. `executable.run(*tensors)` runs the compiled function."""
    spec = executable.call_spec
    if spec is not None:
        n = spec._positional
        # n tensors, not containers or constants (`_plain_positional`): the trees need no walk
        if n is not None and not kwargs and len(args) == n and all([type(a) is spec._tensor for a in args]):
            results = executable.run(*args)
            k = spec._returns
            if len(results) >= (k or 1):
                return results[-1] if k is None else results[len(results) - k:]
            return spec.unflatten(results)  # its error
        return spec.unflatten(executable.run(*spec.flatten(args, kwargs)))
    if kwargs:
        raise VtmlirError("error: keyword inputs are only taken by a function compiled from an nn.Module")
    results = executable.run(*args)
    return results[0] if len(results) == 1 else results


def describe(spec) -> str:
    """A short, readable form of a pytree spec: `(args...), {kwarg: ...}` with `*` for a leaf and
    class names for other nodes (a full TreeSpec of a cache prints its whole context)."""
    if spec.is_leaf():
        return "*"
    children = [describe(c) for c in spec.children()]
    if spec.type is tuple:
        return "(" + ", ".join(children) + ("," if len(children) == 1 else "") + ")"
    if spec.type is list:
        return "[" + ", ".join(children) + "]"
    if spec.type is dict:
        return "{" + ", ".join(f"{k}: {c}" for k, c in zip(spec.context, children)) + "}"
    return spec.type.__name__


def _in_exported_order(kwargs: dict, in_spec) -> dict:
    """Keyword inputs in the order the export recorded them (a dict spec compares keys in order)."""
    exported = in_spec.children()[1] if in_spec.num_children == 2 else None
    if exported is None or exported.type is not dict or set(exported.context) != set(kwargs):
        return kwargs
    return {k: kwargs[k] for k in exported.context}


def _same_constant(value, expected) -> bool:
    try:
        return type(value) is type(expected) and bool(value == expected)
    except Exception:  # an object whose == is not a truth value
        return value is expected
