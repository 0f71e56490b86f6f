"""Which neighbours of a contraction kernel run inside its block tiles: the kernels before it that
prepare its accumulator (the fill; with padding also the copy of the unpadded accumulator into the
padded one) and the kernels after it that consume its result (copied out of a padded buffer, then
bias, activation, residual add, casts: the epilogue), so that they are one GPU kernel.

At the kernel level a Linear layer is `fill(C); C += A * B; out = f(C, bias, ...)`: the graph-level
fusion puts the bias and activation in one elementwise generic after the contraction (or in the next
contraction's prologue, which `codegen-gpu-split-prologues` splits off into such a generic again);
`codegen-gpu-pad-contractions` adds a zeroed padded C, the copy of C into its corner and the copy of
the corner back. The contraction schedule tiles these neighbours with the contraction's block tiles
and fuses their `scf.forall`s with its own (`transform.loop.fuse_sibling`): each block runs the
prologue on its tile, accumulates the tile, and after a barrier runs the epilogue on it, each step's
threads reading elements other threads of the block wrote before a barrier (global memory writes
are visible to the block after `bar.sync`). Every element is computed by the same operations in the
same order as by the separate kernels: bitwise the same.

The group (everything read through the bindings: SSA values, indexing maps, the buffers behind
views, static strides and offsets):
- a member is a parallel generic the vector schedule took (it vectorises), with one output written
  with the identity map, whose loops match C's dimensions in order: as long as C along the
  dimensions split over blocks, at most as long or missing along the others (which one block then
  covers whole: a padded contraction's 16 rows; a batch-1 epilogue whose unit row dimension
  `linalg-fold-unit-extent-dims` folded away);
- every buffer a member or the contraction writes is accessed by all of them with the identity map
  through views whose static strides per C dimension and offsets are parts of one of them (the same
  index of C's space is the same element), so a block only reads what its own threads wrote; the
  contraction's operands A and B are written by none;
- members are taken scanning away from the contraction (back for the prologue, forward for the
  epilogue, never across another contraction), skipping kernels that do not qualify; the fused loop
  takes the last member's place, so no op between a member and that place may use a buffer the
  member uses other than by a view (frees are moved after the group);
- the loops the contraction tiles over blocks are C's dimensions in C's order, so the members'
  block `scf.forall`s are the contraction's (same bounds, steps and mapping), as fusing requires.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod

from torch_mlir import ir

from ...passes.memref_dealloc_at_last_use import VIEW_OPS, users_in_block
from ..bodies import buffer_root
from ..kernels import Kernel, KernelKind
from .layouts import element_bytes, strides_and_offset, vector_width

PROLOGUE, EPILOGUE = "prologue", "epilogue"


@dataclass(frozen=True)
class FusedNeighbour:
    """A kernel run in a contraction's block tiles: its id, `role` (prologue or epilogue), its block
    tile per loop (0: the whole extent), how its tile is spread over the block's threads (`threads`
    per loop, 0: not split; `linear_dims` their mapping; `thread_tile` the elements of one thread,
    rows of one vector each) and its work for the report."""

    id: int
    role: str
    block_sizes: tuple[int, ...]
    threads: tuple[int, ...]
    linear_dims: tuple[int, ...]
    thread_tile: tuple[int, ...]
    flops: int
    bytes: int


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
    found = strides_and_offset(t)
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


def _member_dims(candidate: Candidate, c_shape: tuple[int, ...],
                 c_whole: set[int]) -> tuple[tuple[int, ...], set[int]] | None:
    """The C dimension of each loop of the candidate and the C dimensions one block must cover
    whole for it (where it is shorter than C, or has no loop: a unit dimension folded away, a
    batch-1 epilogue's), or None when it cannot be a member. Loops are matched to C's dimensions in
    order, equal extents first."""
    op, kernel = candidate.op, candidate.kernel
    if (not candidate.vectorizable or op.name != "linalg.generic" or kernel.reduction_dims
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


def find_group(candidates: list[Candidate], pos: int, c_whole: set[int], taken: set[int]) -> Group | None:
    """The prologue and epilogue of the contraction `candidates[pos]` (None when it has neither).
    `c_whole`: the C dimensions one block tile may cover whole (its block size is C's extent);
    `taken`: kernels already in another contraction's group."""
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
        found = _member_dims(candidate, c_shape, c_whole)
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


def spread(shape: tuple[int, ...], vector: int, threads: int) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """Threads per dimension of a tile of `shape` (0: not split): `vector`-element vectors along the
    innermost dimension, one per thread and row, rows over the remaining threads; and the mapping of
    those dimensions (innermost on x). None when the innermost dimension alone needs more threads."""
    last = shape[-1]
    across = last // vector
    if across > threads:
        return None
    num = [0] * len(shape)
    num[-1] = across
    linear = (0,)
    rows_dim = next((i for i in range(len(shape) - 2, -1, -1) if shape[i] > 1), None)
    if rows_dim is not None:
        num[rows_dim] = max(d for d in range(1, shape[rows_dim] + 1)
                            if shape[rows_dim] % d == 0 and d * across <= threads)
        linear = (1, 0)
    return tuple(num), linear


def neighbour(kernel: Kernel, kid: int, role: str, block_sizes: tuple[int, ...], threads: int) -> FusedNeighbour | None:
    """`kernel` as a neighbour run in block tiles of `block_sizes` by `threads` threads, or None when
    its tile cannot be spread over them."""
    shape = tuple(s or r for s, r in zip(block_sizes, kernel.loop_ranges))
    last = kernel.rank - 1
    vector = 1 << 30
    for value, amap in zip(kernel.op.operands, kernel.maps):
        results = list(amap.results)
        if (isinstance(value.type, ir.MemRefType) and results and isinstance(results[-1], ir.AffineDimExpr)
                and results[-1].position == last):
            vector = min(vector, vector_width(ir.MemRefType(value.type), shape[-1], index_multiple=shape[-1]))
    found = spread(shape, 1 if vector == 1 << 30 else vector, threads)
    if found is None:
        return None
    moved = sum(prod(ir.MemRefType(v.type).shape) * element_bytes(ir.MemRefType(v.type).element_type)
                for v in kernel.op.operands if isinstance(v.type, ir.MemRefType))
    body_ops = len(list(kernel.op.regions[0].blocks[0].operations)) - 1
    thread_tile = tuple(e // n if n else e for e, n in zip(shape, found[0]))
    return FusedNeighbour(kid, role, block_sizes, found[0], found[1], thread_tile,
                          kernel.iterations * max(0, body_ops), moved)


def _identity(amap: ir.AffineMap, rank: int) -> bool:
    results = list(amap.results)
    return len(results) == rank and all(isinstance(e, ir.AffineDimExpr) and e.position == i
                                        for i, e in enumerate(results))
