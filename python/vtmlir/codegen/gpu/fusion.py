"""How a contraction's neighbours run inside its GPU block tiles: the group itself (the fill; with
padding also the copy of the unpadded accumulator into the padded one; the copy out of a padded
buffer, bias, activation, residual add, casts) is found by the target-neutral `codegen.fusion`
(`find_group`, the legality rules); this module spreads each member's block tile over the block's
threads (`neighbour`, `spread`), so that the group is one GPU kernel.

`codegen-gpu-pad-contractions` adds a zeroed padded C, the copy of C into its corner and the copy of
the corner back. The contraction schedule tiles the neighbours with the contraction's block tiles
and fuses their `scf.forall`s with its own (`transform.loop.fuse_sibling`): each block runs the
prologue on its tile, accumulates the tile, and after a barrier runs the epilogue on it, each step's
threads reading elements other threads of the block wrote before a barrier (global memory writes
are visible to the block after `bar.sync`). Every element is computed by the same operations in the
same order as by the separate kernels: bitwise the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from torch_mlir import ir

from ..kernels import Kernel
from .layouts import element_bytes, vector_width


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

