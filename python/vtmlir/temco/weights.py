"""Reading and writing the values of constant tensors (conv weights) at graph level.

TeMCO's decomposition (Song et al., ICPP'24, §2.1) needs the numbers inside a conv's weight constant.
The torch importer emits weights as `arith.constant dense_resource<KEY> : tensor<...>`: the attribute
holds only a key into the context's resource table, and the Python bindings can create such blobs
(`DenseResourceElementsAttr.get_from_buffer`) but not read them back.

How we read them (robust, no private API): clone the one `arith.constant` into an empty scratch
module and print that. MLIR's printer emits the `{-# dialect_resources: { builtin: { KEY: "0x..." } } #-}`
trailer for exactly the resources the printed IR references, so the text holds this one blob and no
other (printing the whole model once per weight would be quadratic). The blob is hex: a 4-byte
little-endian alignment word followed by the raw little-endian elements, which numpy reads with the
element type's dtype. Plain `dense<...>` constants are read with `numpy.array(DenseElementsAttr)`.

New weights are written as plain `DenseElementsAttr`s (`make_constant`), which keeps the IR
self-contained and readable in lit tests; vtmlir's printers elide large ones.
"""

from __future__ import annotations

import re

import numpy as np
from torch_mlir import ir

from ..errors import VtmlirError

_RESOURCE_KEY = re.compile(r'^dense_resource<("(?:[^"\\]|\\.)*"|[^>]*)>')


def numpy_dtype(element_type) -> np.dtype:
    """The numpy dtype of an MLIR element type (bf16 through ml_dtypes)."""
    t = str(element_type)
    table = {
        "f16": np.float16,
        "f32": np.float32,
        "f64": np.float64,
        "i8": np.int8,
        "i16": np.int16,
        "i32": np.int32,
        "i64": np.int64,
        "ui8": np.uint8,
    }
    if t in table:
        return np.dtype(table[t])
    if t == "bf16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    raise VtmlirError(f"error: cannot read constants of element type {t}")


def constant_array(op) -> np.ndarray | None:
    """The value of an `arith.constant` of ranked tensor type as a numpy array, or None for other ops.

    Works for `dense<...>` (including splats) and `dense_resource<...>` values.
    """
    op = op.operation
    if op.name != "arith.constant":
        return None
    attr = op.attributes["value"]
    if not _is_ranked(attr.type):
        return None
    ttype = ir.RankedTensorType(attr.type)
    shape = tuple(ttype.shape)
    dtype = numpy_dtype(ttype.element_type)
    text = str(attr)
    if text.startswith("dense_resource<"):
        return _resource_array(op, text, shape, dtype)
    try:
        dense = ir.DenseElementsAttr(attr)
    except (ValueError, TypeError):
        return None
    if dense.is_splat:
        splat = dense.get_splat_value()
        value = ir.FloatAttr(splat).value if dtype.kind == "f" or str(ttype.element_type) == "bf16" else ir.IntegerAttr(splat).value
        return np.full(shape, value, dtype=dtype)
    try:
        return np.array(dense).astype(dtype, copy=False).reshape(shape)
    except (TypeError, ValueError, RuntimeError):  # element types without a buffer format (bf16)
        return _dense_from_text(text, shape, dtype)


def _dense_from_text(text: str, shape: tuple, dtype: np.dtype) -> np.ndarray:
    """Parse a printed `dense<...>`: a raw hex blob `dense<"0x...">` or a nested list of numbers."""
    blob = re.match(r'^dense<"0x([0-9A-Fa-f]*)">', text)
    if blob:
        return np.frombuffer(bytes.fromhex(blob.group(1)), dtype=dtype).reshape(shape).copy()
    body = text[len("dense<") : text.rindex("> :")]
    numbers = re.findall(r"[-+]?(?:0x[0-9A-Fa-f]+|(?:\d+\.?\d*(?:[eE][-+]?\d+)?|inf|nan))|true|false", body)
    values = [1.0 if n == "true" else 0.0 if n == "false" else float(n) for n in numbers]
    return np.array(values, dtype=np.float64).astype(dtype).reshape(shape)


def _is_ranked(t) -> bool:
    try:
        ir.RankedTensorType(t)
        return True
    except (ValueError, TypeError):
        return False


def _resource_array(op, attr_text: str, shape: tuple, dtype: np.dtype) -> np.ndarray:
    match = _RESOURCE_KEY.match(attr_text)
    if not match:
        raise VtmlirError(f"error: cannot parse resource key of {attr_text[:80]}")
    key = match.group(1)
    with op.context, ir.Location.unknown():
        scratch = ir.Module.create()
        with ir.InsertionPoint(scratch.body):
            op.clone()
        printed = scratch.operation.get_asm()
    trailer = printed.find("dialect_resources")
    blob = re.search(re.escape(key) + r'\s*:\s*"0x([0-9A-Fa-f]*)"', printed[trailer:]) if trailer >= 0 else None
    if blob is None:
        raise VtmlirError(f"error: the blob of resource {key} is not available (was it released?)")
    raw = bytes.fromhex(blob.group(1))[4:]  # 4-byte alignment word, then the elements
    count = int(np.prod(shape, dtype=np.int64))
    if len(raw) != count * dtype.itemsize:
        raise VtmlirError(
            f"error: resource {key} holds {len(raw)} bytes, expected {count} x {dtype.itemsize} for {shape}"
        )
    return np.frombuffer(raw, dtype=dtype.newbyteorder("<")).astype(dtype).reshape(shape)


def make_constant(array: np.ndarray, element_type) -> ir.Value:
    """Insert `arith.constant dense<array> : tensor<shape x element_type>` at the current insertion point."""
    from torch_mlir.dialects import arith

    dtype = numpy_dtype(element_type)
    data = np.ascontiguousarray(array.astype(dtype))
    ttype = ir.RankedTensorType.get(list(data.shape), element_type)
    # bf16 has no buffer-protocol format: hand over its bits, typed by `ttype`.
    buffer = data.view(np.uint16) if str(element_type) == "bf16" else data
    attr = ir.DenseElementsAttr.get(buffer, type=ttype)
    return arith.ConstantOp(ttype, attr).result
