"""The calling convention of a compiled function: its arguments and results.

Read from the graph-level `func.func` (before bufferization turns results into out-parameters), so
both backends check user inputs the same way and hand results back the same way:

- arguments and results are ranked tensors of the element types in `_NUMPY_DTYPES` (complex
  included) or scalars (`i64`, `f64`, `i1`: torch's int, float and bool). Scalars cross the
  boundary as 0-d tensors (`box_scalars` rewrites the entry before bufferization); a scalar result
  comes back as a Python number, as PyTorch returns it.
- MLIR integers are signless; `vtmlir.element_type = ui8` on an argument or result (written by
  `import_torch` for torch.uint8 tensors) keeps the unsigned type, so a uint8 result is a uint8
  tensor. A signless `i8` argument takes int8 and uint8 arrays alike (the same bits).
- `vtmlir.input_mutations` on the function (written by `import_torch`): per result, the index of
  the user input that result is the new value of (the module wrote the input in place: `add_`,
  `copy_`, `out=`), -1 for a value the module returns, -2 for a new value of one of the module's
  own buffers (they are constants of the compiled function). Only the module's own results are
  returned; a written input is updated only when donated (`vtmlir.compile` refuses otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np
from torch_mlir import ir
from torch_mlir.dialects import tensor

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
    "complex<f32>": np.complex64,
    "complex<f64>": np.complex128,
}
_BF16 = np.dtype(ml_dtypes.bfloat16)
# Argument/result attributes and the function attribute `import_torch` writes (module docstring).
ELEMENT_TYPE = "vtmlir.element_type"
INPUT_MUTATIONS = "vtmlir.input_mutations"
RETURNED, BUFFER_UPDATE = -1, -2


@dataclass(frozen=True)
class TensorSpec:
    """Shape (None for a dynamic dim) and element type of one argument or result; `scalar` for a
    scalar (a Python number at the boundary, a 0-d tensor inside). Python numbers a module was
    traced with are constants of the export, not arguments (`frontend/torch_calls.py` checks them)."""

    shape: tuple[int | None, ...]
    element_type: str
    scalar: bool = False

    @property
    def numpy_dtype(self) -> np.dtype:
        return np.dtype(_NUMPY_DTYPES[self.element_type])

    @property
    def is_static(self) -> bool:
        return all(d is not None for d in self.shape)

    def accepts(self, dtype: np.dtype) -> bool:
        """Whether an array of `dtype` can be passed: its own dtype, or for signless i8 either byte type."""
        return dtype == self.numpy_dtype or (self.element_type == "i8" and dtype == np.uint8)

    def __str__(self) -> str:
        if self.scalar:
            return self.element_type
        dims = "x".join("?" if d is None else str(d) for d in self.shape)
        return f"tensor<{dims + 'x' if dims else ''}{self.element_type}>"

    @staticmethod
    def from_type(t: ir.Type, what: str, attrs: dict | None = None, where: str = "") -> "TensorSpec":
        """The spec of type `t` of `what` (e.g. "input 0 of @main") with its argument or result
        attributes `attrs`; errors start with `where` (`file:line:col`, the function's location) when given."""
        prefix = f"{where}: error:" if where else "error:"
        t = t.maybe_downcast()
        attrs = attrs or {}
        if isinstance(t, (ir.IntegerType, ir.F64Type, ir.F32Type)):
            scalar, elt, shape = True, str(t), ()
        elif isinstance(t, ir.RankedTensorType):
            scalar, elt = False, str(t.element_type)
            shape = tuple(None if t.is_dynamic_dim(i) else t.get_dim_size(i) for i in range(t.rank))
        else:
            raise VtmlirError(f"{prefix} {what} has type {t}; only ranked tensors and scalars are supported "
                              "at function boundaries")
        if ELEMENT_TYPE in attrs:
            elt = str(ir.TypeAttr(attrs[ELEMENT_TYPE]).value)
        if elt not in _NUMPY_DTYPES:
            raise VtmlirError(f"{prefix} {what} has element type {elt}, which vtmlir cannot pass to or from Python yet")
        return TensorSpec(shape, elt, scalar)


@dataclass(frozen=True)
class Signature:
    name: str
    inputs: tuple[TensorSpec, ...]
    results: tuple[TensorSpec, ...]
    # per result: RETURNED, BUFFER_UPDATE, or the index of the input it is the new value of
    writes: tuple[int, ...] = ()

    def __post_init__(self):
        if not self.writes:
            object.__setattr__(self, "writes", (RETURNED,) * len(self.results))

    def __str__(self) -> str:
        ins = ", ".join(map(str, self.inputs))
        outs = ", ".join(str(spec) for spec, w in zip(self.results, self.writes) if w == RETURNED)
        return f"@{self.name}({ins}) -> ({outs})"

    @property
    def written_inputs(self) -> dict[int, int]:
        """{input index: result index} for the inputs the module writes in place."""
        return {w: r for r, w in enumerate(self.writes) if w >= 0}

    def check_inputs(self, arrays: list[np.ndarray]) -> None:
        """Raise a VtmlirError naming the first argument whose count, shape or dtype is wrong."""
        if len(arrays) != len(self.inputs):
            raise VtmlirError(f"error: @{self.name} takes {len(self.inputs)} inputs, got {len(arrays)}")
        for i, (array, spec) in enumerate(zip(arrays, self.inputs)):
            if not spec.accepts(array.dtype):
                raise VtmlirError(f"error: input {i} of @{self.name} must have dtype {spec.numpy_dtype}, got {array.dtype}")
            ok = len(array.shape) == len(spec.shape) and all(
                d is None or d == n for d, n in zip(spec.shape, array.shape)
            )
            if not ok:
                raise VtmlirError(f"error: input {i} of @{self.name} must have shape {spec}, got {tuple(array.shape)}")

    def deliver(self, values: list[np.ndarray], args: tuple) -> tuple:
        """What the module returns, as a tuple, from the arrays of all results (`values`, in result
        order): the new value of an input the module writes goes into that input (`args[i]`,
        donated), a scalar becomes a Python number, a tensor a torch tensor."""
        returned = []
        for value, spec, w in zip(values, self.results, self.writes):
            if value.dtype != spec.numpy_dtype and value.dtype.itemsize == spec.numpy_dtype.itemsize \
                    and value.dtype.kind in "iub" and spec.numpy_dtype.kind in "iub":
                value = value.view(spec.numpy_dtype)   # the CUDA runtime reads buffers back signless
            if w >= 0:
                _write_back(args[w], value, w)
            elif w == RETURNED:
                returned.append(value.reshape(()).item() if spec.scalar else to_torch(value))
        return tuple(returned)


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


def attr_dicts(func_op: ir.Operation, key: str, n: int) -> list[dict]:
    """The per-argument (`arg_attrs`) or per-result (`res_attrs`) attributes of `func_op` as dicts."""
    if key not in func_op.attributes:
        return [{} for _ in range(n)]
    return [{a.name: a.attr for a in ir.DictAttr(d)} for d in ir.ArrayAttr(func_op.attributes[key])]


def signature_of(func_op: ir.Operation) -> Signature:
    name = ir.StringAttr(func_op.attributes["sym_name"]).value
    ftype = ir.FunctionType(ir.TypeAttr(func_op.attributes["function_type"]).value)
    where = format_location(func_op.location, "<module>")
    arg_attrs = attr_dicts(func_op, "arg_attrs", len(ftype.inputs))
    res_attrs = attr_dicts(func_op, "res_attrs", len(ftype.results))
    inputs = tuple(TensorSpec.from_type(t, f"input {i} of @{name}", a, where)
                   for i, (t, a) in enumerate(zip(ftype.inputs, arg_attrs)))
    results = tuple(TensorSpec.from_type(t, f"result {i} of @{name}", a, where)
                    for i, (t, a) in enumerate(zip(ftype.results, res_attrs)))
    writes = ()
    if INPUT_MUTATIONS in func_op.attributes:
        writes = tuple(ir.DenseI64ArrayAttr(func_op.attributes[INPUT_MUTATIONS]))
        if len(writes) != len(results):
            raise VtmlirError(f"{where}: error: @{name}: {INPUT_MUTATIONS} has {len(writes)} entries for "
                              f"{len(results)} results")
    return Signature(name, inputs, results, writes)


def box_scalars(func_op: ir.Operation) -> None:
    """Make the scalar arguments and results of `func_op` 0-d tensors (`tensor.extract` at the entry,
    `tensor.from_elements` before the return), so that both backends pass every value as a buffer."""
    block = func_op.regions[0].blocks[0]
    ftype = ir.FunctionType(ir.TypeAttr(func_op.attributes["function_type"]).value)

    def boxed(t):
        t = t.maybe_downcast()
        return t if isinstance(t, ir.ShapedType) else ir.RankedTensorType.get([], t)

    with func_op.context, func_op.location:
        inputs = [boxed(t) for t in ftype.inputs]
        results = [boxed(t) for t in ftype.results]
    if inputs == list(ftype.inputs) and results == list(ftype.results):
        return
    first = next(iter(block.operations)).operation
    ret = [op.operation for op in block.operations][-1]
    with func_op.context, func_op.location:
        for arg, t in zip(list(block.arguments), inputs):
            if arg.type == t:
                continue
            scalar_type = arg.type
            uses = [(getattr(u.owner, 'operation', u.owner), u.operand_number) for u in arg.uses]
            arg.set_type(t)
            with ir.InsertionPoint(first):
                value = tensor.ExtractOp(arg, [], results=[scalar_type]).result
            for owner, number in uses:
                owner.operands[number] = value
        with ir.InsertionPoint(ret):
            for i, (value, t) in enumerate(zip(list(ret.operands), results)):
                if value.type != t:
                    ret.operands[i] = tensor.FromElementsOp(t, [value]).result
        func_op.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, results))


# Values crossing the boundary: what a compiled function is called with and returns.


def to_torch(array: np.ndarray):
    """A torch tensor sharing `array`'s memory (bf16 through its bits: torch has no numpy bf16)."""
    from torch import bfloat16, from_numpy  # deferred: torch is heavy; loaded on first use

    if array.dtype is _BF16:  # numpy dtypes are singletons (and this is on every call's path)
        return from_numpy(array.view(np.int16)).view(bfloat16)
    return from_numpy(array)


def to_numpy(value, index: int) -> np.ndarray:
    """Input `index` (a torch tensor, numpy array or Python scalar) as a C-contiguous numpy array
    (of the same rank: a 0-d tensor stays 0-d)."""
    import torch  # deferred: torch is heavy; loaded on first use

    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().contiguous()
        if value.dtype == torch.bfloat16:
            value = value.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        else:
            value = value.resolve_conj().resolve_neg().numpy()
    if not isinstance(value, np.ndarray):
        if isinstance(value, (bool, int, float, complex, np.number, np.bool_)):
            value = np.asarray(value)
        else:
            raise VtmlirError(f"error: input {index} is a {type(value).__name__}; pass torch tensors or numpy arrays")
    return value if value.flags.c_contiguous else np.ascontiguousarray(value)


def _write_back(target, value: np.ndarray, index: int) -> None:
    """Store `value` into the caller's input `target` (a donated tensor the module writes), unless
    the compiled code already wrote it there."""
    import torch  # deferred: torch is heavy; loaded on first use

    if isinstance(target, torch.Tensor):
        source = to_torch(value)
        if target.device.type == "cpu" and target.is_contiguous() and target.data_ptr() == source.data_ptr():
            return
        with torch.no_grad():
            target.copy_(source.reshape(target.shape))
    elif isinstance(target, np.ndarray):
        if target.ctypes.data != value.ctypes.data or target.strides != value.strides:
            np.copyto(target, value.reshape(target.shape), casting="unsafe")
    else:
        raise VtmlirError(f"error: input {index} is written in place by the module, but a "
                          f"{type(target).__name__} cannot be; pass a tensor")
