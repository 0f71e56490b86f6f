"""The DVM virtual machine (Fang et al., DVM, §4.3, Algorithm 2) written as MLIR.

`vm_module_text()` returns one MLIR module (func/scf/memref/arith/math only) whose entry
``@dvm_vm`` interprets the bytecode of `bytecode.py` exactly like the numpy reference `vm.py`:

    func.func @dvm_vm(%code: memref<?xi64>, %local: memref<?xi8>,
                      %args: memref<?xmemref<?xi8>>, %t0: index, %t1: index)

It runs tiles ``[t0, t1)`` (the tile range of one core, Alg. 2 lines 3-5) on one local memory: for
each tile ``@run_tile`` runs an ``scf.while`` that walks the code body from ``H`` to ``H + CodeSize`` (lines 6-7), an
``scf.index_switch`` on the record's opcode is the instruction table I (lines 8-9), memory
instructions get the tile id (line 11), and the loop steps by the record's ``Insn_Len`` (line 14).
The arguments are one table of byte-buffer descriptors (``memref<?xmemref<?xi8>>``, the header's A
entries) indexed by a record's argument number, so the VM takes as many as the bytecode names; typed
access goes through ``memref.view``.
``vm_module_text(gpu=True)`` wraps the same ``@run_tile`` in ``@dvm_vm_gpu``, an ``scf.parallel`` over
the tiles for the CUDA path (`gpu.py`).

The text is generated from Python only to stamp out per-opcode / per-width / per-dtype variants;
it is built and JIT-compiled once per process (`native.NativeVM`), never per shape. Arithmetic is
on f32 and f64 on the CPU, f32 in the PTX variant (`ARITH_TYPES`: every arithmetic instruction is stamped once per type as
``@op_<name>_<type>`` and ``@op_<name>`` switches on the record's dtype field; f64 is what
torch-mlir's LayerNorm decomposition computes the variance in); the other dtypes move through
Load/Store/Copy/Broadcast and the casts of `CASTS`. `native.unsupported_reason` tells which
programs the native VM runs.
"""

from __future__ import annotations

from .isa import CmpType, DType, Opcode

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
    Opcode.SQRT: "math.sqrt {x} : {t}",
    Opcode.ABS: "math.absf {x} : {t}",
    Opcode.LOG: "math.log {x} : {t}",
    Opcode.EXP: "math.exp {x} : {t}",
    Opcode.ROUND: "math.roundeven {x} : {t}",  # np.rint: round half to even
    Opcode.FLOOR: "math.floor {x} : {t}",
}
BINARY = {
    Opcode.ADD: "arith.addf {a}, {b} : {t}",
    Opcode.SUB: "arith.subf {a}, {b} : {t}",
    Opcode.MUL: "arith.mulf {a}, {b} : {t}",
    Opcode.DIV: "arith.divf {a}, {b} : {t}",
    Opcode.MIN: "arith.minimumf {a}, {b} : {t}",  # NaN-propagating like np.minimum
    Opcode.MAX: "arith.maximumf {a}, {b} : {t}",
    Opcode.POW: "math.powf {a}, {b} : {t}",
}
CMP_FLOAT = {CmpType.EQ: "oeq", CmpType.NE: "une", CmpType.LT: "olt", CmpType.LE: "ole",
             CmpType.GT: "ogt", CmpType.GE: "oge"}
CMP_SIGNED = {CmpType.EQ: "eq", CmpType.NE: "ne", CmpType.LT: "slt", CmpType.LE: "sle",
              CmpType.GT: "sgt", CmpType.GE: "sge"}
CMP_UNSIGNED = {CmpType.EQ: "eq", CmpType.NE: "ne", CmpType.LT: "ult", CmpType.LE: "ule",
                CmpType.GT: "ugt", CmpType.GE: "uge"}
REDUCE = {Opcode.SUM: "arith.addf", Opcode.REDUCE_MAX: "arith.maximumf", Opcode.REDUCE_MIN: "arith.minimumf"}
#: IsFinite: the exponent mask of each float type (finite <=> not all ones; an integer test, no inf
#: literal, which the LLVM IR parser of llvmlite does not read)
_EXPONENT = {DType.F16: (16, 0x7C00), DType.F32: (32, 0x7F800000), DType.F64: (64, 0x7FF0000000000000)}

_CONSTS = "\n".join(f"  %c{i} = arith.constant {i} : index" for i in range(12))
_CM1 = "  %cm1 = arith.constant -1 : index"


def _fields(names, first=2):
    """Lines loading record fields ``names`` (at words p+first, p+first+1, ...) as index values."""
    out = []
    for i, name in enumerate(names):
        if name is None:
            continue
        out.append(f"  %{name}_at = arith.addi %p, %c{first + i} : index")
        out.append(f"  %{name} = func.call @fld(%code, %{name}_at) : (memref<?xi64>, index) -> index")
    return "\n".join(out)


def _view(name, byte, count, ty):
    return f"  %{name} = memref.view %l[%{byte}][%{count}] : memref<?xi8> to memref<?x{ty}>"


def _op_head(name):
    return (f"func.func private @{name}(%code: memref<?xi64>, %p: index, %l: memref<?xi8>) {{\n"
            f"{_CONSTS}\n")


def _name(op_name: str, dt: DType) -> str:
    return f"{op_name}_{dt.name.lower()}"


def _ld(var, view, idx, dt, ind="    "):
    """Load element `idx` of `view` (element type `dt`) as `%var` in its compute type."""
    st, ct = _MLIR_TYPE[dt], _COMPUTE.get(dt, _MLIR_TYPE[dt])
    if st == ct:
        return f"{ind}%{var} = memref.load %{view}[%{idx}] : memref<?x{st}>\n"
    return (f"{ind}%{var}_m = memref.load %{view}[%{idx}] : memref<?x{st}>\n"
            f"{ind}%{var} = arith.extf %{var}_m : {st} to {ct}\n")


def _st(val, view, idx, dt, ind="    "):
    """Store `%val` (in `dt`'s compute type) as element `idx` of `view`: rounded back once."""
    st, ct = _MLIR_TYPE[dt], _COMPUTE.get(dt, _MLIR_TYPE[dt])
    if st == ct:
        return f"{ind}memref.store %{val}, %{view}[%{idx}] : memref<?x{st}>\n"
    return (f"{ind}%{val}_r = arith.truncf %{val} : {ct} to {st}\n"
            f"{ind}memref.store %{val}_r, %{view}[%{idx}] : memref<?x{st}>\n")


def _f64_to_f16(x, y, ind):
    """`%y` (f16) = `%x` (f64) rounded once to nearest even, as numpy's ``npy_double_to_half``.
    LLVM's direct fptrunc calls ``__truncdfhf2``, which the JIT cannot resolve; rounding to f32
    by round-to-odd and then to f16 is the same single rounding (24 >= 11 + 2 bits: Boldo and
    Melquiond, "Emulation of FMA and correctly rounded sums: proved algorithms using rounding to
    odd")."""
    return (f"{ind}%{y}_n = arith.truncf %{x} : f64 to f32\n"
            f"{ind}%{y}_b = arith.extf %{y}_n : f32 to f64\n"
            f"{ind}%{y}_ne = arith.cmpf one, %{y}_b, %{x} : f64\n"  # inexact (never for NaN)
            f"{ind}%{y}_ab = math.absf %{y}_b : f64\n"
            f"{ind}%{y}_ax = math.absf %{x} : f64\n"
            f"{ind}%{y}_up = arith.cmpf ogt, %{y}_ab, %{y}_ax : f64\n"  # rounded away from zero
            f"{ind}%{y}_i = arith.bitcast %{y}_n : f32 to i32\n"
            f"{ind}%{y}_d = arith.extui %{y}_up : i1 to i32\n"
            f"{ind}%{y}_t = arith.subi %{y}_i, %{y}_d : i32\n"  # truncated toward zero
            f"{ind}%{y}_o = arith.extui %{y}_ne : i1 to i32\n"
            f"{ind}%{y}_s = arith.ori %{y}_t, %{y}_o : i32\n"  # the sticky bit: odd if inexact
            f"{ind}%{y}_f = arith.bitcast %{y}_s : i32 to f32\n"
            f"{ind}%{y} = arith.truncf %{y}_f : f32 to f16\n")


def _unary(op, dt):
    t = _COMPUTE[dt]
    expr = UNARY[op].format(x="%x", t=t)
    return (_op_head(_name(f"op_{op.name.lower()}", dt)) + _fields(["dtype", "dst", "src", "n"]) + "\n"
            + _view("s", "src", "n", _MLIR_TYPE[dt]) + "\n" + _view("d", "dst", "n", _MLIR_TYPE[dt]) + "\n"
            + "  scf.for %i = %c0 to %n step %c1 {\n" + _ld("x", "s", "i", dt)
            + f"    %y = {expr}\n" + _st("y", "d", "i", dt) + "  }\n  return\n}\n")


def _is_finite(dt):
    bits, mask = _EXPONENT[dt]
    it = f"i{bits}"
    return (_op_head(_name("op_is_finite", dt)) + _fields(["dtype", "dst", "src", "n"]) + "\n"
            + _view("s", "src", "n", _MLIR_TYPE[dt]) + "\n" + _view("d", "dst", "n", "i8") + "\n"
            + f"  %em = arith.constant {mask} : {it}\n"
            "  scf.for %i = %c0 to %n step %c1 {\n"
            f"    %x = memref.load %s[%i] : memref<?x{_MLIR_TYPE[dt]}>\n"
            f"    %xb = arith.bitcast %x : {_MLIR_TYPE[dt]} to {it}\n"
            f"    %a = arith.andi %xb, %em : {it}\n"
            f"    %b = arith.cmpi ne, %a, %em : {it}\n"
            "    %y = arith.extui %b : i1 to i8\n"
            "    memref.store %y, %d[%i] : memref<?xi8>\n"
            "  }\n  return\n}\n")


def _immediate(dt):
    """(lines, value): the record's f64 immediate (word p+5) in `dt`'s compute type, rounded to
    `dt` first as numpy's ``dtype.type(scalar)``."""
    lines = ("  %sc_at = arith.addi %p, %c5 : index\n"
             "  %bits = memref.load %code[%sc_at] : memref<?xi64>\n"
             "  %sd = arith.bitcast %bits : i64 to f64\n")
    if dt == DType.F64:
        return lines, "%sd"
    if dt == DType.F32:
        return lines + "  %sv = arith.truncf %sd : f64 to f32\n", "%sv"
    return lines + _f64_to_f16("sd", "sh", "  ") + "  %sv = arith.extf %sh : f16 to f32\n", "%sv"


def _scalar(op, dt):
    fn = "arith.addf" if op == Opcode.ADDS else "arith.mulf"
    imm, sv = _immediate(dt)
    return (_op_head(_name(f"op_{op.name.lower()}", dt)) + _fields(["dtype", "dst", "src", None, "n"]) + "\n"
            + imm + _view("s", "src", "n", _MLIR_TYPE[dt]) + "\n" + _view("d", "dst", "n", _MLIR_TYPE[dt]) + "\n"
            + "  scf.for %i = %c0 to %n step %c1 {\n" + _ld("x", "s", "i", dt)
            + f"    %y = {fn} %x, {sv} : {_COMPUTE[dt]}\n" + _st("y", "d", "i", dt) + "  }\n  return\n}\n")


def _binary(op, dt):
    expr = BINARY[op].format(a="%x", b="%y", t=_COMPUTE[dt])
    st = _MLIR_TYPE[dt]
    return (_op_head(_name(f"op_{op.name.lower()}", dt)) + _fields(["dtype", "dst", "lhs", "rhs", "n"]) + "\n"
            + _view("a", "lhs", "n", st) + "\n" + _view("b", "rhs", "n", st) + "\n"
            + _view("d", "dst", "n", st) + "\n"
            + "  scf.for %i = %c0 to %n step %c1 {\n" + _ld("x", "a", "i", dt) + _ld("y", "b", "i", dt)
            + f"    %z = {expr}\n" + _st("z", "d", "i", dt) + "  }\n  return\n}\n")


def _cmp(dt):
    st = _MLIR_TYPE[dt]
    if dt in FLOAT_TYPES:
        preds, fn, t = CMP_FLOAT, "arith.cmpf", _COMPUTE[dt]
    else:
        preds, fn, t = (CMP_UNSIGNED if dt in _UNSIGNED else CMP_SIGNED), "arith.cmpi", st
    cases = []
    for c, pred in preds.items():
        cases.append(
            f"  case {int(c)} {{\n"
            "    scf.for %i = %c0 to %n step %c1 {\n"
            + _ld("x", "a", "i", dt, "      ") + _ld("y", "b", "i", dt, "      ")
            + f"      %z = {fn} {pred}, %x, %y : {t}\n"
            "      %w = arith.extui %z : i1 to i8\n"
            "      memref.store %w, %d[%i] : memref<?xi8>\n"
            "    }\n    scf.yield\n  }\n")
    return (_op_head(_name("op_cmp", dt)) + _fields(["dtype", "dst", "lhs", "rhs", "n", "cmp"]) + "\n"
            + _view("a", "lhs", "n", st) + "\n" + _view("b", "rhs", "n", st) + "\n"
            + _view("d", "dst", "n", "i8") + "\n"
            + "  scf.index_switch %cmp\n" + "".join(cases) + "  default {\n    scf.yield\n  }\n"
            "  return\n}\n")


def _select():
    # dtype-generic: the chosen elements move as integers of the dtype's width
    cases = []
    for w in (8, 16, 32, 64):
        ty = f"i{w}"
        cases.append(
            f"  case {w // 8} {{\n"
            f"    %a = memref.view %l[%lhs][%n] : memref<?xi8> to memref<?x{ty}>\n"
            f"    %b = memref.view %l[%rhs][%n] : memref<?xi8> to memref<?x{ty}>\n"
            f"    %d = memref.view %l[%dst][%n] : memref<?xi8> to memref<?x{ty}>\n"
            "    scf.for %i = %c0 to %n step %c1 {\n"
            "      %k = memref.load %c[%i] : memref<?xi8>\n"
            "      %t = arith.cmpi ne, %k, %z8 : i8\n"
            f"      %x = memref.load %a[%i] : memref<?x{ty}>\n"
            f"      %y = memref.load %b[%i] : memref<?x{ty}>\n"
            f"      %z = arith.select %t, %x, %y : {ty}\n"
            f"      memref.store %z, %d[%i] : memref<?x{ty}>\n"
            "    }\n    scf.yield\n  }\n")
    return (_op_head("op_select") + _fields(["dtype", "dst", "cond", "lhs", "rhs", "n"]) + "\n"
            + _view("c", "cond", "n", "i8") + "\n"
            + "  %z8 = arith.constant 0 : i8\n"
            "  %es = func.call @itemsize(%dtype) : (index) -> index\n"
            "  scf.index_switch %es\n" + "".join(cases) + "  default {\n    scf.yield\n  }\n"
            "  return\n}\n")


def _convert(s: DType, d: DType, ind: str) -> str:
    """Lines converting `%x` (element type `s` in memory) to `%y` (`d` in memory)."""
    ts, td = _MLIR_TYPE[s], _MLIR_TYPE[d]
    if ts == td and (s in FLOAT_TYPES or d != DType.BOOL or s == DType.BOOL):
        # the same bits: identity, i8 <-> u8, bool -> i8/u8 (0/1)
        return f"{ind}%y = arith.bitcast %x : {ts} to {td}\n"
    if d == DType.BOOL:
        if s in FLOAT_TYPES:
            x, t = ("%x", ts) if s != DType.F16 else ("%xf", "f32")
            pre = "" if s != DType.F16 else f"{ind}%xf = arith.extf %x : f16 to f32\n"
            return (pre + f"{ind}%z0 = arith.constant 0.0 : {t}\n{ind}%b = arith.cmpf une, {x}, %z0 : {t}\n"
                    f"{ind}%y = arith.extui %b : i1 to i8\n")
        return (f"{ind}%z0 = arith.constant 0 : {ts}\n{ind}%b = arith.cmpi ne, %x, %z0 : {ts}\n"
                f"{ind}%y = arith.extui %b : i1 to i8\n")
    if s in FLOAT_TYPES and d in FLOAT_TYPES:
        if (s, d) == (DType.F64, DType.F16):
            return _f64_to_f16("x", "y", ind)
        op = "arith.extf" if _ITEMSIZE[d] > _ITEMSIZE[s] else "arith.truncf"
        return f"{ind}%y = {op} %x : {ts} to {td}\n"
    if s in FLOAT_TYPES:  # -> integer: truncate toward zero (through i32 for the narrow types)
        pre, x, t = "", "%x", ts
        if s == DType.F16:
            pre, x, t = f"{ind}%xf = arith.extf %x : f16 to f32\n", "%xf", "f32"
        if _ITEMSIZE[d] >= 4:
            return pre + f"{ind}%y = arith.fptosi {x} : {t} to {td}\n"
        return pre + f"{ind}%yi = arith.fptosi {x} : {t} to i32\n{ind}%y = arith.trunci %yi : i32 to {td}\n"
    if d in FLOAT_TYPES:  # integer -> float; f16 through f32 (exact below 2^24, inf at and above 65520)
        op = "arith.uitofp" if s in _UNSIGNED else "arith.sitofp"
        if d == DType.F16:
            return f"{ind}%yf = {op} %x : {ts} to f32\n{ind}%y = arith.truncf %yf : f32 to f16\n"
        return f"{ind}%y = {op} %x : {ts} to {td}\n"
    if _ITEMSIZE[d] < _ITEMSIZE[s]:  # integer -> integer: wrap, or extend by the source's sign
        return f"{ind}%y = arith.trunci %x : {ts} to {td}\n"
    op = "arith.extui" if s in _UNSIGNED else "arith.extsi"
    return f"{ind}%y = {op} %x : {ts} to {td}\n"


def _cast():
    cases = []
    for s, d in sorted(CASTS):
        st, dt = _MLIR_TYPE[s], _MLIR_TYPE[d]
        cases.append(
            f"  case {int(s) * 16 + int(d)} {{\n"
            + _view("s", "src", "n", st).replace("  %", "    %", 1) + "\n"
            + _view("d", "dst", "n", dt).replace("  %", "    %", 1) + "\n"
            "    scf.for %i = %c0 to %n step %c1 {\n"
            f"      %x = memref.load %s[%i] : memref<?x{st}>\n" + _convert(s, d, "      ")
            + f"      memref.store %y, %d[%i] : memref<?x{dt}>\n"
            "    }\n    scf.yield\n  }\n")
    return (_op_head("op_cast") + _fields(["dst", "src", "n", "sdt", "ddt"]) + "\n"
            "  %c16 = arith.constant 16 : index\n"
            "  %pair0 = arith.muli %sdt, %c16 : index\n"
            "  %pair = arith.addi %pair0, %ddt : index\n"
            "  scf.index_switch %pair\n" + "".join(cases) + "  default {\n    scf.yield\n  }\n"
            "  return\n}\n")


def _reduce(op, dt):
    """[m, size, n] -> [m, 1, n], sequentially along `size` in the compute type (an f16 sum
    accumulates in f32 and is rounded once)."""
    fn, st, t = REDUCE[op], _MLIR_TYPE[dt], _COMPUTE[dt]
    return (_op_head(_name(f"op_{op.name.lower()}", dt)) + _fields(["dtype", "dst", "src", "m", "size", "n"]) + "\n"
            + "  %big0 = arith.muli %m, %size : index\n  %big = arith.muli %big0, %n : index\n"
            "  %small = arith.muli %m, %n : index\n"
            + _view("s", "src", "big", st) + "\n" + _view("d", "dst", "small", st) + "\n"
            + "  %sn = arith.muli %size, %n : index\n"
            "  scf.for %i = %c0 to %m step %c1 {\n"
            "    %rowb = arith.muli %i, %sn : index\n"
            "    %orow = arith.muli %i, %n : index\n"
            "    scf.for %k = %c0 to %n step %c1 {\n"
            "      %i0 = arith.addi %rowb, %k : index\n"
            + _ld("x0", "s", "i0", dt, "      ")
            + f"      %acc = scf.for %j = %c1 to %size step %c1 iter_args(%a = %x0) -> ({t}) {{\n"
            "        %jn = arith.muli %j, %n : index\n"
            "        %ij = arith.addi %i0, %jn : index\n"
            + _ld("x", "s", "ij", dt, "        ")
            + f"        %a2 = {fn} %a, %x : {t}\n"
            f"        scf.yield %a2 : {t}\n"
            "      }\n"
            "      %o = arith.addi %orow, %k : index\n"
            + _st("acc", "d", "o", dt, "      ")
            + "    }\n  }\n  return\n}\n")


def _matmul_prologue(dt, storage: str, compute: str) -> str:
    """The MatMul record's fields, the [m, k], [k, n], [m, n] views of its operands in the storage
    type, a zero of the compute type and `%keep` (accumulate into dst)."""
    return (_op_head(_name("op_matmul", dt)) + _fields(["dtype", "dst", "lhs", "rhs", "m", "k", "n", "acc"]) + "\n"
            + "  %mk = arith.muli %m, %k : index\n  %kn = arith.muli %k, %n : index\n"
            "  %mn = arith.muli %m, %n : index\n"
            + _view("a", "lhs", "mk", storage) + "\n" + _view("b", "rhs", "kn", storage) + "\n"
            + _view("d", "dst", "mn", storage) + "\n"
            + f"  %zero = arith.constant 0.0 : {compute}\n"
            "  %keep = arith.cmpi ne, %acc, %c0 : index\n")


def _matmul(dt):
    if dt == DType.F16:
        return _matmul_widened(dt)
    t = _MLIR_TYPE[dt]
    return (_matmul_prologue(dt, t, t)
            # i-k-j order: the innermost loop runs along contiguous rows of rhs and dst
            + "  scf.for %i = %c0 to %m step %c1 {\n"
            "    %arow = arith.muli %i, %k : index\n"
            "    %drow = arith.muli %i, %n : index\n"
            "    scf.if %keep {\n    } else {\n"
            "      scf.for %j = %c0 to %n step %c1 {\n"
            "        %dj = arith.addi %drow, %j : index\n"
            f"        memref.store %zero, %d[%dj] : memref<?x{t}>\n"
            "      }\n    }\n"
            "    scf.for %q = %c0 to %k step %c1 {\n"
            "      %aq = arith.addi %arow, %q : index\n"
            f"      %x = memref.load %a[%aq] : memref<?x{t}>\n"
            "      %brow = arith.muli %q, %n : index\n"
            "      scf.for %j = %c0 to %n step %c1 {\n"
            "        %bq = arith.addi %brow, %j : index\n"
            "        %dj = arith.addi %drow, %j : index\n"
            f"        %y = memref.load %b[%bq] : memref<?x{t}>\n"
            f"        %old = memref.load %d[%dj] : memref<?x{t}>\n"
            f"        %xy = arith.mulf %x, %y : {t}\n"
            f"        %r = arith.addf %old, %xy : {t}\n"
            f"        memref.store %r, %d[%dj] : memref<?x{t}>\n"
            "      }\n"
            "    }\n  }\n  return\n}\n")


def _matmul_widened(dt):
    """MatMul of a type computed wider (f16): i-j-k order, each dot product accumulated in the
    compute type along k and rounded once, as numpy's half matmul; `accumulate` adds that rounded
    product to dst (numpy's ``c += a @ b``)."""
    st, t = _MLIR_TYPE[dt], _COMPUTE[dt]
    return (_matmul_prologue(dt, st, t)
            + "  scf.for %i = %c0 to %m step %c1 {\n"
            "    %arow = arith.muli %i, %k : index\n"
            "    %drow = arith.muli %i, %n : index\n"
            "    scf.for %j = %c0 to %n step %c1 {\n"
            f"      %dot = scf.for %q = %c0 to %k step %c1 iter_args(%s = %zero) -> ({t}) {{\n"
            "        %aq = arith.addi %arow, %q : index\n"
            "        %qn = arith.muli %q, %n : index\n"
            "        %bq = arith.addi %qn, %j : index\n"
            + _ld("x", "a", "aq", dt, "        ") + _ld("y", "b", "bq", dt, "        ")
            + f"        %xy = arith.mulf %x, %y : {t}\n"
            f"        %s2 = arith.addf %s, %xy : {t}\n"
            f"        scf.yield %s2 : {t}\n"
            "      }\n"
            "      %dj = arith.addi %drow, %j : index\n"
            f"      %pr = arith.truncf %dot : {t} to {st}\n"
            f"      %r = scf.if %keep -> ({st}) {{\n"
            + _ld("old", "d", "dj", dt, "        ")
            + f"        %pw = arith.extf %pr : {st} to {t}\n"
            f"        %sum = arith.addf %old, %pw : {t}\n"
            f"        %sr = arith.truncf %sum : {t} to {st}\n"
            f"        scf.yield %sr : {st}\n"
            "      } else {\n"
            f"        scf.yield %pr : {st}\n"
            "      }\n"
            f"      memref.store %r, %d[%dj] : memref<?x{st}>\n"
            "    }\n  }\n  return\n}\n")


def _itemsize_fn():
    cases = "".join(f"  case {int(d)} {{\n    %v = arith.constant {s} : index\n    scf.yield %v : index\n  }}\n"
                    for d, s in _ITEMSIZE.items())
    return ("func.func private @itemsize(%dt: index) -> index {\n"
            "  %r = scf.index_switch %dt -> index\n" + cases
            + "  default {\n    %z = arith.constant 1 : index\n    scf.yield %z : index\n  }\n"
            "  return %r : index\n}\n")


def _copy():
    # dtype-generic: a byte copy of size * itemsize bytes
    return (_op_head("op_copy") + _fields(["dtype", "dst", "src", "n"]) + "\n"
            + "  %es = func.call @itemsize(%dtype) : (index) -> index\n"
            "  %nb = arith.muli %n, %es : index\n"
            "  scf.for %i = %c0 to %nb step %c1 {\n"
            "    %si = arith.addi %src, %i : index\n"
            "    %di = arith.addi %dst, %i : index\n"
            "    %x = memref.load %l[%si] : memref<?xi8>\n"
            "    memref.store %x, %l[%di] : memref<?xi8>\n"
            "  }\n  return\n}\n")


def _broadcast():
    # dtype-generic: [m,1,n] -> [m,size,n], moving elements as integers of the dtype's width
    cases = []
    for w in (8, 16, 32, 64):
        ty = f"i{w}"
        cases.append(
            f"  case {w // 8} {{\n"
            f"    %s = memref.view %l[%src][%small] : memref<?xi8> to memref<?x{ty}>\n"
            f"    %d = memref.view %l[%dst][%big] : memref<?xi8> to memref<?x{ty}>\n"
            "    scf.for %i = %c0 to %m step %c1 {\n"
            "      %sr = arith.muli %i, %n : index\n"
            "      %ds = arith.muli %i, %size : index\n"
            "      scf.for %j = %c0 to %size step %c1 {\n"
            "        %dij = arith.addi %ds, %j : index\n"
            "        %dr = arith.muli %dij, %n : index\n"
            "        scf.for %k = %c0 to %n step %c1 {\n"
            "          %sk = arith.addi %sr, %k : index\n"
            "          %dk = arith.addi %dr, %k : index\n"
            f"          %x = memref.load %s[%sk] : memref<?x{ty}>\n"
            f"          memref.store %x, %d[%dk] : memref<?x{ty}>\n"
            "        }\n      }\n    }\n    scf.yield\n  }\n")
    return (_op_head("op_broadcast") + _fields(["dtype", "dst", "src", "m", "size", "n"]) + "\n"
            + "  %es = func.call @itemsize(%dtype) : (index) -> index\n"
            "  %small = arith.muli %m, %n : index\n"
            "  %big = arith.muli %small, %size : index\n"
            "  scf.index_switch %es\n" + "".join(cases) + "  default {\n    scf.yield\n  }\n"
            "  return\n}\n")


def _box(width):
    """Move one n-d tile between an argument and local memory (element width `width` bits): the
    innermost tile dimension is a strided run, the outer ones are unravelled once per run."""
    ty, eb = f"i{width}", width // 8
    return f"""func.func private @box_{width}(%g: memref<?xi8>, %l: memref<?xi8>, %gbase: index, %lbyte: index,
    %n: index, %sizes: memref<{MAX_DIMS}xindex>, %eff: memref<{MAX_DIMS}xindex>,
    %strides: memref<{MAX_DIMS}xindex>, %store: i1) {{
{_CONSTS}
  %ceb = arith.constant {eb} : index
  %gbytes = memref.dim %g, %c0 : memref<?xi8>
  %gn = arith.divui %gbytes, %ceb : index
  %gv = memref.view %g[%c0][%gn] : memref<?xi8> to memref<?x{ty}>
  %cnt = scf.for %j = %c0 to %n step %c1 iter_args(%a = %c1) -> (index) {{
    %s = memref.load %sizes[%j] : memref<{MAX_DIMS}xindex>
    %a2 = arith.muli %a, %s : index
    scf.yield %a2 : index
  }}
  %lv = memref.view %l[%lbyte][%cnt] : memref<?xi8> to memref<?x{ty}>
  %last = arith.subi %n, %c1 : index
  %inner = memref.load %eff[%last] : memref<{MAX_DIMS}xindex>
  %ist = memref.load %strides[%last] : memref<{MAX_DIMS}xindex>
  %lst0 = memref.load %sizes[%last] : memref<{MAX_DIMS}xindex>
  %outer = scf.for %j = %c0 to %last step %c1 iter_args(%a = %c1) -> (index) {{
    %e = memref.load %eff[%j] : memref<{MAX_DIMS}xindex>
    %a2 = arith.muli %a, %e : index
    scf.yield %a2 : index
  }}
  scf.for %o = %c0 to %outer step %c1 {{
    %go, %lo, %r, %ls = scf.for %k = %c0 to %last step %c1
        iter_args(%ga = %gbase, %la = %c0, %rr = %o, %lss = %lst0) -> (index, index, index, index) {{
      %j0 = arith.subi %last, %c1 : index
      %j = arith.subi %j0, %k : index
      %e = memref.load %eff[%j] : memref<{MAX_DIMS}xindex>
      %ij = arith.remui %rr, %e : index
      %r2 = arith.divui %rr, %e : index
      %gs = memref.load %strides[%j] : memref<{MAX_DIMS}xindex>
      %gd = arith.muli %ij, %gs : index
      %ga2 = arith.addi %ga, %gd : index
      %ld = arith.muli %ij, %lss : index
      %la2 = arith.addi %la, %ld : index
      %sj = memref.load %sizes[%j] : memref<{MAX_DIMS}xindex>
      %ls2 = arith.muli %lss, %sj : index
      scf.yield %ga2, %la2, %r2, %ls2 : index, index, index, index
    }}
    scf.if %store {{
      scf.for %i = %c0 to %inner step %c1 {{
        %li = arith.addi %lo, %i : index
        %gi0 = arith.muli %i, %ist : index
        %gi = arith.addi %go, %gi0 : index
        %x = memref.load %lv[%li] : memref<?x{ty}>
        memref.store %x, %gv[%gi] : memref<?x{ty}>
      }}
    }} else {{
      scf.for %i = %c0 to %inner step %c1 {{
        %li = arith.addi %lo, %i : index
        %gi0 = arith.muli %i, %ist : index
        %gi = arith.addi %go, %gi0 : index
        %x = memref.load %gv[%gi] : memref<?x{ty}>
        memref.store %x, %lv[%li] : memref<?x{ty}>
      }}
    }}
  }}
  return
}}
"""


#: the kernel's arguments: one descriptor of a byte buffer per argument, indexed by the records'
#: argument number (the header's A of them: no bound beyond the bytecode's)
ARGS_TYPE = "memref<?xmemref<?xi8>>"
_ARGS_SIG = f"%args: {ARGS_TYPE}"
_ARGS_USE = "%args"
_ARGS_TY = ARGS_TYPE
_V = f"memref<{MAX_DIMS}xindex>"


def _mem():
    """Load/Store/ViewLoad/ViewStore (Alg. 2 line 11: the tile id is an operand)."""
    box_cases = "".join(
        f"    case {w // 8} {{\n      func.call @box_{w}(%g, %l, %base, %loc, %n, %sizes, %eff, %strides, %store)"
        f" : (memref<?xi8>, memref<?xi8>, index, index, index, {_V}, {_V}, {_V}, i1) -> ()\n      scf.yield\n    }}\n"
        for w in (8, 16, 32, 64))
    return f"""func.func private @op_mem(%code: memref<?xi64>, %p: index, %l: memref<?xi8>, {_ARGS_SIG},
    %gb: index, %G: index, %t: index, %view: i1, %store: i1) {{
{_CONSTS}
{_CM1}
{_fields(["dtype", "loc", "arg", "off"])}
  %q = arith.addi %p, %c7 : index
  %bidx = memref.alloca() : {_V}
  %base, %rem = scf.for %k = %c0 to %G step %c1 iter_args(%b = %off, %r = %t) -> (index, index) {{
    %d0 = arith.subi %G, %c1 : index
    %d = arith.subi %d0, %k : index
    %d3 = arith.muli %d, %c3 : index
    %cnt_at = arith.addi %gb, %d3 : index
    %cnt = func.call @fld(%code, %cnt_at) : (memref<?xi64>, index) -> index
    %blk_at = arith.addi %cnt_at, %c1 : index
    %blk = func.call @fld(%code, %blk_at) : (memref<?xi64>, index) -> index
    %bd = arith.remui %r, %cnt : index
    %r2 = arith.divui %r, %cnt : index
    memref.store %bd, %bidx[%d] : {_V}
    %gs_at = arith.addi %q, %d : index
    %gs = func.call @fld(%code, %gs_at) : (memref<?xi64>, index) -> index
    %x1 = arith.muli %bd, %blk : index
    %x2 = arith.muli %x1, %gs : index
    %b2 = arith.addi %b, %x2 : index
    scf.yield %b2, %r2 : index, index
  }}
  %q2 = arith.addi %q, %G : index
  %sizes = memref.alloca() : {_V}
  %strides = memref.alloca() : {_V}
  %binds = memref.alloca() : {_V}
  %eff = memref.alloca() : {_V}
  %n = scf.if %view -> index {{
    %nv = func.call @fld(%code, %q2) : (memref<?xi64>, index) -> index
    %s0 = arith.addi %q2, %c1 : index
    %st0a = arith.addi %s0, %nv : index
    %st0 = arith.addi %st0a, %c1 : index
    %bd0a = arith.addi %st0, %nv : index
    %bd0 = arith.addi %bd0a, %c1 : index
    scf.for %j = %c0 to %nv step %c1 {{
      %i1 = arith.addi %s0, %j : index
      %v1 = func.call @fld(%code, %i1) : (memref<?xi64>, index) -> index
      memref.store %v1, %sizes[%j] : {_V}
      %i2 = arith.addi %st0, %j : index
      %v2 = func.call @fld(%code, %i2) : (memref<?xi64>, index) -> index
      memref.store %v2, %strides[%j] : {_V}
      %i3 = arith.addi %bd0, %j : index
      %v3 = func.call @fld(%code, %i3) : (memref<?xi64>, index) -> index
      memref.store %v3, %binds[%j] : {_V}
    }}
    scf.yield %nv : index
  }} else {{
    %rows = func.call @fld(%code, %q2) : (memref<?xi64>, index) -> index
    %q3 = arith.addi %q2, %c1 : index
    %row = func.call @fld(%code, %q3) : (memref<?xi64>, index) -> index
    %q4 = arith.addi %q2, %c2 : index
    %bind = func.call @fld(%code, %q4) : (memref<?xi64>, index) -> index
    // a contiguous run of rows*row elements: one 1-d box, clamped here on the tail tile
    %isb = arith.cmpi sge, %bind, %c0 : index
    %er = scf.if %isb -> index {{
      %b3 = arith.muli %bind, %c3 : index
      %ga = arith.addi %gb, %b3 : index
      %blk_at = arith.addi %ga, %c1 : index
      %blk = func.call @fld(%code, %blk_at) : (memref<?xi64>, index) -> index
      %ext_at = arith.addi %ga, %c2 : index
      %ext = func.call @fld(%code, %ext_at) : (memref<?xi64>, index) -> index
      %bi = memref.load %bidx[%bind] : {_V}
      %st = arith.muli %bi, %blk : index
      %lim = arith.subi %ext, %st : index
      %mm = arith.minsi %rows, %lim : index
      scf.yield %mm : index
    }} else {{
      scf.yield %rows : index
    }}
    %full = arith.muli %rows, %row : index
    %run = arith.muli %er, %row : index
    memref.store %full, %sizes[%c0] : {_V}
    memref.store %run, %eff[%c0] : {_V}
    memref.store %c1, %strides[%c0] : {_V}
    memref.store %cm1, %binds[%c0] : {_V}
    scf.yield %c1 : index
  }}
  // tile dims bound to a grid dim are clamped on its tail tile (the 1-d run of Load/Store is
  // already clamped: its bind is -1 here)
  scf.for %j = %c0 to %n step %c1 {{
    %s = memref.load %sizes[%j] : {_V}
    %bj = memref.load %binds[%j] : {_V}
    %isb = arith.cmpi sge, %bj, %c0 : index
    %e0 = memref.load %eff[%j] : {_V}
    %s1 = arith.select %view, %s, %e0 : index
    %e = scf.if %isb -> index {{
      %b3 = arith.muli %bj, %c3 : index
      %ga = arith.addi %gb, %b3 : index
      %blk_at = arith.addi %ga, %c1 : index
      %blk = func.call @fld(%code, %blk_at) : (memref<?xi64>, index) -> index
      %ext_at = arith.addi %ga, %c2 : index
      %ext = func.call @fld(%code, %ext_at) : (memref<?xi64>, index) -> index
      %bi = memref.load %bidx[%bj] : {_V}
      %st = arith.muli %bi, %blk : index
      %lim = arith.subi %ext, %st : index
      %mm = arith.minsi %s, %lim : index
      scf.yield %mm : index
    }} else {{
      scf.yield %s1 : index
    }}
    memref.store %e, %eff[%j] : {_V}
  }}
  // the argument's descriptor from the table (valid bytecode never names one past it: decode /
  // the templates' guards; the bound is kept here so that no record reads outside the table)
  %nargs = memref.dim %args, %c0 : {ARGS_TYPE}
  %known = arith.cmpi ult, %arg, %nargs : index
  scf.if %known {{
    %g = memref.load %args[%arg] : {ARGS_TYPE}
    %es = func.call @itemsize(%dtype) : (index) -> index
    scf.index_switch %es
{box_cases}    default {{
      scf.yield
    }}
  }}
  return
}}
"""


_SIMPLE = {}  # opcode -> helper name, filled by vm_module_text


def _dtype_dispatch(name: str, types) -> str:
    """``@<name>``: switch on the record's dtype field (word p+2) to the typed variant
    ``@<name>_<dtype>``."""
    cases = "".join(
        f"  case {int(dt)} {{\n    func.call @{_name(name, dt)}(%code, %p, %l)"
        " : (memref<?xi64>, index, memref<?xi8>) -> ()\n    scf.yield\n  }\n" for dt in types)
    return (_op_head(name) + _fields(["dtype"]) + "\n  scf.index_switch %dtype\n" + cases
            + "  default {\n    scf.yield\n  }\n  return\n}\n")


def _all_types(gen, name: str, types) -> list[str]:
    """`gen(dt)` for every type and the dispatch over them."""
    return [gen(dt) for dt in types] + [_dtype_dispatch(name, types)]


def vm_module_text(gpu: bool = False) -> str:
    """The MLIR source of the VM (see the module docstring); `gpu=True`: the CUDA variant
    ``@dvm_vm_gpu(code, local, args, M, local_bytes)`` with one thread block per tile."""
    funcs = ["func.func private @fld(%code: memref<?xi64>, %i: index) -> index {\n"
             "  %w = memref.load %code[%i] : memref<?xi64>\n"
             "  %x = arith.index_cast %w : i64 to index\n  return %x : index\n}\n",
             _itemsize_fn(), _mem(), _copy(), _broadcast(), _select(), _cast()]
    # the PTX VM keeps f32 arithmetic only (f64 doubles its PTX and its assembly time)
    types = GPU_ARITH_TYPES if gpu else ARITH_TYPES
    funcs += (_all_types(_is_finite, "op_is_finite", types) + _all_types(_cmp, "op_cmp", tuple(DType))
              + _all_types(_matmul, "op_matmul", types))
    handlers = {Opcode.COPY: "op_copy", Opcode.BROADCAST: "op_broadcast", Opcode.IS_FINITE: "op_is_finite",
                Opcode.CMP: "op_cmp", Opcode.SELECT: "op_select", Opcode.CAST: "op_cast",
                Opcode.MATMUL: "op_matmul"}
    for table, gen in ((UNARY, _unary), ((Opcode.ADDS, Opcode.MULS), _scalar), (BINARY, _binary),
                       (REDUCE, _reduce)):
        for op in table:
            name = f"op_{op.name.lower()}"
            funcs += _all_types(lambda dt, op=op: gen(op, dt), name, types)
            handlers[op] = name
    funcs += [_box(w) for w in (8, 16, 32, 64)]
    _SIMPLE.update(handlers)
    cases = []
    mem_ty = f"(memref<?xi64>, index, memref<?xi8>, {_ARGS_TY}, index, index, index, i1, i1) -> ()"
    for op, view, store in ((Opcode.LOAD, "false", "false"), (Opcode.VIEW_LOAD, "true", "false"),
                            (Opcode.STORE, "false", "true"), (Opcode.VIEW_STORE, "true", "true")):
        cases.append(f"    case {int(op)} {{\n"
                     f"      func.call @op_mem(%code, %p, %l, {_ARGS_USE}, %gb, %G, %t, %{view}, %{store})"
                     f" : {mem_ty}\n      scf.yield\n    }}\n")
    for op in sorted(handlers):
        cases.append(f"    case {int(op)} {{\n"
                     f"      func.call @{handlers[op]}(%code, %p, %l) : (memref<?xi64>, index, memref<?xi8>) -> ()\n"
                     "      scf.yield\n    }\n")
    tile = f"""func.func private @run_tile(%code: memref<?xi64>, %l: memref<?xi8>, {_ARGS_SIG}, %t: index) {{
{_CONSTS}
  %true = arith.constant true
  %false = arith.constant false
  %H = func.call @fld(%code, %c2) : (memref<?xi64>, index) -> index
  %cs = func.call @fld(%code, %c4) : (memref<?xi64>, index) -> index
  %A = func.call @fld(%code, %c7) : (memref<?xi64>, index) -> index
  %G = func.call @fld(%code, %c8) : (memref<?xi64>, index) -> index
  %A2 = arith.muli %A, %c2 : index
  %gb = arith.addi %A2, %c9 : index
  %end = arith.addi %H, %cs : index
  %fin = scf.while (%p = %H) : (index) -> index {{
    %more = arith.cmpi slt, %p, %end : index
    scf.condition(%more) %p : index
  }} do {{
  ^bb0(%p: index):
    %opw = memref.load %code[%p] : memref<?xi64>
    %op = arith.index_cast %opw : i64 to index
    %len_at = arith.addi %p, %c1 : index
    %len = func.call @fld(%code, %len_at) : (memref<?xi64>, index) -> index
    scf.index_switch %op
{"".join(cases)}    default {{
      scf.yield
    }}
    %next = arith.addi %p, %len : index
    scf.yield %next : index
  }}
  return
}}
"""
    tile_ty = f"(memref<?xi64>, memref<?xi8>, {_ARGS_TY}, index) -> ()"
    if gpu:
        # one thread block per tile: `scf.parallel` over the tiles, mapped to the grid by the CUDA
        # lowering; each tile gets its own `local_bytes` slice of %local
        main = f"""func.func @dvm_vm_gpu(%code: memref<?xi64>, %local: memref<?xi8>, {_ARGS_SIG}, %M: index,
    %lb: index) {{
{_CONSTS}
  scf.parallel (%t) = (%c0) to (%M) step (%c1) {{
    %off = arith.muli %t, %lb : index
    %l = memref.view %local[%off][%lb] : memref<?xi8> to memref<?xi8>
    func.call @run_tile(%code, %l, {_ARGS_USE}, %t) : {tile_ty}
    scf.reduce
  }}
  return
}}
"""
    else:
        main = f"""func.func @dvm_vm(%code: memref<?xi64>, %l: memref<?xi8>, {_ARGS_SIG}, %t0: index, %t1: index)
    attributes {{llvm.emit_c_interface}} {{
{_CONSTS}
  scf.for %t = %t0 to %t1 step %c1 {{
    func.call @run_tile(%code, %l, {_ARGS_USE}, %t) : {tile_ty}
  }}
  return
}}
"""
    funcs.append(tile)
    return "module {\n" + "\n".join(funcs) + "\n" + main + "}\n"


def handled_opcodes() -> frozenset:
    if not _SIMPLE:
        vm_module_text()
    return frozenset(_SIMPLE) | {Opcode.LOAD, Opcode.VIEW_LOAD, Opcode.STORE, Opcode.VIEW_STORE}
