"""`codegen-streaming-stores`: a large transposing copy writes its rows past the caches.

A transposing copy's tile writes `width` output rows of one register each: a whole cache line per
row, in `width` lines that are far apart. With ordinary stores each line is first read from memory
(read for ownership) and then evicted; a 2048x2048 f32 transpose ran at ~35% of `numpy.copyto`'s
bandwidth, one thread, whatever the tile order (blocks for the TLB, prefetches: measured in C, the
same). Non-temporal stores write whole lines without reading them: 3x faster with the caches cold.
They help only where nothing reads the output soon, so the schedule marks the loops of transposing
copies whose output is large (`schedules.STREAMING_STORE_BYTES`) with `codegen.streaming_stores`.

This pass rewrites every `vector.transfer_write` inside a marked loop that is in bounds, unmasked and
a minor identity on a memref whose innermost stride is 1 into `vector.store {nontemporal = true}`,
one per row of the vector (LLVM: `store ... !nontemporal`), and removes the mark. Same values, same
places: bitwise.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import arith, memref, scf, vector

from ..passes.registry import Pass, register_pass
from .kernels import STREAMING_STORES_ATTR


def _unit_innermost_stride(memref_type: ir.MemRefType) -> bool:
    if memref_type.rank == 0:
        return False
    strides, _ = memref_type.get_strides_and_offset()
    return strides[-1] == 1


def _element_bytes(shaped: ir.ShapedType) -> int:
    """Bytes per element (0 for a type without a fixed width, `index`: never streamed)."""
    return getattr(shaped.element_type, "width", 0) // 8


def _streamable(op: ir.Operation) -> bool:
    if len(op.operands) < 2:
        return False
    value, base = op.operands[0], op.operands[1]
    if not isinstance(value.type, ir.VectorType) or not isinstance(base.type, ir.MemRefType):
        return False
    write = op.opview
    if write.mask is not None:
        return False
    in_bounds = [ir.BoolAttr(a).value for a in ir.ArrayAttr(op.attributes["in_bounds"])]
    perm = ir.AffineMapAttr(op.attributes["permutation_map"]).value
    rank = value.type.rank
    row_bytes = value.type.shape[-1] * _element_bytes(value.type)
    if row_bytes < 16 or row_bytes & (row_bytes - 1):
        return False
    return (all(in_bounds) and perm == ir.AffineMap.get_minor_identity(base.type.rank, rank)
            and _unit_innermost_stride(base.type))


def _store_rows(op: ir.Operation) -> None:
    """The transfer_write as one `vector.store` per innermost row: non-temporal where the row's
    address is a multiple of its size at run time (x86's streaming stores need that alignment; LLVM
    splits a less aligned one into scalar stores, 8x slower), an ordinary store otherwise."""
    write = op.opview
    value, base, indices = write.valueToStore, write.base, list(write.indices)
    shape = list(value.type.shape)
    outer = shape[:-1]
    lead = len(indices) - len(shape)   # memref dims the vector does not span
    row_bytes = shape[-1] * _element_bytes(value.type)
    with op.location, ir.InsertionPoint(op):
        index = ir.IndexType.get()
        row_type = ir.VectorType.get([shape[-1]], value.type.element_type)
        address = _address_of(base)
        mask = arith.constant(index, row_bytes - 1)
        zero = arith.constant(index, 0)
        positions = [[]]
        for extent in outer:
            positions = [p + [i] for p in positions for i in range(extent)]
        for pos in positions:
            row = vector.extract(value, [], pos) if pos else value
            if pos and row.type != row_type:
                row = vector.shape_cast(row_type, row)
            at = list(indices)
            for k, offset in enumerate(pos):
                if offset:
                    at[lead + k] = arith.addi(at[lead + k], arith.constant(index, offset))
            aligned = arith.cmpi(arith.CmpIPredicate.eq, arith.andi(address(at), mask), zero)
            branch = scf.IfOp(aligned, has_else=True)
            with ir.InsertionPoint(branch.then_block):
                vector.store(row, base, at, nontemporal=True, alignment=row_bytes)
                scf.yield_([])
            with ir.InsertionPoint(branch.else_block):
                vector.store(row, base, at)
                scf.yield_([])
    op.erase()


def _address_of(base: ir.Value):
    """A function of indices giving the byte address of that element of `base` (index arithmetic)."""
    index = ir.IndexType.get()
    rank = base.type.rank
    meta = memref.ExtractStridedMetadataOp(base)
    pointer = memref.extract_aligned_pointer_as_index(base)
    offset, strides = meta.results[1], list(meta.results[2 + rank:2 + 2 * rank])
    size = arith.constant(index, _element_bytes(base.type))

    def address(at):
        linear = offset
        for i, stride in zip(at, strides):
            linear = arith.addi(linear, arith.muli(i, stride))
        return arith.addi(pointer, arith.muli(linear, size))

    return address


def streaming_stores(module_op: ir.Operation) -> int:
    """Rewrite the eligible transfer_writes under marked loops; returns how many were rewritten."""
    marked, writes = [], []

    def find(op):
        if STREAMING_STORES_ATTR in op.attributes:
            marked.append(op)
        return ir.WalkResult.ADVANCE

    module_op.walk(find)
    for loop in marked:
        def collect(op):
            if op.name == "vector.transfer_write" and _streamable(op):
                writes.append(op)
            return ir.WalkResult.ADVANCE

        loop.walk(collect)
        del loop.attributes[STREAMING_STORES_ATTR]
    for op in writes:
        _store_rows(op)
    return len(writes)


@register_pass
class StreamingStores(Pass):
    name = "codegen-streaming-stores"
    summary = "Write the vectors of loops marked codegen.streaming_stores with non-temporal stores"
    description = (
        "In every loop carrying `codegen.streaming_stores` (a large transposing copy's tiles), each "
        "in-bounds, unmasked, minor-identity vector.transfer_write to a memref with unit innermost stride "
        "becomes one `vector.store {nontemporal = true}` per row; the mark is removed. Bitwise."
    )

    def run(self, module):
        streaming_stores(module.operation)
