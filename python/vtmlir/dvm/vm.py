"""The reference DVM virtual machine in numpy (Fang et al., DVM, §4.3, Algorithm 2).

It runs a bytecode program exactly as Alg. 2 describes: core `id` of N takes tiles
``[m*id, min(M, m*(id+1)))`` with ``m = ceil(M/N)``; for each tile it walks the code body from its
start to ``start + CodeSize``, looks the record's opcode up in the virtual instruction table `TABLE`,
calls the instruction function -- with the tile id for memory instructions (line 11) -- and steps by
the record's length. Cores run one after another here, each with its own local memory.

It is the semantic reference for any other VM of the same bytecode (native or PTX): every
instruction function is a few lines of numpy over byte-addressed local memory.
"""

from __future__ import annotations

import math
import os

import numpy as np

from .bytecode import BytecodeError, decode
from .isa import CmpType, DType, Instr, Opcode, Program


class _Core:
    """The state of one core: its local memory, the kernel arguments and the current tile."""

    def __init__(self, program: Program, args):
        self.program = program
        self.local = np.zeros(max(program.local_bytes, 1), dtype=np.uint8)
        self.args = args
        self.tile = ()  # grid indices of the current tile

    def buf(self, addr: int, dtype: DType, count: int) -> np.ndarray:
        return self.local[addr : addr + count * dtype.itemsize].view(dtype.numpy)


def tile_indices(program: Program, tile_id: int) -> tuple[int, ...]:
    """Grid indices of a tile id (row-major, last grid dimension fastest)."""
    idx = []
    for g in reversed(program.grid):
        tile_id, r = divmod(tile_id, g.count)
        idx.append(r)
    return tuple(reversed(idx))


def _global_view(core: _Core, ins: Instr, sizes, strides, binds):
    """The argument elements the current tile of a memory instruction covers (a strided view),
    and the clamped (tail) sizes."""
    grid, tile = core.program.grid, core.tile
    base = ins.offset
    for g, b, s in zip(grid, tile, ins.grid_strides):
        base += b * g.block * s
    eff = []
    for size, bind in zip(sizes, binds):
        if bind >= 0:
            g = grid[bind]
            size = min(size, g.extent - tile[bind] * g.block)
        eff.append(size)
    arr = core.args[ins.arg]
    view = np.lib.stride_tricks.as_strided(arr[base:], shape=eff, strides=[s * arr.itemsize for s in strides])
    return view, eff


def _local_view(core: _Core, ins: Instr, sizes, eff):
    full = core.buf(ins.local, ins.dtype, math.prod(sizes)).reshape(sizes)
    return full[tuple(slice(0, e) for e in eff)]


def _contig_dims(ins: Instr):
    return (ins.rows, ins.row), (ins.row, 1), (ins.bind, -1)


def _load(core, ins):
    sizes, strides, binds = _contig_dims(ins) if ins.op == Opcode.LOAD else (ins.sizes, ins.strides, ins.binds)
    g, eff = _global_view(core, ins, sizes, strides, binds)
    _local_view(core, ins, sizes, eff)[...] = g


def _store(core, ins):
    sizes, strides, binds = _contig_dims(ins) if ins.op == Opcode.STORE else (ins.sizes, ins.strides, ins.binds)
    g, eff = _global_view(core, ins, sizes, strides, binds)
    g[...] = _local_view(core, ins, sizes, eff)


_UNARY = {Opcode.SQRT: np.sqrt, Opcode.ABS: np.abs, Opcode.LOG: np.log, Opcode.EXP: np.exp,
          Opcode.ROUND: np.rint, Opcode.FLOOR: np.floor}
_BINARY = {Opcode.ADD: np.add, Opcode.SUB: np.subtract, Opcode.MUL: np.multiply, Opcode.DIV: np.divide,
           Opcode.MIN: np.minimum, Opcode.MAX: np.maximum, Opcode.POW: np.power}
_CMP = {CmpType.EQ: np.equal, CmpType.NE: np.not_equal, CmpType.LT: np.less, CmpType.LE: np.less_equal,
        CmpType.GT: np.greater, CmpType.GE: np.greater_equal}
_REDUCE = {Opcode.SUM: np.sum, Opcode.REDUCE_MAX: np.max, Opcode.REDUCE_MIN: np.min}


def _unary(core, ins):
    src = core.buf(ins.src, ins.dtype, ins.size)
    if ins.op == Opcode.COPY:
        core.buf(ins.dst, ins.dtype, ins.size)[...] = src
    elif ins.op == Opcode.IS_FINITE:
        core.buf(ins.dst, DType.BOOL, ins.size)[...] = np.isfinite(src)
    else:
        _UNARY[ins.op](src, out=core.buf(ins.dst, ins.dtype, ins.size))


def _scalar(core, ins):
    ufunc = np.add if ins.op == Opcode.ADDS else np.multiply
    src, dst = core.buf(ins.src, ins.dtype, ins.size), core.buf(ins.dst, ins.dtype, ins.size)
    ufunc(src, ins.dtype.numpy.type(ins.scalar), out=dst)


def _binary(core, ins):
    dt, n = ins.dtype, ins.size
    _BINARY[ins.op](core.buf(ins.lhs, dt, n), core.buf(ins.rhs, dt, n), out=core.buf(ins.dst, dt, n))


def _cmp(core, ins):
    dt, n = ins.dtype, ins.size
    _CMP[ins.cmp](core.buf(ins.lhs, dt, n), core.buf(ins.rhs, dt, n), out=core.buf(ins.dst, DType.BOOL, n))


def _cast(core, ins):
    src = core.buf(ins.src, ins.src_dtype, ins.size)
    core.buf(ins.dst, ins.dst_dtype, ins.size)[...] = src.astype(ins.dst_dtype.numpy)


def _select(core, ins):
    dt, n = ins.dtype, ins.size
    cond = core.buf(ins.cond, DType.BOOL, n)
    core.buf(ins.dst, dt, n)[...] = np.where(cond, core.buf(ins.lhs, dt, n), core.buf(ins.rhs, dt, n))


def _broadcast(core, ins):
    m, size, n = ins.m, ins.size, ins.n
    src = core.buf(ins.src, ins.dtype, m * n).reshape(m, 1, n)
    core.buf(ins.dst, ins.dtype, m * size * n).reshape(m, size, n)[...] = src


def _reduce(core, ins):
    m, size, n = ins.m, ins.size, ins.n
    src = core.buf(ins.src, ins.dtype, m * size * n).reshape(m, size, n)
    # an f16 sum accumulates in f32 and is rounded once (numpy's own f16 sum along a
    # non-innermost axis rounds to f16 after every addition)
    if ins.op == Opcode.SUM and ins.dtype == DType.F16:
        out = np.sum(src, axis=1, dtype=np.float32)
    else:
        out = _REDUCE[ins.op](src, axis=1)
    core.buf(ins.dst, ins.dtype, m * n).reshape(m, n)[...] = out


def _matmul(core, ins):
    m, k, n, dt = ins.m, ins.k, ins.n, ins.dtype
    a = core.buf(ins.lhs, dt, m * k).reshape(m, k)
    b = core.buf(ins.rhs, dt, k * n).reshape(k, n)
    c = core.buf(ins.dst, dt, m * n).reshape(m, n)
    if ins.accumulate:
        c += a @ b
    else:
        np.matmul(a, b, out=c)


#: The virtual instruction table I of Alg. 2: opcode -> (is memory instruction, function).
TABLE = {Opcode.LOAD: _load, Opcode.VIEW_LOAD: _load, Opcode.STORE: _store, Opcode.VIEW_STORE: _store,
         Opcode.CMP: _cmp, Opcode.CAST: _cast, Opcode.SELECT: _select, Opcode.BROADCAST: _broadcast,
         Opcode.MATMUL: _matmul}
for _op in (Opcode.COPY, Opcode.IS_FINITE, *_UNARY):
    TABLE[_op] = _unary
for _op in (Opcode.ADDS, Opcode.MULS):
    TABLE[_op] = _scalar
for _op in _BINARY:
    TABLE[_op] = _binary
for _op in _REDUCE:
    TABLE[_op] = _reduce
assert set(TABLE) == set(Opcode)
MEMORY = frozenset({Opcode.LOAD, Opcode.VIEW_LOAD, Opcode.STORE, Opcode.VIEW_STORE})


def execute(bytecode, args, cores: int | None = None) -> None:
    """Run a bytecode program on 1-d argument arrays (inputs and outputs, in header order),
    writing the outputs in place. `cores` is N of Alg. 2 (default: the CPU count, at most the tile
    count). The bytecode is validated by `decode` first."""
    words = np.asarray(bytecode)
    program = decode(words)
    if len(args) != len(program.args):
        raise BytecodeError(f"dvm vm: error: program takes {len(program.args)} arguments, got {len(args)}")
    flat = []
    for i, (a, desc) in enumerate(zip(args, program.args)):
        if not isinstance(a, np.ndarray) or a.ndim != 1 or a.dtype != desc.dtype.numpy or a.size < desc.numel:
            raise BytecodeError(f"dvm vm: error: argument {i} must be a 1-d {desc.dtype.numpy} array of at "
                                f"least {desc.numel} elements")
        if a.strides[0] != a.itemsize and a.size > 1:
            raise BytecodeError(f"dvm vm: error: argument {i} must be dense")
        flat.append(a)
    # Records by body offset: Alg. 2 walks the raw words (opcode at p, Insn_Len at p+1); the
    # decoded record at p is what an instruction function reads its operands from.
    hwords = int(words[2])
    code = words[hwords:].tolist()
    records, p = {}, 0
    for ins in program.body:
        records[p] = ins
        p += code[p + 1]
    code_size = len(code)

    M = program.tile_count  # line 3
    N = max(1, min(M, cores or os.cpu_count() or 1))  # line 2
    m = -(-M // N)  # line 4
    with np.errstate(all="ignore"):  # stale tail rows of a tile may hold anything
        for core_id in range(N):  # each core runs this loop in parallel on the device
            core = _Core(program, flat)
            for i in range(m * core_id, min(M, m * (core_id + 1))):  # line 5
                core.tile = tile_indices(program, i)
                p = 0  # line 6
                while p < code_size:  # line 7
                    b = records[p]  # line 8
                    f = TABLE[b.op]  # line 9
                    f(core, b)  # lines 10-13 (memory functions read the tile from the core)
                    p += code[p + 1]  # line 14
