"""Reading and writing the values of constant tensors (conv weights) at graph level.

TeMCO's decomposition (Song et al., ICPP'24, §2.1) needs the numbers inside a conv's weight constant.
The torch importer emits weights as `arith.constant dense_resource<KEY> : tensor<...>`; plain
`dense<...>` constants occur too. Both are read by the IR layer (`vtmlir.ir_constants`: the
bindings' buffer protocol, and the resource blob from the module's bytecode).

New weights are written as plain `DenseElementsAttr`s (`make_constant`), which keeps the IR
self-contained and readable in lit tests; vtmlir's printers elide large ones.
"""

from __future__ import annotations

import numpy as np
from torch_mlir import ir

from ..ir_constants import elements_array, numpy_dtype

__all__ = ["constant_array", "make_constant", "numpy_dtype"]


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
    from torch_mlir.dialects import arith

    dtype = numpy_dtype(element_type)
    data = np.ascontiguousarray(array.astype(dtype))
    ttype = ir.RankedTensorType.get(list(data.shape), element_type)
    # bf16 has no buffer-protocol format: hand over its bits, typed by `ttype`.
    buffer = data.view(np.uint16) if isinstance(ir.Type(element_type).maybe_downcast(), ir.BF16Type) else data
    attr = ir.DenseElementsAttr.get(buffer, type=ttype)
    return arith.ConstantOp(ttype, attr).result
