"""Static facts about a kernel's memrefs that the GPU schedules need: alignment and vector widths.

Shapes, strides and offsets are static at the kernel level (views carry them in their strided
layouts, device buffers start 256-byte aligned), so how wide a vector access may be is a property of
the type: a `vector<V x T>` access along the innermost dimension is aligned when the innermost
stride is 1 and V divides every other stride and the offset (in elements). The schedules never
claim an alignment this does not prove; `convert-vector-to-llvm{use-vector-alignment}` then emits
`ld.global.v4`/`st.global.v4` for them.
"""

from __future__ import annotations

from math import gcd

from torch_mlir import ir

# The widest global or shared-memory access of one thread (ld.global.v4.b32, cp.async 16 bytes).
MAX_VECTOR_BYTES = 16


def element_bytes(t: ir.Type) -> int:
    if isinstance(t, ir.IndexType):
        return 8
    return max(1, getattr(t, "width", 32) // 8)


def strides_and_offset(memref_type: ir.MemRefType) -> tuple[list[int], int] | None:
    """Static (strides, offset) in elements, or None when any is dynamic."""
    strides, offset = memref_type.get_strides_and_offset()
    if any(memref_type.is_dynamic_stride_or_offset(v) for v in list(strides) + [offset]):
        return None
    return list(strides), int(offset)


def aligned_elements(memref_type: ir.MemRefType) -> int:
    """The largest power of two (elements) dividing the offset and every stride but the innermost
    (0 when the innermost stride is not 1 or the layout is dynamic): a vector of that many elements
    along the innermost dimension at an index that is a multiple of it is aligned to its size."""
    found = strides_and_offset(memref_type)
    if found is None or memref_type.rank == 0:
        return 0
    strides, offset = found
    if strides[-1] != 1:
        return 0
    g = offset
    for s in strides[:-1]:
        g = gcd(g, s)
    g = g or (1 << 30)
    return g & -g  # lowest set bit: the power of two dividing all of them


def vector_width(memref_type: ir.MemRefType, extent: int, index_multiple: int | None = None) -> int:
    """Elements per vector access along the innermost dimension of `memref_type` when accesses
    start at multiples of `index_multiple` (default: the vector width itself) and cover `extent`
    elements: a power of two, at most 16 bytes, dividing `extent`, aligned (`aligned_elements`)."""
    elem = element_bytes(memref_type.element_type)
    limit = min(MAX_VECTOR_BYTES // elem, aligned_elements(memref_type))
    width = 1
    while width * 2 <= limit and extent % (width * 2) == 0 and \
            (index_multiple is None or index_multiple % (width * 2) == 0):
        width *= 2
    return width
