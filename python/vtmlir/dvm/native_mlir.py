"""The DVM virtual machine (Fang et al., DVM, §4.3, Algorithm 2) built as MLIR.

`build_vm_module()` builds, through the dialects' op builders, one MLIR module
(func/scf/memref/arith/math; vector for the CPU variant's MatMul register blocks) whose entry
``@dvm_vm`` interprets the bytecode of `bytecode.py` exactly like the numpy reference `vm.py`:

    func.func @dvm_vm(%code: memref<?xi64>, %local: memref<?xi8>,
                      %args: memref<?xmemref<?xi8>>, %t0: index, %t1: index)

It runs tiles ``[t0, t1)`` (the tile range of one core, Alg. 2 lines 3-5) on one local memory: for
each tile ``@run_tile`` runs an ``scf.while`` that walks the code body from ``H`` to ``H + CodeSize``
(lines 6-7), an ``scf.index_switch`` on the record's opcode is the instruction table I (lines 8-9),
memory instructions get the tile id (line 11), and the loop steps by the record's ``Insn_Len``
(line 14). The arguments are one table of byte-buffer descriptors (``memref<?xmemref<?xi8>>``, the
header's A entries) indexed by a record's argument number, so the VM takes as many as the bytecode
names; typed access goes through ``memref.view``. ``build_vm_module(gpu=True)`` wraps the same
``@run_tile`` in ``@dvm_vm_gpu``, an ``scf.parallel`` over the tiles for the CUDA path (`gpu.py`).

Python stamps out the per-opcode / per-width / per-dtype variants; the module is built and
JIT-compiled once per process (`native.NativeVM`), never per shape. Arithmetic is on f32 and f64 on
the CPU, f32 in the PTX variant (`ARITH_TYPES`: every arithmetic instruction is stamped once per
type as ``@op_<name>_<type>`` and ``@op_<name>`` switches on the record's dtype field; f64 is what
torch-mlir's LayerNorm decomposition computes the variance in); the other dtypes move through
Load/Store/Copy/Broadcast and the casts of `CASTS`. `native.unsupported_reason` tells which
programs the native VM runs.
"""

from __future__ import annotations

from contextlib import contextmanager

from torch_mlir import ir
from torch_mlir.dialects import arith, func, math, memref, scf, vector

from ..codegen.target import host_target
from .isa import CmpType, DType, Opcode
from .mlir_build import call, cidx, const, function, i, index, scalar
from .mlir_build import memref as memref_type

MAX_DIMS = 8  # grid dimensions and view tile dimensions

_ITEMSIZE = {DType.F32: 4, DType.F16: 2, DType.F64: 8, DType.I32: 4, DType.I64: 8, DType.I8: 1,
             DType.U8: 1, DType.I16: 2, DType.BOOL: 1}
#: the element type in memory of every DType (u8 and bool are signless i8)
_MLIR_TYPE = {DType.F32: "f32", DType.F16: "f16", DType.F64: "f64", DType.I32: "i32", DType.I64: "i64",
              DType.I8: "i8", DType.U8: "i8", DType.I16: "i16", DType.BOOL: "i8"}
FLOAT_TYPES = (DType.F32, DType.F64, DType.F16)
#: element types of the native arithmetic instructions on the CPU (the PTX VM: `GPU_ARITH_TYPES`)
ARITH_TYPES = FLOAT_TYPES
GPU_ARITH_TYPES = (DType.F32,)
#: the type an element type is computed in: f16 in f32, rounded back once per instruction, as
#: numpy's half loops do (exact for + - * / sqrt: 24 >= 2*11 + 2 bits)
_COMPUTE = {DType.F32: "f32", DType.F64: "f64", DType.F16: "f32"}
_SIGNED = (DType.I8, DType.I16, DType.I32, DType.I64)
_UNSIGNED = (DType.U8, DType.BOOL)
#: every (src, dst) pair of `CAST` the native VM converts, like numpy's ``astype`` for in-range
#: values: float -> int truncates toward zero, int -> int wraps, anything -> bool is ``!= 0``
#: (NaN is true), bool and u8 are unsigned
CASTS = frozenset((s, d) for s in DType for d in DType)

UNARY = {
    Opcode.SQRT: math.sqrt,
    Opcode.ABS: math.absf,
    Opcode.LOG: math.log,
    Opcode.EXP: math.exp,
    Opcode.ROUND: math.roundeven,  # np.rint: round half to even
    Opcode.FLOOR: math.floor,
}
BINARY = {
    Opcode.ADD: arith.addf,
    Opcode.SUB: arith.subf,
    Opcode.MUL: arith.mulf,
    Opcode.DIV: arith.divf,
    Opcode.MIN: arith.minimumf,  # NaN-propagating like np.minimum
    Opcode.MAX: arith.maximumf,
    Opcode.POW: math.powf,
}
CMP_FLOAT = {CmpType.EQ: "OEQ", CmpType.NE: "UNE", CmpType.LT: "OLT", CmpType.LE: "OLE", CmpType.GT: "OGT",
             CmpType.GE: "OGE"}
CMP_SIGNED = {CmpType.EQ: "eq", CmpType.NE: "ne", CmpType.LT: "slt", CmpType.LE: "sle", CmpType.GT: "sgt",
              CmpType.GE: "sge"}
CMP_UNSIGNED = {CmpType.EQ: "eq", CmpType.NE: "ne", CmpType.LT: "ult", CmpType.LE: "ule", CmpType.GT: "ugt",
                CmpType.GE: "uge"}
REDUCE = {Opcode.SUM: arith.addf, Opcode.REDUCE_MAX: arith.maximumf, Opcode.REDUCE_MIN: arith.minimumf}
#: IsFinite: the exponent mask of each float type (finite <=> not all ones; an integer test, no inf
#: literal, which the LLVM IR parser of llvmlite does not read)
_EXPONENT = {DType.F16: (16, 0x7C00), DType.F32: (32, 0x7F800000), DType.F64: (64, 0x7FF0000000000000)}
_WIDTHS = (8, 16, 32, 64)  # the data movement moves elements as integers of the dtype's width
_N_CONSTS = 12  # every function starts with the index constants 0 .. 11


def _cmpi(pred: str, a, b):
    return arith.cmpi(getattr(arith.CmpIPredicate, pred), a, b)


def _cmpf(pred: str, a, b):
    return arith.cmpf(getattr(arith.CmpFPredicate, pred), a, b)


def _types():
    """(code, bytes, the argument table, a tile-dims vector) memref types."""
    return (memref_type(i(64)), memref_type(i(8)), memref_type(memref_type(i(8))), memref_type(index(), MAX_DIMS))


def _consts() -> list[ir.Value]:
    return [cidx(k) for k in range(_N_CONSTS)]


def _name(op_name: str, dt: DType) -> str:
    return f"{op_name}_{dt.name.lower()}"


@contextmanager
def _for(lb, ub, step):
    """An ``scf.for`` without results: its body is the insertion point, its induction variable
    the value."""
    loop = scf.ForOp(lb, ub, step)
    with ir.InsertionPoint(loop.body):
        yield loop.induction_variable
        scf.YieldOp([])


def _switch(arg, cases, build) -> None:
    """``scf.index_switch`` without results: `build(case)` fills each case; the default does nothing."""
    op = scf.IndexSwitchOp([], arg, list(cases))
    for k, case in enumerate(cases):
        with ir.InsertionPoint(op.case_block(k)):
            build(case)
            scf.YieldOp([])
    with ir.InsertionPoint(op.default_block):
        scf.YieldOp([])


class _Op:
    """The function of one VM instruction, ``@name(%code, %p, %l)``: used as a context, its entry
    block is the insertion point (after the index constants `c`) and it returns at the end."""

    def __init__(self, name: str):
        code_t, bytes_t, _, _ = _types()
        _, entry = function(name, [code_t, index(), bytes_t], private=True)
        self.entry = entry
        self.code, self.p, self.l = entry.arguments

    def __enter__(self):
        self._ip = ir.InsertionPoint(self.entry)
        self._ip.__enter__()
        self.c = _consts()
        return self

    def __exit__(self, *exc):
        if exc[0] is None:
            func.ReturnOp([])
        self._ip.__exit__(*exc)

    def fields(self, names, first: int = 2) -> dict[str, ir.Value]:
        return _fields(self.code, self.p, self.c, names, first)

    def view(self, byte, count, ty: str):
        """``memref.view`` of local memory at `byte` as `count` elements of `ty`."""
        return memref.view(memref_type(scalar(ty)), self.l, byte, [count])


def _fields(code, p, c, names, first: int = 2) -> dict[str, ir.Value]:
    """The record fields `names` (words p+first, p+first+1, ...; None skips one) as index values."""
    out = {}
    for k, name in enumerate(names):
        if name is not None:
            at = arith.addi(p, c[first + k])
            out[name] = call("fld", [code, at], [index()])[0]
    return out


def _ld(view, idx, dt: DType):
    """Element `idx` of `view` (element type `dt`) in its compute type."""
    st, ct = _MLIR_TYPE[dt], _COMPUTE.get(dt, _MLIR_TYPE[dt])
    x = memref.load(view, [idx])
    return x if st == ct else arith.extf(scalar(ct), x)


def _st(val, view, idx, dt: DType) -> None:
    """Store `val` (in `dt`'s compute type) as element `idx` of `view`: rounded back once."""
    st, ct = _MLIR_TYPE[dt], _COMPUTE.get(dt, _MLIR_TYPE[dt])
    memref.store(val if st == ct else arith.truncf(scalar(st), val), view, [idx])


def _f64_to_f16(x):
    """`x` (f64) rounded once to nearest even f16, as numpy's ``npy_double_to_half``. LLVM's
    direct fptrunc calls ``__truncdfhf2``, which the JIT cannot resolve; rounding to f32 by
    round-to-odd and then to f16 is the same single rounding (24 >= 11 + 2 bits: Boldo and
    Melquiond, "Emulation of FMA and correctly rounded sums: proved algorithms using rounding to
    odd")."""
    f32, f64, i32 = scalar("f32"), scalar("f64"), i(32)
    n = arith.truncf(f32, x)
    b = arith.extf(f64, n)
    inexact = _cmpf("ONE", b, x)  # never for NaN
    away = _cmpf("OGT", math.absf(b), math.absf(x))  # rounded away from zero
    toward = arith.subi(arith.bitcast(i32, n), arith.extui(i32, away))  # truncated toward zero
    odd = arith.ori(toward, arith.extui(i32, inexact))  # the sticky bit: odd if inexact
    return arith.truncf(scalar("f16"), arith.bitcast(f32, odd))


def _unary(op, dt):
    with _Op(_name(f"op_{op.name.lower()}", dt)) as o:
        f = o.fields(["dtype", "dst", "src", "n"])
        s, d = o.view(f["src"], f["n"], _MLIR_TYPE[dt]), o.view(f["dst"], f["n"], _MLIR_TYPE[dt])
        with _for(o.c[0], f["n"], o.c[1]) as k:
            _st(UNARY[op](_ld(s, k, dt)), d, k, dt)


def _is_finite(dt):
    bits, mask = _EXPONENT[dt]
    with _Op(_name("op_is_finite", dt)) as o:
        f = o.fields(["dtype", "dst", "src", "n"])
        s, d = o.view(f["src"], f["n"], _MLIR_TYPE[dt]), o.view(f["dst"], f["n"], "i8")
        em = const(i(bits), mask)
        with _for(o.c[0], f["n"], o.c[1]) as k:
            xb = arith.bitcast(i(bits), memref.load(s, [k]))
            finite = _cmpi("ne", arith.andi(xb, em), em)
            memref.store(arith.extui(i(8), finite), d, [k])


def _immediate(o: _Op, dt):
    """The record's f64 immediate (word p+5) in `dt`'s compute type, rounded to `dt` first as
    numpy's ``dtype.type(scalar)``."""
    at = arith.addi(o.p, o.c[5])
    sd = arith.bitcast(scalar("f64"), memref.load(o.code, [at]))
    if dt == DType.F64:
        return sd
    if dt == DType.F32:
        return arith.truncf(scalar("f32"), sd)
    return arith.extf(scalar("f32"), _f64_to_f16(sd))


def _scalar(op, dt):
    fn = arith.addf if op == Opcode.ADDS else arith.mulf
    with _Op(_name(f"op_{op.name.lower()}", dt)) as o:
        f = o.fields(["dtype", "dst", "src", None, "n"])
        sv = _immediate(o, dt)
        s, d = o.view(f["src"], f["n"], _MLIR_TYPE[dt]), o.view(f["dst"], f["n"], _MLIR_TYPE[dt])
        with _for(o.c[0], f["n"], o.c[1]) as k:
            _st(fn(_ld(s, k, dt), sv), d, k, dt)


def _binary(op, dt):
    st = _MLIR_TYPE[dt]
    with _Op(_name(f"op_{op.name.lower()}", dt)) as o:
        f = o.fields(["dtype", "dst", "lhs", "rhs", "n"])
        a, b, d = (o.view(f[x], f["n"], st) for x in ("lhs", "rhs", "dst"))
        with _for(o.c[0], f["n"], o.c[1]) as k:
            x = _ld(a, k, dt)
            y = _ld(b, k, dt)
            _st(BINARY[op](x, y), d, k, dt)


def _cmp(dt):
    st = _MLIR_TYPE[dt]
    if dt in FLOAT_TYPES:
        preds, cmp = CMP_FLOAT, _cmpf
    else:
        preds, cmp = (CMP_UNSIGNED if dt in _UNSIGNED else CMP_SIGNED), _cmpi
    with _Op(_name("op_cmp", dt)) as o:
        f = o.fields(["dtype", "dst", "lhs", "rhs", "n", "cmp"])
        a, b = o.view(f["lhs"], f["n"], st), o.view(f["rhs"], f["n"], st)
        d = o.view(f["dst"], f["n"], "i8")

        def case(c):
            with _for(o.c[0], f["n"], o.c[1]) as k:
                x = _ld(a, k, dt)
                y = _ld(b, k, dt)
                memref.store(arith.extui(i(8), cmp(preds[CmpType(c)], x, y)), d, [k])

        _switch(f["cmp"], [int(c) for c in preds], case)


def _select():
    # dtype-generic: the chosen elements move as integers of the dtype's width
    with _Op("op_select") as o:
        f = o.fields(["dtype", "dst", "cond", "lhs", "rhs", "n"])
        cond = o.view(f["cond"], f["n"], "i8")
        z8 = const(i(8), 0)
        es = call("itemsize", [f["dtype"]], [index()])[0]

        def case(nbytes):
            ty = f"i{8 * nbytes}"
            a, b, d = (o.view(f[x], f["n"], ty) for x in ("lhs", "rhs", "dst"))
            with _for(o.c[0], f["n"], o.c[1]) as k:
                t = _cmpi("ne", memref.load(cond, [k]), z8)
                x = memref.load(a, [k])
                y = memref.load(b, [k])
                memref.store(arith.select(t, x, y), d, [k])

        _switch(es, [w // 8 for w in _WIDTHS], case)


def _convert(x, s: DType, d: DType):
    """`x` (element type `s` in memory) converted to `d` in memory."""
    ts, td = _MLIR_TYPE[s], _MLIR_TYPE[d]
    f32, tdt = scalar("f32"), scalar(td)
    if ts == td and (s in FLOAT_TYPES or d != DType.BOOL or s == DType.BOOL):
        # the same bits: identity, i8 <-> u8, bool -> i8/u8 (0/1)
        return arith.bitcast(tdt, x)
    if d == DType.BOOL:
        if s in FLOAT_TYPES:
            t = ts if s != DType.F16 else "f32"
            if s == DType.F16:
                x = arith.extf(f32, x)
            nonzero = _cmpf("UNE", x, const(scalar(t), 0.0))
        else:
            nonzero = _cmpi("ne", x, const(scalar(ts), 0))
        return arith.extui(i(8), nonzero)
    if s in FLOAT_TYPES and d in FLOAT_TYPES:
        if (s, d) == (DType.F64, DType.F16):
            return _f64_to_f16(x)
        return (arith.extf if _ITEMSIZE[d] > _ITEMSIZE[s] else arith.truncf)(tdt, x)
    if s in FLOAT_TYPES:  # -> integer: truncate toward zero (through i32 for the narrow types)
        if s == DType.F16:
            x = arith.extf(f32, x)
        if _ITEMSIZE[d] >= 4:
            return arith.fptosi(tdt, x)
        return arith.trunci(tdt, arith.fptosi(i(32), x))
    if d in FLOAT_TYPES:  # integer -> float; f16 through f32 (exact below 2^24, inf at and above 65520)
        op = arith.uitofp if s in _UNSIGNED else arith.sitofp
        if d == DType.F16:
            return arith.truncf(tdt, op(f32, x))
        return op(tdt, x)
    if _ITEMSIZE[d] < _ITEMSIZE[s]:  # integer -> integer: wrap, or extend by the source's sign
        return arith.trunci(tdt, x)
    return (arith.extui if s in _UNSIGNED else arith.extsi)(tdt, x)


def _cast():
    pairs = sorted(CASTS)
    with _Op("op_cast") as o:
        f = o.fields(["dst", "src", "n", "sdt", "ddt"])
        c16 = cidx(16)
        pair = arith.addi(arith.muli(f["sdt"], c16), f["ddt"])

        def case(key):
            s, d = DType(key // 16), DType(key % 16)
            sv, dv = o.view(f["src"], f["n"], _MLIR_TYPE[s]), o.view(f["dst"], f["n"], _MLIR_TYPE[d])
            with _for(o.c[0], f["n"], o.c[1]) as k:
                memref.store(_convert(memref.load(sv, [k]), s, d), dv, [k])

        _switch(pair, [int(s) * 16 + int(d) for s, d in pairs], case)


def _reduce(op, dt):
    """[m, size, n] -> [m, 1, n], sequentially along `size` in the compute type (an f16 sum
    accumulates in f32 and is rounded once)."""
    fn, st, t = REDUCE[op], _MLIR_TYPE[dt], _COMPUTE[dt]
    with _Op(_name(f"op_{op.name.lower()}", dt)) as o:
        f = o.fields(["dtype", "dst", "src", "m", "size", "n"])
        m, size, n = f["m"], f["size"], f["n"]
        big = arith.muli(arith.muli(m, size), n)
        small = arith.muli(m, n)
        s, d = o.view(f["src"], big, st), o.view(f["dst"], small, st)
        sn = arith.muli(size, n)
        with _for(o.c[0], m, o.c[1]) as row:
            rowb = arith.muli(row, sn)
            orow = arith.muli(row, n)
            with _for(o.c[0], n, o.c[1]) as k:
                i0 = arith.addi(rowb, k)
                x0 = _ld(s, i0, dt)
                acc = scf.ForOp(o.c[1], size, o.c[1], [x0])
                with ir.InsertionPoint(acc.body):
                    ij = arith.addi(i0, arith.muli(acc.induction_variable, n))
                    x = _ld(s, ij, dt)
                    scf.YieldOp([fn(acc.inner_iter_args[0], x)])
                _st(acc.results[0], d, arith.addi(orow, k), dt)


def _matmul_prologue(o: _Op, storage: str, compute: str):
    """The MatMul record's fields, the [m, k], [k, n], [m, n] views of its operands in the storage
    type, a zero of the compute type and `keep` (accumulate into dst)."""
    f = o.fields(["dtype", "dst", "lhs", "rhs", "m", "k", "n", "acc"])
    mk = arith.muli(f["m"], f["k"])
    kn = arith.muli(f["k"], f["n"])
    mn = arith.muli(f["m"], f["n"])
    a, b, d = o.view(f["lhs"], mk, storage), o.view(f["rhs"], kn, storage), o.view(f["dst"], mn, storage)
    zero = const(scalar(compute), 0.0)
    keep = _cmpi("ne", f["acc"], o.c[0])
    return f, a, b, d, zero, keep


# The CPU VM's MatMul computes blocks of rows x one vector of columns in registers
# (`_matmul_register_block`): each element still starts from dst (accumulate) or 0 and adds
# a[i, q] * b[q, j] for q = 0, 1, ... with one multiply and one add, as the i-k-j loop of the other
# rows and columns does -- bitwise the same results, without a load and a store of dst per product.
# Blocks of `_MM_ROW_BLOCKS[0]` rows, then of the next sizes for the m % 8 rows left; columns in
# vectors of `_MM_WIDE_BYTES`, then `_VECTOR_BYTES`, then i-k-j. Measured on the AVX-512 dev
# machine (Zen 4, f32, GMAC/s; 32x32x64 / 64x64x16 / 63x32x64 / 7x32x64): 4 rows x 128 bytes
# 38.5 / 33.9 / 38.2 / 32.4; 8 rows x 64 bytes, then 2 and 1 rows: 52.3 / 49.9 / 50.8 / 40.2 (the
# 8 accumulators are 8 zmm registers; 4 rows x 2 zmm or 12 rows were slower). Without AVX-512 a
# 64-byte vector is two ymm registers, so 4 rows keep the 8 accumulators in registers there.
_MM_ROW_BLOCKS = (8, 2, 1) if host_target().vector_bits >= 512 else (4, 2, 1)
_MM_WIDE_BYTES = 64
_VECTOR_BYTES = 32


def _matmul(dt, tiled: bool = False):
    if dt == DType.F16:
        return _matmul_widened(dt)
    t = _MLIR_TYPE[dt]
    with _Op(_name("op_matmul", dt)) as o:
        f, a, b, d, zero, keep = _matmul_prologue(o, t, t)
        m, k, n = f["m"], f["k"], f["n"]
        if tiled:
            # blocks of each size in turn over the rows the larger ones left, all with vector columns
            rows = o.c[0]
            for block in _MM_ROW_BLOCKS:
                rows = _matmul_blocks(o, a, b, d, zero, keep, rows, m, k, n, dt, block)
            return
        # i-k-j order: the innermost loop runs along contiguous rows of rhs and dst
        with _for(o.c[0], m, o.c[1]) as row:
            _matmul_row(o, a, b, d, zero, keep, row, o.c[0], k, n)


def _matmul_row(o, a, b, d, zero, keep, row, j0, k, n):
    """Columns [j0, n) of one dst row, i-k-j."""
    arow = arith.muli(row, k)
    drow = arith.muli(row, n)
    clear = scf.IfOp(keep, [], has_else=True)
    with ir.InsertionPoint(clear.then_block):
        scf.YieldOp([])
    with ir.InsertionPoint(clear.else_block):
        with _for(j0, n, o.c[1]) as j:
            memref.store(zero, d, [arith.addi(drow, j)])
        scf.YieldOp([])
    with _for(o.c[0], k, o.c[1]) as q:
        x = memref.load(a, [arith.addi(arow, q)])
        brow = arith.muli(q, n)
        with _for(j0, n, o.c[1]) as j:
            bq = arith.addi(brow, j)
            dj = arith.addi(drow, j)
            y = memref.load(b, [bq])
            old = memref.load(d, [dj])
            memref.store(arith.addf(old, arith.mulf(x, y)), d, [dj])


def _matmul_blocks(o, a, b, d, zero, keep, start, m, k, n, dt, block: int):
    """Rows [start, end) with end = m - (m - start) % block, in blocks of `block` rows; their
    columns in vectors of `_MM_WIDE_BYTES`, then of W = `_VECTOR_BYTES` (in elements of the type),
    held in registers along k; the remaining n % W columns i-k-j. Returns end (a Value)."""
    width = _VECTOR_BYTES // _ITEMSIZE[dt]
    wide_lanes = _MM_WIDE_BYTES // _ITEMSIZE[dt]
    R, W = cidx(block), cidx(width)
    wide = cidx(wide_lanes)
    rows = arith.subi(m, arith.remui(arith.subi(m, start), R))
    cols_wide = arith.subi(n, arith.remui(n, wide))
    cols = arith.subi(n, arith.remui(n, W))
    with _for(start, rows, R) as row:
        arows = [arith.muli(arith.addi(row, cidx(r)), k) for r in range(block)]
        drows = [arith.muli(arith.addi(row, cidx(r)), n) for r in range(block)]
        for lo, hi, lanes in ((o.c[0], cols_wide, wide_lanes), (cols_wide, cols, width)):
            _matmul_register_block(o, a, b, d, zero, keep, k, n, dt, arows, drows, lo, hi, lanes)
        for r in range(block):
            _matmul_row(o, a, b, d, zero, keep, arith.addi(row, cidx(r)), cols, k, n)
    return rows


def _matmul_register_block(o, a, b, d, zero, keep, k, n, dt, arows, drows, lo, hi, width):
    """Columns [lo, hi) of the rows at `arows` / `drows`, one vector of `width` at a time, each
    element's sum along k in a register (from dst or 0)."""
    vt = ir.VectorType.get([width], scalar(_MLIR_TYPE[dt]))
    vzero = vector.broadcast(vt, zero)
    with _for(lo, hi, cidx(width)) as j:
        starts = []
        for drow in drows:
            init = scf.IfOp(keep, [vt], has_else=True)
            with ir.InsertionPoint(init.then_block):
                scf.YieldOp([vector.load(vt, d, [arith.addi(drow, j)])])
            with ir.InsertionPoint(init.else_block):
                scf.YieldOp([vzero])
            starts.append(init.results[0])
        loop = scf.ForOp(o.c[0], k, o.c[1], starts)
        with ir.InsertionPoint(loop.body):
            q = loop.induction_variable
            y = vector.load(vt, b, [arith.addi(arith.muli(q, n), j)])
            accs = []
            for arow, acc in zip(arows, loop.inner_iter_args):
                x = vector.broadcast(vt, memref.load(a, [arith.addi(arow, q)]))
                accs.append(arith.addf(acc, arith.mulf(x, y)))
            scf.YieldOp(accs)
        for drow, acc in zip(drows, loop.results):
            vector.StoreOp(acc, d, [arith.addi(drow, j)])


def _matmul_widened(dt):
    """MatMul of a type computed wider (f16): i-j-k order, each dot product accumulated in the
    compute type along k and rounded once, as numpy's half matmul; `accumulate` adds that rounded
    product to dst (numpy's ``c += a @ b``)."""
    st, t = _MLIR_TYPE[dt], _COMPUTE[dt]
    with _Op(_name("op_matmul", dt)) as o:
        f, a, b, d, zero, keep = _matmul_prologue(o, st, t)
        m, k, n = f["m"], f["k"], f["n"]
        with _for(o.c[0], m, o.c[1]) as row:
            arow = arith.muli(row, k)
            drow = arith.muli(row, n)
            with _for(o.c[0], n, o.c[1]) as j:
                dot = scf.ForOp(o.c[0], k, o.c[1], [zero])
                with ir.InsertionPoint(dot.body):
                    q = dot.induction_variable
                    aq = arith.addi(arow, q)
                    bq = arith.addi(arith.muli(q, n), j)
                    x = _ld(a, aq, dt)
                    y = _ld(b, bq, dt)
                    scf.YieldOp([arith.addf(dot.inner_iter_args[0], arith.mulf(x, y))])
                dj = arith.addi(drow, j)
                pr = arith.truncf(scalar(st), dot.results[0])
                acc = scf.IfOp(keep, [scalar(st)], has_else=True)
                with ir.InsertionPoint(acc.then_block):
                    old = _ld(d, dj, dt)
                    total = arith.addf(old, arith.extf(scalar(t), pr))
                    scf.YieldOp([arith.truncf(scalar(st), total)])
                with ir.InsertionPoint(acc.else_block):
                    scf.YieldOp([pr])
                memref.store(acc.results[0], d, [dj])


def _fld():
    code_t, _, _, _ = _types()
    _, entry = function("fld", [code_t, index()], [index()], private=True)
    with ir.InsertionPoint(entry):
        word = memref.load(entry.arguments[0], [entry.arguments[1]])
        func.ReturnOp([arith.index_cast(index(), word)])


def _itemsize_fn():
    _, entry = function("itemsize", [index()], [index()], private=True)
    with ir.InsertionPoint(entry):
        sizes = list(_ITEMSIZE.items())
        op = scf.IndexSwitchOp([index()], entry.arguments[0], [int(dt) for dt, _ in sizes])
        for k, (_, size) in enumerate(sizes):
            with ir.InsertionPoint(op.case_block(k)):
                scf.YieldOp([cidx(size)])
        with ir.InsertionPoint(op.default_block):
            scf.YieldOp([cidx(1)])
        func.ReturnOp([op.results[0]])


def _copy():
    # dtype-generic: a byte copy of size * itemsize bytes
    with _Op("op_copy") as o:
        f = o.fields(["dtype", "dst", "src", "n"])
        es = call("itemsize", [f["dtype"]], [index()])[0]
        nb = arith.muli(f["n"], es)
        with _for(o.c[0], nb, o.c[1]) as k:
            si = arith.addi(f["src"], k)
            di = arith.addi(f["dst"], k)
            memref.store(memref.load(o.l, [si]), o.l, [di])


def _broadcast():
    # dtype-generic: [m,1,n] -> [m,size,n], moving elements as integers of the dtype's width
    with _Op("op_broadcast") as o:
        f = o.fields(["dtype", "dst", "src", "m", "size", "n"])
        m, size, n = f["m"], f["size"], f["n"]
        es = call("itemsize", [f["dtype"]], [index()])[0]
        small = arith.muli(m, n)
        big = arith.muli(small, size)

        def case(nbytes):
            ty = f"i{8 * nbytes}"
            s, d = o.view(f["src"], small, ty), o.view(f["dst"], big, ty)
            # n == 1 (a scalar or a column broadcast along the row): each source element fills a
            # run of `size` -- one loop over the run, which LLVM vectorises, instead of `size`
            # one-iteration inner loops; the elements written are the same
            column = scf.IfOp(_cmpi("eq", n, o.c[1]), [], has_else=True)
            with ir.InsertionPoint(column.then_block):
                with _for(o.c[0], m, o.c[1]) as row:
                    v = memref.load(s, [row])
                    ds = arith.muli(row, size)
                    with _for(o.c[0], size, o.c[1]) as j:
                        memref.store(v, d, [arith.addi(ds, j)])
                scf.YieldOp([])
            with ir.InsertionPoint(column.else_block):
                with _for(o.c[0], m, o.c[1]) as row:
                    sr = arith.muli(row, n)
                    ds = arith.muli(row, size)
                    with _for(o.c[0], size, o.c[1]) as j:
                        dr = arith.muli(arith.addi(ds, j), n)
                        with _for(o.c[0], n, o.c[1]) as k:
                            sk = arith.addi(sr, k)
                            dk = arith.addi(dr, k)
                            memref.store(memref.load(s, [sk]), d, [dk])
                scf.YieldOp([])

        _switch(es, [w // 8 for w in _WIDTHS], case)


def _box(width):
    """Move one n-d tile between an argument and local memory (element width `width` bits): the
    innermost tile dimension is a strided run, the outer ones are unravelled once per run."""
    _, bytes_t, _, vec_t = _types()
    ty = memref_type(i(width))
    idx = index()
    _, entry = function(f"box_{width}", [bytes_t, bytes_t, idx, idx, idx, vec_t, vec_t, vec_t, i(1)], private=True)
    g, l, gbase, lbyte, n, sizes, eff, strides, store = entry.arguments
    with ir.InsertionPoint(entry):
        c = _consts()
        ceb = cidx(width // 8)
        gn = arith.divui(memref.dim(g, c[0]), ceb)
        gv = memref.view(ty, g, c[0], [gn])

        def product(upper, vec):
            loop = scf.ForOp(c[0], upper, c[1], [c[1]])
            with ir.InsertionPoint(loop.body):
                s = memref.load(vec, [loop.induction_variable])
                scf.YieldOp([arith.muli(loop.inner_iter_args[0], s)])
            return loop.results[0]

        lv = memref.view(ty, l, lbyte, [product(n, sizes)])
        last = arith.subi(n, c[1])
        inner = memref.load(eff, [last])
        ist = memref.load(strides, [last])
        lst0 = memref.load(sizes, [last])
        with _for(c[0], product(last, eff), c[1]) as outer:
            walk = scf.ForOp(c[0], last, c[1], [gbase, c[0], outer, lst0])
            with ir.InsertionPoint(walk.body):
                ga, la, rr, lss = walk.inner_iter_args
                j = arith.subi(arith.subi(last, c[1]), walk.induction_variable)
                e = memref.load(eff, [j])
                ij = arith.remui(rr, e)
                r2 = arith.divui(rr, e)
                gs = memref.load(strides, [j])
                ga2 = arith.addi(ga, arith.muli(ij, gs))
                la2 = arith.addi(la, arith.muli(ij, lss))
                sj = memref.load(sizes, [j])
                scf.YieldOp([ga2, la2, r2, arith.muli(lss, sj)])
            go, lo = walk.results[0], walk.results[1]
            branch = scf.IfOp(store, [], has_else=True)
            for block, (src, dst, to_global) in ((branch.then_block, (lv, gv, True)),
                                                 (branch.else_block, (gv, lv, False))):
                with ir.InsertionPoint(block):
                    # a contiguous run (global stride 1, every Load/Store) as a plain copy loop,
                    # which LLVM vectorises; a strided one element by element
                    dense = scf.IfOp(_cmpi("eq", ist, c[1]), [], has_else=True)
                    for body, stride in ((dense.then_block, None), (dense.else_block, ist)):
                        with ir.InsertionPoint(body):
                            with _for(c[0], inner, c[1]) as k:
                                li = arith.addi(lo, k)
                                gi = arith.addi(go, k if stride is None else arith.muli(k, stride))
                                memref.store(memref.load(src, [li if to_global else gi]), dst,
                                             [gi if to_global else li])
                            scf.YieldOp([])
                    scf.YieldOp([])
        func.ReturnOp([])


def _clamped(code, gb, c, bidx, bind, size):
    """``min(size, extent - block index · block)`` of the grid dimension `bind`: a tile dimension
    bound to a grid dimension is clamped on its tail tile."""
    ga = arith.addi(gb, arith.muli(bind, c[3]))
    blk = call("fld", [code, arith.addi(ga, c[1])], [index()])[0]
    ext = call("fld", [code, arith.addi(ga, c[2])], [index()])[0]
    start = arith.muli(memref.load(bidx, [bind]), blk)
    return arith.minsi(size, arith.subi(ext, start))


def _if_index(cond, then, otherwise):
    """``scf.if cond -> index``, each branch yielding what its builder returns."""
    op = scf.IfOp(cond, [index()], has_else=True)
    with ir.InsertionPoint(op.then_block):
        scf.YieldOp([then()])
    with ir.InsertionPoint(op.else_block):
        scf.YieldOp([otherwise()])
    return op.results[0]


def _mem():
    """Load/Store/ViewLoad/ViewStore (Alg. 2 line 11: the tile id is an operand)."""
    code_t, bytes_t, args_t, vec_t = _types()
    idx = index()
    _, entry = function("op_mem", [code_t, idx, bytes_t, args_t, idx, idx, idx, i(1), i(1)], private=True)
    code, p, l, args, gb, G, t, view, store = entry.arguments
    with ir.InsertionPoint(entry):
        c = _consts()
        cm1 = cidx(-1)
        f = _fields(code, p, c, ["dtype", "loc", "arg", "off"])
        q = arith.addi(p, c[7])
        bidx = memref.alloca(vec_t, [], [])
        grid = scf.ForOp(c[0], G, c[1], [f["off"], t])
        with ir.InsertionPoint(grid.body):
            b, r = grid.inner_iter_args
            d = arith.subi(arith.subi(G, c[1]), grid.induction_variable)
            cnt_at = arith.addi(gb, arith.muli(d, c[3]))
            cnt = call("fld", [code, cnt_at], [idx])[0]
            blk = call("fld", [code, arith.addi(cnt_at, c[1])], [idx])[0]
            bd = arith.remui(r, cnt)
            r2 = arith.divui(r, cnt)
            memref.store(bd, bidx, [d])
            gs = call("fld", [code, arith.addi(q, d)], [idx])[0]
            scf.YieldOp([arith.addi(b, arith.muli(arith.muli(bd, blk), gs)), r2])
        base = grid.results[0]
        q2 = arith.addi(q, G)
        sizes, strides, binds, eff = (memref.alloca(vec_t, [], []) for _ in range(4))
        dims = scf.IfOp(view, [idx], has_else=True)
        with ir.InsertionPoint(dims.then_block):
            nv = call("fld", [code, q2], [idx])[0]
            s0 = arith.addi(q2, c[1])
            st0 = arith.addi(arith.addi(s0, nv), c[1])
            bd0 = arith.addi(arith.addi(st0, nv), c[1])
            with _for(c[0], nv, c[1]) as j:
                for start, vec in ((s0, sizes), (st0, strides), (bd0, binds)):
                    memref.store(call("fld", [code, arith.addi(start, j)], [idx])[0], vec, [j])
            scf.YieldOp([nv])
        with ir.InsertionPoint(dims.else_block):
            rows = call("fld", [code, q2], [idx])[0]
            row = call("fld", [code, arith.addi(q2, c[1])], [idx])[0]
            bind = call("fld", [code, arith.addi(q2, c[2])], [idx])[0]
            # a contiguous run of rows*row elements: one 1-d box, clamped here on the tail tile
            er = _if_index(_cmpi("sge", bind, c[0]), lambda: _clamped(code, gb, c, bidx, bind, rows), lambda: rows)
            full = arith.muli(rows, row)
            run = arith.muli(er, row)
            memref.store(full, sizes, [c[0]])
            memref.store(run, eff, [c[0]])
            memref.store(c[1], strides, [c[0]])
            memref.store(cm1, binds, [c[0]])
            scf.YieldOp([c[1]])
        n = dims.results[0]
        # tile dims bound to a grid dim are clamped on its tail tile (the 1-d run of Load/Store is
        # already clamped: its bind is -1 here)
        with _for(c[0], n, c[1]) as j:
            s = memref.load(sizes, [j])
            bj = memref.load(binds, [j])
            isb = _cmpi("sge", bj, c[0])
            s1 = arith.select(view, s, memref.load(eff, [j]))
            memref.store(_if_index(isb, lambda: _clamped(code, gb, c, bidx, bj, s), lambda: s1), eff, [j])
        # the argument's descriptor from the table (valid bytecode never names one past it: decode /
        # the templates' guards; the bound is kept here so that no record reads outside the table)
        known = _cmpi("ult", f["arg"], memref.dim(args, c[0]))
        check = scf.IfOp(known, [], has_else=False)
        with ir.InsertionPoint(check.then_block):
            g = memref.load(args, [f["arg"]])
            es = call("itemsize", [f["dtype"]], [idx])[0]
            _switch(es, [w // 8 for w in _WIDTHS],
                    lambda nbytes: call(f"box_{8 * nbytes}", [g, l, base, f["loc"], n, sizes, eff, strides, store]))
            scf.YieldOp([])
        func.ReturnOp([])


def _dtype_dispatch(name: str, types) -> None:
    """``@<name>``: switch on the record's dtype field (word p+2) to the typed variant
    ``@<name>_<dtype>``."""
    with _Op(name) as o:
        f = o.fields(["dtype"])
        _switch(f["dtype"], [int(dt) for dt in types],
                lambda case: call(_name(name, DType(case)), [o.code, o.p, o.l]))


def _all_types(gen, name: str, types) -> None:
    """`gen(dt)` for every type and the dispatch over them."""
    for dt in types:
        gen(dt)
    _dtype_dispatch(name, types)


#: opcode -> the function of its instruction (the memory instructions go to ``@op_mem``)
_HANDLERS = {Opcode.COPY: "op_copy", Opcode.BROADCAST: "op_broadcast", Opcode.IS_FINITE: "op_is_finite",
             Opcode.CMP: "op_cmp", Opcode.SELECT: "op_select", Opcode.CAST: "op_cast", Opcode.MATMUL: "op_matmul"}
_TYPED = ((UNARY, _unary), ((Opcode.ADDS, Opcode.MULS), _scalar), (BINARY, _binary), (REDUCE, _reduce))
_HANDLERS.update({op: f"op_{op.name.lower()}" for table, _ in _TYPED for op in table})
#: (opcode, view, store) of the memory instructions
_MEMORY = ((Opcode.LOAD, False, False), (Opcode.VIEW_LOAD, True, False), (Opcode.STORE, False, True),
           (Opcode.VIEW_STORE, True, True))


def _run_tile(code_t, bytes_t, args_t) -> None:
    idx = index()
    _, entry = function("run_tile", [code_t, bytes_t, args_t, idx], private=True)
    code, l, args, t = entry.arguments
    with ir.InsertionPoint(entry):
        c = _consts()
        flags = {True: const(i(1), True), False: const(i(1), False)}
        H, cs, A, G = (call("fld", [code, c[k]], [idx])[0] for k in (2, 4, 7, 8))
        gb = arith.addi(arith.muli(A, c[2]), c[9])
        end = arith.addi(H, cs)
        loop = scf.WhileOp([idx], [H])
        before = loop.before.blocks.append(idx)
        with ir.InsertionPoint(before):
            scf.ConditionOp(_cmpi("slt", before.arguments[0], end), [before.arguments[0]])
        after = loop.after.blocks.append(idx)
        with ir.InsertionPoint(after):
            p = after.arguments[0]
            op = arith.index_cast(idx, memref.load(code, [p]))
            length = call("fld", [code, arith.addi(p, c[1])], [idx])[0]
            cases = [int(op_) for op_, _, _ in _MEMORY] + [int(op_) for op_ in sorted(_HANDLERS)]
            memory = {int(op_): (view, store) for op_, view, store in _MEMORY}

            def case(opcode):
                if opcode in memory:
                    view, store = memory[opcode]
                    call("op_mem", [code, p, l, args, gb, G, t, flags[view], flags[store]])
                else:
                    call(_HANDLERS[Opcode(opcode)], [code, p, l])

            _switch(op, cases, case)
            scf.YieldOp([arith.addi(p, length)])
        func.ReturnOp([])


def build_vm_module(gpu: bool = False) -> ir.Module:
    """The VM (see the module docstring), built in the current context; `gpu=True`: the CUDA
    variant ``@dvm_vm_gpu(code, local, args, M, local_bytes)`` with one thread block per tile."""
    code_t, bytes_t, args_t, _ = _types()
    idx = index()
    module = ir.Module.create()
    with ir.InsertionPoint(module.body):
        _fld()
        _itemsize_fn()
        _mem()
        _copy()
        _broadcast()
        _select()
        _cast()
        # the PTX VM keeps f32 arithmetic only (f64 doubles its PTX and its assembly time)
        types = GPU_ARITH_TYPES if gpu else ARITH_TYPES
        _all_types(_is_finite, "op_is_finite", types)
        _all_types(_cmp, "op_cmp", tuple(DType))
        _all_types(lambda dt: _matmul(dt, tiled=not gpu), "op_matmul", types)
        for table, gen in _TYPED:
            for op in table:
                _all_types(lambda dt, op=op: gen(op, dt), f"op_{op.name.lower()}", types)
        for w in _WIDTHS:
            _box(w)
        _run_tile(code_t, bytes_t, args_t)
        if gpu:
            # one thread block per tile: `scf.parallel` over the tiles, mapped to the grid by the
            # CUDA lowering; each tile gets its own `local_bytes` slice of %local
            _, entry = function("dvm_vm_gpu", [code_t, bytes_t, args_t, idx, idx])
            code, local, args, M, lb = entry.arguments
            with ir.InsertionPoint(entry):
                c = _consts()
                par = scf.ParallelOp([], [c[0]], [M], [c[1]], [])
                body = par.regions[0].blocks.append(idx)
                with ir.InsertionPoint(body):
                    tile = body.arguments[0]
                    l = memref.view(bytes_t, local, arith.muli(tile, lb), [lb])
                    call("run_tile", [code, l, args, tile])
                    scf.ReduceOp([], 0)
                func.ReturnOp([])
        else:
            _, entry = function("dvm_vm", [code_t, bytes_t, args_t, idx, idx],
                                attrs={"llvm.emit_c_interface": ir.UnitAttr.get()})
            code, l, args, t0, t1 = entry.arguments
            with ir.InsertionPoint(entry):
                c = _consts()
                with _for(t0, t1, c[1]) as tile:
                    call("run_tile", [code, l, args, tile])
                func.ReturnOp([])
            # every kernel of one shape in one call (`native.Sequence`): kernel k's code and
            # argument table, all its tiles (the header's tile count, word 5), one after another on
            # one local memory -- no host code between the kernels
            codes_t, tables_t = memref_type(code_t), memref_type(args_t)
            _, entry = function("dvm_seq", [codes_t, bytes_t, tables_t],
                                attrs={"llvm.emit_c_interface": ir.UnitAttr.get()})
            codes, l, tables = entry.arguments
            with ir.InsertionPoint(entry):
                c = _consts()
                count = arith.minui(memref.dim(codes, c[0]), memref.dim(tables, c[0]))
                with _for(c[0], count, c[1]) as k:
                    code = memref.load(codes, [k])
                    args = memref.load(tables, [k])
                    with _for(c[0], call("fld", [code, c[5]], [idx])[0], c[1]) as tile:
                        call("run_tile", [code, l, args, tile])
                func.ReturnOp([])
    return module


def handled_opcodes() -> frozenset:
    return frozenset(_HANDLERS) | {op for op, _, _ in _MEMORY}
