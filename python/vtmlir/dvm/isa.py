"""The tile-level virtual instruction set of DVM (Fang et al., "DVM: Real-Time Kernel Generation for
Dynamic AI Models", §4.1, Table 1), plus a MatMul tile for the cube/vector kernels of §4.2.

Every instruction works on a *tile*: memory instructions move one tile between global memory (the
kernel's arguments) and the core's local memory, computation instructions work on whole local
buffers (`size` elements, the "size" parameter of Table 1). Local operands are byte addresses into
the core's local memory, as in Fig. 6 (`Add.fp16.832 0xf00, 0x200, 0x880`).

This module fixes, for every opcode, the *record layout*: the ordered list of fields that follow the
two-word record prefix `[opcode, record length]` in the bytecode body (Fig. 7; the length is the
`Insn_Len` with which Alg. 2 steps from one record to the next). The layouts are the contract
between the encoder, the reference interpreter (`vm.py`) and any other VM that interprets the same
bytecode (e.g. one compiled once through MLIR): a VM only needs this table.

Field kinds (one int64 word each unless stated):
- ``int``: a signed integer; ``dtype``/``cmp``/``bool``: an enum value / 0-or-1;
- ``local``: a byte address in local memory; ``arg``: an index into the kernel's arguments;
- ``f64``: a float64 immediate stored as its IEEE bit pattern;
- ``vec``: a length-prefixed int array (one word n, then n words).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from .symbolic import Sym


class Opcode(enum.IntEnum):
    """Virtual instruction IDs (`Insn_ID` in Alg. 2). Values are part of the bytecode format."""

    # memory instructions (they take the tile id, Alg. 2 line 11)
    LOAD = 1
    VIEW_LOAD = 2
    STORE = 3
    VIEW_STORE = 4
    # data movement in local memory
    COPY = 10
    BROADCAST = 11
    # unary
    SQRT = 20
    ABS = 21
    LOG = 22
    EXP = 23
    ROUND = 24
    FLOOR = 25
    IS_FINITE = 26
    # scalar (tensor op immediate)
    ADDS = 30
    MULS = 31
    # binary
    ADD = 40
    SUB = 41
    MUL = 42
    DIV = 43
    MIN = 44
    MAX = 45
    POW = 46
    # comparison, conversion, selection
    CMP = 50
    CAST = 51
    SELECT = 52
    # reductions along the penultimate axis of [M, size, N]
    SUM = 60
    REDUCE_MAX = 61
    REDUCE_MIN = 62
    # matrix tile (cube unit)
    MATMUL = 70


MEMORY_OPS = frozenset({Opcode.LOAD, Opcode.VIEW_LOAD, Opcode.STORE, Opcode.VIEW_STORE})
UNARY_OPS = frozenset(
    {Opcode.COPY, Opcode.SQRT, Opcode.ABS, Opcode.LOG, Opcode.EXP, Opcode.ROUND, Opcode.FLOOR,
     Opcode.IS_FINITE}
)
SCALAR_OPS = frozenset({Opcode.ADDS, Opcode.MULS})
BINARY_OPS = frozenset(
    {Opcode.ADD, Opcode.SUB, Opcode.MUL, Opcode.DIV, Opcode.MIN, Opcode.MAX, Opcode.POW}
)
REDUCE_OPS = frozenset({Opcode.SUM, Opcode.REDUCE_MAX, Opcode.REDUCE_MIN})


class DType(enum.IntEnum):
    """Element types of tiles. BOOL is one byte (0/1), the result type of Cmp and IsFinite."""

    F32 = 0
    F16 = 1
    F64 = 2
    I32 = 3
    I64 = 4
    I8 = 5
    U8 = 6
    I16 = 7
    BOOL = 8

    @property
    def numpy(self) -> np.dtype:
        return _NUMPY[self]

    @property
    def itemsize(self) -> int:
        return _NUMPY[self].itemsize

    @property
    def short(self) -> str:
        return _SHORT[self]

    @classmethod
    def from_numpy(cls, dtype) -> "DType":
        dt = np.dtype(dtype)
        for k, v in _NUMPY.items():
            if v == dt:
                return k
        raise ValueError(f"no DVM element type for numpy dtype {dt}")

    @property
    def is_float(self) -> bool:
        return self in (DType.F16, DType.F32, DType.F64)


_NUMPY = {
    DType.F32: np.dtype(np.float32),
    DType.F16: np.dtype(np.float16),
    DType.F64: np.dtype(np.float64),
    DType.I32: np.dtype(np.int32),
    DType.I64: np.dtype(np.int64),
    DType.I8: np.dtype(np.int8),
    DType.U8: np.dtype(np.uint8),
    DType.I16: np.dtype(np.int16),
    DType.BOOL: np.dtype(np.bool_),
}
_SHORT = {
    DType.F32: "fp32", DType.F16: "fp16", DType.F64: "fp64", DType.I32: "i32", DType.I64: "i64",
    DType.I8: "i8", DType.U8: "u8", DType.I16: "i16", DType.BOOL: "bool",
}


class CmpType(enum.IntEnum):
    """`cmp_type` of Cmp (Table 1)."""

    EQ = 0
    NE = 1
    LT = 2
    LE = 3
    GT = 4
    GE = 5


class KernelType(enum.IntEnum):
    """`KernelType` of the code header (Fig. 7): which units the meta-kernel runs on."""

    VECTOR = 0  # a meta-kernel on the vector units ("vmain.aiv" in Fig. 6)
    CUBE_VECTOR = 1  # a MatMul tile with an elementwise vector epilogue (cube-vector fusion, §5.1)


# ---------------------------------------------------------------------------------------------
# Record layouts. Memory records (all four share the addressing scheme of `vm.tile_base`):
#   offset        static element offset into the argument
#   grid_strides  per grid dimension d: the argument's element stride along that iteration
#                 dimension (0 where the argument is broadcast); tile (b_0..b_{G-1}) starts at
#                 offset + sum_d b_d * block_d * grid_strides[d]
#   Load/Store    a contiguous run of rows*row elements; `bind` names the grid dimension whose
#                 tail tile clamps `rows` (-1: never clamped)  -- Table 1 "tile_size", with the
#                 tile_stride given by the grid strides
#   ViewLoad/     an n-d tile: sizes[j] elements at global stride strides[j]; binds[j] as above
#   ViewStore     per tile dimension (Table 1 "tile_stride[], tile_size[], tile_dims")
# Local memory always holds the full (unclamped) tile densely in row-major order, so computation
# records never depend on the tile id (the tail tile is not padded, Fig. 6).
# ---------------------------------------------------------------------------------------------
_MEM_CONTIG = (("dtype", "dtype"), ("local", "local"), ("arg", "arg"), ("offset", "int"),
               ("grid_strides", "vec"), ("rows", "int"), ("row", "int"), ("bind", "int"))
_MEM_VIEW = (("dtype", "dtype"), ("local", "local"), ("arg", "arg"), ("offset", "int"),
             ("grid_strides", "vec"), ("sizes", "vec"), ("strides", "vec"), ("binds", "vec"))
_UNARY = (("dtype", "dtype"), ("dst", "local"), ("src", "local"), ("size", "int"))
_SCALAR = (("dtype", "dtype"), ("dst", "local"), ("src", "local"), ("scalar", "f64"), ("size", "int"))
_BINARY = (("dtype", "dtype"), ("dst", "local"), ("lhs", "local"), ("rhs", "local"), ("size", "int"))
_MNK = (("dtype", "dtype"), ("dst", "local"), ("src", "local"), ("m", "int"), ("size", "int"),
        ("n", "int"))

FORMATS: dict[Opcode, tuple[tuple[str, str], ...]] = {
    Opcode.LOAD: _MEM_CONTIG,
    Opcode.STORE: _MEM_CONTIG,
    Opcode.VIEW_LOAD: _MEM_VIEW,
    Opcode.VIEW_STORE: _MEM_VIEW,
    Opcode.BROADCAST: _MNK,  # [m,1,n] -> [m,size,n]
    Opcode.SUM: _MNK,  # [m,size,n] -> [m,1,n]
    Opcode.REDUCE_MAX: _MNK,
    Opcode.REDUCE_MIN: _MNK,
    Opcode.CMP: (("dtype", "dtype"), ("dst", "local"), ("lhs", "local"), ("rhs", "local"),
                 ("size", "int"), ("cmp", "cmp")),
    Opcode.CAST: (("dst", "local"), ("src", "local"), ("size", "int"), ("src_dtype", "dtype"),
                  ("dst_dtype", "dtype")),
    Opcode.SELECT: (("dtype", "dtype"), ("dst", "local"), ("cond", "local"), ("lhs", "local"),
                    ("rhs", "local"), ("size", "int")),
    Opcode.MATMUL: (("dtype", "dtype"), ("dst", "local"), ("lhs", "local"), ("rhs", "local"),
                    ("m", "int"), ("k", "int"), ("n", "int"), ("accumulate", "bool")),
}
for _op in UNARY_OPS:
    FORMATS[_op] = _UNARY
for _op in SCALAR_OPS:
    FORMATS[_op] = _SCALAR
for _op in BINARY_OPS:
    FORMATS[_op] = _BINARY
assert set(FORMATS) == set(Opcode)

FIELD_INDEX = {op: {name: i for i, (name, _) in enumerate(fmt)} for op, fmt in FORMATS.items()}


@dataclass(frozen=True)
class Instr:
    """One decoded instruction: its opcode and its fields in `FORMATS[op]` order (``vec`` fields are
    tuples of ints, ``f64`` fields floats, enum fields their IntEnum)."""

    op: Opcode
    args: tuple

    def __getattr__(self, name):
        try:
            return self.args[FIELD_INDEX[self.op][name]]
        except KeyError:
            raise AttributeError(f"{self.op.name} has no field {name!r}") from None

    def fields(self) -> dict:
        return {name: v for (name, _), v in zip(FORMATS[self.op], self.args)}

    def __str__(self) -> str:
        f = self.fields()
        head = self.op.name.lower()
        if "dtype" in f:
            head += "." + DType(f.pop("dtype")).short
        parts = []
        for name, v in f.items():
            if FORMATS[self.op][FIELD_INDEX[self.op][name]][1] == "local":
                parts.append(f"{name}=0x{v:x}")
            elif isinstance(v, enum.Enum):
                parts.append(f"{name}={v.name}")
            elif isinstance(v, tuple):
                parts.append(f"{name}=[{','.join(map(str, v))}]")
            else:
                parts.append(f"{name}={v}")
        return f"{head} {', '.join(parts)}"


def _as_dtype(v):
    return v if type(v) is DType else DType(v)


def _as_cmp(v):
    return v if type(v) is CmpType else CmpType(v)


def _as_int(v):
    # `Sym` (a size traced by `template.py`) passes through: converting it would pin its value
    return v if type(v) is int or type(v) is Sym else int(v)


def _as_vec(v):
    return tuple(_as_int(x) for x in v)


def _as_bool(v):
    return int(bool(v))


def _as_f64(v):
    return v if type(v) is Sym else float(v)


_CONVERT = {"dtype": _as_dtype, "cmp": _as_cmp, "vec": _as_vec, "f64": _as_f64, "bool": _as_bool,
            "int": _as_int, "local": _as_int, "arg": _as_int}
_CONVERTERS = {op: tuple((name, _CONVERT[kind]) for name, kind in fmt) for op, fmt in FORMATS.items()}


def make(op: Opcode, **fields) -> Instr:
    """Build an `Instr` from keyword fields (all fields of the layout are required)."""
    conv = _CONVERTERS[op]
    try:
        vals = tuple(c(fields[name]) for name, c in conv)
    except KeyError:
        vals = None
    if vals is None or len(fields) != len(conv):
        names = [n for n, _ in conv]
        missing = [n for n in names if n not in fields]
        extra = sorted(set(fields) - set(names))
        raise TypeError(f"{op.name}: missing fields {missing}, unknown fields {extra}")
    return Instr(op if type(op) is Opcode else Opcode(op), vals)


@dataclass(frozen=True)
class Repeat:
    """`body` repeated `count` times, the fields named in `deltas` ({(record index, field): step})
    advancing by their step per repetition (`body` is repetition 0). Only traced programs hold one
    (`template.py`: the full chunks of a matmul's k loop, so that the chunk count is a size, not
    a structure); encoded bytecode is always unrolled, see `expand`."""

    count: object
    body: tuple
    deltas: dict

    def expand(self) -> list:
        out = []
        for r in range(self.count):
            for i, ins in enumerate(self.body):
                for (j, name), step in self.deltas.items():
                    if j == i and r:
                        k = FIELD_INDEX[ins.op][name]
                        ins = Instr(ins.op, ins.args[:k] + (ins.args[k] + r * step,) + ins.args[k + 1:])
                out.append(ins)
        return out


@dataclass(frozen=True)
class GridDim:
    """One dimension of the tile grid: `count` tiles of `block` iterations over `extent`
    (the last tile has extent - (count-1)*block iterations: the tail)."""

    count: int
    block: int
    extent: int


@dataclass(frozen=True)
class ArgDesc:
    """A kernel argument as the bytecode records it: element type and element count."""

    dtype: DType
    numel: int


@dataclass(frozen=True)
class Program:
    """A decoded bytecode program: the code header of Fig. 7 and the code body.

    `tile_count` is the product of the grid's counts; tile id i is decomposed into grid indices in
    row-major order (last grid dimension fastest)."""

    kernel_type: KernelType
    local_bytes: int
    args: tuple[ArgDesc, ...]
    grid: tuple[GridDim, ...]
    body: tuple[Instr, ...]

    @property
    def tile_count(self) -> int:
        n = 1
        for g in self.grid:
            n *= g.count
        return n

    def disassemble(self) -> str:
        """A readable listing in the spirit of Fig. 6."""
        lines = [
            f"// kernel_type={self.kernel_type.name}, tile_count={self.tile_count}, "
            f"local_bytes={self.local_bytes}",
            "// args: " + ", ".join(f"%{i}:{a.dtype.short}[{a.numel}]" for i, a in enumerate(self.args)),
            "// grid: " + " x ".join(f"{g.count}(block={g.block}, extent={g.extent})" for g in self.grid),
        ]
        lines += [f"{i}: {ins}" for i, ins in enumerate(self.body)]
        return "\n".join(lines)
