"""`temco-pad-in-place`: a padded tensor is built around its source instead of copied from it.

TeMCO measures the internal peak (§4, Table 3). After decomposition and fusion, the peak of
AlexNet sits at a `tensor.pad`: the first lconv's output and its padded copy for the next conv are
live together, since one-shot bufferization gives the pad a new buffer and copies the source into
it. DenseNet's stem is the same (the 7x7 conv's output and its -inf-padded copy for max-pool).

This pass rewrites each `tensor.pad` whose value does not depend on the position (a constant or a
value from outside the pad) and whose shapes are static into

    %e = tensor.empty() ; %f = linalg.fill ins(%value) outs(%e) ;
    %r = tensor.insert_slice %source into %f[low...][source sizes][1...]

Then `eliminate-empty-tensors` (in backend/bufferize.py) lets the producer of `%source` compute
straight into the interior of the padded buffer, so source and copy are never both live. The result
is bitwise the same: the same values at the same positions.

Building a pad in place is not free: the producer then writes a strided interior (a 1x1 conv
into a 4-wide row of a 6-wide buffer gets 4-lane vectors; ResNet-18 ran 18 % slower with every pad
in place), and the padded buffer is live during the producer's step where the unpadded one was. The
internal peak is a maximum over program points, so a pad away from the peak gains nothing for that
cost. With `where=peak` (the default) a pad is built in place only where that lowers the peak: the
function's backend peak (`vtc.backend_peak`, the static replay that equals the counting
allocator's measured peak) is evaluated with no pad and every pad in place; if every pad in place is
not lower, none is rewritten, else pads are left as copies, halves of them at a time (group
testing, a few replays when few pads sit at the peak), as long as the peak stays the all-in-place
one. `where=all` rewrites every eligible pad (the behaviour before).
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import linalg, tensor

from ..errors import VtmlirError, format_location
from ..ir_utils import symbol_name, walk_ops
from ..passes.registry import Option, Pass, register_pass, report_option


def pad_value(pad):
    """The value `pad` yields if it is the same everywhere (defined outside the pad), else None."""
    body = pad.regions[0].blocks[0]
    value = list(body.operations)[-1].operands[0]
    if any(value == arg for arg in body.arguments):
        return None
    owner = value.owner
    if not isinstance(owner, ir.Block) and owner.operation.parent == pad:
        return None
    return value


WHERE = ("peak", "all")


def _eligible(pad) -> bool:
    """A pad with one value everywhere and static shapes and amounts (no operand but the source)."""
    return (pad_value(pad) is not None and len(pad.operands) == 1
            and ir.RankedTensorType(pad.operands[0].type).has_static_shape
            and ir.RankedTensorType(pad.results[0].type).has_static_shape)


def _rewrite(pad) -> str:
    """`pad` as empty + fill + insert_slice; returns its report line."""
    source, result = pad.operands[0], pad.results[0]
    src_type = ir.RankedTensorType(source.type)
    res_type = ir.RankedTensorType(result.type)
    low = list(ir.DenseI64ArrayAttr(pad.attributes["static_low"]))
    with ir.InsertionPoint(pad), pad.location:
        empty = tensor.EmptyOp(list(res_type.shape), res_type.element_type)
        filled = linalg.fill(pad_value(pad), outs=[empty.result])
        inserted = tensor.InsertSliceOp(source, filled, [], [], [], low, list(src_type.shape),
                                        [1] * src_type.rank)
    result.replace_all_uses_with(inserted.result)
    line = f"temco-pad-in-place: {format_location(pad.location)}: {src_type} into {res_type}\n"
    pad.erase()
    return line


def _pads(func) -> list:
    return [pad for pad in walk_ops(func, "tensor.pad") if _eligible(pad)]


def _functions(root) -> list:
    return [f for f in walk_ops(root, "func.func") if f.regions[0].blocks]


class _PeakOf:
    """Backend peak of one function with a subset of its eligible pads built in place, on copies."""

    def __init__(self, func):
        self.func, self.name = func, symbol_name(func)
        self.replays = 0

    def __call__(self, chosen) -> int:
        # The backend (bufferization, the replay) is imported when a decision is made: importing it
        # loads the JIT's runtime libraries.
        from ..vtc import function_named, peak_of_edited_copy

        def build_in_place(copy) -> None:
            pads = _pads(function_named(copy, self.name))
            for i in chosen:
                _rewrite(pads[i])

        self.replays += 1
        return peak_of_edited_copy(self.func, self.name, build_in_place)


def pads_at_peak(func, count: int) -> tuple[set[int], str]:
    """Which of `func`'s `count` eligible pads to build in place so that its backend peak
    is the one with every pad in place (docstring), and a report line."""
    peak = _PeakOf(func)
    try:
        copied, in_place = peak(()), peak(range(count))
    except VtmlirError as err:
        # The replay cannot model this function: keep the behaviour of `where=all`.
        return set(range(count)), f"peak not evaluated ({str(err).splitlines()[0]}): every pad in place"
    if in_place >= copied:
        return set(), f"peak {copied} B, {in_place} B with every pad in place: no pad lowers it"
    keep = set(range(count))

    def leave_copied(block: list[int]) -> None:
        nonlocal keep
        if peak(keep - set(block)) <= in_place:
            keep -= set(block)
        elif len(block) > 1:
            leave_copied(block[:len(block) // 2])
            leave_copied(block[len(block) // 2:])

    if count > 1:
        order = list(range(count))
        leave_copied(order[:count // 2])
        leave_copied(order[count // 2:])
    return keep, (f"peak {copied} B -> {in_place} B with {len(keep)} of {count} pad(s) in place "
                  f"({peak.replays} replays)")


def pad_in_place(module, where: str = "peak") -> list[str]:
    """Rewrite the eligible `tensor.pad`s under `module` (all, or those at the peak: `where`);
    returns one report line per rewrite, and with `where=peak` one per function on the decision."""
    if where not in WHERE:
        raise VtmlirError(f"temco-pad-in-place: where must be one of {', '.join(WHERE)}, got '{where}'")
    root = module.operation if hasattr(module, "operation") else module
    lines = []
    for func in _functions(root):
        pads = _pads(func)
        if not pads:
            continue
        chosen = set(range(len(pads)))
        if where == "peak":
            chosen, why = pads_at_peak(func, len(pads))
            lines.append(f"temco-pad-in-place @{symbol_name(func)}: {why}\n")
        lines.extend(_rewrite(pad) for i, pad in enumerate(pads) if i in chosen)
    return lines


@register_pass
class TemcoPadInPlace(Pass):
    name = "temco-pad-in-place"
    summary = "Build padded tensors around their source (fill + insert_slice) so the producer writes in place"
    description = (
        "Rewrites tensor.pad with a position-independent value and static shapes into tensor.empty + "
        "linalg.fill + tensor.insert_slice; eliminate-empty-tensors then puts the source's producer in "
        "the padded buffer's interior, so the source and its padded copy are never live together. "
        "where=peak (default): only where that lowers the function's internal peak (backend replay)."
    )
    options = (Option("where", str, "peak",
                      "'peak': only pads whose in-place build lowers the function's internal peak; "
                      "'all': every eligible pad"),
               report_option("one line per rewritten pad (and the peak decision)"))

    def run(self, module) -> None:
        if self.where not in WHERE:
            self.emit_error(module, f"{self.name}: where must be one of {', '.join(WHERE)}, got '{self.where}'")
            return
        self.write_report(module, "".join(pad_in_place(module, self.where)))
