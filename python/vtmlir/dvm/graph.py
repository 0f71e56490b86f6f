"""Basic-operator computation graphs for the DVM operator compiler (Fang et al., DVM, §3, Fig. 5).

A `Graph` is the unit the bytecode compiler receives: a set of basic operators to fuse into one
kernel ("addmm is decomposed into matmul and add"). It is built once, with ranks and element types
but no sizes; sizes arrive with every call (`compile.compile_graph`), which is where the runtime
compiler's per-shape work -- shape inference, tiling, encoding -- happens. Broadcasting follows
numpy/PyTorch rules (right-aligned, size-1 dimensions stretch); reductions keep their dimensions
(size 1), like ``keepdim=True``.
"""

from __future__ import annotations

from dataclasses import dataclass, field


from ..errors import VtmlirError
from .isa import BINARY_OPS, UNARY_OPS, CmpType, DType, Opcode


class GraphError(VtmlirError):
    """A graph that cannot be built or has no valid shapes for the given inputs."""


@dataclass(frozen=True)
class Node:
    """One basic operator. kind: input | unary | scalar | binary | cmp | cast | select | reduce |
    matmul. For reduce, `attrs` holds (opcode, axes, mean); for scalar (opcode, value); cmp
    (CmpType,); cast (DType,)."""

    kind: str
    op: Opcode | None
    inputs: tuple[int, ...]
    rank: int
    dtype: DType
    attrs: tuple = ()


@dataclass(frozen=True)
class Value:
    graph: "Graph"
    id: int

    @property
    def node(self) -> Node:
        return self.graph.nodes[self.id]

    @property
    def rank(self) -> int:
        return self.node.rank

    @property
    def dtype(self) -> DType:
        return self.node.dtype

    def __add__(self, o):
        return self.graph.add(self, o)

    __radd__ = __add__

    def __sub__(self, o):
        return self.graph.sub(self, o)

    def __rsub__(self, o):
        return self.graph.add(self.graph.mul(self, -1.0), o)

    def __mul__(self, o):
        return self.graph.mul(self, o)

    __rmul__ = __mul__

    def __truediv__(self, o):
        return self.graph.div(self, o)

    def __matmul__(self, o):
        return self.graph.matmul(self, o)


@dataclass
class Graph:
    """A graph of basic operators under construction (see the module docstring)."""

    name: str = "kernel"
    nodes: list[Node] = field(default_factory=list)
    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)

    # -- construction ---------------------------------------------------------------------
    def _add(self, node: Node) -> Value:
        self.__dict__.pop("_dvm_fast", None)  # a compile entry point registered for the old structure
        self.nodes.append(node)
        return Value(self, len(self.nodes) - 1)

    def _value(self, v) -> Value:
        if not isinstance(v, Value) or v.graph is not self:
            raise GraphError(f"{self.name}: operand {v!r} is not a value of this graph")
        return v

    def input(self, rank: int, dtype="float32") -> Value:
        dt = dtype if isinstance(dtype, DType) else DType.from_numpy(dtype)
        v = self._add(Node("input", None, (), int(rank), dt))
        self.inputs.append(v.id)
        return v

    def output(self, *values: Value) -> None:
        self.__dict__.pop("_dvm_fast", None)
        for v in values:
            self.outputs.append(self._value(v).id)

    def unary(self, op: Opcode, x: Value) -> Value:
        x = self._value(x)
        if op not in UNARY_OPS:
            raise GraphError(f"{op.name} is not a unary instruction")
        if op not in (Opcode.COPY, Opcode.ABS) and not x.dtype.is_float:
            raise GraphError(f"{op.name.lower()} needs a float operand, got {x.dtype.name}")
        out = DType.BOOL if op == Opcode.IS_FINITE else x.dtype
        return self._add(Node("unary", op, (x.id,), x.rank, out))

    def sqrt(self, x): return self.unary(Opcode.SQRT, x)
    def abs(self, x): return self.unary(Opcode.ABS, x)
    def log(self, x): return self.unary(Opcode.LOG, x)
    def exp(self, x): return self.unary(Opcode.EXP, x)
    def round(self, x): return self.unary(Opcode.ROUND, x)
    def floor(self, x): return self.unary(Opcode.FLOOR, x)
    def isfinite(self, x): return self.unary(Opcode.IS_FINITE, x)
    def copy(self, x): return self.unary(Opcode.COPY, x)

    def binary(self, op: Opcode, a, b) -> Value:
        if op not in BINARY_OPS:
            raise GraphError(f"{op.name} is not a binary instruction")
        if not isinstance(b, Value) and op in (Opcode.ADD, Opcode.SUB, Opcode.MUL, Opcode.DIV):
            a = self._value(a)
            value = float(b)
            if op == Opcode.SUB:
                return self.scalar(Opcode.ADDS, a, -value)
            if op == Opcode.DIV:
                if not a.dtype.is_float:
                    raise GraphError("division by a scalar needs a float operand")
                return self.scalar(Opcode.MULS, a, 1.0 / value)
            return self.scalar(Opcode.ADDS if op == Opcode.ADD else Opcode.MULS, a, value)
        a, b = self._value(a), self._value(b)
        if a.dtype != b.dtype:
            raise GraphError(f"{op.name.lower()}: operand types differ ({a.dtype.name} vs {b.dtype.name}); cast first")
        if op in (Opcode.DIV, Opcode.POW) and not a.dtype.is_float:
            raise GraphError(f"{op.name.lower()} needs float operands, got {a.dtype.name}")
        return self._add(Node("binary", op, (a.id, b.id), max(a.rank, b.rank), a.dtype))

    def add(self, a, b): return self.binary(Opcode.ADD, a, b)
    def sub(self, a, b): return self.binary(Opcode.SUB, a, b)
    def mul(self, a, b): return self.binary(Opcode.MUL, a, b)
    def div(self, a, b): return self.binary(Opcode.DIV, a, b)
    def minimum(self, a, b): return self.binary(Opcode.MIN, a, b)
    def maximum(self, a, b): return self.binary(Opcode.MAX, a, b)
    def pow(self, a, b): return self.binary(Opcode.POW, a, b)

    def scalar(self, op: Opcode, x: Value, value: float) -> Value:
        x = self._value(x)
        if op not in (Opcode.ADDS, Opcode.MULS):
            raise GraphError(f"{op.name} is not a scalar instruction")
        return self._add(Node("scalar", op, (x.id,), x.rank, x.dtype, (float(value),)))

    def cmp(self, a: Value, b: Value, cmp) -> Value:
        a, b = self._value(a), self._value(b)
        cmp = CmpType[cmp.upper()] if isinstance(cmp, str) else CmpType(cmp)
        if a.dtype != b.dtype:
            raise GraphError(f"cmp: operand types differ ({a.dtype.name} vs {b.dtype.name})")
        return self._add(Node("cmp", Opcode.CMP, (a.id, b.id), max(a.rank, b.rank), DType.BOOL, (cmp,)))

    def cast(self, x: Value, dtype) -> Value:
        x = self._value(x)
        dt = dtype if isinstance(dtype, DType) else DType.from_numpy(dtype)
        return self._add(Node("cast", Opcode.CAST, (x.id,), x.rank, dt, (dt,)))

    def select(self, cond: Value, a: Value, b: Value) -> Value:
        cond, a, b = self._value(cond), self._value(a), self._value(b)
        if cond.dtype != DType.BOOL:
            raise GraphError(f"select: condition must be bool, got {cond.dtype.name}")
        if a.dtype != b.dtype:
            raise GraphError(f"select: branch types differ ({a.dtype.name} vs {b.dtype.name})")
        rank = max(cond.rank, a.rank, b.rank)
        return self._add(Node("select", Opcode.SELECT, (cond.id, a.id, b.id), rank, a.dtype))

    def reduce(self, op: Opcode, x: Value, axes, mean: bool = False) -> Value:
        x = self._value(x)
        axes = (axes,) if isinstance(axes, int) else tuple(axes)
        norm = tuple(sorted({a % x.rank for a in axes})) if x.rank else ()
        if len(norm) != len(axes) or any(not -x.rank <= a < x.rank for a in axes):
            raise GraphError(f"reduce: bad axes {axes} for rank {x.rank}")
        if mean and not x.dtype.is_float:
            raise GraphError("mean needs a float operand")
        return self._add(Node("reduce", op, (x.id,), x.rank, x.dtype, (op, norm, mean)))

    def sum(self, x, axes): return self.reduce(Opcode.SUM, x, axes)
    def max(self, x, axes): return self.reduce(Opcode.REDUCE_MAX, x, axes)
    def min(self, x, axes): return self.reduce(Opcode.REDUCE_MIN, x, axes)
    def mean(self, x, axes): return self.reduce(Opcode.SUM, x, axes, mean=True)

    def matmul(self, a: Value, b: Value) -> Value:
        a, b = self._value(a), self._value(b)
        if a.rank != 2 or b.rank != 2:
            raise GraphError(f"matmul takes rank-2 operands, got ranks {a.rank} and {b.rank}")
        if a.dtype != b.dtype or not a.dtype.is_float:
            raise GraphError("matmul takes float operands of one type")
        return self._add(Node("matmul", Opcode.MATMUL, (a.id, b.id), 2, a.dtype))

    # -- shapes ---------------------------------------------------------------------------
    def infer_shapes(self, input_shapes) -> list[tuple[int, ...]]:
        """The shape of every node for the given input shapes (numpy broadcasting)."""
        return self.infer_shapes_of([tuple(int(s) for s in shp) for shp in input_shapes])

    def infer_shapes_of(self, input_shapes) -> list[tuple]:
        """`infer_shapes` without converting the sizes (they may be traced `symbolic.Sym`s)."""
        if len(input_shapes) != len(self.inputs):
            raise GraphError(f"{self.name}: expected {len(self.inputs)} input shapes, got {len(input_shapes)}")
        shapes: list[tuple[int, ...] | None] = [None] * len(self.nodes)
        for nid, shp in zip(self.inputs, input_shapes):
            if len(shp) != self.nodes[nid].rank or any(s < 1 for s in shp):
                raise GraphError(f"{self.name}: input %{nid} has rank {self.nodes[nid].rank} "
                                 f"and positive sizes; got shape {list(shp)}")
            shapes[nid] = shp
        for nid, node in enumerate(self.nodes):
            if node.kind == "input":
                continue
            ins = [shapes[i] for i in node.inputs]
            if node.kind == "matmul":
                (m, k), (k2, n) = ins
                if k != k2:
                    raise GraphError(f"{self.name}: matmul %{nid}: inner sizes differ ({k} vs {k2})")
                shapes[nid] = (m, n)
            elif node.kind == "reduce":
                axes = node.attrs[1]
                shapes[nid] = tuple(1 if d in axes else s for d, s in enumerate(ins[0]))
            else:
                try:
                    shapes[nid] = ins[0] if len(ins) == 1 or all(x == ins[0] for x in ins) else broadcast_shapes(ins)
                except ValueError:
                    raise GraphError(f"{self.name}: {node.kind} %{nid}: shapes "
                                     f"{' and '.join(str(list(s)) for s in ins)} do not broadcast") from None
        return shapes


def broadcast_shapes(shapes) -> tuple[int, ...]:
    """numpy's broadcasting of positive-size shapes (right-aligned; 1 stretches), without numpy's
    per-call overhead (this runs for every node of every new shape)."""
    rank = max(len(s) for s in shapes)
    out = []
    for d in range(rank):
        size = 1
        for s in shapes:
            k = d - rank + len(s)
            if k < 0:
                continue
            v = s[k]
            if v != 1:
                if size not in (1, v):
                    raise ValueError("shapes do not broadcast")
                size = v
        out.append(size)
    return tuple(out)
