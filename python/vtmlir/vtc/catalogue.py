"""The graph-level data-movement catalogue (VTC Def. 2, §4.4): one declarative entry per op kind.

VTC §4.4 asks developers to "specify the mapping function and possible virtual tensor optimization
rules between inputs and outputs for each data movement operator"; everything else (VTOG, conflict
sets, profitability, the greedy) is derived. This module is that specification for linalg-on-tensors
as the torch-mlir importer emits it. Each `DataMovementKind` in `CATALOGUE` gives:

* `mapping(op)` — Def. 2's F: output index x → (data input j, input index y) with `out[x] = in_j[y]`,
  as a `MappingFunction` (several pieces for concat / insert_slice). Raises `NotVirtualisable` with
  the reason when F cannot be a `vt` mapping (dynamic offsets, strided box pieces, ...).
* `inverse(op, j)` — the input-as-virtual-of-output direction: input j's index y → output index x
  with `in_j[y] = out[x]`, over the part of input j the output holds (pieces, possibly partial), or
  a reason string when this direction is illegal for this op.
* `extra(op)` — rules that are neither plain direction (insert_slice's in-place update).
* `rules` — the §4.4 rules as text (direction, legality, profitability), printed by docs/vtc.md.

Directions (VTC §4.1): OUTPUT_OF_INPUT makes the op's result a virtual tensor of its inputs (a
consumer reads the inputs through F); INPUT_OF_OUTPUT makes an input a virtual tensor of the result
(the input's producer writes straight into the result's storage through F⁻¹). A `Candidate` is one
potential VTOG edge `virtual → physical` (Def. 6) with its mapping over the region of the virtual
tensor it covers; `analyse(op)` gives all candidates of one op.

Adding an op is one entry: a recogniser, F, F⁻¹ per input (or a reason), the rule text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from torch_mlir import ir

from ..dialects.affine_eval import compose_maps
from ..dialects.vt_mapping import MappingFunction, Piece

OUTPUT_OF_INPUT = "output-of-input"
INPUT_OF_OUTPUT = "input-of-output"
IN_PLACE = "in-place"

_DYNAMIC = ir.ShapedType.get_dynamic_size()


class NotVirtualisable(Exception):
    """The op moves data but F (or one rule) cannot be expressed as a `vt` mapping; says why."""


@dataclass(frozen=True)
class Rule:
    """One §4.4 virtualisation rule, as documentation (the code is the entry's functions)."""

    direction: str
    virtual: str        # which tensor becomes virtual
    physical: str       # ... of which
    legal_when: str
    profitability: str


@dataclass
class Candidate:
    """A potential VTOG edge: `virtual` may become a virtual tensor of `physical` (VTC Def. 6).

    `mapping` maps indices of `virtual` to indices of `physical` (its pieces all read source 0) and
    covers `region` = the union of its pieces' boxes; `full` when that is all of `virtual`.
    `in_place`: `physical`'s storage is updated in place (insert_slice's dest), legal only as stated
    in `condition`.
    """

    kind: str
    direction: str
    op: ir.Operation
    virtual: ir.Value
    physical: ir.Value
    mapping: MappingFunction
    full: bool
    in_place: bool = False
    condition: str = ""

    @property
    def virtual_shape(self) -> list[int]:
        return list(ir.RankedTensorType(self.virtual.type).shape)

    @property
    def physical_shape(self) -> list[int]:
        return list(ir.RankedTensorType(self.physical.type).shape)


@dataclass
class Analysis:
    """What the catalogue knows about one data-movement op."""

    kind: str
    op: ir.Operation
    inputs: list            # data inputs: F's source j is inputs[j]
    output: ir.Value
    mapping: MappingFunction | None   # F (Def. 2); None when not expressible (see mapping_error)
    mapping_error: str = ""
    candidates: list[Candidate] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)   # (rule, why not)


@dataclass(frozen=True)
class DataMovementKind:
    """One catalogue entry."""

    op_name: str
    kind: str
    summary: str
    inputs: Callable          # op -> list of data-input Values (F's sources, in order)
    mapping: Callable         # op -> MappingFunction, or raise NotVirtualisable
    inverse: Callable         # (op, j) -> MappingFunction | str (reason)
    rules: tuple[Rule, ...]
    matches: Callable = lambda op: True
    extra: Callable = lambda op: []   # op -> list of (Candidate | (rule, reason))


# -- small helpers -----------------------------------------------------------------------------------


def _shape(value) -> list[int]:
    return list(ir.RankedTensorType(value.type).shape)


def _static(shape: Sequence[int]) -> bool:
    return all(e != _DYNAMIC and e >= 0 for e in shape)


def _i64s(op, name) -> list[int]:
    return list(ir.DenseI64ArrayAttr(op.attributes[name]))


def _dim(i: int):
    return ir.AffineDimExpr.get(i)


def _cst(c: int):
    return ir.AffineConstantExpr.get(c)


def _map(n_dims: int, results) -> ir.AffineMap:
    return ir.AffineMap.get(n_dims, 0, list(results))


def _require_static(op, what: str = "shapes") -> None:
    for v in list(op.operands) + list(op.results):
        t = v.type
        if isinstance(t.maybe_downcast() if hasattr(t, "maybe_downcast") else t, ir.RankedTensorType):
            if not _static(_shape(v)):
                raise NotVirtualisable(
                    f"dynamic {what}: the mapping's floordiv/mod and piece boxes need constant "
                    f"extents (dynamic shapes belong to DVM)")


def _slice_params(op, sliced_value):
    """(offsets, sizes, strides, kept) of an extract/insert_slice; kept[i] = position of source dim i
    in the small (sliced) tensor, or None for a rank-reduced unit dim."""
    offsets, sizes, strides = (_i64s(op, n) for n in ("static_offsets", "static_sizes", "static_strides"))
    if any(v == _DYNAMIC for v in offsets + sizes + strides):
        raise NotVirtualisable(
            "dynamic offsets/sizes/strides: the mapping's constants would be SSA values, and "
            "vt mapping maps take no symbols (the slice position must be known at compile time)")
    small = _shape(sliced_value)
    kept: list[int | None] = []
    j = 0
    for s in sizes:
        if j < len(small) and small[j] == s:
            kept.append(j)
            j += 1
        elif s == 1:
            kept.append(None)
        else:
            raise NotVirtualisable(f"cannot match slice sizes {sizes} with shape {small}")
    if j != len(small):
        raise NotVirtualisable(f"cannot match slice sizes {sizes} with shape {small}")
    return offsets, sizes, strides, kept


def _box_complement(full: Sequence[int], box: Sequence[tuple[int, int]]) -> list[tuple]:
    """Boxes (as (dim, lo, hi) ranges) covering `full` minus `box`, disjoint."""
    out = []
    prefix: list[tuple[int, int, int]] = []
    for d, (lo, hi) in enumerate(box):
        if lo > 0:
            out.append(tuple(prefix + [(d, 0, lo)]))
        if hi < full[d]:
            out.append(tuple(prefix + [(d, hi, full[d])]))
        prefix.append((d, lo, hi))
    return out


# -- linalg.transpose --------------------------------------------------------------------------------


def _transpose_perm(op) -> list[int]:
    return _i64s(op, "permutation")


def _transpose_mapping(op) -> MappingFunction:
    perm = _transpose_perm(op)
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return MappingFunction.permutation(inv)  # y[k] = x[inv[k]]  <=>  out[x] = in[y], y[perm[i]] = x[i]


def _transpose_inverse(op, j):
    return MappingFunction.permutation(_transpose_perm(op))  # x[i] = y[perm[i]]


# -- linalg.generic that only moves one input (permutation / broadcast / copy) ------------------------


def generic_parts(op):
    """(input index, in_map, out_map) of a generic whose body only yields one input, else None."""
    if len(op.results) != 1:
        return None
    iters = [str(a) for a in ir.ArrayAttr(op.attributes["iterator_types"])]
    if any("reduction" in t for t in iters):
        return None
    block = op.regions[0].blocks[0]
    body = list(block.operations)
    if len(body) != 1 or body[0].operation.name != "linalg.yield":
        return None
    value = body[0].operation.operands[0]
    if not isinstance(value.owner, ir.Block):
        return None
    arg = ir.BlockArgument(value)
    n_inputs = len(op.operands) - 1
    if arg.arg_number >= n_inputs:
        return None
    if not isinstance(op.operands[arg.arg_number].type.maybe_downcast(), ir.RankedTensorType):
        return None  # a scalar operand broadcast (a fill): nothing to view
    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    in_map, out_map = maps[arg.arg_number], maps[n_inputs]
    if not out_map.is_permutation:
        return None
    for e in in_map.results:
        e = e.maybe_downcast() if hasattr(e, "maybe_downcast") else e
        if not isinstance(e, (ir.AffineDimExpr, ir.AffineConstantExpr)):
            return None
    return arg.arg_number, in_map, out_map


def _generic_matches(op) -> bool:
    return generic_parts(op) is not None


def _generic_inputs(op):
    j, _, _ = generic_parts(op)
    return [op.operands[j]]


def _out_map_inverse(out_map: ir.AffineMap) -> ir.AffineMap:
    """x -> loops for a permutation out_map (loops -> x)."""
    n = out_map.n_dims
    loops = [None] * n
    for i, e in enumerate(out_map.results):
        loops[ir.AffineDimExpr(e).position] = _dim(i)
    return _map(n, loops)


def _generic_mapping(op) -> MappingFunction:
    _, in_map, out_map = generic_parts(op)
    return MappingFunction.single(compose_maps(in_map, _out_map_inverse(out_map)))


def _generic_inverse(op, j):
    _, in_map, out_map = generic_parts(op)
    in_shape = _shape(op.operands[generic_parts(op)[0]])
    loops: list = [_cst(0)] * in_map.n_dims   # loops the input does not see: broadcast, take 0
    seen = set()
    ranges = []
    for r, e in enumerate(in_map.results):
        e = e.maybe_downcast() if hasattr(e, "maybe_downcast") else e
        if isinstance(e, ir.AffineDimExpr):
            if e.position in seen:
                return f"input reads loop d{e.position} twice (a diagonal): not one-to-one"
            seen.add(e.position)
            loops[e.position] = _dim(r)
        else:   # constant index: the output holds only that slice of the input
            if in_shape[r] != 1:
                ranges.append((r, e.value, e.value + 1))
    lmap = _map(len(in_map.results), loops)
    return MappingFunction([Piece(0, compose_maps(out_map, lmap), tuple(ranges))])


# -- linalg.broadcast / linalg.copy -------------------------------------------------------------------


def _broadcast_mapping(op) -> MappingFunction:
    dims = set(_i64s(op, "dimensions"))
    rank = len(_shape(op.results[0]))
    return MappingFunction.single(_map(rank, [_dim(i) for i in range(rank) if i not in dims]))


def _broadcast_inverse(op, j):
    dims = set(_i64s(op, "dimensions"))
    rank = len(_shape(op.results[0]))
    results, k = [], 0
    for i in range(rank):
        if i in dims:
            results.append(_cst(0))
        else:
            results.append(_dim(k))
            k += 1
    return MappingFunction.single(_map(k, results))


def _identity_mapping(op) -> MappingFunction:
    return MappingFunction.identity(len(_shape(op.results[0])))


def _identity_inverse(op, j):
    return MappingFunction.identity(len(_shape(op.operands[0])))


# -- tensor.expand_shape / tensor.collapse_shape ------------------------------------------------------


def _groups(op) -> list[list[int]]:
    return [[ir.IntegerAttr(i).value for i in ir.ArrayAttr(g)]
            for g in ir.ArrayAttr(op.attributes["reassociation"])]


def _linearise(groups, fine_shape, n_fine) -> ir.AffineMap:
    """fine index -> coarse index: each coarse dim = row-major linearisation of its group."""
    results = []
    for g in groups:
        e = _cst(0)
        for k in g:
            stride = 1
            for k2 in g[g.index(k) + 1:]:
                stride *= fine_shape[k2]
            e = e + _dim(k) * stride
        results.append(e)
    return _map(n_fine, results)


def _delinearise(groups, fine_shape, n_coarse) -> ir.AffineMap:
    """coarse index -> fine index: floordiv/mod by the group's suffix products (VTC Eq. 2 style). A
    fine dim in no group is a unit dim (a 0-d tensor expanded to tensor<1xf32> has no groups): index 0."""
    results: list = [_cst(0)] * len(fine_shape)
    for c, g in enumerate(groups):
        for pos, k in enumerate(g):
            stride = 1
            for k2 in g[pos + 1:]:
                stride *= fine_shape[k2]
            e = _dim(c)
            if stride > 1:
                e = ir.AffineExpr.get_floor_div(e, _cst(stride))
            if pos > 0:
                e = ir.AffineExpr.get_mod(e, _cst(fine_shape[k]))
            results[k] = e
    return _map(n_coarse, results)


def _expand_mapping(op) -> MappingFunction:
    _require_static(op)
    out = _shape(op.results[0])
    return MappingFunction.single(_linearise(_groups(op), out, len(out)))


def _expand_inverse(op, j):
    _require_static(op)
    return MappingFunction.single(_delinearise(_groups(op), _shape(op.results[0]), len(_shape(op.operands[0]))))


def _collapse_mapping(op) -> MappingFunction:
    _require_static(op)
    return MappingFunction.single(_delinearise(_groups(op), _shape(op.operands[0]), len(_shape(op.results[0]))))


def _collapse_inverse(op, j):
    _require_static(op)
    src = _shape(op.operands[0])
    return MappingFunction.single(_linearise(_groups(op), src, len(src)))


# -- tensor.extract_slice ----------------------------------------------------------------------------


def _extract_mapping(op) -> MappingFunction:
    offsets, sizes, strides, kept = _slice_params(op, op.results[0])
    rank = len(_shape(op.results[0]))
    results = [(_cst(o) if k is None else _dim(k) * s + o) for o, s, k in zip(offsets, strides, kept)]
    return MappingFunction.single(_map(rank, results))


def _extract_inverse(op, j):
    offsets, sizes, strides, kept = _slice_params(op, op.results[0])
    if any(s != 1 and n > 1 for s, n in zip(strides, sizes)):
        return ("strided slice: the input elements the output holds form a lattice, not a box, so "
                "the input cannot be a piece-wise view of the output")
    src = _shape(op.operands[0])
    rank = len(src)
    results = [None] * len(_shape(op.results[0]))
    ranges = []
    for i, (o, n, k) in enumerate(zip(offsets, sizes, kept)):
        if k is not None:
            results[k] = _dim(i) - o if o else _dim(i)
        if o != 0 or n != src[i]:
            ranges.append((i, o, o + n))
    return MappingFunction([Piece(0, _map(rank, results), tuple(ranges))])


# -- tensor.insert_slice ----------------------------------------------------------------------------


def _insert_mapping(op) -> MappingFunction:
    offsets, sizes, strides, kept = _slice_params(op, op.operands[0])
    if any(s != 1 and n > 1 for s, n in zip(strides, sizes)):
        raise NotVirtualisable("strided insert: the positions taken from the source form a lattice, "
                               "not a box, so F has no box-piece form (the in-place rules still apply)")
    out = _shape(op.results[0])
    rank = len(out)
    src_results = [None] * len(_shape(op.operands[0]))
    for i, (o, k) in enumerate(zip(offsets, kept)):
        if k is not None:
            src_results[k] = _dim(i) - o if o else _dim(i)
    box = [(o, o + n) for o, n in zip(offsets, sizes)]
    pieces = [Piece(0, _map(rank, src_results), tuple((d, lo, hi) for d, (lo, hi) in enumerate(box)))]
    ident = ir.AffineMap.get_identity(rank)
    pieces += [Piece(1, ident, ranges) for ranges in _box_complement(out, box)]
    return MappingFunction(pieces).simplified(out)


def _insert_inverse(op, j):
    offsets, sizes, strides, kept = _slice_params(op, op.operands[0])
    if j == 0:   # source -> result: any strides
        results = [(_cst(o) if k is None else _dim(k) * s + o) for o, s, k in zip(offsets, strides, kept)]
        return MappingFunction.single(_map(len(_shape(op.operands[0])), results))
    if any(s != 1 and n > 1 for s, n in zip(strides, sizes)):
        return "strided insert: the part of dest the result keeps is not a union of boxes"
    out = _shape(op.results[0])
    box = [(o, o + n) for o, n in zip(offsets, sizes)]
    ranges = _box_complement(out, box)
    if not ranges:
        return "the slice overwrites all of dest: the result holds none of it"
    ident = ir.AffineMap.get_identity(len(out))
    return MappingFunction([Piece(0, ident, r) for r in ranges]).simplified(out)


def _insert_in_place(op):
    """Rule 1 of ScatterND (VTC §4.4): the result is dest updated in place."""
    dest = op.operands[1]
    cond = ("dest has no other user, and the slice region of dest is then written with the source: "
            "by its producer (edge source -> result) or by a copy of the source only")
    n_uses = sum(1 for _ in dest.uses)
    if n_uses != 1:
        return [(IN_PLACE, f"dest has {n_uses} uses: updating it in place would change what the "
                           f"other users read")]
    return [Candidate("insert-slice", IN_PLACE, op, op.results[0], dest,
                      MappingFunction.identity(len(_shape(dest))), True, True, cond)]


# -- tensor.concat -----------------------------------------------------------------------------------


def _concat_offsets(op) -> tuple[int, list[int]]:
    dim = ir.IntegerAttr(op.attributes["dim"]).value
    offs, acc = [], 0
    for v in op.operands:
        offs.append(acc)
        acc += _shape(v)[dim]
    return dim, offs


def _concat_mapping(op) -> MappingFunction:
    _require_static(op)
    dim, offs = _concat_offsets(op)
    rank = len(_shape(op.results[0]))
    pieces = []
    for j, (v, o) in enumerate(zip(op.operands, offs)):
        results = [(_dim(i) - o if (i == dim and o) else _dim(i)) for i in range(rank)]
        pieces.append(Piece(j, _map(rank, results), ((dim, o, o + _shape(v)[dim]),)))
    return MappingFunction(pieces)


def _concat_inverse(op, j):
    _require_static(op)
    dim, offs = _concat_offsets(op)
    rank = len(_shape(op.results[0]))
    results = [(_dim(i) + offs[j] if i == dim else _dim(i)) for i in range(rank)]
    return MappingFunction.single(_map(rank, results))


# -- tensor.pad (constant padding) ------------------------------------------------------------------


def _pad_amounts(op) -> tuple[list[int], list[int]]:
    low, high = _i64s(op, "static_low"), _i64s(op, "static_high")
    if any(v == _DYNAMIC for v in low + high):
        raise NotVirtualisable("dynamic padding amounts: the interior's offset would be an SSA value")
    if any(v < 0 for v in low + high):
        raise NotVirtualisable("negative padding (a crop) is a slice, not a pad")
    return low, high


def pad_value(op):
    """The value a constant `tensor.pad` writes on the border (defined outside its region)."""
    block = op.regions[0].blocks[0]
    body = list(block.operations)
    if len(body) != 1 or body[0].operation.name != "tensor.yield":
        raise NotVirtualisable("the padding value is computed per index (not a constant pad)")
    v = body[0].operation.operands[0]
    if isinstance(v.owner, ir.Block) and v.owner == block:
        raise NotVirtualisable("the padding value is an index of the pad (not a constant pad)")
    return v


def _pad_mapping(op) -> MappingFunction:
    pad_value(op)
    raise NotVirtualisable("the border holds the padding value, not an element of a tensor: only "
                           "the interior is a view of the input (partial edge)")


def _pad_inverse(op, j):
    low, _ = _pad_amounts(op)
    pad_value(op)
    rank = len(low)
    return MappingFunction.single(_map(rank, [_dim(i) + lo if lo else _dim(i) for i, lo in enumerate(low)]))


def _pad_interior(op):
    """Output-of-input on the interior box only: out[x] = in[x - low] there (the border is not a
    view of anything); a partial edge, so the rewrite (which keeps no residual storage) does not
    take it, but the VTOG shows it."""
    low, high = _pad_amounts(op)
    pad_value(op)
    src = _shape(op.operands[0])
    rank = len(low)
    ranges = tuple((d, lo, lo + src[d]) for d, lo in enumerate(low) if lo or high[d])
    m = MappingFunction([Piece(0, _map(rank, [_dim(i) - lo if lo else _dim(i) for i, lo in enumerate(low)]),
                               ranges)])
    return [Candidate("pad", OUTPUT_OF_INPUT, op, op.results[0], op.operands[0], m, not ranges)]


# -- tm_tensor.scatter (index_put / index_copy) ------------------------------------------------------


def _scatter_not_virtualisable(op, j=None):
    why = ("the positions written come from the indices operand, a tensor (data, even when it is a "
           "constant resource): F depends on values, and a vt mapping is a static affine map")
    if j is None:
        raise NotVirtualisable(why)
    return why


# -- the catalogue -----------------------------------------------------------------------------------

_ALWAYS = "always (static shapes)"

CATALOGUE: tuple[DataMovementKind, ...] = (
    DataMovementKind(
        "linalg.transpose", "transpose", "out[x] = in[y], y[perm[i]] = x[i]",
        inputs=lambda op: [op.operands[0]], mapping=_transpose_mapping, inverse=_transpose_inverse,
        rules=(Rule(OUTPUT_OF_INPUT, "result", "input", _ALWAYS,
                    "Type I only for an identity permutation; else Type II, partially contiguous "
                    "when the innermost dim stays innermost and is long enough"),
               Rule(INPUT_OF_OUTPUT, "input", "result", _ALWAYS, "as the other direction"))),
    DataMovementKind(
        "linalg.generic", "permute/broadcast", "body only yields one input; out = in ∘ out_map⁻¹",
        inputs=_generic_inputs, mapping=_generic_mapping, inverse=_generic_inverse,
        matches=_generic_matches,
        rules=(Rule(OUTPUT_OF_INPUT, "result", "the yielded input",
                    "all loops parallel, output map a permutation, input map dims/constants",
                    "Type I when F is the identity; broadcasting is Type II (Expand, §4.4)"),
               Rule(INPUT_OF_OUTPUT, "the yielded input", "result",
                    "input map reads each loop at most once (no diagonal); broadcast loops read "
                    "at index 0", "Type II for a broadcast (§4.4 Expand)"))),
    DataMovementKind(
        "linalg.broadcast", "broadcast", "out[x] = in[x without `dimensions`]",
        inputs=lambda op: [op.operands[0]], mapping=_broadcast_mapping, inverse=_broadcast_inverse,
        rules=(Rule(OUTPUT_OF_INPUT, "result", "input", _ALWAYS,
                    "Type II (§4.4 Expand); profitable when the duplicated run exceeds the unit"),
               Rule(INPUT_OF_OUTPUT, "input", "result", "always: the input is the slice at index 0 "
                    "of the broadcast dims", "Type II"))),
    DataMovementKind(
        "linalg.copy", "copy", "out = in",
        inputs=lambda op: [op.operands[0]], mapping=_identity_mapping, inverse=_identity_inverse,
        rules=(Rule(OUTPUT_OF_INPUT, "result", "input", _ALWAYS, "Type I"),
               Rule(INPUT_OF_OUTPUT, "input", "result", _ALWAYS, "Type I"))),
    DataMovementKind(
        "tensor.expand_shape", "reshape", "in[g] = row-major linearisation of out's group g",
        inputs=lambda op: [op.operands[0]], mapping=_expand_mapping, inverse=_expand_inverse,
        rules=(Rule(OUTPUT_OF_INPUT, "result", "input", "static output shape", "Type I"),
               Rule(INPUT_OF_OUTPUT, "input", "result", "static output shape (floordiv/mod by "
                    "constant extents)", "Type I"))),
    DataMovementKind(
        "tensor.collapse_shape", "reshape", "out[g] = row-major linearisation of in's group g",
        inputs=lambda op: [op.operands[0]], mapping=_collapse_mapping, inverse=_collapse_inverse,
        rules=(Rule(OUTPUT_OF_INPUT, "result", "input", "static input shape", "Type I"),
               Rule(INPUT_OF_OUTPUT, "input", "result", "static input shape", "Type I"))),
    DataMovementKind(
        "tensor.extract_slice", "slice", "out[x] = in[offset + stride·x] (rank-reduced dims fixed)",
        inputs=lambda op: [op.operands[0]], mapping=_extract_mapping, inverse=_extract_inverse,
        rules=(Rule(OUTPUT_OF_INPUT, "result", "source", "static offsets, sizes and strides "
                    "(dynamic: the mapping would need SSA values)",
                    "Type I for a split on the outermost non-unit axis; else Type II, partial "
                    "when the inner extent is long (§4.4 Split, Fig. 5)"),
               Rule(INPUT_OF_OUTPUT, "source (the part the slice holds)", "result",
                    "static, unit strides; covers only the slice's box of the source (several "
                    "slices of one source are compatible when their boxes are disjoint)",
                    "Type II (§4.4 Split: outputs are stored separately)"))),
    DataMovementKind(
        "tensor.insert_slice", "insert-slice", "out = dest with out[offset + stride·y] = source[y]",
        inputs=lambda op: [op.operands[0], op.operands[1]], mapping=_insert_mapping,
        inverse=_insert_inverse, extra=_insert_in_place,
        rules=(Rule(OUTPUT_OF_INPUT, "result", "source (slice box) / dest (the rest)",
                    "static, unit strides (box pieces)", "source piece Type II, dest pieces Type II"),
               Rule(INPUT_OF_OUTPUT, "source", "result", "static offsets/sizes/strides",
                    "§4.4 ScatterND rule 2: Type II, partially contiguous for a KV-cache row"),
               Rule(INPUT_OF_OUTPUT, "dest (outside the slice box)", "result", "static, unit strides",
                    "Type II"),
               Rule(IN_PLACE, "result", "dest (whole, updated in place)",
                    "dest has no other user; the slice box is then written with the source",
                    "§4.4 ScatterND rule 1: Type I (the result is a clone of dest)"))),
    DataMovementKind(
        "tensor.concat", "concat", "out[x] = in_j[x − offset_j along dim] for x in piece j",
        inputs=lambda op: list(op.operands), mapping=_concat_mapping, inverse=_concat_inverse,
        rules=(Rule(OUTPUT_OF_INPUT, "result (piece j)", "input j", "static shapes; one edge per "
                    "input, covering that input's piece: edges of one result are compatible",
                    "Type I along the outermost non-unit axis, else Type II"),
               Rule(INPUT_OF_OUTPUT, "input j", "result", "static shapes",
                    "as the other direction (Fig. 3: Q, K, V written into one tensor)"))),
    DataMovementKind(
        "tensor.pad", "pad", "out[x] = in[x − low] inside the interior box, the padding value outside",
        inputs=lambda op: [op.operands[0]], mapping=_pad_mapping, inverse=_pad_inverse,
        extra=_pad_interior,
        rules=(Rule(OUTPUT_OF_INPUT, "result (interior only)", "input",
                    "static amounts, constant padding value; partial (the border is no view)",
                    "as a slice of the padded tensor: Type II unless only outer dims are padded"),
               Rule(INPUT_OF_OUTPUT, "input", "result", "static amounts, constant padding value: "
                    "the producer writes the interior of a buffer filled with the value",
                    "Type II (rows of the interior are separated by the border)"))),
    DataMovementKind(
        "tm_tensor.scatter", "scatter", "out = original with out[indices[i]] = updates[i] (index_put, "
        "index_copy)",
        inputs=lambda op: [op.operands[0], op.operands[2]], mapping=_scatter_not_virtualisable,
        inverse=_scatter_not_virtualisable,
        rules=(Rule(OUTPUT_OF_INPUT, "result", "updates / original", "never: positions are data", "—"),
               Rule(INPUT_OF_OUTPUT, "updates", "result", "never: positions are data", "—"))),
)

_BY_NAME: dict[str, list[DataMovementKind]] = {}
for _entry in CATALOGUE:
    _BY_NAME.setdefault(_entry.op_name, []).append(_entry)


def entry_for(op) -> DataMovementKind | None:
    """The catalogue entry describing `op`, or None when it is not a (known) data-movement op."""
    op = op.operation
    if not len(op.results) or not all(isinstance(r.type, ir.RankedTensorType) for r in op.results):
        return None  # memref forms (bufferized IR) and unranked values are not graph-level data movement
    for entry in _BY_NAME.get(op.name, ()):
        if entry.matches(op):
            return entry
    return None


def analyse(op) -> Analysis | None:
    """F and every virtualisation candidate of one op (None: not a catalogued data-movement op)."""
    op = op.operation
    entry = entry_for(op)
    if entry is None:
        return None
    inputs = entry.inputs(op)
    output = op.results[0]
    result = Analysis(entry.kind, op, inputs, output, None)
    try:
        _require_static(op)
        result.mapping = entry.mapping(op)
    except NotVirtualisable as why:
        result.mapping_error = str(why)
        result.rejected.append((OUTPUT_OF_INPUT, str(why)))
    if result.mapping is not None:
        for j, value in enumerate(inputs):
            pieces = [Piece(0, p.map, p.ranges) for p in result.mapping.pieces if p.source == j]
            if not pieces:
                continue
            full = len(pieces) == len(result.mapping.pieces)
            result.candidates.append(Candidate(
                entry.kind, OUTPUT_OF_INPUT, op, output, value, MappingFunction(pieces), full))
    for j, value in enumerate(inputs):
        try:
            _require_static(op)
            inv = entry.inverse(op, j)
        except NotVirtualisable as why:
            inv = str(why)
        if isinstance(inv, str):
            result.rejected.append((f"{INPUT_OF_OUTPUT} #{j}", inv))
            continue
        full = all(not p.ranges for p in inv.pieces) or _covers_all(inv, _shape(value))
        result.candidates.append(Candidate(entry.kind, INPUT_OF_OUTPUT, op, value, output, inv, full))
    try:
        extras = entry.extra(op)
    except NotVirtualisable as why:
        extras = [(IN_PLACE, str(why))]
    for item in extras:
        if isinstance(item, Candidate):
            result.candidates.append(item)
        else:
            result.rejected.append(item)
    return result


def region_elements(mapping: MappingFunction, shape: Sequence[int]) -> int:
    """How many elements of a tensor of `shape` the pieces of `mapping` cover (pieces are disjoint)."""
    total = 0
    for p in mapping.pieces:
        n = 1
        for d in range(len(shape)):
            lo, hi = p.extent(d, shape)
            n *= hi - lo
        total += n
    return total


def _covers_all(mapping: MappingFunction, shape: Sequence[int]) -> bool:
    total = 1
    for e in shape:
        total *= e
    return region_elements(mapping, shape) == total


def is_data_movement(op) -> bool:
    return entry_for(op) is not None
