"""The values of constant elements attributes as numpy arrays, read through the bindings.

- `DenseElementsAttr`: the bindings' buffer protocol; a splat through its splat value; bf16 (no
  buffer format) through MLIR's own constant folding of an exact ``arith.extf`` to f32.
- `DenseResourceElementsAttr` (``dense_resource<KEY>``, how the torch importer emits weights):
  the bindings can create such blobs (`get_from_buffer`) but not read them back. The attribute is
  set on an empty scratch module, which the bindings serialise to MLIR bytecode
  (`Operation.write_bytecode`); the bytecode's resource section holds exactly the resources the
  module references, as raw bytes (`_bytecode_blobs` reads it after the format's specification,
  mlir/docs/BytecodeFormat.md). One scratch module per attribute: serialising the whole model per
  weight would be quadratic.
"""

from __future__ import annotations

import io

import ml_dtypes
import numpy as np
from torch_mlir import ir
from torch_mlir.dialects import arith, func

from .errors import VtmlirError
from .passes.pipeline import run_pipeline

__all__ = ["constant_array", "elements_array", "is_dense_resource", "make_constant", "numpy_dtype", "resource_blob"]


def numpy_dtype(element_type: ir.Type) -> np.dtype:
    """The numpy dtype of a builtin element type (bf16 through ml_dtypes)."""
    t = ir.Type(element_type).maybe_downcast()
    if isinstance(t, ir.IntegerType):
        if t.width == 1:
            return np.dtype(np.bool_)
        if t.width in (8, 16, 32, 64):
            kind = "u" if t.is_unsigned else "i"
            return np.dtype(f"{kind}{t.width // 8}")
    for cls, dtype in ((ir.F16Type, np.float16), (ir.F32Type, np.float32), (ir.F64Type, np.float64)):
        if isinstance(t, cls):
            return np.dtype(dtype)
    if isinstance(t, ir.BF16Type):
        return np.dtype(ml_dtypes.bfloat16)
    raise VtmlirError(f"error: cannot read constants of element type {t}")


def is_dense_resource(attr: ir.Attribute) -> bool:
    try:  # the bindings' checked cast (the class has no registered downcast nor typeid)
        ir.DenseResourceElementsAttr(attr)
    except ValueError:
        return False
    return True


def elements_array(attr: ir.Attribute) -> np.ndarray | None:
    """The value of a ranked-tensor elements attribute (dense, splat or dense_resource) as a numpy
    array of its element type and shape; None for any other attribute."""
    attr = ir.Attribute(attr).maybe_downcast()
    ttype = getattr(attr, "type", None)
    ttype = ttype.maybe_downcast() if ttype is not None else None
    if not isinstance(ttype, ir.RankedTensorType):
        return None
    shape, dtype = tuple(ttype.shape), numpy_dtype(ttype.element_type)
    if is_dense_resource(attr):
        raw = resource_blob(attr)
        count = int(np.prod(shape, dtype=np.int64))
        if len(raw) != count * dtype.itemsize:
            raise VtmlirError(f"error: a dense_resource of {ttype} holds {len(raw)} bytes, expected "
                              f"{count} x {dtype.itemsize}")
        return np.frombuffer(raw, dtype=dtype.newbyteorder("<")).astype(dtype).reshape(shape)
    try:
        dense = ir.DenseElementsAttr(attr)
    except (ValueError, TypeError):
        return None
    if dense.is_splat:
        splat = dense.get_splat_value()
        value = ir.FloatAttr(splat).value if dtype.kind == "f" or dtype.name == "bfloat16" else ir.IntegerAttr(splat).value
        return np.full(shape, value, dtype=dtype)
    if isinstance(ir.Type(ttype.element_type).maybe_downcast(), ir.BF16Type):
        return _bf16_array(dense).astype(dtype).reshape(shape)
    return np.array(dense).astype(dtype, copy=False).reshape(shape)


def _bf16_array(dense) -> np.ndarray:
    """bf16 elements (no buffer format in the bindings) widened to f32 by folding ``arith.extf``:
    exact, so the f32 values round back to the same bf16 ones."""
    with dense.context, ir.Location.unknown():
        src = ir.RankedTensorType(dense.type)
        wide = ir.RankedTensorType.get(src.shape, ir.F32Type.get())
        scratch = ir.Module.create()
        with ir.InsertionPoint(scratch.body):
            fn = func.FuncOp("widen", ([], [wide]))
            with ir.InsertionPoint(fn.add_entry_block()):
                func.ReturnOp([arith.extf(wide, arith.ConstantOp(src, dense).result)])
        run_pipeline(scratch, "builtin.module(func.func(canonicalize))", what="reading a bf16 constant")
        ret = fn.entry_block.operations[len(fn.entry_block.operations) - 1]
        folded = ret.operands[0].owner
        if folded.name != "arith.constant":  # pragma: no cover - canonicalize folds extf of a constant
            raise VtmlirError("error: cannot read a bf16 constant (arith.extf did not fold)")
        return np.array(ir.DenseElementsAttr(folded.attributes["value"]), dtype=np.float32)


def resource_blob(attr: ir.Attribute) -> bytes:
    """The raw bytes of a `dense_resource` attribute's blob (see the module docstring)."""
    attr = ir.Attribute(attr)
    if not is_dense_resource(attr):
        raise VtmlirError(f"error: not a dense_resource attribute: {attr.type}")
    with attr.context, ir.Location.unknown():
        scratch = ir.Module.create()
        scratch.operation.attributes["vtmlir.resource"] = attr
        buffer = io.BytesIO()
        scratch.operation.write_bytecode(buffer)
    blobs = _bytecode_blobs(buffer.getvalue())
    if len(blobs) != 1:
        raise VtmlirError("error: the blob of a dense_resource is not available (was it released?)")
    return next(iter(blobs.values()))


# -- MLIR bytecode: just enough of the format to read the resource section -------------------
_STRINGS, _RESOURCE, _RESOURCE_OFFSET = 0, 5, 6
_BLOB = 0  # AsmResourceEntryKind::Blob


class _Reader:
    def __init__(self, data: bytes, pos: int = 0, end: int | None = None):
        self.data, self.pos, self.end = data, pos, len(data) if end is None else end

    def byte(self) -> int:
        if self.pos >= self.end:
            raise VtmlirError("error: truncated MLIR bytecode")
        self.pos += 1
        return self.data[self.pos - 1]

    def varint(self) -> int:
        """A PrefixVarInt: the trailing zeros of the first byte count the bytes that follow."""
        first = self.byte()
        if first & 1:
            return first >> 1
        if first == 0:
            return int.from_bytes(self.take(8), "little")
        extra = (first & -first).bit_length() - 1
        return int.from_bytes(bytes([first]) + self.take(extra), "little") >> (extra + 1)

    def take(self, n: int) -> bytes:
        if self.pos + n > self.end:
            raise VtmlirError("error: truncated MLIR bytecode")
        self.pos += n
        return self.data[self.pos - n:self.pos]

    def align(self, alignment: int) -> None:
        """Skip the padding up to `alignment` (offsets are relative to the bytecode's start, which
        the writer assumes aligned to every section's alignment)."""
        if alignment & (alignment - 1):
            raise VtmlirError(f"error: MLIR bytecode alignment {alignment} is not a power of two")
        self.take(-self.pos % alignment)


def _bytecode_blobs(data: bytes) -> dict[str, bytes]:
    """{resource key: blob bytes} of every blob resource in a bytecode buffer."""
    r = _Reader(data)
    if r.take(4) != b"ML\xefR":
        raise VtmlirError("error: not MLIR bytecode")
    r.varint()  # version
    while r.byte() != 0:  # the producer string, null-terminated
        pass
    sections = {}
    while r.pos < len(data):
        head = r.byte()
        length = r.varint()
        if head & 0x80:
            r.align(r.varint())
        sections[head & 0x7F] = (r.pos, r.pos + length)
        r.take(length)
    if _RESOURCE_OFFSET not in sections:
        return {}
    strings = _strings(data, *sections[_STRINGS])
    offsets = _Reader(data, *sections[_RESOURCE_OFFSET])
    values = _Reader(data, *sections[_RESOURCE])
    blobs = {}
    external = offsets.varint()
    group = 0
    while offsets.pos < offsets.end:
        offsets.varint()  # the group's key: an external provider's name, else its dialect
        for _ in range(offsets.varint()):
            key, size, kind = strings[offsets.varint()], offsets.varint(), offsets.byte()
            entry = _Reader(data, values.pos, values.pos + size)
            values.take(size)
            if kind == _BLOB and group >= external:
                alignment, n = entry.varint(), entry.varint()
                entry.align(alignment)
                blobs[key] = entry.take(n)
        group += 1
    return blobs


def _strings(data: bytes, start: int, end: int) -> list[str]:
    """The string section: a count, the sizes (with their null terminators) in reverse order, then
    the strings, the last one at the end of the section."""
    r = _Reader(data, start, end)
    sizes = [r.varint() for _ in range(r.varint())]
    out, stop = [], end
    for size in sizes:
        out.append(data[stop - size:stop - 1].decode())
        stop -= size
    return out[::-1]


# -- constant ops (conv weights) at graph level; new ones are plain `dense<>` attributes, which keep the IR
# self-contained and readable in lit tests (vtmlir's printers elide large ones).


def constant_array(op) -> np.ndarray | None:
    """The value of an `arith.constant` of ranked tensor type as a numpy array, or None for other ops.

    Works for `dense<...>` (including splats) and `dense_resource<...>` values.
    """
    op = op.operation
    if op.name != "arith.constant":
        return None
    return elements_array(op.attributes["value"])


def make_constant(array: np.ndarray, element_type) -> ir.Value:
    """Insert `arith.constant dense<array> : tensor<shape x element_type>` at the current insertion point."""
    dtype = numpy_dtype(element_type)
    data = np.ascontiguousarray(array.astype(dtype))
    ttype = ir.RankedTensorType.get(list(data.shape), element_type)
    # bf16 has no buffer-protocol format: hand over its bits, typed by `ttype`.
    buffer = data.view(np.uint16) if isinstance(ir.Type(element_type).maybe_downcast(), ir.BF16Type) else data
    attr = ir.DenseElementsAttr.get(buffer, type=ttype)
    return arith.ConstantOp(ttype, attr).result
