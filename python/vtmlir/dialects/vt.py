"""The `vt` dialect: virtual tensors (VTC Def. 3). Placeholder op set, completed by the dialect work."""


from collections.abc import Sequence

from torch_mlir import ir
from torch_mlir.dialects import ext
from torch_mlir.dialects.ext import Operand, Result


class VTDialect(ext.Dialect, name="vt"):
    pass


class ViewOp(VTDialect.Operation, name="view", traits=[ext.Pure]):
    sources: Sequence[Operand[ir.RankedTensorType]]
    mapping: ir.ArrayAttr
    result: Result[ir.RankedTensorType]
