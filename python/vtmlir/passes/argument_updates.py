"""Arguments a compiled function updates: read-only by default, donated on request.

Bufferization (`one-shot-bufferize` with function boundaries) treats every argument of a function as
writable unless it carries `bufferization.writable = false`, so a decode layer's KV-cache update
(`tensor.insert_slice %k into %k_cache`) overwrote the caller's cache tensor. A compiled function is
a value to the user -- `compiled(x, k_cache, v_cache)` must leave the caller's tensors as they were
-- unless the caller *donates* an argument (`vtmlir.compile(..., donate=(1, 2))`, as JAX's
`donate_argnums`; in IR the argument attribute `vtmlir.donated`). Two passes around
`one-shot-bufferize` (this module holds what they and `vtmlir.compile` share):

- `copy-updated-arguments` (before it, `copy_updated_arguments.py`): tensor arguments read-only
  except the donated ones; a read-only argument whose update is returned is copied once, at the entry.
- `drop-donated-results` (after it, `drop_donated_results.py`): a donated argument updated in place
  is returned in place (no out-parameter, no copy); `vtmlir.result_arguments` records where every
  result lives.

The executable hands back the donated input array as that result (`CpuExecutable`): the values equal
the non-donated run bitwise (the same kernels compute the same elements); the donated input's memory
holds the result afterwards, so the caller must not use its old value.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch_mlir import ir

from ..errors import VtmlirError

WRITABLE = "bufferization.writable"
DONATED = "vtmlir.donated"   # kept after bufferization, which drops `bufferization.writable`
RESULT_ARGUMENTS = "vtmlir.result_arguments"


def arg_attrs(func) -> list[dict]:
    """The argument attributes of `func`, one mutable dict (name -> attribute) per argument."""
    n = len(func.regions[0].blocks[0].arguments)
    if "arg_attrs" not in func.attributes:
        return [{} for _ in range(n)]
    return [{a.name: a.attr for a in ir.DictAttr(d)} for d in ir.ArrayAttr(func.attributes["arg_attrs"])]


def donate_arguments(func, donate: Sequence[int]) -> None:
    """Mark the `donate`d arguments of `func` `vtmlir.donated`; a VtmlirError names an index that is
    no tensor argument."""
    attrs = arg_attrs(func)
    args = func.regions[0].blocks[0].arguments
    name = ir.StringAttr(func.attributes["sym_name"]).value
    for i in donate:
        if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < len(args):
            raise VtmlirError(f"error: donate={tuple(donate)}: @{name} has {len(args)} arguments; "
                              f"{i!r} is not an argument index")
        if not isinstance(args[i].type, ir.RankedTensorType):
            raise VtmlirError(f"error: donate={tuple(donate)}: argument {i} of @{name} is a "
                              f"{args[i].type}, not a tensor")
    with func.context:
        for i in donate:
            attrs[i][DONATED] = ir.UnitAttr.get()
        func.attributes["arg_attrs"] = ir.ArrayAttr.get([ir.DictAttr.get(d) for d in attrs])


def result_arguments(func) -> list[int] | None:
    """`vtmlir.result_arguments` of a bufferized function (None when `drop-donated-results` left no
    record: nothing was donated)."""
    if RESULT_ARGUMENTS not in func.attributes:
        return None
    return list(ir.DenseI64ArrayAttr(func.attributes[RESULT_ARGUMENTS]))
