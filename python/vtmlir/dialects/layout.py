"""The `layout` dialect: memory and register layouts. Placeholder op set, completed by the dialect work."""


from typing import Any

from torch_mlir import ir
from torch_mlir.dialects import ext
from torch_mlir.dialects.ext import Operand, Result


class LayoutDialect(ext.Dialect, name="layout"):
    pass


class ConvertOp(LayoutDialect.Operation, name="convert", traits=[ext.Pure]):
    source: Operand[ir.RankedTensorType]
    src_layout: Any
    dst_layout: Any
    result: Result[ir.RankedTensorType]
