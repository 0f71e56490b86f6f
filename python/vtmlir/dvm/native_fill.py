"""The per-new-shape compile (guards, Alg. 1 / the MatMul template, the shape-dependent words)
compiled through MLIR to native code (Fang et al., DVM §4.2: a new shape costs "shape tiling" and
"bytecode encoding" only; here they run as machine code instead of Python).

A `template.TemplateSet` holds, per traced structure, a straight-line program over the kernel's
parameters (input sizes ``s<i>_<d>``, element strides ``t<i>_<d>``): guards, assignments, one tiling
call, and the words of its bytecode (constant words plus "holes", expressions over the parameters;
see `template.KernelTemplate`). `NativeFill` translates that program into one MLIR function

    func.func @dvm_fill(%P, %W, %C, %I, %M : memref<?xi64>)

that tries the templates in order (a failing guard jumps to the next one), writes the words of the
first that holds into ``W``, and its template index, word count, tiling and output shapes into
``I``. ``C`` holds every template's constant words, ``P`` the parameters, ``M`` the last MatMul
tiling of this call (the templates of a set mostly tile the same sizes). The expressions are the
traced Python text, parsed with `ast` and mapped one to one onto `arith` (``//`` is
``arith.floordivsi``, ``%`` is ``a - (a // b) * b``, both Python's floor semantics; ``/`` and
``_f64bits`` are f64 division and a bitcast). Alg. 1 (`tiling.tile_vector`, unrolled per call site
over its static rank and reduction dimensions, with `tiling.min_cost_tile` and
`tiling.hardware_align_div` as MLIR functions) and the MatMul template (a full scan of the
candidates of `tiling.tile_matmul_reference`, which `tiling.tile_matmul` equals) are written here
once in MLIR. The module is lowered by the CPU backend's stages and JIT-compiled, like the VM
(`native.py`), when a template set is complete (`template.prebuild`, `DvmFunction.prebuild`).

Whatever the native code cannot decide exactly like Python it hands back (status -3): a division
by zero, a shape Alg. 1 rejects (the Python path raises the `TilingError`), a parameter count it
was not built for, an integer operation that wraps in i64 (`_Template.exact`: the words and the
guards that hold `decode`'s checks on them, `bytecode.check_traced`, are exact or not written). Then the Python `fill` runs, so results are always those of the Python
templates, which the tests compare bitwise on random shapes.
"""

from __future__ import annotations

import ast
import ctypes
import re
import threading

import numpy as np

from .tiling import MatmulTiling, Target, VectorTiling

NONE_MATCHED, NO_ROOM, ASK_PYTHON = -1, -2, -3


_OVERFLOW = {"addi": "sadd", "subi": "ssub", "muli": "smul"}  # `_Template.exact`: LLVM intrinsics


class Unsupported(Exception):
    """The template set uses an expression the translation does not know (it stays in Python)."""


class _Desc1D(ctypes.Structure):
    _fields_ = [("allocated", ctypes.c_void_p), ("aligned", ctypes.c_void_p), ("offset", ctypes.c_int64),
                ("size", ctypes.c_int64), ("stride", ctypes.c_int64)]


# a call takes about a microsecond: keep the GIL (PYFUNCTYPE), so no other thread can interleave
# its use of the shared buffers and no lock is needed
_PACKED = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)


def _runtime_functions(target: Target) -> str:
    """`tiling.min_cost_tile` + `hardware_align_div` and the MatMul template's scan, with the
    target's constants; each returns its result and an ok flag (false: Python decides)."""
    cores, over, mem = target.cores, target.tile_overhead, target.local_memory_bytes
    return f"""
  func.func @dvm_align_div(%tmax: i64, %inner: i64, %extent: i64, %outer: i64, %align: i64) -> (i64, i1) {{
    %c0 = arith.constant 0 : i64
    %c1 = arith.constant 1 : i64
    %cores = arith.constant {cores} : i64
    %ov = arith.constant {over} : i64
    %false = arith.constant false
    %true = arith.constant true
    %q = arith.divsi %tmax, %inner : i64
    %thi = arith.minsi %extent, %q : i64
    %bad = arith.cmpi slt, %thi, %c1 : i64
    cf.cond_br %bad, ^fail, ^start
  ^fail:
    return %c0, %false : i64, i1
  ^start:
    %x0 = arith.muli %extent, %inner : i64
    %x = arith.muli %x0, %outer : i64
    %n0 = arith.ceildivsi %extent, %thi : i64
    cf.br ^loop(%n0, %c0, %c0, %false : i64, i64, i64, i1)
  ^loop(%n: i64, %bc: i64, %bt: i64, %found: i1):
    %on = arith.muli %outer, %n : i64
    %w = arith.ceildivsi %on, %cores : i64
    %ovw = arith.muli %ov, %w : i64
    %room = arith.subi %bc, %ovw : i64
    %roomc = arith.muli %room, %cores : i64
    %above = arith.cmpi sgt, %x, %roomc : i64
    %stop = arith.andi %found, %above : i1
    cf.cond_br %stop, ^done(%bt : i64), ^body
  ^body:
    %wc = arith.muli %w, %cores : i64
    %nq = arith.divsi %wc, %outer : i64
    %n2 = arith.minsi %extent, %nq : i64
    %t = arith.ceildivsi %extent, %n2 : i64
    %ti = arith.muli %t, %inner : i64
    %tio = arith.addi %ti, %ov : i64
    %cost = arith.muli %w, %tio : i64
    %lt = arith.cmpi slt, %cost, %bc : i64
    %eq = arith.cmpi eq, %cost, %bc : i64
    %gt = arith.cmpi sgt, %t, %bt : i64
    %tie = arith.andi %eq, %gt : i1
    %better0 = arith.ori %lt, %tie : i1
    %notfound = arith.xori %found, %true : i1
    %better = arith.ori %notfound, %better0 : i1
    %bc2 = arith.select %better, %cost, %bc : i64
    %bt2 = arith.select %better, %t, %bt : i64
    %one = arith.cmpi eq, %t, %c1 : i64
    cf.cond_br %one, ^done(%bt2 : i64), ^next
  ^next:
    %tm1 = arith.subi %t, %c1 : i64
    %n3 = arith.ceildivsi %extent, %tm1 : i64
    cf.br ^loop(%n3, %bc2, %bt2, %true : i64, i64, i64, i1)
  ^done(%best: i64):
    %whole = arith.cmpi eq, %best, %extent : i64
    cf.cond_br %whole, ^ret(%extent : i64), ^align
  ^align:
    cf.br ^gcd(%align, %inner : i64, i64)
  ^gcd(%ga: i64, %gb: i64):
    %gz = arith.cmpi eq, %gb, %c0 : i64
    cf.cond_br %gz, ^aligned, ^gstep
  ^gstep:
    %gr = arith.remsi %ga, %gb : i64
    cf.br ^gcd(%gb, %gr : i64, i64)
  ^aligned:
    %step = arith.divsi %align, %ga : i64
    %upq = arith.ceildivsi %best, %step : i64
    %up = arith.muli %upq, %step : i64
    %upbig = arith.cmpi sge, %up, %extent : i64
    %whole_fits = arith.cmpi sle, %x0, %tmax : i64
    %take_whole = arith.andi %upbig, %whole_fits : i1
    cf.cond_br %take_whole, ^ret(%extent : i64), ^tryup
  ^tryup:
    %upi = arith.muli %up, %inner : i64
    %upfits = arith.cmpi sle, %upi, %tmax : i64
    %upin = arith.cmpi sle, %up, %extent : i64
    %take_up = arith.andi %upfits, %upin : i1
    cf.cond_br %take_up, ^ret(%up : i64), ^down
  ^down:
    %dq = arith.divsi %best, %step : i64
    %dn = arith.muli %dq, %step : i64
    %dpos = arith.cmpi sge, %dn, %c1 : i64
    %r = arith.select %dpos, %dn, %best : i64
    cf.br ^ret(%r : i64)
  ^ret(%res: i64):
    return %res, %true : i64, i1
  }}

  func.func @dvm_tile_matmul(%m: i64, %n: i64, %k: i64, %live: i64, %isz: i64, %align: i64)
      -> (i64, i64, i64, i64, i1) {{
    %c0 = arith.constant 0 : i64
    %c1 = arith.constant 1 : i64
    %c3 = arith.constant 3 : i64
    %c7 = arith.constant 7 : i64
    %cores = arith.constant {cores} : i64
    %ov = arith.constant {over} : i64
    %mem = arith.constant {mem} : i64
    %false = arith.constant false
    %true = arith.constant true
    %i0 = arith.constant 0 : index
    %i1 = arith.constant 1 : index
    %i10 = arith.constant 10 : index
    %i8 = arith.constant 8 : index
    // every (tm, tn) of `tile_matmul_reference`; its key (cost, -area, tm) orders candidates totally,
    // so the scan order does not matter. tn outside (its tile count once), tm = min(m, 2^e1) inside
    // (ceil(m / 2^e1) is a shift).
    %r:6 = scf.for %e2 = %i0 to %i8 step %i1 iter_args(%bc = %c0, %bna = %c0, %btm = %c0, %btn = %c0, %btk = %c0,
        %found = %false) -> (i64, i64, i64, i64, i64, i1) {{
      %e2i = arith.index_cast %e2 : index to i64
      %p2 = arith.shli %align, %e2i : i64
      %tn = arith.minsi %n, %p2 : i64
      %nt = arith.ceildivsi %n, %tn : i64
      %s:6 = scf.for %e1 = %i0 to %i10 step %i1 iter_args(%bc2 = %bc, %bna2 = %bna, %btm2 = %btm, %btn2 = %btn,
          %btk2 = %btk, %found2 = %found) -> (i64, i64, i64, i64, i64, i1) {{
        %e1i = arith.index_cast %e1 : index to i64
        %p1 = arith.shli %c1, %e1i : i64
        %tm = arith.minsi %m, %p1 : i64
        %area = arith.muli %tm, %tn : i64
        %la = arith.muli %live, %area : i64
        %avail = arith.subi %mem, %la : i64
        %pos = arith.cmpi sgt, %avail, %c0 : i64
        %tmn = arith.addi %tm, %tn : i64
        %den = arith.muli %tmn, %isz : i64
        %safe = arith.select %pos, %avail, %c0 : i64
        %tk0 = arith.divsi %safe, %den : i64
        %full = arith.cmpi sge, %tk0, %k : i64
        %ge_al = arith.cmpi sge, %tk0, %align : i64
        %rem = arith.remsi %tk0, %align : i64
        %down = arith.subi %tk0, %rem : i64
        %tk1 = arith.select %ge_al, %down, %tk0 : i64
        %tk = arith.select %full, %k, %tk1 : i64
        %feasible = arith.cmpi sge, %tk, %c1 : i64
        %whole = arith.cmpi sge, %p1, %m : i64
        %p1m1 = arith.subi %p1, %c1 : i64
        %mup = arith.addi %m, %p1m1 : i64
        %mshift = arith.shrsi %mup, %e1i : i64
        %mt = arith.select %whole, %c1, %mshift : i64
        %tiles = arith.muli %mt, %nt : i64
        %waves = arith.ceildivsi %tiles, %cores : i64
        %l1 = arith.muli %tmn, %k : i64
        %area7 = arith.addi %area, %c7 : i64
        %a8 = arith.shrsi %area7, %c3 : i64
        %l2 = arith.muli %a8, %k : i64
        %work0 = arith.addi %l1, %l2 : i64
        %work = arith.addi %work0, %ov : i64
        %cost = arith.muli %waves, %work : i64
        %na = arith.subi %c0, %area : i64
        %lt = arith.cmpi slt, %cost, %bc2 : i64
        %eq = arith.cmpi eq, %cost, %bc2 : i64
        %nalt = arith.cmpi slt, %na, %bna2 : i64
        %naeq = arith.cmpi eq, %na, %bna2 : i64
        %tmlt = arith.cmpi slt, %tm, %btm2 : i64
        %t1 = arith.andi %naeq, %tmlt : i1
        %t2 = arith.ori %nalt, %t1 : i1
        %t3 = arith.andi %eq, %t2 : i1
        %lex = arith.ori %lt, %t3 : i1
        %nf = arith.xori %found2, %true : i1
        %want = arith.ori %nf, %lex : i1
        %better = arith.andi %feasible, %want : i1
        %o1 = arith.select %better, %cost, %bc2 : i64
        %o2 = arith.select %better, %na, %bna2 : i64
        %o3 = arith.select %better, %tm, %btm2 : i64
        %o4 = arith.select %better, %tn, %btn2 : i64
        %o5 = arith.select %better, %tk, %btk2 : i64
        %o6 = arith.ori %found2, %better : i1
        scf.yield %o1, %o2, %o3, %o4, %o5, %o6 : i64, i64, i64, i64, i64, i1
      }}
      scf.yield %s#0, %s#1, %s#2, %s#3, %s#4, %s#5 : i64, i64, i64, i64, i64, i1
    }}
    return %r#2, %r#3, %r#4, %r#0, %r#5 : i64, i64, i64, i64, i1
  }}

  // the templates of a set usually tile the same (m, n, k): %M remembers the last call of this fill
  // (M[0] = 1 when valid, M[1..5] the arguments, M[6..10] the results)
  func.func @dvm_tile_matmul_memo(%M: memref<?xi64>, %m: i64, %n: i64, %k: i64, %live: i64, %isz: i64,
      %align: i64) -> (i64, i64, i64, i64, i1) {{
    %c1 = arith.constant 1 : i64
    %i0 = arith.constant 0 : index
    %i1 = arith.constant 1 : index
    %i2 = arith.constant 2 : index
    %i3 = arith.constant 3 : index
    %i4 = arith.constant 4 : index
    %i5 = arith.constant 5 : index
    %i6 = arith.constant 6 : index
    %i7 = arith.constant 7 : index
    %i8 = arith.constant 8 : index
    %i9 = arith.constant 9 : index
    %i10 = arith.constant 10 : index
    %valid = memref.load %M[%i0] : memref<?xi64>
    %a1 = memref.load %M[%i1] : memref<?xi64>
    %a2 = memref.load %M[%i2] : memref<?xi64>
    %a3 = memref.load %M[%i3] : memref<?xi64>
    %a4 = memref.load %M[%i4] : memref<?xi64>
    %a5 = memref.load %M[%i5] : memref<?xi64>
    %e0 = arith.cmpi eq, %valid, %c1 : i64
    %e1 = arith.cmpi eq, %a1, %m : i64
    %e2 = arith.cmpi eq, %a2, %n : i64
    %e3 = arith.cmpi eq, %a3, %k : i64
    %e4 = arith.cmpi eq, %a4, %live : i64
    %e5 = arith.cmpi eq, %a5, %isz : i64
    %x1 = arith.andi %e0, %e1 : i1
    %x2 = arith.andi %x1, %e2 : i1
    %x3 = arith.andi %x2, %e3 : i1
    %x4 = arith.andi %x3, %e4 : i1
    %same = arith.andi %x4, %e5 : i1
    cf.cond_br %same, ^hit, ^miss
  ^hit:
    %h0 = memref.load %M[%i6] : memref<?xi64>
    %h1 = memref.load %M[%i7] : memref<?xi64>
    %h2 = memref.load %M[%i8] : memref<?xi64>
    %h3 = memref.load %M[%i9] : memref<?xi64>
    %h4 = memref.load %M[%i10] : memref<?xi64>
    %hok = arith.trunci %h4 : i64 to i1
    return %h0, %h1, %h2, %h3, %hok : i64, i64, i64, i64, i1
  ^miss:
    %r:5 = func.call @dvm_tile_matmul(%m, %n, %k, %live, %isz, %align)
        : (i64, i64, i64, i64, i64, i64) -> (i64, i64, i64, i64, i1)
    memref.store %c1, %M[%i0] : memref<?xi64>
    memref.store %m, %M[%i1] : memref<?xi64>
    memref.store %n, %M[%i2] : memref<?xi64>
    memref.store %k, %M[%i3] : memref<?xi64>
    memref.store %live, %M[%i4] : memref<?xi64>
    memref.store %isz, %M[%i5] : memref<?xi64>
    memref.store %r#0, %M[%i6] : memref<?xi64>
    memref.store %r#1, %M[%i7] : memref<?xi64>
    memref.store %r#2, %M[%i8] : memref<?xi64>
    memref.store %r#3, %M[%i9] : memref<?xi64>
    %okw = arith.extui %r#4 : i1 to i64
    memref.store %okw, %M[%i10] : memref<?xi64>
    return %r#0, %r#1, %r#2, %r#3, %r#4 : i64, i64, i64, i64, i1
  }}
"""


class _Function:
    """The text of `@dvm_fill` being generated: blocks of lines, fresh SSA names, the constants of
    the entry block (they dominate every template's blocks)."""

    def __init__(self):
        self.lines: list[str] = []
        self.consts: dict[tuple, str] = {}
        self.n = 0
        self.labels = 0

    def fresh(self) -> str:
        self.n += 1
        return f"%v{self.n}"

    def label(self) -> str:
        self.labels += 1
        return f"^b{self.labels}"

    def emit(self, text: str) -> None:
        self.lines.append("    " + text)

    def op(self, text: str) -> str:
        v = self.fresh()
        self.emit(f"{v} = {text}")
        return v

    def block(self, label: str, args: str = "") -> None:
        self.lines.append(f"  {label}{'(' + args + ')' if args else ''}:")

    def const(self, value, ty: str = "i64") -> str:
        key = (ty, value)
        if key not in self.consts:
            self.consts[key] = f"%k{len(self.consts)}"
        return self.consts[key]

    def index(self, v: str) -> str:
        return self.op(f"arith.index_cast {v} : i64 to index")


class _Template:
    """One template's statements as MLIR: `env` maps the generated code's names to (SSA, type)."""

    def __init__(self, fn: _Function, params: dict, target: Target, fail: str, fallback: str):
        self.fn, self.target, self.fail, self.fallback = fn, target, fail, fallback
        self._wrapped = fn.const("false", "i1")  # did an `exact` operation wrap so far
        self.env: dict[str, tuple[str, str]] = dict(params)
        self.memo: dict[str, tuple[str, str]] = {}
        self.records: dict[str, dict] = {}  # tiling call variable -> fields

    # -- expressions -------------------------------------------------------------------------
    def expr(self, text: str) -> tuple[str, str]:
        hit = self.memo.get(text)
        if hit is None:
            hit = self.memo[text] = self._node(ast.parse(text, mode="eval").body)
        return hit

    def int_expr(self, text: str) -> str:
        v, ty = self.expr(text)
        if ty != "i64":
            raise Unsupported(f"{text!r} is not an integer expression")
        return v

    def _node(self, node) -> tuple[str, str]:
        fn = self.fn
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool):
                return fn.const("true" if node.value else "false", "i1"), "i1"
            if isinstance(node.value, int):
                return fn.const(int(node.value)), "i64"
            if isinstance(node.value, float):
                bits = int(np.array(node.value, dtype=np.float64).view(np.int64))
                return fn.const(f"0x{bits & (2**64 - 1):016X}", "f64"), "f64"
        elif isinstance(node, ast.Name):
            if node.id in self.env:
                return self.env[node.id]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            record = self.records.get(node.value.id)
            if record is not None and node.attr in record:
                return record[node.attr], "i64"
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            v, ty = self._node(node.operand)
            if ty == "i64":
                return self.exact("subi", fn.const(0), v), "i64"
            if ty == "f64":
                return fn.op(f"arith.negf {v} : f64"), "f64"
        elif isinstance(node, ast.BinOp):
            return self._binop(node)
        elif isinstance(node, ast.Compare) and len(node.ops) == 1:
            return self._compare(node.ops[0], self._node(node.left), self._node(node.comparators[0]))
        elif isinstance(node, ast.BoolOp):
            values = [self._truth(self._node(v)) for v in node.values]
            acc = values[0]
            for v in values[1:]:
                acc = fn.op(f"arith.{'andi' if isinstance(node.op, ast.And) else 'ori'} {acc}, {v} : i1")
            return acc, "i1"
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_f64bits"
              and len(node.args) == 1):
            v = self._float(self._node(node.args[0]))
            return fn.op(f"arith.bitcast {v} : f64 to i64"), "i64"
        raise Unsupported(f"expression {ast.unparse(node)!r}")

    def _float(self, vt) -> str:
        v, ty = vt
        if ty == "f64":
            return v
        if ty == "i64":
            return self.fn.op(f"arith.sitofp {v} : i64 to f64")
        raise Unsupported("a truth value used as a number")

    def _truth(self, vt) -> str:
        v, ty = vt
        if ty == "i1":
            return v
        if ty == "i64":
            return self.fn.op(f"arith.cmpi ne, {v}, {self.fn.const(0)} : i64")
        raise Unsupported("a float used as a truth value")

    def _nonzero_divisor(self, x: str, d: str) -> None:
        """Python raises on a zero divisor, and its ``MIN // -1`` does not wrap: leave such a
        shape to it."""
        fn = self.fn
        zero = fn.op(f"arith.cmpi eq, {d}, {fn.const(0)} : i64")
        minus1 = fn.op(f"arith.cmpi eq, {d}, {fn.const(-1)} : i64")
        least = fn.op(f"arith.cmpi eq, {x}, {fn.const(-(1 << 63))} : i64")
        wraps = fn.op(f"arith.andi {minus1}, {least} : i1")
        bad = fn.op(f"arith.ori {zero}, {wraps} : i1")
        self._fallback_if(bad)

    def _fallback_if(self, cond: str) -> None:
        ok = self.fn.label()
        self.fn.emit(f"cf.cond_br {cond}, {self.fallback}, {ok}")
        self.fn.block(ok)

    def exact(self, op: str, x: str, y: str) -> str:
        """``x op y`` (addi, subi, muli) on i64, noting whether it wrapped where Python's integers
        do not (Python then decides: `check_exact`). The template's words and its guards --
        `decode`'s checks on those words (`bytecode.check_traced`) -- are computed from the same
        expressions, so exact arithmetic is what makes a guard that holds natively hold for the
        words written: a wrapped size could pass a bound check that the real one fails. LLVM's
        overflow intrinsics (an add or multiply and its overflow flag) with the flags OR-ed
        together, not a branch per operation: the set's JIT time grows with its code."""
        fn = self.fn
        r = fn.op(f'"llvm.intr.{_OVERFLOW[op]}.with.overflow"({x}, {y}) : (i64, i64) -> !llvm.struct<(i64, i1)>')
        wraps = fn.op(f"llvm.extractvalue {r}[1] : !llvm.struct<(i64, i1)>")
        self._wrapped = fn.op(f"arith.ori {self._wrapped}, {wraps} : i1")
        return fn.op(f"llvm.extractvalue {r}[0] : !llvm.struct<(i64, i1)>")

    def check_exact(self) -> None:
        """Python decides if anything so far wrapped (before a value is used for more than a
        guard: a tiling call, the words)."""
        self._fallback_if(self._wrapped)

    def _binop(self, node) -> tuple[str, str]:
        fn = self.fn
        a, b = self._node(node.left), self._node(node.right)
        op = type(node.op)
        if op is ast.Div:
            x, y = self._float(a), self._float(b)
            self._fallback_if(fn.op(f"arith.cmpf oeq, {y}, {fn.const('0x0000000000000000', 'f64')} : f64"))
            return fn.op(f"arith.divf {x}, {y} : f64"), "f64"
        if a[1] == "i64" and b[1] == "i64":
            x, y = a[0], b[0]
            if op in (ast.Add, ast.Sub, ast.Mult):
                return self.exact({ast.Add: "addi", ast.Sub: "subi", ast.Mult: "muli"}[op], x, y), "i64"
            if op in (ast.FloorDiv, ast.Mod):
                self._nonzero_divisor(x, y)
                q = fn.op(f"arith.floordivsi {x}, {y} : i64")
                if op is ast.FloorDiv:
                    return q, "i64"
                # |x - q·y| < |y|: exact mod 2^64 even where q·y alone wraps
                qy = fn.op(f"arith.muli {q}, {y} : i64")
                return fn.op(f"arith.subi {x}, {qy} : i64"), "i64"
        elif "i1" not in (a[1], b[1]) and op in (ast.Add, ast.Sub, ast.Mult):
            x, y = self._float(a), self._float(b)
            name = {ast.Add: "addf", ast.Sub: "subf", ast.Mult: "mulf"}[op]
            return fn.op(f"arith.{name} {x}, {y} : f64"), "f64"
        raise Unsupported(f"operator {ast.unparse(node)!r}")

    _CMPI = {ast.Eq: "eq", ast.NotEq: "ne", ast.Lt: "slt", ast.LtE: "sle", ast.Gt: "sgt", ast.GtE: "sge"}
    _CMPF = {ast.Eq: "oeq", ast.NotEq: "une", ast.Lt: "olt", ast.LtE: "ole", ast.Gt: "ogt", ast.GtE: "oge"}

    def _compare(self, op, a, b) -> tuple[str, str]:
        if type(op) not in self._CMPI or "i1" in (a[1], b[1]):
            raise Unsupported(f"comparison {type(op).__name__}")
        if a[1] == b[1] == "i64":
            return self.fn.op(f"arith.cmpi {self._CMPI[type(op)]}, {a[0]}, {b[0]} : i64"), "i1"
        x, y = self._float(a), self._float(b)
        return self.fn.op(f"arith.cmpf {self._CMPF[type(op)]}, {x}, {y} : f64"), "i1"

    # -- statements --------------------------------------------------------------------------
    def guard(self, cond: str) -> None:
        """`cond` must hold or the next template is tried. A guard that held on a value that
        wrapped is caught by the `check_exact` before the words; one that failed on it at worst
        reports NONE_MATCHED, after which `template.compile_templated` asks the (exact) Python
        `fill` before tracing anything."""
        c = self._truth(self.expr(cond))
        ok = self.fn.label()
        self.fn.emit(f"cf.cond_br {c}, {ok}, {self.fail}")
        self.fn.block(ok)

    def check(self, cond: str) -> None:
        """`cond` must hold or Python decides (Alg. 1 raising, ...)."""
        ok = self.fn.label()
        self.fn.emit(f"cf.cond_br {cond}, {ok}, {self.fallback}")
        self.fn.block(ok)

    def assign(self, var: str, text: str) -> None:
        node = ast.parse(text, mode="eval").body
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in (
                "tile_matmul", "tile_vector"):
            self.records[var] = getattr(self, "_" + node.func.id)(node)
            return
        self.env[var] = self.expr(text)

    def _constant(self, node) -> int:
        if not (isinstance(node, ast.Constant) and isinstance(node.value, int)):
            raise Unsupported(f"non-constant tiling argument {ast.unparse(node)!r}")
        return int(node.value)

    def _tile_matmul(self, node) -> dict:
        fn = self.fn
        m, n, k = (self.int_expr(ast.unparse(a)) for a in node.args[:3])
        n_live, itemsize = self._constant(node.args[3]), self._constant(node.args[4])
        for v in (m, n):
            self.check(fn.op(f"arith.cmpi sge, {v}, {fn.const(1)} : i64"))
        # no value @dvm_tile_matmul computes exceeds m·n·(10·k + ov) (a cost is waves·work with
        # waves <= mt·nt, mt·tm <= 2m, nt·tn <= 2n, tm + tn <= 2·tm·tn): where that fits i64 it
        # computes Python's result, else Python decides
        mn = self.exact("muli", m, n)
        self.exact("muli", mn, self.exact("addi", self.exact("muli", k, fn.const(10)),
                                          fn.const(self.target.tile_overhead)))
        self.check_exact()
        res = fn.fresh()
        fn.emit(f"{res}:5 = func.call @dvm_tile_matmul_memo(%M, {m}, {n}, {k}, {fn.const(n_live * itemsize)}, "
                f"{fn.const(itemsize)}, {fn.const(self.target.vector_elems(itemsize))}) "
                ": (memref<?xi64>, i64, i64, i64, i64, i64, i64) -> (i64, i64, i64, i64, i1)")
        self.check(f"{res}#4")
        return {"kind": "matmul", "args": [m, n, k], "tm": f"{res}#0", "tn": f"{res}#1", "tk": f"{res}#2",
                "cost": f"{res}#3"}

    def _tile_vector(self, node) -> dict:
        """Alg. 1 (`tiling.tile_vector`) unrolled over the call's static rank."""
        fn = self.fn
        shape_node, reduce_node = node.args[0], node.args[1]
        if not isinstance(shape_node, ast.Tuple) or not shape_node.elts:
            raise Unsupported("tile_vector shape")
        if isinstance(reduce_node, ast.Set):
            reduce = {self._constant(e) for e in reduce_node.elts}
        elif isinstance(reduce_node, ast.Call) and ast.unparse(reduce_node) == "set()":
            reduce = set()
        else:
            raise Unsupported("tile_vector reduction dimensions")
        n_max, itemsize = self._constant(node.args[2]), self._constant(node.args[3])
        dims = [self.int_expr(ast.unparse(e)) for e in shape_node.elts]
        rank = len(dims)
        reduce = {d % rank for d in reduce}
        align = self.target.vector_elems(itemsize)
        t_max = self.target.local_memory_bytes // (max(1, n_max) * itemsize)
        if t_max >= align:
            t_max -= t_max % align
        if t_max < 1:
            raise Unsupported("no tile fits local memory")
        for d in dims:
            self.check(fn.op(f"arith.cmpi sge, {d}, {fn.const(1)} : i64"))
        # inner[i] = prod(dims[i+1:]), outer[i] = prod(dims[:i]): a dimension is reached only when
        # every dimension before it was too big to tile, so its `outer` is their product
        inner = [fn.const(1)] * rank
        for i in range(rank - 2, -1, -1):
            inner[i] = self.exact("muli", dims[i + 1], inner[i + 1])
        outer = [fn.const(1)] * rank
        for i in range(1, rank):
            outer[i] = self.exact("muli", outer[i - 1], dims[i - 1])
        # no value @dvm_align_div computes exceeds numel·(ov + 8)·cores (its costs are
        # w·(t·inner + ov) with w <= outer·n/cores + 1 and t <= ceil(extent/n)): where that fits
        # i64 it computes Python's result, else Python decides. Every product below is <= numel.
        numel = self.exact("muli", outer[rank - 1], dims[rank - 1])
        self.exact("muli", numel, fn.const((self.target.tile_overhead + 8) * self.target.cores))
        self.check_exact()
        join = fn.label()
        tmax = fn.const(t_max)
        for i in range(rank):
            if i in reduce:
                whole = fn.op(f"arith.muli {dims[i]}, {inner[i]} : i64")  # <= numel: exact
                self.check(fn.op(f"arith.cmpi sle, {whole}, {tmax} : i64"))
                fn.emit(f"cf.br {join}({fn.const(i)}, {dims[i]} : i64, i64)")
                break
            big = fn.op(f"arith.cmpi sgt, {inner[i]}, {tmax} : i64")
            fit, nxt = fn.label(), fn.label()
            fn.emit(f"cf.cond_br {big}, {nxt}, {fit}")
            fn.block(fit)
            res = fn.fresh()
            fn.emit(f"{res}:2 = func.call @dvm_align_div({tmax}, {inner[i]}, {dims[i]}, {outer[i]}, "
                    f"{fn.const(align)}) : (i64, i64, i64, i64, i64) -> (i64, i1)")
            self.check(f"{res}#1")
            fn.emit(f"cf.br {join}({fn.const(i)}, {res}#0 : i64, i64)")
            fn.block(nxt)
        else:  # the innermost dimension always fits in Python (an assertion there)
            fn.emit(f"cf.br {self.fallback}")
        dim, tile = fn.fresh(), fn.fresh()
        fn.block(join, f"{dim}: i64, {tile}: i64")
        return {"kind": "vector", "args": dims, "dim": dim, "tile": tile, "t_max": t_max, "n_max": n_max}


class NativeFill:
    """A `TemplateSet`'s per-shape compile, JIT-compiled: `fast(shapes, strides)` is the entry
    point every compile of the set goes through (see `kernel`); `__call__(params)` gives what the
    Python `fill` gives (``(index, tiling, words, output shapes)`` or None), for comparisons.

    The native function reads ``P = [mode, sizes..., strides...]`` (mode 1: dense inputs, the
    strides are computed natively, so the caller passes sizes only) and writes the words into
    ``W`` and ``I = [status, word count, output shapes..., tiling arguments, tiling fields]``
    (the output shapes at the same positions for every template of the set). `fast` is Python
    generated for the set's input ranks: it unpacks the shapes into the preallocated parameter
    array, makes the one native call and builds the `CompiledKernel` from the info record (its
    tiling dataclass is made from the record when first read)."""

    def __init__(self, tset, opt_level: int = 2):
        from torch_mlir import ir

        from ..backend.cpu.executable import _create_engine
        from ..backend.cpu.lower import lower_to_llvm
        from ..errors import VtmlirError

        self.tset = tset
        self.n_params = len(tset.templates[-1].params) if tset.templates else 0
        self.ranks = _ranks(tset.templates[-1].params)
        self.source, self.words, meta, n_out = _module_text(tset)
        self._ctx = ir.Context()
        with self._ctx, ir.Location.unknown():
            module = ir.Module.parse(self.source)
            lower_to_llvm(module)
            self._engine = _create_engine(module, opt_level)
        addr = self._engine.raw_lookup("_mlir_ciface_dvm_fill")
        if not addr:
            raise VtmlirError("error: the LLVM JIT could not materialise @dvm_fill")
        self._entry = _PACKED(addr)
        self._params = (ctypes.c_int64 * (1 + self.n_params))()  # slice assignment: cheaper than numpy's
        self._info = np.zeros(max(2, *(m[-1] for m in meta)), np.int64)
        self.meta = [m[:-1] for m in meta]
        self.tilings = [_tiling_builder(kind, 2 + n_out, n_args, extra) for kind, n_args, _, extra in self.meta]
        # room for the most words the set has written, and the block `_emit_words` writes once more
        blocks = [len(t.parts[1][0][0]) for t in tset.templates if t.parts[1] is not None]
        self._out = np.zeros(max(4096, tset.max_words + max(blocks, default=0)), np.int64)
        self._outmv = memoryview(self._out)  # `fast` copies the words out of it
        self._memo = np.zeros(16, np.int64)
        self._lock = threading.Lock()
        arrays = (self._out, self.words, self._info, self._memo)
        params = ctypes.addressof(self._params)
        # descriptors made once (`fast` holds their array): a larger word buffer updates W's in place.
        # The packed entry takes one pointer per argument to the argument, here a descriptor pointer.
        self._descs = [_Desc1D(params, params, 0, len(self._params), 1)]
        self._descs += [_Desc1D(a.ctypes.data, a.ctypes.data, 0, a.size, 1) for a in arrays]
        self._desc_ptrs = [ctypes.pointer(d) for d in self._descs]
        self._packed = (ctypes.c_void_p * len(self._descs))(*[ctypes.addressof(p) for p in self._desc_ptrs])
        self.fast = self._generate_fast(n_out)

    def _grow(self, words: int) -> None:
        self._out = np.zeros(words, np.int64)
        self._outmv = memoryview(self._out)
        d = self._descs[1]
        d.allocated = d.aligned = self._out.ctypes.data
        d.size = self._out.size

    def _generate_fast(self, n_out: int):
        """`fast(shapes, strides)`: the per-shape compile of this set in Python's fewest steps.
        `strides` None means dense (computed natively, and by `CompiledKernel` only if read),
        else already normalised (`codegen.compile_graph`). Returns the `CompiledKernel`, or the
        info record (a list: ``[status, words needed, ...]``) when the native code decided nothing
        (no template matched, the word buffer is too small, or Python must decide); raises
        ValueError/TypeError for shapes of the wrong ranks or non-integer sizes (the general path
        then says what is wrong)."""
        from .codegen import CompiledKernel
        from .template import _COVERAGE, _count

        tset = self.tset
        graph = tset.templates[-1].graph
        sizes = [[f"s{i}_{d}" for d in range(r)] for i, r in enumerate(self.ranks)]
        strides = [[f"t{i}_{d}" for d in range(r)] for i, r in enumerate(self.ranks)]

        def unpack(names):
            return ", ".join(("(" + "".join(n + ", " for n in ns) + ")") if ns else "[]" for ns in names) + ","

        flat_s = [n for ns in sizes for n in ns]
        flat_t = [n for ns in strides for n in ns]
        shapes = "(" + "".join("(" + "".join(f"_int({n}), " for n in ns) + "), " for ns in sizes) + ")"
        outs = []
        pos = 2
        for shp in ast.parse(tset.templates[-1].out_shapes, mode="eval").body.elts:
            outs.append("(" + "".join(f"i[{pos + d}], " for d in range(len(shp.elts))) + ")")
            pos += len(shp.elts)
        assert pos == 2 + n_out
        src = "\n".join([
            "def fast(S, T):",
            f"    {unpack(sizes)} = S",
            "    if T is not None:",
            f"        {unpack(strides)} = T",
            "    with _lock:  # the buffers are shared: one compile of the set at a time",
            "        if T is None:",
            f"            _P[0:{1 + len(flat_s)}] = (1, {''.join(n + ', ' for n in flat_s)})",
            "        else:",
            f"            _P[0:{1 + len(flat_s) + len(flat_t)}] = (0, {''.join(n + ', ' for n in flat_s + flat_t)})",
            "        _entry(_packed)",
            "        i = _I.tolist()",
            "        if i[0] < 0:",
            "            return i",
            # read-only (valid as made: the template's guards) and cheaper than a writeable copy
            # whose flag is then cleared (0.37 vs 0.27 + 0.42 us)
            "        words = _frombuffer(_nat._outmv[:i[1]].tobytes(), _WORD)",
            "    if _COVERAGE:",
            "        _count(_tset, i[0])",
            f"    return _CK(_graph, words, None, {shapes}, T, ({''.join(o + ', ' for o in outs)}),"
            " _dtypes, _tilings[i[0]], i, _reasons[i[0]])",
        ]) + "\n"
        namespace = {"_P": self._params, "_entry": self._entry, "_packed": self._packed, "_I": self._info,
                     "_lock": self._lock,
                     "_nat": self, "_COVERAGE": _COVERAGE, "_count": _count, "_tset": tset, "_CK": CompiledKernel,
                     "_graph": graph, "_dtypes": tset.templates[-1].output_dtypes, "_tilings": self.tilings,
                     "_reasons": [t.native_reason for t in tset.templates], "_frombuffer": np.frombuffer,
                     "_WORD": np.dtype(np.int64),
                     "_int": int}
        self.fast_source = src
        exec(compile(src, f"<dvm native compile {graph.name}>", "exec"), namespace)
        return namespace["fast"]

    def kernel(self, shapes, strides):
        """The `CompiledKernel` of `shapes` (normalised tuples) and `strides` (normalised, or None:
        dense), or the status NONE_MATCHED (no template covers the shape) or ASK_PYTHON (the
        Python `fill` decides). A word buffer too small is grown and the call repeated."""
        while True:
            k = self.fast(shapes, strides)
            if type(k) is not list:
                return k
            if k[0] != NO_ROOM:
                return k[0]
            with self._lock:
                if self._out.size < k[1]:
                    self._grow(2 * k[1])

    def split(self, params):
        """(shapes, strides) of a parameter list (`template._params`)."""
        shapes, strides, j = [], [], 0
        for r in self.ranks:
            shapes.append(tuple(params[j:j + r]))
            j += r
        for r in self.ranks:
            strides.append(tuple(params[j:j + r]))
            j += r
        return tuple(shapes), tuple(strides)

    def __call__(self, params):
        if len(params) != self.n_params:
            return self.tset.fill(*params)
        k = self.kernel(*self.split(params))
        if type(k) is int:  # no template matched natively (a guard may have read a wrapped value)
            return self.tset.fill(*params)
        return k.template_index, k.tiling, k.bytecode, k.output_shapes


_PARAM = re.compile(r"([st])(\d+)_(\d+)")


def _ranks(params) -> list[int]:
    """Input ranks from the parameter names (`s<i>_<d>` sizes, then `t<i>_<d>` strides)."""
    ranks: dict[int, int] = {}
    for name in params:
        kind, i, d = _PARAM.fullmatch(name).groups()
        if kind == "s":
            ranks[int(i)] = max(ranks.get(int(i), 0), int(d) + 1)
    return [ranks.get(i, 0) for i in range(1 + max(ranks, default=-1))]


def _tiling_builder(kind: str, a: int, n_args: int, extra):
    """info record -> the tiling dataclass (arguments at ``a``, then the result fields)."""
    f = a + n_args
    if kind == "matmul":
        return lambda i: MatmulTiling(*i[a:f], *i[f:f + 4])
    t_max, n_max = extra
    return lambda i: VectorTiling(tuple(i[a:f]), i[f], i[f + 1], t_max, n_max)


def _module_text(tset) -> tuple[str, np.ndarray, list, int]:
    """(`@dvm_fill` and the runtime functions as MLIR, the constant words, per template the layout
    of its info record, the number of output shape words in it)."""
    target: Target = tset.target
    fn = _Function()
    templates = tset.templates
    n_params = len(templates[-1].params)
    if any(len(t.params) != n_params for t in templates):
        raise Unsupported("templates with different parameter lists")
    # P = [mode, sizes..., strides...]; mode 1: dense inputs, each stride is 0 for a size-1
    # dimension, else the product of the inner sizes (`codegen._dense_strides`), computed here
    names = templates[-1].params
    ranks = _ranks(names)
    if not ranks:
        raise Unsupported("a kernel without inputs")
    entry_loads = ["    %e_i0 = arith.constant 0 : index", "    %e_0 = arith.constant 0 : i64",
                   "    %e_1 = arith.constant 1 : i64", "    %e_mode = memref.load %P[%e_i0] : memref<?xi64>",
                   "    %e_dense = arith.cmpi eq, %e_mode, %e_1 : i64"]
    entry_loads += ["    %e_63 = arith.constant 63 : i64", "    %e_false = arith.constant false"]
    wraps = "%e_false"  # a dense stride does not fit i64: Python decides
    params, sizes = {}, {}
    for j, name in enumerate(names):
        kind, i, d = _PARAM.fullmatch(name).groups()
        i, d = int(i), int(d)
        v = f"%p{j}"
        entry_loads.append(f"    %pi{j} = arith.constant {j + 1} : index")
        if kind == "s":
            entry_loads.append(f"    {v} = memref.load %P[%pi{j}] : memref<?xi64>")
            sizes[i, d] = v
        else:
            entry_loads.append(f"    %pg{j} = memref.load %P[%pi{j}] : memref<?xi64>")
            inner = "%e_1"
            for e in range(d + 1, ranks[i]):  # exact, like every product here (`_Template.exact`)
                entry_loads.append(f"    %pm{j}_{e}:2 = arith.mulsi_extended {inner}, {sizes[i, e]} : i64")
                entry_loads.append(f"    %ps{j}_{e} = arith.shrsi %pm{j}_{e}#0, %e_63 : i64")
                entry_loads.append(f"    %pw{j}_{e} = arith.cmpi ne, %pm{j}_{e}#1, %ps{j}_{e} : i64")
                entry_loads.append(f"    %po{j}_{e} = arith.ori {wraps}, %pw{j}_{e} : i1")
                inner, wraps = f"%pm{j}_{e}#0", f"%po{j}_{e}"
            entry_loads.append(f"    %pu{j} = arith.cmpi eq, {sizes[i, d]}, %e_1 : i64")
            entry_loads.append(f"    %pd{j} = arith.select %pu{j}, %e_0, {inner} : i64")
            entry_loads.append(f"    {v} = arith.select %e_dense, %pd{j}, %pg{j} : i64")
        params[name] = (v, "i64")
    words: list[int] = []
    meta = []
    fallback = "^fallback"
    starts = [fn.label() for _ in templates] + ["^none"]
    entry_loads.append(f"    %e_wraps = arith.andi %e_dense, {wraps} : i1")
    fn.emit(f"cf.cond_br %e_wraps, {fallback}, {starts[0]}")
    for i, tmpl in enumerate(templates):
        fn.block(starts[i])
        t = _Template(fn, params, target, starts[i + 1], fallback)
        for kind, a, b in tmpl.stmts:
            if kind == "guard":
                t.guard(a)
            else:
                t.assign(a, b)
        meta.append(_emit_words(t, tmpl, i, words))
    fn.block("^none")
    fn.emit(f"memref.store {fn.const(NONE_MATCHED)}, %I[{fn.const(0, 'index')}] : memref<?xi64>")
    fn.emit("return")
    fn.block(fallback)
    fn.emit(f"memref.store {fn.const(ASK_PYTHON)}, %I[{fn.const(0, 'index')}] : memref<?xi64>")
    fn.emit("return")
    consts = [f"    {name} = arith.constant {value}" + ("" if ty == "i1" else f" : {ty}")
              for (ty, value), name in fn.consts.items()]
    body = "\n".join(entry_loads + consts + fn.lines)
    text = ("module {\n" + _runtime_functions(target) +
            "  func.func @dvm_fill(%P: memref<?xi64>, %W: memref<?xi64>, %C: memref<?xi64>, %I: memref<?xi64>, "
            "%M: memref<?xi64>) {\n"
            + "    %m0 = arith.constant 0 : index\n    %z0 = arith.constant 0 : i64\n"
            + "    memref.store %z0, %M[%m0] : memref<?xi64>\n" + body + "\n  }\n}\n")
    out_ranks = {tuple(len(shp.elts) for shp in ast.parse(t.out_shapes, mode="eval").body.elts) for t in templates}
    if len(out_ranks) != 1:  # pragma: no cover - the graph fixes its output ranks
        raise Unsupported("templates with different output ranks")
    return text, np.array(words or [0], dtype=np.int64), meta, sum(out_ranks.pop())


def _emit_words(t: _Template, tmpl, index: int, words: list) -> tuple:
    """The template's words into %W (the Python `KernelTemplate.code` natively) and its info
    record into %I: status, word count, tiling arguments and fields, output shapes."""
    fn = t.fn
    (pre, pre_holes), block, post = tmpl.parts
    idx = fn.index

    def copy(src_off: int, count: str, dst: str) -> None:
        """%W[dst + q] = %C[src_off + q] for q < count (index values)."""
        lo, step = fn.const(0, "index"), fn.const(1, "index")
        q = fn.fresh()
        fn.emit(f"scf.for {q} = {lo} to {count} step {step} {{")
        s = fn.op(f"arith.addi {q}, {fn.const(src_off, 'index')} : index")
        d = fn.op(f"arith.addi {q}, {dst} : index")
        w = fn.op(f"memref.load %C[{s}] : memref<?xi64>")
        fn.emit(f"memref.store {w}, %W[{d}] : memref<?xi64>")
        fn.emit("}")

    def store(value: str, at: str) -> None:
        fn.emit(f"memref.store {value}, %W[{at}] : memref<?xi64>")

    def at(base: str, j: int) -> str:
        return fn.op(f"arith.addi {base}, {fn.const(j, 'index')} : index")

    # every hole value first (the branch may still fall back), then the room check, then the stores
    pre_vals = [(j, t.int_expr(e)) for j, e in pre_holes]
    zero = fn.const(0, "index")
    if block is not None:
        (blk, blk_holes), step_pos = block
        count = t.int_expr(tmpl.count)
        count = fn.op(f"arith.maxsi {count}, {fn.const(0)} : i64")
        blk_vals = [(j, t.int_expr(e)) for j, e in blk_holes]
        steps = [(p, t.int_expr(s)) for p, s in zip(step_pos, tmpl.steps) if s != "0"]
        post_vals = [(j, t.int_expr(e)) for j, e in post[1]]
        nb = len(blk)
        # exact (a wrapped count would pass the room check below and overrun W)
        blk_words = t.exact("muli", count, fn.const(nb))
        total = t.exact("addi", blk_words, fn.const(len(pre) + len(post[0])))
        # room for the traced block written once even when it repeats zero times
        need = t.exact("addi", total, fn.const(nb))
    else:
        total = need = fn.const(len(pre))
    shape_vals = [[t.int_expr(ast.unparse(d)) for d in shp.elts]
                  for shp in ast.parse(tmpl.out_shapes, mode="eval").body.elts]
    record = t.records[tmpl.tiling]
    t.check_exact()  # the words, their guards and the word count: as Python computes them
    cap = fn.op(f"memref.dim %W, {zero} : memref<?xi64>")
    cap64 = fn.op(f"arith.index_cast {cap} : index to i64")
    room = fn.op(f"arith.cmpi sle, {need}, {cap64} : i64")
    ok, short = fn.label(), fn.label()
    fn.emit(f"cf.cond_br {room}, {ok}, {short}")
    fn.block(short)
    fn.emit(f"memref.store {fn.const(NO_ROOM)}, %I[{zero}] : memref<?xi64>")
    fn.emit(f"memref.store {need}, %I[{fn.const(1, 'index')}] : memref<?xi64>")
    fn.emit("return")
    fn.block(ok)
    base = len(words)
    words.extend(int(w) for w in pre)
    copy(base, fn.const(len(pre), "index"), zero)
    for j, v in pre_vals:
        store(v, fn.const(j, "index"))
    if block is not None:
        start = fn.const(len(pre), "index")
        off_blk = len(words)
        words.extend(int(w) for w in blk)
        copy(off_blk, fn.const(nb, "index"), start)
        for j, v in blk_vals:
            store(v, fn.const(len(pre) + j, "index"))
        # repetitions 1..count-1: the first one's words, plus r * step at the step positions
        n_idx = idx(count)
        one = fn.const(1, "index")
        r = fn.fresh()
        fn.emit(f"scf.for {r} = {one} to {n_idx} step {one} {{")
        rb = fn.op(f"arith.muli {r}, {fn.const(nb, 'index')} : index")
        dst = fn.op(f"arith.addi {rb}, {start} : index")
        q = fn.fresh()
        fn.emit(f"scf.for {q} = {zero} to {fn.const(nb, 'index')} step {one} {{")
        s = fn.op(f"arith.addi {q}, {start} : index")
        d = fn.op(f"arith.addi {q}, {dst} : index")
        w = fn.op(f"memref.load %W[{s}] : memref<?xi64>")
        fn.emit(f"memref.store {w}, %W[{d}] : memref<?xi64>")
        fn.emit("}")
        if steps:  # exact: |r * step| <= |(count-1) * step|, which a guard computed exactly
            r64 = fn.op(f"arith.index_cast {r} : index to i64")
            for p, sv in steps:
                first = fn.op(f"memref.load %W[{fn.const(len(pre) + p, 'index')}] : memref<?xi64>")
                inc = fn.op(f"arith.muli {r64}, {sv} : i64")
                val = fn.op(f"arith.addi {first}, {inc} : i64")
                store(val, at(dst, p))
        fn.emit("}")
        nb_idx = fn.const(nb, "index")
        span = fn.op(f"arith.muli {n_idx}, {nb_idx} : index")
        e = fn.op(f"arith.addi {start}, {span} : index")
        off_post = len(words)
        words.extend(int(w) for w in post[0])
        copy(off_post, fn.const(len(post[0]), "index"), e)
        for j, v in post_vals:
            store(v, at(e, j))
    # the info record: status, words, tiling arguments, tiling fields, output shapes
    fields = [record["tm"], record["tn"], record["tk"], record["cost"]] if record["kind"] == "matmul" \
        else [record["dim"], record["tile"]]
    info = [total, *(v for shp in shape_vals for v in shp), *record["args"], *fields]
    status = fn.const(index)
    fn.emit(f"memref.store {status}, %I[{zero}] : memref<?xi64>")
    for j, v in enumerate(info):
        fn.emit(f"memref.store {v}, %I[{fn.const(j + 1, 'index')}] : memref<?xi64>")
    fn.emit("return")
    extra = (record["t_max"], record["n_max"]) if record["kind"] == "vector" else None
    return record["kind"], len(record["args"]), len(fields), extra, 1 + len(info)
