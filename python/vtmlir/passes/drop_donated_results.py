"""`drop-donated-results`: after `one-shot-bufferize`, a donated argument updated in place is
returned in place, not through an out-parameter (`argument_updates` says why).

`drop-donated-results` (after it): a result that is a donated argument updated in place *is* that
argument after bufferization (the function returns the block argument). The pass removes it from the
results, so `buffer-results-to-out-params` makes no out-parameter and no copy for it -- the cache
exists once (VTC Table 2's decode setting updates it in place) -- and records where every original
result lives in `vtmlir.result_arguments` on the function: the donated argument's index, or -1 for
an out-parameter (in order). A donated result that bufferization could not compute in place (another
reader of the old value after the update) stays an out-parameter: correct, without the saving.
"""

from __future__ import annotations

from torch_mlir import ir

from .argument_updates import DONATED, RESULT_ARGUMENTS, arg_attrs
from .registry import Pass, register_pass


def drop_donated_results(func) -> list[int] | None:
    """Drop the results of bufferized `func` that are one of its donated (`vtmlir.donated`) arguments;
    return and record `vtmlir.result_arguments`. None (and no record) when no argument is donated."""
    if not len(func.regions) or not len(func.regions[0].blocks):
        return None
    writable = {i for i, d in enumerate(arg_attrs(func)) if DONATED in d}
    if not writable:
        return None
    block = func.regions[0].blocks[0]
    ret = [op.operation for op in block.operations][-1]
    if ret.name != "func.return" or len(func.regions[0].blocks) != 1:
        return None
    sources = []
    for v in ret.operands:
        arg = v if isinstance(v.owner, ir.Block) else None
        sources.append(arg.arg_number if arg is not None and arg.owner == block
                       and arg.arg_number in writable else -1)
    kept = [v for v, s in zip(ret.operands, sources) if s < 0]
    if len(kept) != len(sources):
        with ret.location, ir.InsertionPoint(ret):
            ir.Operation.create("func.return", operands=kept)
        ret.erase()
        ftype = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
        results = [t for t, s in zip(ftype.results, sources) if s < 0]
        func.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(list(ftype.inputs), results))
        if "res_attrs" in func.attributes:
            res = [a for a, s in zip(ir.ArrayAttr(func.attributes["res_attrs"]), sources) if s < 0]
            func.attributes["res_attrs"] = ir.ArrayAttr.get(res)
    func.attributes[RESULT_ARGUMENTS] = ir.DenseI64ArrayAttr.get(sources)
    return sources


@register_pass
class DropDonatedResults(Pass):
    name = "drop-donated-results"
    summary = "After bufferization, return a donated (writable) argument in place: no out-parameter, no copy"
    description = __doc__

    def run(self, module) -> None:
        for op in module.regions[0].blocks[0].operations:
            if op.operation.name == "func.func" and "sym_visibility" not in op.attributes:
                drop_donated_results(op.operation)
