"""The calling convention of a compiled function: its tensor arguments and results.

Read from the graph-level `func.func` (before bufferization turns results into out-parameters), so
both backends check user inputs the same way and allocate results the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np
from torch_mlir import ir

from .errors import VtmlirError, format_location

_NUMPY_DTYPES = {
    "f64": np.float64,
    "f32": np.float32,
    "f16": np.float16,
    "bf16": ml_dtypes.bfloat16,
    "i64": np.int64,
    "i32": np.int32,
    "i16": np.int16,
    "i8": np.int8,
    "ui8": np.uint8,
    "i1": np.bool_,
}


@dataclass(frozen=True)
class TensorSpec:
    """Shape (None for a dynamic dim) and element type of one argument or result."""

    shape: tuple[int | None, ...]
    element_type: str

    @property
    def numpy_dtype(self) -> np.dtype:
        return np.dtype(_NUMPY_DTYPES[self.element_type])

    @property
    def is_static(self) -> bool:
        return all(d is not None for d in self.shape)

    def __str__(self) -> str:
        dims = "x".join("?" if d is None else str(d) for d in self.shape)
        return f"tensor<{dims + 'x' if dims else ''}{self.element_type}>"

    @staticmethod
    def from_type(t: ir.Type, what: str, where: str = "") -> "TensorSpec":
        """The spec of type `t` of `what` (e.g. "input 0 of @main"); errors start with `where`
        (`file:line:col`, the function's location) when given."""
        prefix = f"{where}: error:" if where else "error:"
        t = t.maybe_downcast()
        if not isinstance(t, ir.RankedTensorType):
            raise VtmlirError(f"{prefix} {what} has type {t}; only ranked tensors are supported at function boundaries")
        rt = t
        elt = str(rt.element_type)
        if elt not in _NUMPY_DTYPES:
            raise VtmlirError(f"{prefix} {what} has element type {elt}, which vtmlir cannot pass to or from Python yet")
        shape = tuple(None if rt.is_dynamic_dim(i) else rt.get_dim_size(i) for i in range(rt.rank))
        return TensorSpec(shape, elt)


@dataclass(frozen=True)
class Signature:
    name: str
    inputs: tuple[TensorSpec, ...]
    results: tuple[TensorSpec, ...]

    def __str__(self) -> str:
        ins = ", ".join(map(str, self.inputs))
        outs = ", ".join(map(str, self.results))
        return f"@{self.name}({ins}) -> ({outs})"

    def check_inputs(self, arrays: list[np.ndarray]) -> None:
        """Raise a VtmlirError naming the first argument whose count, shape or dtype is wrong."""
        if len(arrays) != len(self.inputs):
            raise VtmlirError(f"error: @{self.name} takes {len(self.inputs)} inputs, got {len(arrays)}")
        for i, (array, spec) in enumerate(zip(arrays, self.inputs)):
            if array.dtype != spec.numpy_dtype:
                raise VtmlirError(f"error: input {i} of @{self.name} must have dtype {spec.numpy_dtype}, got {array.dtype}")
            ok = len(array.shape) == len(spec.shape) and all(
                d is None or d == n for d, n in zip(spec.shape, array.shape)
            )
            if not ok:
                raise VtmlirError(f"error: input {i} of @{self.name} must have shape {spec}, got {tuple(array.shape)}")


def find_entry(module: ir.Module, entry: str | None = None) -> ir.Operation:
    """The entry `func.func`: `entry` by name, else `@main`, else the only public function."""
    funcs = [op.operation for op in module.body.operations if op.operation.name == "func.func"]
    defined = [f for f in funcs if len(f.regions[0].blocks) > 0]
    where = format_location(module.operation.location, "<module>")

    def name_of(f):
        return ir.StringAttr(f.attributes["sym_name"]).value

    if entry is not None:
        for f in defined:
            if name_of(f) == entry:
                return f
        names = ", ".join("@" + name_of(f) for f in defined) or "none"
        raise VtmlirError(f"{where}: error: no function @{entry} in the module (functions: {names})")
    for f in defined:
        if name_of(f) == "main":
            return f
    public = [f for f in defined if "sym_visibility" not in f.attributes]
    if len(public) == 1:
        return public[0]
    raise VtmlirError(f"{where}: error: cannot tell the entry function: the module has no @main and "
                      f"{len(public)} public functions; pass entry=...")


def signature_of(func_op: ir.Operation) -> Signature:
    name = ir.StringAttr(func_op.attributes["sym_name"]).value
    ftype = ir.FunctionType(ir.TypeAttr(func_op.attributes["function_type"]).value)
    where = format_location(func_op.location, "<module>")
    inputs = tuple(TensorSpec.from_type(t, f"input {i} of @{name}", where) for i, t in enumerate(ftype.inputs))
    results = tuple(TensorSpec.from_type(t, f"result {i} of @{name}", where) for i, t in enumerate(ftype.results))
    return Signature(name, inputs, results)


# Values crossing the boundary: what a compiled function is called with and returns.


def to_torch(array: np.ndarray):
    """A torch tensor sharing `array`'s memory (bf16 through its bits: torch has no numpy bf16)."""
    import torch

    if array.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(array)


def to_numpy(value, index: int) -> np.ndarray:
    """Input `index` (a torch tensor, numpy array or Python scalar) as a C-contiguous numpy array."""
    import torch

    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().contiguous()
        if value.dtype == torch.bfloat16:
            value = value.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        else:
            value = value.numpy()
    if not isinstance(value, np.ndarray):
        if isinstance(value, (bool, int, float, np.number)):
            value = np.asarray(value)
        else:
            raise VtmlirError(f"error: input {index} is a {type(value).__name__}; pass torch tensors or numpy arrays")
    return np.ascontiguousarray(value)
