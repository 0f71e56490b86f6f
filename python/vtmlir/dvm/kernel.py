"""`CompiledKernel`, one compiled DVM kernel instance, and the element strides it is keyed by.

Made by the reference lowering (`compile.compile_graph` with ``template=False``), by the bytecode
templates (`template.py`) and by the native fill (`native_fill.py`); run on the numpy VM (`vm.py`) or
the native one (`native.py`).
"""

from __future__ import annotations

import functools
import math
import threading

import numpy as np

from ..backend.cpu.calling import ResultBuffers, data_pointer
from .bytecode import decode
from .graph import Graph, GraphError
from .isa import Program
from .native import BytecodeError, launch_header, native_vm, unsupported_reason
from .tiling import MatmulTiling, VectorTiling
from .vm import execute


# --------------------------------------------------------------------------------- results
class _Unchecked:
    """`CompiledKernel.native_reason` not known yet: the bytecode was not made by a template."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNCHECKED"


UNCHECKED = _Unchecked()

class CompiledKernel:
    """One compiled kernel instance: its bytecode and what is needed to call it (`graph`,
    `bytecode`, `tiling`, `input_shapes`, `input_strides`, `output_shapes`, `output_dtypes`).

    A new shape builds only the words, the shapes and this object (`template.py`,
    `native_fill.py`); what running does not need is derived when first read: `program` (the
    bytecode decoded, when read), `tiling` (the dataclass of the tiling fields the native compile
    wrote into `info`, an info record of `native_fill`) and the `input_strides` of dense inputs
    (None given: `__call__` checks contiguity instead). A plain class with slots: its constructor
    is part of every new shape's cost.

    `native_reason` says why the native VM cannot run the kernel (None: it can). A template gives
    it with the words: its guards hold `decode`'s checks (`bytecode.check_traced`) and the reason
    depends on the structure only, so such a kernel is never decoded before it runs. Any other
    kernel (``template=False``) is decoded -- validated -- at its first native run."""

    __slots__ = ("graph", "bytecode", "_tiling", "input_shapes", "_input_strides", "output_shapes",
                 "output_dtypes", "_tiling_of", "info", "_program", "_native", "_header", "native_call")

    def __init__(self, graph: Graph, bytecode: np.ndarray, tiling, input_shapes, input_strides, output_shapes,
                 output_dtypes, tiling_of=None, info=None, native_reason=UNCHECKED):
        self.graph, self.bytecode, self._tiling = graph, bytecode, tiling
        self.input_shapes, self._input_strides = input_shapes, input_strides
        self.output_shapes, self.output_dtypes = output_shapes, output_dtypes
        self._tiling_of, self.info, self._program = tiling_of, info, None
        self._native = native_reason
        self._header = None  # `native.launch_header` of the bytecode, read at the first native run
        # `_NativeCall` ``(inputs, cores) -> outputs or None``, made at the first native run; False: none
        self.native_call = None

    @property
    def tiling(self) -> VectorTiling | MatmulTiling:
        t = self._tiling
        if t is None:
            t = self._tiling = self._tiling_of(self.info)
        return t

    @property
    def input_strides(self) -> tuple[tuple[int, ...], ...]:
        st = self._input_strides
        if st is None:
            st = self._input_strides = tuple(map(cached_dense_strides, self.input_shapes))
        return st

    @property
    def template_index(self) -> int | None:
        """The template of its set that compiled it (natively compiled kernels)."""
        return None if self.info is None else self.info[0]

    @property
    def program(self) -> Program:
        p = self._program
        if p is None:
            p = self._program = decode(self.bytecode)
        return p

    @property
    def native_reason(self) -> str | None:
        """Why the native VM cannot run this kernel (None: it can). Known without decoding for a
        kernel a template made; else the bytecode is decoded (validated) here, once."""
        r = self._native
        if r is UNCHECKED:
            r = self._native = unsupported_reason(self.program)
        return r

    def _prepare_native(self):
        """Before the first native run: the check (`native_reason`, raising for a program the
        native VM cannot run), the header read once (the words never change) and, for a kernel
        compiled for dense inputs, its `_NativeCall` (False where there is none)."""
        reason = self.native_reason  # a template's kernel: known, no decode (see the class doc)
        if reason is not None:
            raise BytecodeError(f"dvm native vm: error: unsupported program: {reason}")
        if self._header is None:
            self._header = launch_header(self.bytecode)
        if self.native_call is None:
            dense = self._input_strides is None or self._input_strides == tuple(
                map(cached_dense_strides, self.input_shapes))
            self.native_call = (dense and _NativeCall.of(self, native_vm(), self._header)) or False
        return self.native_call

    def __repr__(self) -> str:
        return (f"CompiledKernel({self.graph.name}, inputs={list(self.input_shapes)}, "
                f"outputs={list(self.output_shapes)}, words={self.bytecode.size})")

    def __call__(self, *inputs, cores: int | None = None, native: bool = False):
        """Run on numpy arrays (of the compiled shapes and strides); returns the outputs.
        `native=True` runs the VM compiled once through MLIR (`native.py`) instead of the numpy
        reference; `cores` is N of Alg. 2 (native default 1)."""
        if native:
            launch = self.native_call
            if launch is None:
                launch = self._prepare_native()
            if launch:
                outs = launch(inputs, cores or 1)
                if outs is not None:
                    return outs

        flat, outs = self.arguments(inputs)
        if native:
            self._prepare_native()  # raises for a program the native VM cannot run
            native_vm()._launch(self.bytecode, flat + [o.reshape(-1) for o in outs], cores or 1, *self._header)
        else:
            execute(self.bytecode, flat + [o.reshape(-1) for o in outs], cores=cores)
        return outs

    def arguments(self, inputs) -> tuple[list, list]:
        """The VM's arguments for `inputs` (numpy arrays of the compiled shapes and strides): each
        input as the 1-d span of elements it covers (a view), and fresh outputs of the compiled
        shapes (the VM writes them flat). Raises `GraphError` for inputs it was not compiled for."""
        if len(inputs) != len(self.input_shapes):
            raise GraphError(f"{self.graph.name}: expected {len(self.input_shapes)} inputs, got {len(inputs)}")
        dense = self._input_strides is None  # compiled for dense inputs: numpy's C-contiguity is that
        flat = []
        for i, (a, shp) in enumerate(zip(inputs, self.input_shapes)):
            a = np.asarray(a)
            if a.shape != shp or not (a.flags.c_contiguous if dense else _element_strides(a) == self.input_strides[i]):
                raise GraphError(f"{self.graph.name}: input {i} has shape {list(a.shape)} and strides "
                                 f"{list(_element_strides(a))}, compiled for {list(shp)} / {list(self.input_strides[i])}")
            # a C-contiguous array's span is all of it: a reshape is a view, cheaper than as_strided
            flat.append(a.reshape(-1) if a.flags.c_contiguous and a.size else _flat_span(a))
        outs = [np.empty(s, dtype=d.numpy) for s, d in zip(self.output_shapes, self.output_dtypes)]
        return flat, outs


class _NativeCall:
    """The native run of a kernel compiled for dense inputs, prepared at its first run: the
    header's launch figures, per input the shape and dtype it takes, per output its shape and
    dtype, and, for one-core runs on the thread that prepared it (from the second on), a frame of
    its own with every word but the argument pointers written (`NativeVM.prepared_frame`; the static path's
    `DescriptorTable` words, as `backend/cpu/calling.py` keeps them per signature). A call checks
    each input (an ndarray of exactly that shape and dtype, C-contiguous), writes the pointers and
    runs; anything else gives None and takes the checked path of `CompiledKernel.__call__`."""

    __slots__ = ("vm", "code", "address", "nargs", "tiles", "local_bytes", "inputs", "outputs", "owner", "frame",
                 "buffers")

    @classmethod
    def of(cls, kernel: CompiledKernel, vm, header) -> _NativeCall | None:
        tiles, local_bytes, descs, address = header
        n = len(kernel.input_shapes)
        # a dense input is read over its whole extent: the header's element count is its size
        if any(numel != math.prod(shape) for shape, (_, numel) in zip(kernel.input_shapes, descs[:n])):
            return None
        self = cls()
        self.vm, self.code, self.address, self.nargs = vm, kernel.bytecode, address, len(descs)
        self.tiles, self.local_bytes = tiles, local_bytes
        self.inputs = [(tuple(shape), np.dtype(dt)) for shape, (dt, _) in zip(kernel.input_shapes, descs[:n])]
        self.outputs = [(tuple(shape), dt.numpy) for shape, dt in zip(kernel.output_shapes, kernel.output_dtypes)]
        self.buffers = ResultBuffers(self.outputs)  # a large output's memory recycled once nothing holds it
        self.owner = threading.get_ident()
        self.frame = None  # made at the second one-core run: a new shape's first run makes nothing more
        return self

    def _prepare_frame(self):
        frame = self.vm.prepared_frame(self.address, self.code.size, self.nargs, self.tiles, self.local_bytes)
        table = frame.table  # the buffers' sizes never change: written once
        for j, (shape, dt) in enumerate(self.inputs + self.outputs):
            table[5 * j + 3] = math.prod(shape) * np.dtype(dt).itemsize
        return frame

    def __call__(self, inputs, cores: int):
        if len(inputs) != len(self.inputs):
            return None
        own = cores == 1 and threading.get_ident() == self.owner
        if own and not self.frame:
            if self.frame is None:  # the first run: the thread's shared frame
                self.frame, own = False, False
            else:
                self.frame = self._prepare_frame()
        frame = self.frame if own else self.vm._frame()
        table = frame.table if own else frame.table_for(self.nargs)
        j = 0
        for a, (shape, dt) in zip(inputs, self.inputs):
            if (type(a) is not np.ndarray or a.shape != shape or (a.dtype is not dt and a.dtype != dt)
                    or not a.flags.c_contiguous):
                return None
            table[j] = table[j + 1] = data_pointer(a)
            table[j + 3] = a.nbytes
            j += 5
        outs = self.buffers.arrays()
        for o in outs:
            table[j] = table[j + 1] = data_pointer(o)
            table[j + 3] = o.nbytes
            j += 5
        if own:
            self.vm.run_prepared(frame)
        else:
            self.vm._dispatch(frame, self.address, self.code.size, self.nargs, self.tiles, self.local_bytes, cores)
        return outs


# A kernel whose arguments total fewer bytes than this runs on one core: handing tiles to the
# thread pool costs tens of µs (more on a loaded machine), more than such a kernel computes.
PARALLEL_MIN_BYTES = 64 * 1024


def launch_cores(kernel: CompiledKernel, target) -> int:
    """Alg. 2's N for `kernel`: the target's cores, one for a small kernel (`PARALLEL_MIN_BYTES`)."""
    if target.cores == 1:
        return 1
    g = kernel.graph
    dtypes = [g.nodes[i].dtype for i in g.inputs] + list(kernel.output_dtypes)
    nbytes = sum(math.prod(s) * d.itemsize
                 for s, d in zip(tuple(kernel.input_shapes) + tuple(kernel.output_shapes), dtypes))
    return 1 if nbytes < PARALLEL_MIN_BYTES else target.cores


def _element_strides(a: np.ndarray) -> tuple[int, ...]:
    st = []
    for s, n in zip(a.strides, a.shape):
        if n == 1:
            st.append(0)
            continue
        if s < 0 or s % a.itemsize:
            raise GraphError(f"unsupported array strides {a.strides} (negative or not element-aligned)")
        st.append(s // a.itemsize)
    return tuple(st)


def _flat_span(a: np.ndarray) -> np.ndarray:
    """The 1-d element range a strided array spans, starting at its first element (a view)."""
    span = 1 + sum((n - 1) * s for n, s in zip(a.shape, _element_strides(a)))
    return np.lib.stride_tricks.as_strided(a, shape=(span,), strides=(a.itemsize,))


def dense_strides(shape) -> tuple[int, ...]:
    st, acc = [], 1
    for n in reversed(shape):
        st.append(0 if n == 1 else acc)
        acc *= n
    st.reverse()
    return tuple(st)


# concrete shapes only (a traced `Sym` must not be hashed: that pins its value); the shapes of a new
# shape's inputs mostly recur (weights, biases), so their strides are looked up, not recomputed
cached_dense_strides = functools.lru_cache(maxsize=4096)(dense_strides)
