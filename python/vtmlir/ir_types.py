"""Sizes of IR types, shared by every layer that counts bytes (vt-stats, TeMCO's memory model, VTC's
cost model, the layout passes, the CPU backend's allocation replay).

`element_bits` is the `vt` dialect's (it knows `!vt.float`); `shaped_bytes` packs sub-byte elements.
"""

from __future__ import annotations

from torch_mlir import ir

from .dialects.vt import element_bits

__all__ = ["element_bits", "shaped_bytes"]


def shaped_bytes(t) -> int | None:
    """Bytes of a statically shaped tensor/memref type (sub-byte elements packed, rounded up); None
    for a dynamic shape, an unranked type, an element of unknown width or a type that is not shaped."""
    try:
        shaped = t.maybe_downcast()
    except (AttributeError, ValueError, TypeError):
        shaped = t
    if not isinstance(shaped, ir.ShapedType):
        return None
    if not shaped.has_rank or not shaped.has_static_shape:
        return None
    bits = element_bits(shaped.element_type)
    if bits is None:
        return None
    elements = 1
    for d in shaped.shape:
        elements *= d
    return (elements * bits + 7) // 8
