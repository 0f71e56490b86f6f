"""Streaming operator fusion for dynamic graphs (Fang et al., DVM, §5.2 "Dynamic computation graphs",
Fig. 10).

When the graph structure is only known while the model runs (Python control flow, data-dependent
branches), operators are not executed one by one: each op is added to an *operator buffer* and the
fusion decision is made immediately, with the same rules as `dvm-fuse` but on the actual shapes and
the actual execution path:

- an elementwise op or a (keep-dim) reduction joins the buffer's vector kernel when its shape
  broadcasts with the kernel's iteration domain (same rank after right-alignment);
- a matmul starts a cube-vector kernel; elementwise ops over its [m, n] output join as epilogue;
- otherwise the buffer is flushed and the op starts a new one.

The buffer is flushed -- its graph compiled for the current shapes (tiling + encoding, cached per
graph structure and shapes) and run by the VM -- when the next op cannot fuse, or when a result is
needed on the host (`numpy()`, `item()`, `bool()`, `float()`, printing). Only the pending values
that are still referenced by a live `LazyTensor` become kernel outputs (Fig. 10: "adds the necessary
store operator"); intermediates that Python already dropped stay in local memory.

    fuser = StreamFuser()
    a, b, x, y = (fuser.tensor(v) for v in (a_np, b_np, x_np, y_np))
    t = x * 2.0 if bool(a > b) else x * 4.0      # bool(): flush of the compare, then a branch
    out = (t + y).numpy()                         # t and + y fuse into one kernel

Reductions keep their dimensions (size 1), like the VM's Sum/Max/Min.
"""

from __future__ import annotations

import time
import weakref

import numpy as np

from ..errors import VtmlirError
from .compile import compile_graph
from .graph import Graph, broadcast_shapes
from .isa import DType, Opcode
from .template import templates_of
from .tiling import Target


class LazyTensor:
    """A tensor that is either materialized (`_array`) or pending in the fuser's buffer."""

    __slots__ = ("fuser", "shape", "dtype", "_array", "_node", "_buffer", "__weakref__")

    def __init__(self, fuser, shape, dtype: DType, array=None, node=None, buffer=None):
        self.fuser, self.shape, self.dtype = fuser, tuple(shape), dtype
        self._array, self._node, self._buffer = array, node, buffer

    @property
    def pending(self) -> bool:
        return self._array is None

    # -- host access: flush ---------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        if self._array is None:
            self.fuser.flush()
        return self._array

    def item(self):
        return self.numpy().reshape(-1)[0].item()

    def __bool__(self):
        if int(np.prod(self.shape)) != 1:
            raise VtmlirError("the truth value of a tensor with more than one element is ambiguous")
        return bool(self.item())

    def __float__(self):
        return float(self.item())

    def __repr__(self):
        return f"LazyTensor({self.numpy()!r})"

    # -- ops ---------------------------------------------------------------------------------------
    def _bin(self, other, op):
        return self.fuser._elementwise(op, self, other)

    def __add__(self, o): return self._bin(o, "add")
    def __radd__(self, o): return self._bin(o, "add")
    def __sub__(self, o): return self._bin(o, "sub")
    def __rsub__(self, o): return self.fuser._elementwise("add", self.fuser._elementwise("mul", self, -1.0), o)
    def __mul__(self, o): return self._bin(o, "mul")
    def __rmul__(self, o): return self._bin(o, "mul")
    def __truediv__(self, o): return self._bin(o, "div")
    def __matmul__(self, o): return self.fuser.matmul(self, o)
    def __gt__(self, o): return self.fuser._compare(self, o, "GT")
    def __ge__(self, o): return self.fuser._compare(self, o, "GE")
    def __lt__(self, o): return self.fuser._compare(self, o, "LT")
    def __le__(self, o): return self.fuser._compare(self, o, "LE")
    def maximum(self, o): return self._bin(o, "maximum")
    def minimum(self, o): return self._bin(o, "minimum")
    def sqrt(self): return self.fuser._unary("sqrt", self)
    def exp(self): return self.fuser._unary("exp", self)
    def log(self): return self.fuser._unary("log", self)
    def abs(self): return self.fuser._unary("abs", self)
    def sum(self, axis): return self.fuser._reduce(Opcode.SUM, self, axis)
    def max(self, axis): return self.fuser._reduce(Opcode.REDUCE_MAX, self, axis)
    def min(self, axis): return self.fuser._reduce(Opcode.REDUCE_MIN, self, axis)
    def mean(self, axis): return self.fuser._reduce(Opcode.SUM, self, axis, mean=True)
    def astype(self, dtype): return self.fuser._cast(self, dtype)


class _Buffer:
    """The operator buffer: one fused kernel under construction."""

    def __init__(self, kind: str):
        self.kind = kind  # "vector" | "cube-vector"
        self.graph = Graph(f"stream.{kind}")
        self.inputs: list[np.ndarray] = []
        self.input_of: dict[int, object] = {}  # id(array) -> graph Value
        self.domain: tuple[int, ...] | None = None
        self.pending: list = []  # weakrefs to LazyTensors produced here
        self.ops = 0


class StreamFuser:
    """Lazy execution with streaming fusion (module docstring). `native=True` runs kernels on the
    VM compiled once through MLIR where it supports them; counters: `kernels_run`, `ops_fused`,
    `compile_seconds` (tiling + encoding of new shapes), `flushes` by reason and `history`
    (reason, kernel kind, fused ops, stored outputs) per kernel run."""

    def __init__(self, target: Target | None = None, native: bool = False):
        self.target = target or Target()
        self.native = native
        self.buffer: _Buffer | None = None
        self._kernels: dict = {}
        self._graphs: dict = {}  # graph structure -> the Graph compiled for it
        self.kernels_run = 0
        self.ops_fused = 0
        self.compile_seconds = 0.0
        self.flushes: dict[str, int] = {}
        self.history: list[tuple[str, str, int, int]] = []  # (reason, kind, ops, outputs) per kernel

    def compile_native(self) -> int:
        """JIT-compile the bytecode templates of every kernel structure seen so far (after a
        warm-up; `template.TemplateSet.compile_native`): later new shapes of those structures then
        compile natively. Returns how many template sets are native."""
        sets = [ts for g in self._graphs.values() for ts in templates_of(g).values()]
        for ts in sets:
            ts.compile_native()
        return sum(ts.native is not None for ts in sets)

    # -- inputs ------------------------------------------------------------------------------------
    def tensor(self, array) -> LazyTensor:
        a = np.ascontiguousarray(array)
        return LazyTensor(self, a.shape, DType.from_numpy(a.dtype), array=a)

    def _value_in(self, buf: _Buffer, t: LazyTensor):
        if not t.pending:
            key = id(t._array)
            if key not in buf.input_of:
                buf.input_of[key] = buf.graph.input(len(t.shape), t.dtype)
                buf.inputs.append(t._array)
            return buf.input_of[key]
        return t._node

    def _coerce(self, x, like: LazyTensor):
        if isinstance(x, LazyTensor):
            return x
        return self.tensor(np.full((1,) * max(len(like.shape), 1), x, dtype=like.dtype.numpy))

    # -- fusion decisions -------------------------------------------------------------------------
    def _admit(self, operands, shape, kind: str = "vector", reduces: bool = False) -> _Buffer:
        """The buffer that takes an op with these operands and result shape (flushing if needed)."""
        buf = self.buffer
        foreign = any(t.pending and t._buffer is not buf for t in operands)
        if buf is not None and not foreign:
            if buf.kind == "vector" and kind == "vector" and _joins(buf.domain, shape):
                return buf
            if buf.kind == "cube-vector" and kind == "vector" and not reduces and tuple(shape) == buf.domain \
                    and any(t.pending and t._buffer is buf for t in operands):
                return buf
        if buf is not None and buf.ops:
            self.flush("cannot fuse")
        self.buffer = _Buffer(kind)
        return self.buffer

    def _record(self, buf: _Buffer, node, shape, dtype) -> LazyTensor:
        buf.domain = tuple(shape) if buf.domain is None else broadcast_shapes([buf.domain, tuple(shape)])
        buf.ops += 1
        self.ops_fused += 1
        t = LazyTensor(self, shape, dtype, node=node, buffer=buf)
        buf.pending.append(weakref.ref(t))
        return t

    def _elementwise(self, op: str, a: LazyTensor, b):
        if not isinstance(b, LazyTensor) and op in ("add", "sub", "mul", "div") and a.dtype.is_float:
            buf = self._admit([a], a.shape)
            node = getattr(buf.graph, op)(self._value_in(buf, a), float(b))
            return self._record(buf, node, a.shape, a.dtype)
        b = self._coerce(b, a)
        shape = _shape(a.shape, b.shape)
        buf = self._admit([a, b], shape)
        node = getattr(buf.graph, op)(self._value_in(buf, a), self._value_in(buf, b))
        return self._record(buf, node, shape, a.dtype)

    def _compare(self, a: LazyTensor, b, cmp: str):
        b = self._coerce(b, a)
        shape = _shape(a.shape, b.shape)
        buf = self._admit([a, b], shape)
        node = buf.graph.cmp(self._value_in(buf, a), self._value_in(buf, b), cmp)
        return self._record(buf, node, shape, DType.BOOL)

    def where(self, cond: LazyTensor, a, b) -> LazyTensor:
        a = self._coerce(a, cond if not isinstance(b, LazyTensor) else b) if not isinstance(a, LazyTensor) else a
        b = self._coerce(b, a)
        shape = _shape(_shape(cond.shape, a.shape), b.shape)
        buf = self._admit([cond, a, b], shape)
        node = buf.graph.select(self._value_in(buf, cond), self._value_in(buf, a), self._value_in(buf, b))
        return self._record(buf, node, shape, a.dtype)

    def _unary(self, op: str, a: LazyTensor):
        buf = self._admit([a], a.shape)
        return self._record(buf, getattr(buf.graph, op)(self._value_in(buf, a)), a.shape, a.dtype)

    def _cast(self, a: LazyTensor, dtype):
        dt = dtype if isinstance(dtype, DType) else DType.from_numpy(dtype)
        buf = self._admit([a], a.shape)
        return self._record(buf, buf.graph.cast(self._value_in(buf, a), dt), a.shape, dt)

    def _reduce(self, opc, a: LazyTensor, axis, mean=False):
        axes = (axis,) if isinstance(axis, int) else tuple(axis)
        buf = self._admit([a], a.shape, reduces=True)
        node = buf.graph.reduce(opc, self._value_in(buf, a), axes, mean=mean)
        norm = {x % len(a.shape) for x in axes}
        shape = tuple(1 if d in norm else n for d, n in enumerate(a.shape))
        return self._record(buf, node, shape, a.dtype)

    def matmul(self, a: LazyTensor, b: LazyTensor) -> LazyTensor:
        if len(a.shape) != 2 or len(b.shape) != 2 or a.shape[1] != b.shape[0]:
            raise VtmlirError(f"matmul: shapes {list(a.shape)} and {list(b.shape)} do not multiply")
        if self.buffer is not None and self.buffer.ops:
            self.flush("cannot fuse")  # a cube kernel starts; its operands must be in memory
        buf = self.buffer = _Buffer("cube-vector")
        node = buf.graph.matmul(self._value_in(buf, a), self._value_in(buf, b))
        return self._record(buf, node, (a.shape[0], b.shape[1]), a.dtype)

    # -- flush ---------------------------------------------------------------------------------
    def flush(self, reason: str = "host needs a result") -> None:
        buf = self.buffer
        self.buffer = None
        if buf is None or not buf.ops:
            return
        self.flushes[reason] = self.flushes.get(reason, 0) + 1
        live = [t for t in (r() for r in buf.pending) if t is not None and t.pending and t._buffer is buf]
        if not live:
            return
        g = buf.graph
        g.output(*[t._node for t in live])
        shapes = [a.shape for a in buf.inputs]
        structure = (tuple(g.nodes), tuple(g.inputs), tuple(g.outputs), tuple(a.dtype.str for a in buf.inputs))
        # one Graph object per structure: its bytecode templates serve every later shape
        g = self._graphs.setdefault(structure, g)
        key = (structure, tuple(shapes))
        entry = self._kernels.get(key)
        if entry is None:
            start = time.perf_counter()
            kernel = compile_graph(g, shapes, self.target)
            self.compile_seconds += time.perf_counter() - start
            use_native = self.native and kernel.native_reason is None  # a template's kernel: no decode
            entry = self._kernels[key] = (kernel, use_native)
        kernel, use_native = entry
        outs = kernel(*buf.inputs, native=use_native, cores=self.target.cores if use_native else None)
        self.kernels_run += 1
        self.history.append((reason, buf.kind, buf.ops, len(live)))
        for t, o in zip(live, outs):
            t._array = o.reshape(t.shape)
            t._node = t._buffer = None


def _joins(domain, shape) -> bool:
    if domain is None:
        return True
    if len(domain) != len(shape):
        return False
    return all(a == b or a == 1 or b == 1 for a, b in zip(domain, shape))


def _shape(a, b):
    try:
        return broadcast_shapes([tuple(a), tuple(b)])
    except ValueError:
        raise VtmlirError(f"shapes {list(a)} and {list(b)} do not broadcast") from None
