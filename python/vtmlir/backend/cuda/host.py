"""The host side of a lowered module as an explicit program: buffers, constant uploads, kernel launches.

After `lower_to_nvvm`, the host function (`@main`) holds only buffer bookkeeping and
`gpu.launch_func`s. `build_host_program` reads it into a `HostProgram` — an ordered list of steps a
runtime executes (`vtmlir.backend.cuda.runtime`) and a user can print. Static shapes only: every
launch size, view offset, size and stride must be a constant.

Views (`memref.subview`, `expand_shape`, `collapse_shape`, `cast`, `reinterpret_cast`) cost nothing at
run time: they become `MemrefView`s — a buffer plus (offset, sizes, strides) in elements, read off the
result's strided layout — and a kernel gets the view's descriptor.

Kernel arguments follow the calling convention of `convert-gpu-to-nvvm`: a memref of rank r becomes
(allocated ptr, aligned ptr, offset, size_0..size_{r-1}, stride_0..stride_{r-1}), an `index` an i64.
`Launch.params()` expands them, and `build_host_program` checks that expansion against the kernel's
`llvm.func` signature, so a convention change is an error at compile time, not a wrong result.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import ml_dtypes
import numpy as np
from torch_mlir import ir

from ...errors import VtmlirError, format_location
from ...ir_constants import elements_array

_DTYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "bf16": ml_dtypes.bfloat16,
           "i1": np.bool_, "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
           "index": np.int64}
GRID_LIMITS = (2**31 - 1, 65535, 65535)
MAX_THREADS_PER_BLOCK = 1024


@dataclass
class Buffer:
    """A device allocation. `role` is "input", "output", "constant" or "temporary"."""

    id: int
    shape: tuple[int, ...]
    dtype: str
    role: str
    name: str = ""

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(numpy_dtype(self.dtype)).itemsize


@dataclass(frozen=True)
class MemrefView:
    """A strided view of a buffer (all in elements)."""

    buffer: int
    offset: int
    sizes: tuple[int, ...]
    strides: tuple[int, ...]


@dataclass(frozen=True)
class Scalar:
    """A scalar kernel argument: an LLVM type name (i64, i32, f32, f64, i1, ...) and its value."""

    type: str
    value: int | float


@dataclass(frozen=True)
class BufferPointer:
    """The device address of a buffer, as a kernel parameter."""

    buffer: int


@dataclass
class Allocate:
    buffer: Buffer

    def __str__(self):
        return f"allocate b{self.buffer.id}: {'x'.join(map(str, self.buffer.shape)) or 'scalar'} {self.buffer.dtype}"


@dataclass
class UploadConstant:
    buffer: Buffer
    data: np.ndarray = field(repr=False)

    def __str__(self):
        return f"upload b{self.buffer.id} <- @{self.buffer.name} ({self.data.nbytes} bytes)"


@dataclass
class Launch:
    """Launch `kernel` (its gpu.module symbol; entry function `function`) on grid × block threads."""

    kernel: str
    function: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    args: list  # MemrefView | Scalar, as in the gpu.launch_func
    param_types: list[str]  # the kernel llvm.func's parameter types after expansion

    def params(self) -> list:
        """The flat parameter list: `BufferPointer`s and `Scalar`s, one per llvm.func parameter."""
        flat = []
        for arg in self.args:
            if isinstance(arg, MemrefView):
                flat += [BufferPointer(arg.buffer), BufferPointer(arg.buffer), Scalar("i64", arg.offset)]
                flat += [Scalar("i64", s) for s in arg.sizes] + [Scalar("i64", s) for s in arg.strides]
            else:
                flat.append(arg)
        return flat

    def __str__(self):
        args = ", ".join(f"b{a.buffer}[+{a.offset}]" if isinstance(a, MemrefView) else f"{a.value}:{a.type}"
                         for a in self.args)
        return f"launch {self.kernel} grid={self.grid} block={self.block} ({args})"


@dataclass
class Free:
    buffer: int

    def __str__(self):
        return f"free b{self.buffer}"


@dataclass
class HostProgram:
    """Buffers and steps of the host function. `inputs`/`outputs` are the function's arguments in order
    (outputs are the trailing out-params that bufferization made of the results); `results` the
    buffer holding each result, in order: an output, or a donated input updated in place
    (`compile(..., donate=...)`); None means the outputs."""

    function: str
    buffers: dict[int, Buffer]
    inputs: list[int]
    outputs: list[int]
    steps: list
    results: list[int] | None = None

    @property
    def result_buffers(self) -> list[int]:
        return self.outputs if self.results is None else self.results

    def launches(self) -> list[Launch]:
        return [s for s in self.steps if isinstance(s, Launch)]

    def __str__(self):
        head = (f"host program @{self.function}: inputs {[f'b{i}' for i in self.inputs]}, "
                f"outputs {[f'b{i}' for i in self.outputs]}")
        if self.results is not None:
            head += f", results {[f'b{i}' for i in self.results]}"
        return "\n".join([head] + [f"  {step}" for step in self.steps])


def numpy_dtype(name: str):
    dtype = _DTYPES.get(name)
    if dtype is None:
        raise VtmlirError(f"error: element type {name} is not supported by the CUDA runtime yet")
    return dtype


def build_host_program(module: ir.Module, num_outputs: int, function: str = "main",
                       result_arguments: list[int] | None = None) -> HostProgram:
    """Read the host function of a module lowered by `lower_to_nvvm` into a `HostProgram`.
    `result_arguments` (from `bufferize` with donated arguments): per result, the input argument
    that holds it, or -1 for the next out-parameter."""
    program = _HostReader(module, num_outputs, function).read()
    if result_arguments is not None:
        fresh = iter(program.outputs)
        program.results = [program.inputs[a] if a >= 0 else next(fresh) for a in result_arguments]
    return program


class _HostReader:
    def __init__(self, module: ir.Module, num_outputs: int, function: str):
        self.module = module
        self.num_outputs = num_outputs
        self.function = function
        self.values: dict = {}  # ir.Value → int/float (constants) or MemrefView
        self.buffers: dict[int, Buffer] = {}
        self.steps: list = []
        self.globals = {}
        self.kernels = {}
        for op in module.body.operations:
            name = op.operation.name
            if name == "memref.global":
                self.globals[ir.StringAttr(op.attributes["sym_name"]).value] = op
            elif name == "gpu.module":
                self.kernels[ir.StringAttr(op.attributes["sym_name"]).value] = op

    def read(self) -> HostProgram:
        func_op = next((op for op in self.module.body.operations if op.operation.name == "func.func"
                        and ir.StringAttr(op.attributes["sym_name"]).value == self.function), None)
        if func_op is None:
            raise VtmlirError(f"error: the module has no host function @{self.function}")
        args = list(func_op.regions[0].blocks[0].arguments)
        if self.num_outputs > len(args):
            raise VtmlirError(f"error: @{self.function} has {len(args)} arguments, fewer than its "
                              f"{self.num_outputs} outputs")
        inputs, outputs = [], []
        for i, arg in enumerate(args):
            is_output = i >= len(args) - self.num_outputs
            if not isinstance(arg.type, ir.MemRefType):
                raise VtmlirError(f"error: argument {i} of @{self.function} has type {arg.type}; "
                                  "the CUDA runtime takes memrefs (tensors) only")
            view = self._new_buffer(arg.type, "output" if is_output else "input", f"arg{i}")
            (outputs if is_output else inputs).append(view.buffer)
            self.values[arg] = view
        for op in func_op.regions[0].blocks[0].operations:
            self._step(op.operation)
        return HostProgram(self.function, self.buffers, inputs, outputs, self.steps)

    # -- values -------------------------------------------------------------------------------------

    def _new_buffer(self, mtype: ir.MemRefType, role: str, name: str = "") -> MemrefView:
        if not mtype.has_static_shape:
            raise VtmlirError(f"error: dynamic shape {mtype} is not supported by the CUDA backend yet")
        dtype = str(mtype.element_type)
        numpy_dtype(dtype)
        buf = Buffer(len(self.buffers), tuple(mtype.shape), dtype, role, name)
        self.buffers[buf.id] = buf
        strides, offset = mtype.get_strides_and_offset()
        if offset != 0 or tuple(strides) != _contiguous(buf.shape):
            raise VtmlirError(f"error: buffer type {mtype} is not contiguous; the CUDA backend allocates "
                              "dense buffers only")
        return MemrefView(buf.id, 0, tuple(buf.shape), tuple(strides))

    def _value(self, value, op):
        if value not in self.values:
            raise VtmlirError(f"{format_location(op.location)}: error: operand of '{op.name}' is not "
                              "computed on the host by a supported op")
        return self.values[value]

    def _constant(self, value, op, what: str) -> int:
        result = self._value(value, op)
        if not isinstance(result, int):
            raise VtmlirError(f"{format_location(op.location)}: error: {what} of '{op.name}' is not a constant")
        return result

    # -- ops ----------------------------------------------------------------------------------------

    def _step(self, op) -> None:
        name = op.name
        if name == "arith.constant":
            self.values[op.results[0]] = self._constant_value(op)
        elif name in ("memref.alloc", "memref.alloca"):
            if len(op.operands):
                raise VtmlirError(f"{format_location(op.location)}: error: dynamic '{name}' is not supported")
            view = self._new_buffer(op.results[0].type, "temporary")
            self.steps.append(Allocate(self.buffers[view.buffer]))
            self.values[op.results[0]] = view
        elif name == "memref.get_global":
            symbol = ir.FlatSymbolRefAttr(op.attributes["name"]).value
            view = self._new_buffer(op.results[0].type, "constant", symbol)
            buf = self.buffers[view.buffer]
            self.steps.append(Allocate(buf))
            self.steps.append(UploadConstant(buf, self._global_data(symbol, buf)))
            self.values[op.results[0]] = view
        elif name in ("memref.subview", "memref.expand_shape", "memref.collapse_shape", "memref.cast",
                      "memref.reinterpret_cast"):
            source = self._value(op.operands[0], op)
            self.values[op.results[0]] = self._view(op, source)
        elif name == "memref.dealloc":
            self.steps.append(Free(self._value(op.operands[0], op).buffer))
        elif name == "gpu.launch_func":
            self.steps.append(self._launch(op))
        elif name == "func.return":
            pass
        else:
            raise VtmlirError(f"{format_location(op.location)}: error: op '{name}' in the host function "
                              "is not supported by the CUDA backend (the GPU lowering left it on the host)")

    def _constant_value(self, op):
        """An `arith.constant` on the host: a Python int (integers, `index`, i1 `true`/`false`), a
        float, or a numpy array for a shaped constant (splat or dense), read through its attribute."""
        attr = op.attributes["value"]
        if isinstance(attr, ir.BoolAttr):
            return int(attr.value)
        if isinstance(attr, (ir.IntegerAttr, ir.FloatAttr)):
            return attr.value
        if isinstance(attr, ir.DenseElementsAttr):
            shaped = ir.ShapedType(attr.type)
            dtype = numpy_dtype(str(shaped.element_type))
            if attr.is_splat:
                return np.full(tuple(shaped.shape), attr.get_splat_value().value, dtype=dtype)
            return np.array(attr, dtype=dtype).reshape(tuple(shaped.shape))
        raise VtmlirError(f"{format_location(op.location)}: error: host constant of type {op.results[0].type} "
                          f"({type(attr).__name__}) is not supported by the CUDA backend")

    def _view(self, op, source: MemrefView) -> MemrefView:
        mtype = op.results[0].type
        if not mtype.has_static_shape:
            raise VtmlirError(f"{format_location(op.location)}: error: dynamic view {mtype} is not supported")
        strides, offset = mtype.get_strides_and_offset()
        if any(mtype.is_dynamic_stride_or_offset(v) for v in list(strides) + [offset]):
            if op.name == "memref.cast" and tuple(mtype.shape) == source.sizes:
                return source
            raise VtmlirError(f"{format_location(op.location)}: error: view {mtype} has a dynamic "
                              "offset or stride; the CUDA backend needs static ones")
        return MemrefView(source.buffer, int(offset), tuple(mtype.shape), tuple(int(s) for s in strides))

    def _launch(self, op) -> Launch:
        launch = op.opview
        kernel_ref = ir.SymbolRefAttr(op.attributes["kernel"]).value  # [module, function]
        module_name, function = kernel_ref[0], kernel_ref[-1]
        if len(launch.asyncDependencies) or launch.dynamicSharedMemorySize is not None:
            raise VtmlirError(f"{format_location(op.location)}: error: async or dynamic-shared-memory "
                              "launches are not supported yet")
        grid = tuple(self._constant(v, op, "grid size") for v in
                     (launch.gridSizeX, launch.gridSizeY, launch.gridSizeZ))
        block = tuple(self._constant(v, op, "block size") for v in
                      (launch.blockSizeX, launch.blockSizeY, launch.blockSizeZ))
        for axis, (g, limit) in enumerate(zip(grid, GRID_LIMITS)):
            if g > limit:
                raise VtmlirError(f"{format_location(op.location)}: error: kernel {module_name}: grid size "
                                  f"{g} along {'xyz'[axis]} exceeds the CUDA limit {limit}")
        if int(np.prod(block)) > MAX_THREADS_PER_BLOCK:
            raise VtmlirError(f"error: kernel {module_name}: {int(np.prod(block))} threads per block "
                              f"exceed {MAX_THREADS_PER_BLOCK}")
        args = []
        for value in launch.kernelOperands:
            v = self._value(value, op)
            if isinstance(v, MemrefView):
                args.append(v)
            elif isinstance(v, np.ndarray):
                raise VtmlirError(f"{format_location(op.location)}: error: kernel {module_name} takes the "
                                  f"shaped host constant {value.type} by value; the CUDA backend passes "
                                  "buffers and scalars only")
            else:
                args.append(Scalar(_llvm_scalar_type(value.type), v))
        step = Launch(module_name, function, grid, block, args, self._kernel_param_types(module_name, function))
        expanded = [("ptr" if isinstance(p, BufferPointer) else p.type) for p in step.params()]
        if expanded != step.param_types:
            raise VtmlirError(f"error: kernel {module_name}: the launch passes ({', '.join(expanded)}) but the "
                              f"kernel takes ({', '.join(step.param_types)})")
        return step

    def _kernel_param_types(self, module_name: str, function: str) -> list[str]:
        gpu_module = self.kernels.get(module_name)
        if gpu_module is None:
            raise VtmlirError(f"error: gpu.launch_func refers to unknown kernel module @{module_name}")
        for op in gpu_module.regions[0].blocks[0].operations:
            if op.operation.name == "llvm.func" and ir.StringAttr(op.attributes["sym_name"]).value == function:
                return [_llvm_type_name(a.type) for a in op.regions[0].blocks[0].arguments]
        raise VtmlirError(f"error: kernel @{module_name}::@{function} is not an llvm.func "
                          "(was the module lowered to NVVM?)")

    # -- constants ----------------------------------------------------------------------------------

    def _global_data(self, symbol: str, buf: Buffer) -> np.ndarray:
        glob = self.globals.get(symbol)
        if glob is None or "initial_value" not in glob.attributes:
            raise VtmlirError(f"error: memref.global @{symbol} has no initial value")
        try:  # dense or dense_resource, read through the bindings (vtmlir.ir_constants)
            data = elements_array(glob.attributes["initial_value"])
        except VtmlirError as err:
            raise VtmlirError(f"error: memref.global @{symbol}: {err}") from None
        if data is None:
            raise VtmlirError(f"error: memref.global @{symbol}: its initial value is not dense data")
        if data.size != int(np.prod(buf.shape, dtype=np.int64)):
            raise VtmlirError(f"error: memref.global @{symbol}: initial value holds {data.size} elements, "
                              f"the type needs {int(np.prod(buf.shape))}")
        return np.ascontiguousarray(data.reshape(buf.shape), dtype=numpy_dtype(buf.dtype))


def _contiguous(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, acc = [], 1
    for size in reversed(shape):
        strides.append(acc)
        acc *= size
    return tuple(reversed(strides))


def _llvm_scalar_type(t: ir.Type) -> str:
    text = str(t)
    return "i64" if text == "index" else text


def _llvm_type_name(t: ir.Type) -> str:
    text = str(t)
    return "ptr" if text.startswith("!llvm.ptr") else text
