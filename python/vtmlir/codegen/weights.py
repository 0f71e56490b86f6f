"""Constant operands at the kernel level: weights read from constant globals, re-laid out at compile time.

A weight reaches a kernel as `memref.get_global` of a private constant `memref.global` (its value a
`dense_resource` blob or a dense attribute), possibly through `memref.expand_shape`/`collapse_shape`.
Passes that want another layout for it (`codegen-transpose-b-operands`, the im2col convolutions of
`codegen-decompose-convolutions`) read its value, permute it with numpy and read a new constant
global instead; the original goes once nothing reads it (`Globals.erase_unread`), so the JIT does not
hold both. Moving values is exact: results do not change.
"""

from __future__ import annotations

import numpy as np
from torch_mlir import ir
from torch_mlir.dialects import memref

from ..ir_constants import elements_array

_RESHAPES = ("memref.expand_shape", "memref.collapse_shape")


def is_identity_layout(t: ir.MemRefType) -> bool:
    """Row-major and contiguous, offset 0."""
    strides, offset = t.get_strides_and_offset()
    expected, size = [], 1
    for extent in reversed(list(t.shape)):
        expected.insert(0, size)
        size *= extent
    return offset == 0 and list(strides) == expected


class Globals:
    """The module's symbols, the constant values read through them, and the globals made."""

    def __init__(self, module_op):
        self.module_op = module_op
        self.symbols = {ir.StringAttr(op.attributes["sym_name"]).value: op.operation
                        for op in module_op.regions[0].blocks[0].operations if "sym_name" in op.attributes}
        self.replaced: set[str] = set()

    def constant_value(self, value, slices: bool = False) -> np.ndarray | None:
        """The value of `value` when it is a constant global read whole (possibly reshaped), else None.
        With `slices`, also a static `memref.subview` of one (a fused QKV weight's Q and V rows, read
        by one product while VTC's view of its K rows is read by another)."""
        t = value.type
        if (slices and isinstance(t, ir.MemRefType) and t.has_static_shape and not isinstance(value, ir.BlockArgument)
                and value.owner.operation.name == "memref.subview" and len(value.owner.operation.operands) == 1):
            op = value.owner.operation
            source = self.constant_value(op.operands[0])
            if source is None:
                return None
            offsets, sizes, strides = (list(ir.DenseI64ArrayAttr(op.attributes[name]))
                                       for name in ("static_offsets", "static_sizes", "static_strides"))
            window = tuple(slice(o, o + n * s, s) for o, n, s in zip(offsets, sizes, strides))
            return np.ascontiguousarray(source[window]).reshape(list(t.shape))
        if (not isinstance(t, ir.MemRefType) or not t.has_static_shape or not is_identity_layout(t)
                or isinstance(value, ir.BlockArgument)):
            return None
        op = value.owner.operation  # (the op view of memref.get_global has a `name` attribute of its own)
        if op.name in _RESHAPES:
            source = self.constant_value(op.operands[0])
            return None if source is None else source.reshape(list(t.shape))
        if op.name != "memref.get_global":
            return None
        glob = self.symbols.get(ir.FlatSymbolRefAttr(op.attributes["name"]).value)
        if glob is None or "constant" not in glob.attributes or "initial_value" not in glob.attributes:
            return None
        return elements_array(glob.attributes["initial_value"])

    def read_relaid(self, value, data: np.ndarray, suffix: str) -> ir.Value:
        """A `memref.get_global` (at the current insertion point) of a new constant global holding
        `data`, which replaces the constant `value` (whose global is noted for `erase_unread`)."""
        op = value.owner.operation
        while op.name in _RESHAPES + ("memref.subview",):
            op = op.operands[0].owner.operation
        base = ir.FlatSymbolRefAttr(op.attributes["name"]).value
        self.replaced.add(base)
        name, i = f"{base}_{suffix}", 0
        while name in self.symbols:
            i += 1
            name = f"{base}_{suffix}_{i}"
        element_type = ir.MemRefType(value.type).element_type
        data = np.ascontiguousarray(data)
        mtype = ir.MemRefType.get(list(data.shape), element_type)
        attr = ir.DenseResourceElementsAttr.get_from_buffer(
            data, name, ir.RankedTensorType.get(list(data.shape), element_type))
        with ir.InsertionPoint.at_block_begin(self.module_op.regions[0].blocks[0]):
            glob = memref.GlobalOp(name, ir.TypeAttr.get(mtype), sym_visibility="private", initial_value=attr,
                                   constant=True, alignment=ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 64))
        self.symbols[name] = glob.operation
        return memref.GetGlobalOp(mtype, name).result

    def erase_unread(self) -> None:
        """Erase the weight reads nothing uses any more, then the replaced globals nothing reads."""
        if not self.replaced:
            return
        while True:
            dead, read = [], set()

            def visit(op):
                if op.name == "memref.get_global" or op.name in _RESHAPES:
                    if not list(op.results[0].uses):
                        dead.append(op)
                    elif op.name == "memref.get_global":
                        read.add(ir.FlatSymbolRefAttr(op.attributes["name"]).value)
                return ir.WalkResult.ADVANCE

            self.module_op.walk(visit)
            if not dead:
                break
            for op in dead:  # a reshape's source becomes dead in the next round
                op.erase()
        for name in self.replaced - read:
            self.symbols.pop(name).erase()
        self.replaced.clear()
