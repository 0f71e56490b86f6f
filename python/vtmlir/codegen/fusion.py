"""Which neighbours of a contraction kernel may run inside its parallel tiles: the kernels before it
that prepare its accumulator (the fill; on the GPU with padding also the copy of the unpadded
accumulator into the padded one) and the kernels after it that consume its result (bias,
activation, BatchNorm, residual add, casts: the epilogue). Target-neutral: the CPU contraction
schedule (`schedules.ContractionSchedule`, the fused `scf.forall` over its N tiles) and the GPU one
(`gpu/fusion.py`, its block tiles) both take the group found here and tile every member with the
contraction's outer tiles, mapped to the member's loops, then fuse the members' loops with the
contraction's (`transform.loop.fuse_sibling`).

At the kernel level a Linear layer is `fill(C); C += A * B; out = f(C, bias, ...)`: the graph-level
fusion puts the bias and activation in one elementwise generic after the contraction (or in the next
contraction's prologue, which `codegen-split-prologues` splits off into such a generic again). Fused,
each tile runs the prologue on its part of C, accumulates it, and then runs the epilogue on it, while
the tile is still in cache. Every element is computed by the same operations in the same order as by
the separate kernels: bitwise the same.

The group (everything read through the bindings: SSA values, indexing maps, the buffers behind
views, static strides and offsets):
- a member is a parallel generic (on the CPU also a `linalg.fill`) that its target's vector schedule
  takes, with one output written with the identity map, whose loops match C's dimensions in order:
  as long as C along the dimensions split into tiles, at most as long or missing along the others
  (which one tile then covers whole: a padded contraction's 16 rows; a batch-1 epilogue whose unit
  row dimension `linalg-fold-unit-extent-dims` folded away);
- every buffer a member or the contraction writes is accessed by all of them with the identity map
  through views whose static strides per C dimension and offsets are parts of one of them (the same
  index of C's space is the same element), so a tile only reads what its own iteration wrote; the
  contraction's operands A and B are written by none;
- members are taken scanning away from the contraction (back for the prologue, forward for the
  epilogue, never across another contraction), skipping kernels that do not qualify; the fused loop
  takes the last member's place, so no op between a member and that place may use a buffer the
  member uses other than by a view (frees are moved after the group);
- the loops the contraction tiles are C's dimensions in C's order, so the members' tile loops are
  the contraction's (same bounds and steps), as fusing requires.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torch_mlir import ir
from torch_mlir.dialects import memref

from ..ir_types import shaped_bytes
from ..passes.memref_dealloc_at_last_use import VIEW_OPS, users_in_block
from .bodies import buffer_root, expr_dims
from .decompose_convolutions import collapse, generic_like, merge_loops
from .delinearize_loops import expanded_type
from .kernels import Kernel, KernelKind

PROLOGUE, EPILOGUE = "prologue", "epilogue"
# The ops a member may be: the GPU pipeline generalises every named op first; on the CPU a
# fill made after bufferization may stay a `linalg.fill`.
GENERIC_MEMBERS = ("linalg.generic",)


def static_strides_and_offset(memref_type: ir.MemRefType) -> tuple[list[int], int] | None:
    """Static (strides, offset) in elements, or None when any is dynamic."""
    strides, offset = memref_type.get_strides_and_offset()
    if any(memref_type.is_dynamic_stride_or_offset(v) for v in list(strides) + [offset]):
        return None
    return list(strides), int(offset)


@dataclass
class Candidate:
    """A kernel of the function as the group search sees it (`vectorizable`: the vector schedule
    took it)."""

    id: int
    op: ir.Operation
    kernel: Kernel
    contraction: bool
    vectorizable: bool


@dataclass
class Group:
    """The members found for one contraction (in program order), the C dimensions one block must
    cover whole, the C dimension of each member loop, and the frees to move after the group's place."""

    prologue: list[Candidate] = field(default_factory=list)
    epilogue: list[Candidate] = field(default_factory=list)
    whole_dims: set[int] = field(default_factory=set)
    dims: dict[int, tuple[int, ...]] = field(default_factory=dict)   # per member: C dimension of each loop
    frees: list[ir.Operation] = field(default_factory=list)
    place: ir.Operation | None = None


def _signature(value: ir.Value, dims: tuple[int, ...]):
    """How an identity access through the view `value` addresses elements in C's index space
    (`dims`: the C dimension of each view dimension): (offset, ((C dimension, stride), ...)) for the
    dimensions longer than 1 (the others are only ever indexed 0), or None for a dynamic layout."""
    t = ir.MemRefType(value.type)
    found = static_strides_and_offset(t)
    if found is None:
        return None
    strides, offset = found
    return offset, tuple(sorted((dims[k], strides[k]) for k in range(t.rank) if t.shape[k] > 1))


class _Accesses:
    """The buffers a group accesses: per buffer, whether it is written, and the signature of each
    access (`_signature`; None for an access that is not the identity element access)."""

    def __init__(self):
        self.bases: list[ir.Value] = []
        self.written: list[bool] = []
        self.signatures: list[list] = []

    def _index(self, base):
        for i, b in enumerate(self.bases):
            if b == base:
                return i
        self.bases.append(base)
        self.written.append(False)
        self.signatures.append([])
        return len(self.bases) - 1

    def add(self, value: ir.Value, dims: tuple[int, ...] | None, write: bool) -> None:
        """Record an access through `value`: `dims` the C dimension of each of its dimensions for an
        identity access, None for any other."""
        i = self._index(buffer_root(value))
        self.written[i] = self.written[i] or write
        self.signatures[i].append(_signature(value, dims) if dims is not None else None)

    def consistent(self) -> bool:
        """Whether every written buffer is only accessed at the same element for the same index of
        C's space: identity accesses whose signatures are parts of one of them (same offset, the
        same stride per C dimension; that one, a view of the buffer, addresses distinct elements)."""
        for written, signatures in zip(self.written, self.signatures):
            if not written:
                continue
            if any(sig is None for sig in signatures) or len({sig[0] for sig in signatures}) != 1:
                return False
            union: dict[int, int] = {}
            for _, pairs in signatures:
                for dim, stride in pairs:
                    if union.setdefault(dim, stride) != stride:
                        return False
            if not any(dict(pairs) == union for _, pairs in signatures):
                return False
        return True

    def aligned(self, base: ir.Value) -> bool:
        """Whether the group accesses `base` by an identity element access."""
        return any(b == base and any(sig is not None for sig in sigs) for b, sigs in zip(self.bases, self.signatures))

    def copy(self) -> _Accesses:
        other = _Accesses()
        other.bases, other.written = list(self.bases), list(self.written)
        other.signatures = [list(sigs) for sigs in self.signatures]
        return other


def _record(accesses: _Accesses, candidate: Candidate, dims: tuple[int, ...]) -> None:
    op, kernel = candidate.op, candidate.kernel
    n_in = len(op.opview.inputs)
    for number, (value, amap) in enumerate(zip(op.operands, kernel.maps)):
        if isinstance(value.type, ir.MemRefType):
            accesses.add(value, dims if _identity(amap, kernel.rank) else None, write=number >= n_in)


def _record_contraction(accesses: _Accesses, kernel: Kernel) -> None:
    op = kernel.op
    for value in op.opview.inputs:
        accesses.add(value, None, write=False)
    output = op.opview.outputs[0]
    accesses.add(output, tuple(range(ir.MemRefType(output.type).rank)), write=True)


def _member_dims(candidate: Candidate, c_shape: tuple[int, ...], c_whole: set[int],
                 names: tuple[str, ...] = GENERIC_MEMBERS) -> tuple[tuple[int, ...], set[int]] | None:
    """The C dimension of each loop of the candidate and the C dimensions one block must cover
    whole for it (where it is shorter than C, or has no loop: a unit dimension folded away, a
    batch-1 epilogue's), or None when it cannot be a member. Loops are matched to C's dimensions in
    order, equal extents first."""
    op, kernel = candidate.op, candidate.kernel
    if (not candidate.vectorizable or op.name not in names or kernel.reduction_dims
            or len(op.opview.outputs) != 1 or not 0 < kernel.rank <= len(c_shape)
            or kernel.kind not in (KernelKind.ELEMENTWISE, KernelKind.DATA_MOVEMENT)
            or not _identity(kernel.maps[-1], kernel.rank)):
        return None
    ranges, dims, whole = kernel.loop_ranges, [], set()
    for d, extent in enumerate(c_shape):
        j = len(dims)
        if j < len(ranges) and (ranges[j] == extent or (ranges[j] < extent and d in c_whole)):
            dims.append(d)
            if ranges[j] < extent:
                whole.add(d)
        elif d in c_whole:
            whole.add(d)  # no loop of the candidate: it touches index 0 only
        else:
            return None
    return (tuple(dims), whole) if len(dims) == len(ranges) else None


def _bases(op: ir.Operation) -> list[ir.Value]:
    return [buffer_root(v) for v in op.operands if isinstance(v.type, ir.MemRefType)]


def _movable(block_owner, members: list[ir.Operation], place: ir.Operation, others: list) -> list | None:
    """Whether each of `members` may run at `place` (later in the block): no op between the two that
    is not in `others` (the group) uses a buffer the member uses, other than by a view or by freeing
    it. Returns those frees (to be moved after `place`), or None."""
    frees = []
    for member in members:
        for base in _bases(member):
            for user in users_in_block(base, block_owner):
                if user.name in VIEW_OPS or any(user == o for o in others):
                    continue
                if not (member.is_before_in_block(user) and user.is_before_in_block(place)):
                    continue
                if user.name != "memref.dealloc":
                    return None
                if not any(user == f for f in frees):
                    frees.append(user)
    return frees


def find_group(candidates: list[Candidate], pos: int, c_whole: set[int], taken: set[int],
               names: tuple[str, ...] = GENERIC_MEMBERS) -> Group | None:
    """The prologue and epilogue of the contraction `candidates[pos]` (None when it has neither).
    `candidates`: the kernels of the contraction's block, in program order; `c_whole`: the C
    dimensions one tile may cover whole (its tile size is C's extent); `taken`: kernels already in
    another contraction's group; `names`: the ops a member may be."""
    contraction = candidates[pos]
    kernel = contraction.kernel
    c_shape = tuple(ir.MemRefType(kernel.op.operands[2].type).shape)
    owner = contraction.op.parent
    accesses = _Accesses()
    _record_contraction(accesses, kernel)
    group = Group(place=contraction.op)
    members = [contraction.op]

    def try_add(candidate: Candidate, role: str) -> bool:
        if candidate.id in taken:
            return False
        found = _member_dims(candidate, c_shape, c_whole, names)
        if found is None:
            return False
        dims, whole = found
        op, ck = candidate.op, candidate.kernel
        if not any(accesses.aligned(buffer_root(v)) for v, amap in zip(op.operands, ck.maps)
                   if isinstance(v.type, ir.MemRefType) and _identity(amap, ck.rank)):
            return False  # no element shared with the group
        trial = accesses.copy()
        _record(trial, candidate, dims)
        if not trial.consistent():
            return False
        ops = members + [candidate.op]
        if role == PROLOGUE:
            moved = _movable(owner, [candidate.op], group.place, ops)
        else:
            moved = _movable(owner, members, candidate.op, ops)
        if moved is None:
            return False
        accesses.bases, accesses.written, accesses.signatures = trial.bases, trial.written, trial.signatures
        members.append(candidate.op)
        group.whole_dims |= whole
        group.dims[candidate.id] = dims
        if role == PROLOGUE:
            group.prologue.insert(0, candidate)
        else:
            group.epilogue.append(candidate)
            group.place = candidate.op
        return True

    for candidate in reversed(candidates[:pos]):
        if candidate.contraction:
            break
        try_add(candidate, PROLOGUE)
    for candidate in candidates[pos + 1:]:
        if candidate.contraction:
            break
        try_add(candidate, EPILOGUE)
    if not group.prologue and not group.epilogue:
        return None
    frees = _movable(owner, [m for m in members if m != group.place], group.place, members)
    if frees is None:
        return None
    group.frees = frees
    return group


def frees_keep_peak(group: Group, contraction: ir.Operation) -> bool:
    """Whether moving `group.frees` after the group's place leaves its block's allocation peak as it is.

    The group runs at its last member's place (the contraction's where it has no epilogue), so a
    buffer freed between its members (the contraction's input, read last there) lives until then,
    beside what is allocated in between (the epilogue's output). The allocations of the block are
    replayed in order, as `backend.cpu.peak_memory` replays the function (each `memref.alloc` its
    bytes plus its alignment; an op with regions adds its own allocations' transient peak): the move
    is harmless where the most bytes live over the group's span, plus the freed buffers, stay within
    the block's peak. (The span's bytes before the frees already count the freed buffers: an
    overestimate, never an underestimate.)"""
    if not group.frees:
        return True
    block = contraction.block
    members = [c.op for c in group.prologue + group.epilogue] + [contraction]
    place = group.place or contraction
    sizes: dict = {}
    live = peak = span_peak = 0
    in_span = False
    for op in block.operations:
        op = op.operation
        in_span = in_span or any(op == m for m in members)
        here = live
        if op.name == "memref.alloc":
            size = _allocation_bytes(op)
            if size is None:
                return False
            sizes[op.results[0]] = size
            live = here = live + size
        elif op.name == "memref.dealloc":
            live = here = live - sizes.pop(op.operands[0], 0)
        else:
            nested = _transient_bytes(op)
            if nested is None:
                return False
            here = live + nested
        peak = max(peak, here)
        if in_span:
            span_peak = max(span_peak, here)
        if op == place:
            in_span = False
    freed = 0
    for dealloc in group.frees:
        size = _allocation_bytes(dealloc.operands[0].owner) if not isinstance(dealloc.operands[0], ir.BlockArgument) else None
        if size is None:
            return False
        freed += size
    return span_peak + freed <= peak


def _allocation_bytes(op) -> int | None:
    """Bytes a `memref.alloc` takes from the allocator (its size plus its alignment), None otherwise."""
    op = op.operation
    if op.name != "memref.alloc":
        return None
    size = shaped_bytes(op.results[0].type)
    if size is None:
        return None
    return size + (ir.IntegerAttr(op.attributes["alignment"]).value if "alignment" in op.attributes else 0)


def _transient_bytes(op) -> int | None:
    """The most bytes `op`'s regions hold allocated at once (freed inside them), None if unknown."""
    most = 0
    for region in op.regions:
        for block in region.blocks:
            live, sizes = 0, {}
            for inner in block.operations:
                inner = inner.operation
                if inner.name == "memref.alloc":
                    size = _allocation_bytes(inner)
                    if size is None:
                        return None
                    sizes[inner.results[0]] = size
                    live += size
                elif inner.name == "memref.dealloc":
                    live -= sizes.pop(inner.operands[0], 0)
                else:
                    nested = _transient_bytes(inner)
                    if nested is None:
                        return None
                    most = max(most, live + nested)
                most = max(most, live)
    return most


def block_tile_of_output(kernel: Kernel, loop_sizes: dict[int, int]) -> tuple[int, ...] | None:
    """The block tile sizes per dimension of the contraction's output C (`loop_sizes`: the tile of
    each contraction loop, 0 for untiled ones), or None when the loops tiled over blocks are not C's
    dimensions in C's order (the neighbour's forall would not be the contraction's)."""
    c_dims = []
    for e in kernel.maps[2].results:
        if not isinstance(e, ir.AffineDimExpr):
            return None
        c_dims.append(e.position)
    tiled = [d for d, s in sorted(loop_sizes.items()) if s]
    if sorted(d for d in c_dims if loop_sizes.get(d)) != sorted(tiled):
        return None
    return tuple(loop_sizes.get(d, 0) for d in c_dims)


def _identity(amap: ir.AffineMap, rank: int) -> bool:
    results = list(amap.results)
    return len(results) == rank and all(isinstance(e, ir.AffineDimExpr) and e.position == i
                                        for i, e in enumerate(results))


def collapsed_output(contraction: Kernel) -> tuple[ir.Value, list[list[int]]] | None:
    """(Y, groups) where the contraction writes C through `memref.collapse_shape` of the buffer Y
    with `groups` of Y's dimensions merged, one at least of several (a 1x1 convolution read as a
    matrix, its pixels one dimension: `codegen-decompose-convolutions`); else None."""
    c = contraction.op.operands[2]
    if isinstance(c, ir.BlockArgument) or c.owner.operation.name != "memref.collapse_shape":
        return None
    view = c.owner.operation
    groups = _reassociation(view)
    if all(len(g) == 1 for g in groups):
        return None
    return view.operands[0], groups


def _reassociation(view: ir.Operation) -> list[list[int]]:
    """The dimension groups of a `memref.collapse_shape` or `memref.expand_shape`."""
    return [[ir.IntegerAttr(i).value for i in ir.ArrayAttr(g)] for g in ir.ArrayAttr(view.attributes["reassociation"])]


def merge_to_output(kernel: Kernel, y: ir.Value, groups: list[list[int]]) -> ir.Operation | None:
    """An elementwise kernel over Y's shape that accesses Y element by element (a 1x1 convolution's
    zero fill, its BatchNorm + ReLU) rewritten over C's loops: each group of loops merged into one
    (`merge_loops`, every operand read through `collapse_shape` views, no copy), so that it can be a
    member of the contraction's group. The same operations per element: bitwise the same. Returns
    the new op (the old one erased), or None (nothing changed) where the kernel is not such a kernel
    or an operand does not read a group's loops as consecutive dimensions, contiguous together (a
    per-channel vector reads none of them)."""
    op = kernel.op
    rank = ir.MemRefType(y.type).rank
    if (kernel.kind not in (KernelKind.ELEMENTWISE, KernelKind.DATA_MOVEMENT) or kernel.rank != rank
            or kernel.reduction_dims or op.name not in ("linalg.generic", "linalg.fill")
            or len(op.opview.outputs) != 1 or not _identity(kernel.maps[-1], rank)):
        return None
    if not any(v == y and _identity(amap, rank) for v, amap in zip(op.operands, kernel.maps)):
        return None
    merged = [g for g in groups if len(g) > 1]
    for value, amap in zip(op.operands, kernel.maps):
        if not isinstance(value.type, ir.MemRefType):
            continue
        if not all(_reads_contiguously(value, amap, g) for g in merged):
            return None
    if op.name == "linalg.fill":
        with op.location, ir.InsertionPoint(op):
            op.operands[1] = collapse(op.operands[1], groups)  # (a fill has no loops to merge)
        return op
    return merge_loops(op, kernel.maps, merged).operation


def expanded_output(contraction: Kernel) -> tuple[ir.Value, ir.Operation] | None:
    """(Y, view) where the contraction writes C through `memref.expand_shape` of the buffer Y (a
    grouped 1x1 convolution's channels as (group, channel) and pixels as (row, column), written
    into a slice of a concatenation: `codegen-delinearize-loops`); else None."""
    c = contraction.op.operands[2]
    if isinstance(c, ir.BlockArgument) or c.owner.operation.name != "memref.expand_shape":
        return None
    view = c.owner.operation
    return view.operands[0], view


def split_to_output(kernel: Kernel, y: ir.Value, view: ir.Operation) -> ir.Operation | None:
    """An elementwise or data-movement kernel over Y's shape whose every operand is a buffer of
    Y's shape read or written element by element (the identity map; a fill, a copy into Y) rewritten
    over C's loops: every operand through the same `memref.expand_shape` as C, identity maps of
    C's rank, so that it can be a member of the contraction's group. The same operations per
    element: bitwise. Returns the new op (the old one erased), or None (nothing changed)."""
    op = kernel.op
    rank = ir.MemRefType(y.type).rank
    if (kernel.kind not in (KernelKind.ELEMENTWISE, KernelKind.DATA_MOVEMENT) or kernel.rank != rank
            or kernel.reduction_dims or op.name != "linalg.generic" or len(op.opview.outputs) != 1
            or op.opview.outputs[0] != y):
        return None
    shape = list(ir.MemRefType(y.type).shape)
    for value, amap in zip(op.operands, kernel.maps):
        if (not isinstance(value.type, ir.MemRefType) or not _identity(amap, rank)
                or list(ir.MemRefType(value.type).shape) != shape
                or static_strides_and_offset(ir.MemRefType(value.type)) is None):
            return None
    c_type = ir.MemRefType(view.results[0].type)
    groups = _reassociation(view)
    out_shape = list(c_type.shape)
    with op.location, ir.InsertionPoint(op):
        operands = []
        for value in op.operands:
            if value == y and view.block == op.block and view.is_before_in_block(op):
                operands.append(view.results[0])
                continue
            operands.append(memref.expand_shape(expanded_type(ir.MemRefType(value.type), out_shape, groups),
                                                value, view.attributes["reassociation"], [], out_shape))
        identity = ir.AffineMap.get_identity(len(out_shape))
        parallel = ir.Attribute.parse("#linalg.iterator_type<parallel>")
        new = generic_like(op, operands, [identity] * len(operands), [parallel] * len(out_shape))
    op.erase()
    return new.operation


def _reads_contiguously(value: ir.Value, amap: ir.AffineMap, loops: list[int]) -> bool:
    """Whether the access of `value` by `amap` reads the consecutive `loops` as consecutive
    dimensions in order, contiguous together (static strides), or reads none of them."""
    positions = [e.position if isinstance(e, ir.AffineDimExpr) else None for e in amap.results]
    for e, d in zip(amap.results, positions):
        if d is None and expr_dims(e) & set(loops):
            return False  # read inside an expression
    found = [i for i, d in enumerate(positions) if d in loops]
    if not found:
        return True
    if [positions[i] for i in found] != loops or found != list(range(found[0], found[0] + len(loops))):
        return False
    t = ir.MemRefType(value.type)
    layout = static_strides_and_offset(t)
    if layout is None:
        return False
    strides = layout[0]
    return all(strides[i] == t.shape[i + 1] * strides[i + 1] for i in found[:-1])
