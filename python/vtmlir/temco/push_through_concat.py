"""`temco-push-through-concat`: elementwise ops move from a concatenation to its parts (TeMCO §3.3).

Song et al., ICPP'24 (TeMCO). The concat split of Fig. 9
(b → c: `fconv(concat(a, b)) = fconv_a(a) + fconv_b(b)`, `fuse.split_concat_fconvs`) needs the
concatenation directly before the 1×1 conv. A DenseNet-BC layer is `conv1x1(relu(bn(concat(x, f1,
..., fk))))`: the concatenation comes *before* the BatchNorm and the ReLU, so the split never applies
and the growing concatenation stays the peak. This pass rewrites

    %c = tensor.concat dim(d) %a, %b
    %y = linalg.generic ins(%c, %p, ...) outs(%e)            // elementwise, per-channel %p
into
    %ya = linalg.generic ins(%a, slice_d(%p, 0, Ca), ...) outs(empty)
    %yb = linalg.generic ins(%b, slice_d(%p, Ca, Cb), ...) outs(empty)
    %y  = tensor.concat dim(d) %ya, %yb

and repeats until no such pair is left, so BN's four elementwise ops and the ReLU all end up on the
parts and the concatenation directly feeds the conv (then split, and each part fuses with the lconv
that produced it: Skip-Opt's clone or the layer's own lconv).

A generic qualifies when it has one result, only parallel iterators, no `linalg.index` in its body,
static shapes, the concat as an input whose indexing map is the identity (as is the output map), and
the concat has no other user. Every other operand is sliced along the iterator `d` where its map
reads it as a plain dimension (BatchNorm's `[C,1,1]` constants, a full-size tensor) and passed whole
where its map does not read `d` (a scalar, a broadcast); a map using `d` in a compound expression
disqualifies the op. The init is a fresh `tensor.empty` per part when it is an empty tensor, else
its slice. Each result element is computed by the same scalar code from the same operand elements,
so the rewrite is exact (bitwise the same results).
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import tensor

from ..ir_utils import all_parallel, walk_ops
from ..passes.registry import Pass, register_pass, report_option
from ..errors import format_location


def _producer(value):
    owner = value.owner
    return None if isinstance(owner, ir.Block) else owner.operation


def _static_ranked(value) -> bool:
    t = value.type.maybe_downcast()
    return isinstance(t, ir.RankedTensorType) and t.has_static_shape


def _num_inputs(op) -> int:
    return int(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])[0])


def _maps(op) -> list:
    return [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]


def _uses_index(op) -> bool:
    return any(o.name == "linalg.index" for o in walk_ops(op))


def _sliced_dim(amap, d: int):
    """The operand dimension that reads iterator `d` as a plain dimension, or None when the map does
    not read `d`. Raises ValueError for a map with compound expressions or reading `d` twice (the
    importer's elementwise maps are plain dimensions and constants)."""
    found = None
    for k, expr in enumerate(amap.results):
        expr = expr.maybe_downcast()
        if isinstance(expr, ir.AffineDimExpr):
            if expr.position == d:
                if found is not None:
                    raise ValueError("iterator read twice")
                found = k
        elif not isinstance(expr, ir.AffineConstantExpr):
            raise ValueError("compound expression")
    return found


def _candidate(concat):
    """The elementwise generic to push through `concat`, with the concat's operand positions, or None."""
    uses = list(concat.results[0].uses)
    # Keyed by the op (identity equality), not id() of a fresh Python wrapper nor hash(op), which is
    # content-based (docs/design.md §9).
    users = {u.owner.operation: u.owner for u in uses}
    if len(users) != 1 or not _static_ranked(concat.results[0]):
        return None
    (user,) = users.values()
    user = user.operation
    if (user.name != "linalg.generic" or len(user.results) != 1 or _uses_index(user)
            or not all_parallel(user)
            or not all(_static_ranked(v) for v in list(user.operands) + list(user.results))):
        return None
    n_in = _num_inputs(user)
    positions = [u.operand_number for u in uses]
    if any(p >= n_in for p in positions):
        return None  # the concat is the init: the result would alias its parts
    maps = _maps(user)
    rank = ir.RankedTensorType(concat.results[0].type).rank
    identity = ir.AffineMap.get_identity(rank, context=concat.context)
    if maps[-1] != identity or any(maps[p] != identity for p in positions):
        return None
    d = ir.IntegerAttr(concat.attributes["dim"]).value
    try:
        for i, amap in enumerate(maps):
            if i not in positions:
                _sliced_dim(amap, d)
    except ValueError:
        return None
    return user, positions, d


def _slice(value, dim: int, offset: int, size: int):
    """`value[..., offset:offset+size (along dim), ...]` as a static `tensor.extract_slice`."""
    shape = list(ir.RankedTensorType(value.type).shape)
    offsets = [0] * len(shape)
    sizes = list(shape)
    offsets[dim], sizes[dim] = offset, size
    result_type = ir.RankedTensorType.get(sizes, ir.RankedTensorType(value.type).element_type)
    return tensor.ExtractSliceOp(result_type, value, [], [], [], offsets, sizes, [1] * len(shape)).result


def _push(concat, user, positions: list[int], d: int):
    """Rewrite `user(concat(parts))` into `concat(user(part) ...)`; returns the new concat."""
    maps = _maps(user)
    n_in = _num_inputs(user)
    init = user.operands[n_in]
    init_producer = _producer(init)
    element_type = ir.RankedTensorType(user.results[0].type).element_type
    parts, offset = [], 0
    with ir.InsertionPoint(user), user.location:
        for part in concat.operands:
            shape = list(ir.RankedTensorType(part.type).shape)
            size = shape[d]
            operands = list(user.operands)
            for i, amap in enumerate(maps[:n_in]):
                k = None if i in positions else _sliced_dim(amap, d)
                if i in positions:
                    operands[i] = part
                elif k is not None:
                    operands[i] = _slice(user.operands[i], k, offset, size)
            if init_producer is not None and init_producer.name == "tensor.empty":
                operands[n_in] = tensor.EmptyOp(shape, element_type).result
            else:
                operands[n_in] = _slice(init, d, offset, size)
            clone = user.clone(ip=ir.InsertionPoint(user))  # after the slices it reads
            for i, value in enumerate(operands):
                clone.operands[i] = value
            clone.results[0].set_type(ir.RankedTensorType.get(shape, element_type))
            parts.append(clone.results[0])
            offset += size
        joined = tensor.ConcatOp(user.results[0].type, d, parts)
    user.results[0].replace_all_uses_with(joined.result)
    user.erase()
    concat.erase()
    return joined.operation


def push_through_concat(module) -> list[str]:
    """Push every qualifying elementwise `linalg.generic` through the concatenation it reads, until
    none is left (see the module docstring). Returns one report line per pushed op."""
    lines: list[str] = []
    root = module.operation if hasattr(module, "operation") else module
    for concat in walk_ops(root, "tensor.concat"):
        # the concat of the pushed op's parts is the next candidate (BatchNorm's chain, then ReLU)
        while (found := _candidate(concat)) is not None:
            user, positions, d = found
            lines.append(f"temco-push-through-concat: {format_location(user.location)}: elementwise op on "
                         f"{ir.RankedTensorType(concat.results[0].type)} now runs on its "
                         f"{len(concat.operands)} parts (dim {d})\n")
            concat = _push(concat, user, positions, d)
    return lines


@register_pass
class TemcoPushThroughConcat(Pass):
    name = "temco-push-through-concat"
    summary = "Move elementwise ops (BatchNorm, ReLU) from a tensor.concat's result to its parts"
    description = (
        "TeMCO (ICPP'24) §3.3: rewrites an elementwise linalg.generic reading a tensor.concat (its only "
        "user) into one generic per part, slicing per-channel operands, and concatenates the results; "
        "repeated to a fixed point so the concatenation reaches the 1x1 conv that the concat split "
        "(Fig. 9c) of temco-fuse-activation divides. Exact."
    )
    options = (report_option("one line per pushed op"),)

    def run(self, module) -> None:
        self.write_report(module, "".join(push_through_concat(module)))
