"""Which neighbours of a contraction kernel run inside its block tiles: the fill of its accumulator
before it and the elementwise consumer of its result after it (bias, activation, residual add,
casts: the epilogue), so that the three are one GPU kernel instead of three launches.

At the kernel level a Linear layer is `fill(C); C += A * B; out = f(C, bias, ...)`: the graph-level
fusion puts the bias and activation in one elementwise generic after the contraction (or in the next
contraction's prologue, which `codegen-gpu-split-prologues` splits off into such a generic again).
The contraction schedule tiles the fill and the epilogue with the contraction's block tiles and
fuses their `scf.forall`s with its own (`transform.loop.fuse_sibling`): each block zeroes its C tile,
accumulates it, and after a barrier applies the epilogue to that tile, reading the C elements its
own threads stored (global memory writes are visible to the block after `bar.sync`). Every element
is computed by the same operations in the same order as by the separate kernels: bitwise the same.

A neighbour qualifies when (everything read through the bindings: SSA values, indexing maps,
buffers behind views):
- fill: a parallel generic with no buffer inputs writing the contraction's output C with the
  identity map (its iteration space is C's shape);
- epilogue: a parallel generic the vector schedule took (so it vectorises), one output, whose
  iteration space is C's shape, reading C with the identity map and touching C's buffer nowhere
  else (each block reads only its own tile);
- "C" is the contraction's output value or another view of its buffer with the same static type
  (bufferization gives each op its own `collapse_shape` of a buffer);
- nothing between the neighbour and the contraction uses the buffers the moved op reads or writes
  (the fused loop takes the later op's place), other than by taking views of them;
- the loops the contraction tiles over blocks are C's dimensions in C's order, so the neighbour's
  block `scf.forall` is the contraction's (same bounds, steps and mapping), as fusing requires.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from torch_mlir import ir

from ...passes.memref_dealloc_at_last_use import VIEW_OPS, users_in_block
from ..kernels import Kernel, KernelKind

FILL, EPILOGUE = "fill", "epilogue"


@dataclass(frozen=True)
class FusedNeighbour:
    """A kernel run in a contraction's block tiles: its id, `role` (fill or epilogue), its block tile
    per loop (0: the whole extent), how its tile is spread over the block's threads (`threads` per
    loop, 0: not split; `linear_dims` their mapping) and its work for the report."""

    id: int
    role: str
    block_sizes: tuple[int, ...]
    threads: tuple[int, ...]
    linear_dims: tuple[int, ...]
    thread_tile: tuple[int, ...]    # the elements of one thread: rows of one vector each
    flops: int
    bytes: int


def base_buffer(value: ir.Value) -> ir.Value:
    """The buffer a memref value is a view of (itself when it is no view)."""
    while not isinstance(value.owner, ir.Block) and value.owner.operation.name in VIEW_OPS:
        value = value.owner.operation.operands[0]
    return value


def same_elements(a: ir.Value, b: ir.Value) -> bool:
    """Whether two memref values address the same elements the same way: one value, or views of one
    buffer of one static type (shape, strides and offset in the type: the same index -> address)."""
    if a == b:
        return True
    if a.type != b.type or base_buffer(a) != base_buffer(b):
        return False
    from .layouts import strides_and_offset

    return strides_and_offset(ir.MemRefType(a.type)) is not None


def is_fill_of(kernel: Kernel, output: ir.Value) -> bool:
    op = kernel.op
    if op.name != "linalg.generic" or kernel.reduction_dims or len(op.opview.outputs) != 1:
        return False
    if any(isinstance(v.type, ir.MemRefType) and ir.MemRefType(v.type).rank for v in op.opview.inputs):
        return False
    return same_elements(op.opview.outputs[0], output) and _identity(kernel.maps[-1], kernel.rank)


def is_epilogue_of(kernel: Kernel, output: ir.Value) -> bool:
    op = kernel.op
    if (op.name != "linalg.generic" or kernel.reduction_dims or len(op.opview.outputs) != 1
            or kernel.kind not in (KernelKind.ELEMENTWISE, KernelKind.DATA_MOVEMENT)):
        return False
    c_type = ir.MemRefType(output.type)
    if tuple(kernel.loop_ranges) != tuple(c_type.shape) or not _identity(kernel.maps[-1], kernel.rank):
        return False
    base, reads = base_buffer(output), False
    for value, amap in zip(op.operands, kernel.maps):
        if not isinstance(value.type, ir.MemRefType) or base_buffer(value) != base:
            continue
        if not same_elements(value, output) or not _identity(amap, kernel.rank):
            return False  # C read elsewhere than the element the thread computes: another block's tile
        reads = reads or any(value == v for v in op.opview.inputs)
    return reads


def independent(block_owner, first: ir.Operation, last: ir.Operation, moved: ir.Operation) -> list | None:
    """Whether no op strictly between `first` and `last` (in `block_owner`'s body) uses a buffer
    `moved` uses, other than by taking a view of it or freeing it: `moved` (one of the two) may then
    run at the other's place. Returns the `memref.dealloc`s in between that free such a buffer (to be
    moved after `last`), or None when not independent."""
    frees = []
    for value in moved.operands:
        if not isinstance(value.type, ir.MemRefType):
            continue
        for user in users_in_block(base_buffer(value), block_owner):
            if user.name in VIEW_OPS or not (first.is_before_in_block(user) and user.is_before_in_block(last)):
                continue
            if user.name != "memref.dealloc":
                return None
            frees.append(user)
    return frees


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
    from .layouts import element_bytes, vector_width

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
