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
tiling of this call (the templates of a set mostly tile the same sizes). The traced expressions
(`expr` trees) map one to one onto `arith` ops built through the bindings (``//`` is
``arith.floordivsi``, ``%`` is ``a - (a // b) * b``, both Python's floor semantics; ``/`` and
`expr.F64Bits` are f64 division and a bitcast). Alg. 1 (`tiling.tile_vector`, unrolled per call site
over its static rank and reduction dimensions, with `tiling.min_cost_tile` and
`tiling.hardware_align_div` as MLIR functions) and the MatMul template (a full scan of the
candidates of `tiling.tile_matmul_reference`, which `tiling.tile_matmul` equals) are built here
once per set with the target's constants. The module is lowered by the CPU backend's stages and JIT-compiled, like the VM
(`native.py`), when a template set is complete (`template.prebuild`, `DvmFunction.prebuild`).

Whatever the native code cannot decide exactly like Python it hands back (status -3): a division
by zero, a shape Alg. 1 rejects (the Python path raises the `TilingError`), a parameter count it
was not built for, an integer operation that wraps in i64 (`_Template.exact`: the words and the
guards that hold `decode`'s checks on them, `bytecode.check_traced`, are exact or not written).
Then the Python `fill` runs, so results are always those of the Python templates, which the tests
compare bitwise on random shapes.
"""

from __future__ import annotations

import ctypes
import threading
from operator import itemgetter

import numpy as np
from torch_mlir import ir
from torch_mlir.dialects import arith, cf, func, llvm, memref, scf

from ..backend.cpu.executable import create_engine
from ..backend.cpu.lower import lower_to_llvm
from ..errors import VtmlirError
from .coverage import COVERAGE, record_hit
from .expr import BinOp, Compare, Const, Expr, F64Bits, Field, Name, Neg, TilingCall, TARGET, f64bits
from .mlir_build import cidx, const, function, i, index, scalar
from .mlir_build import memref as memref_type
from .kernel import CompiledKernel
from .tiling import MatmulTiling, Target, VectorTiling

NONE_MATCHED, NO_ROOM, ASK_PYTHON = -1, -2, -3

#: `_Template.exact`: the LLVM overflow intrinsic of each operation
_OVERFLOW = {"addi": llvm.intr_sadd_with_overflow, "subi": llvm.intr_ssub_with_overflow,
             "muli": llvm.intr_smul_with_overflow}
_CMPI = {"==": "eq", "!=": "ne", "<": "slt", "<=": "sle", ">": "sgt", ">=": "sge"}
_CMPF = {"==": "oeq", "!=": "une", "<": "olt", "<=": "ole", ">": "ogt", ">=": "oge"}
_ARITH_I = {"+": "addi", "-": "subi", "*": "muli"}
_ARITH_F = {"+": arith.addf, "-": arith.subf, "*": arith.mulf}


class Unsupported(Exception):
    """The template set uses an expression the translation does not know (it stays in Python)."""


class _Desc1D(ctypes.Structure):
    _fields_ = [("allocated", ctypes.c_void_p), ("aligned", ctypes.c_void_p), ("offset", ctypes.c_int64),
                ("size", ctypes.c_int64), ("stride", ctypes.c_int64)]


# a call takes about a microsecond: keep the GIL (PYFUNCTYPE), so no other thread can interleave
# its use of the shared buffers and no lock is needed
_PACKED = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)


def _cmpi(pred: str, a, b):
    return arith.cmpi(getattr(arith.CmpIPredicate, pred), a, b)


def _blocks(op, *signatures):
    """New blocks at the end of `op`'s body, one per tuple of argument types."""
    return [op.regions[0].blocks.append(*sig) for sig in signatures]


def _runtime_functions(target: Target) -> None:
    """`tiling.min_cost_tile` + `hardware_align_div` and the MatMul template's scan, with the
    target's constants; each returns its result and an ok flag (false: Python decides)."""
    _align_div(target)
    _tile_matmul(target)
    _tile_matmul_memo()


def _align_div(target: Target) -> None:
    """``@dvm_align_div(tmax, inner, extent, outer, align) -> (tile, ok)``: Alg. 1's tile of one
    dimension (`tiling.min_cost_tile`, then `tiling.hardware_align_div`)."""
    i64, i1 = i(64), i(1)
    fn, entry = function("dvm_align_div", [i64] * 5, [i64, i1])
    tmax, inner, extent, outer, align = entry.arguments
    (fail, start, loop, body, nxt, done, align_b, gcd, gstep, aligned, tryup, down, ret) = _blocks(
        fn, (), (), (i64, i64, i64, i1), (), (), (i64,), (), (i64, i64), (), (), (), (), (i64,))
    with ir.InsertionPoint(entry):
        c0, c1 = const(i64, 0), const(i64, 1)
        cores, ov = const(i64, target.cores), const(i64, target.tile_overhead)
        false, true = const(i1, False), const(i1, True)
        q = arith.divsi(tmax, inner)
        thi = arith.minsi(extent, q)
        cf.cond_br(_cmpi("slt", thi, c1), [], [], fail, start)
    with ir.InsertionPoint(fail):
        func.ReturnOp([c0, false])
    with ir.InsertionPoint(start):
        x0 = arith.muli(extent, inner)
        x = arith.muli(x0, outer)
        cf.br([arith.ceildivsi(extent, thi), c0, c0, false], loop)
    n, bc, bt, found = loop.arguments
    with ir.InsertionPoint(loop):
        w = arith.ceildivsi(arith.muli(outer, n), cores)
        room = arith.subi(bc, arith.muli(ov, w))
        above = _cmpi("sgt", x, arith.muli(room, cores))
        cf.cond_br(arith.andi(found, above), [bt], [], done, body)
    with ir.InsertionPoint(body):
        n2 = arith.minsi(extent, arith.divsi(arith.muli(w, cores), outer))
        t = arith.ceildivsi(extent, n2)
        cost = arith.muli(w, arith.addi(arith.muli(t, inner), ov))
        lt = _cmpi("slt", cost, bc)
        eq = _cmpi("eq", cost, bc)
        gt = _cmpi("sgt", t, bt)
        better0 = arith.ori(lt, arith.andi(eq, gt))
        better = arith.ori(arith.xori(found, true), better0)
        bc2 = arith.select(better, cost, bc)
        bt2 = arith.select(better, t, bt)
        cf.cond_br(_cmpi("eq", t, c1), [bt2], [], done, nxt)
    with ir.InsertionPoint(nxt):
        cf.br([arith.ceildivsi(extent, arith.subi(t, c1)), bc2, bt2, true], loop)
    (best,) = done.arguments
    with ir.InsertionPoint(done):
        cf.cond_br(_cmpi("eq", best, extent), [extent], [], ret, align_b)
    with ir.InsertionPoint(align_b):
        cf.br([align, inner], gcd)
    ga, gb = gcd.arguments
    with ir.InsertionPoint(gcd):
        cf.cond_br(_cmpi("eq", gb, c0), [], [], aligned, gstep)
    with ir.InsertionPoint(gstep):
        cf.br([gb, arith.remsi(ga, gb)], gcd)
    with ir.InsertionPoint(aligned):
        step = arith.divsi(align, ga)
        up = arith.muli(arith.ceildivsi(best, step), step)
        upbig = _cmpi("sge", up, extent)
        whole_fits = _cmpi("sle", x0, tmax)
        cf.cond_br(arith.andi(upbig, whole_fits), [extent], [], ret, tryup)
    with ir.InsertionPoint(tryup):
        upfits = _cmpi("sle", arith.muli(up, inner), tmax)
        upin = _cmpi("sle", up, extent)
        cf.cond_br(arith.andi(upfits, upin), [up], [], ret, down)
    with ir.InsertionPoint(down):
        dn = arith.muli(arith.divsi(best, step), step)
        cf.br([arith.select(_cmpi("sge", dn, c1), dn, best)], ret)
    with ir.InsertionPoint(ret):
        func.ReturnOp([ret.arguments[0], true])


def _tile_matmul(target: Target) -> None:
    """``@dvm_tile_matmul(m, n, k, live, isz, align) -> (tm, tn, tk, cost, ok)``: every (tm, tn)
    of `tiling.tile_matmul_reference`; its key (cost, -area, tm) orders candidates totally, so the
    scan order does not matter. tn outside (its tile count once), tm = min(m, 2^e1) inside
    (ceil(m / 2^e1) is a shift)."""
    i64, i1 = i(64), i(1)
    fn, entry = function("dvm_tile_matmul", [i64] * 6, [i64, i64, i64, i64, i1])
    m, n, k, live, isz, align = entry.arguments
    with ir.InsertionPoint(entry):
        c0, c1, c3, c7 = (const(i64, v) for v in (0, 1, 3, 7))
        cores, ov = const(i64, target.cores), const(i64, target.tile_overhead)
        mem = const(i64, target.local_memory_bytes)
        false, true = const(i1, False), const(i1, True)
        i0, i1_, i10, i8 = cidx(0), cidx(1), cidx(10), cidx(8)
        outer = scf.ForOp(i0, i8, i1_, [c0, c0, c0, c0, c0, false])
        with ir.InsertionPoint(outer.body):
            e2i = arith.index_cast(i64, outer.induction_variable)
            tn = arith.minsi(n, arith.shli(align, e2i))
            nt = arith.ceildivsi(n, tn)
            inner = scf.ForOp(i0, i10, i1_, list(outer.inner_iter_args))
            with ir.InsertionPoint(inner.body):
                bc2, bna2, btm2, btn2, btk2, found2 = inner.inner_iter_args
                e1i = arith.index_cast(i64, inner.induction_variable)
                p1 = arith.shli(c1, e1i)
                tm = arith.minsi(m, p1)
                area = arith.muli(tm, tn)
                avail = arith.subi(mem, arith.muli(live, area))
                pos = _cmpi("sgt", avail, c0)
                tmn = arith.addi(tm, tn)
                den = arith.muli(tmn, isz)
                tk0 = arith.divsi(arith.select(pos, avail, c0), den)
                full = _cmpi("sge", tk0, k)
                ge_al = _cmpi("sge", tk0, align)
                down = arith.subi(tk0, arith.remsi(tk0, align))
                tk = arith.select(full, k, arith.select(ge_al, down, tk0))
                feasible = _cmpi("sge", tk, c1)
                whole = _cmpi("sge", p1, m)
                mshift = arith.shrsi(arith.addi(m, arith.subi(p1, c1)), e1i)
                mt = arith.select(whole, c1, mshift)
                waves = arith.ceildivsi(arith.muli(mt, nt), cores)
                l1 = arith.muli(tmn, k)
                l2 = arith.muli(arith.shrsi(arith.addi(area, c7), c3), k)
                cost = arith.muli(waves, arith.addi(arith.addi(l1, l2), ov))
                na = arith.subi(c0, area)
                lt = _cmpi("slt", cost, bc2)
                eq = _cmpi("eq", cost, bc2)
                nalt = _cmpi("slt", na, bna2)
                naeq = _cmpi("eq", na, bna2)
                tmlt = _cmpi("slt", tm, btm2)
                lex = arith.ori(lt, arith.andi(eq, arith.ori(nalt, arith.andi(naeq, tmlt))))
                want = arith.ori(arith.xori(found2, true), lex)
                better = arith.andi(feasible, want)
                picked = [arith.select(better, new, old) for new, old in
                          ((cost, bc2), (na, bna2), (tm, btm2), (tn, btn2), (tk, btk2))]
                scf.YieldOp(picked + [arith.ori(found2, better)])
            scf.YieldOp(list(inner.results))
        r = outer.results
        func.ReturnOp([r[2], r[3], r[4], r[0], r[5]])


def _tile_matmul_memo() -> None:
    """``@dvm_tile_matmul_memo(M, m, n, k, live, isz, align)``: the templates of a set usually
    tile the same (m, n, k): %M remembers the last call of this fill (M[0] = 1 when valid,
    M[1..5] the arguments, M[6..10] the results)."""
    i64, i1 = i(64), i(1)
    fn, entry = function("dvm_tile_matmul_memo", [memref_type(i64)] + [i64] * 6, [i64, i64, i64, i64, i1])
    M, *args = entry.arguments
    hit, miss = _blocks(fn, (), ())
    with ir.InsertionPoint(entry):
        c1 = const(i64, 1)
        ix = [cidx(v) for v in range(11)]
        saved = [memref.load(M, [ix[j]]) for j in range(6)]
        same = [_cmpi("eq", saved[0], c1)] + [_cmpi("eq", saved[j], args[j - 1]) for j in range(1, 6)]
        acc = same[0]
        for e in same[1:]:
            acc = arith.andi(acc, e)
        cf.cond_br(acc, [], [], hit, miss)
    with ir.InsertionPoint(hit):
        h = [memref.load(M, [ix[j]]) for j in range(6, 11)]
        func.ReturnOp(h[:4] + [arith.trunci(i1, h[4])])
    with ir.InsertionPoint(miss):
        r = list(func.CallOp([i64, i64, i64, i64, i1], ir.FlatSymbolRefAttr.get("dvm_tile_matmul"),
                             args[:6]).results)
        for j, v in enumerate([c1] + args[:5] + r[:4]):
            memref.store(v, M, [ix[j]])
        memref.store(arith.extui(i64, r[4]), M, [ix[10]])
        func.ReturnOp(r)


class _FillFunction:
    """`@dvm_fill` being built: its blocks (created when first named, placed when started), the
    current insertion point, and the constants of the entry block (they dominate every
    template's blocks), created in first-use order before the entry block's branch."""

    def __init__(self, op):
        self.region = op.regions[0]
        self.consts: dict[tuple, ir.Value] = {}
        self.const_ip: ir.InsertionPoint | None = None
        self._ip: ir.InsertionPoint | None = None

    def label(self, *types) -> ir.Block:
        return self.region.blocks.append(*types)

    def block(self, b: ir.Block) -> None:
        """Continue in `b`, placed after every block started so far."""
        b.append_to(self.region)
        self.at(ir.InsertionPoint(b))

    def at(self, ip: ir.InsertionPoint | None) -> None:
        if self._ip is not None:
            self._ip.__exit__(None, None, None)
        self._ip = ip
        if ip is not None:
            ip.__enter__()

    def const(self, value, ty: str = "i64") -> ir.Value:
        key = (ty, f64bits(value) if ty == "f64" else value)
        v = self.consts.get(key)
        if v is None:
            with self.const_ip:
                v = self.consts[key] = const(scalar(ty), value)
        return v

    def index(self, v: ir.Value) -> ir.Value:
        return arith.index_cast(index(), v)


class _Template:
    """One template's statements as MLIR: `env` maps the trace's names to (value, type)."""

    def __init__(self, fn: _FillFunction, params: dict, target: Target, fail: ir.Block, fallback: ir.Block):
        self.fn, self.target, self.fail, self.fallback = fn, target, fail, fallback
        self._wrapped = fn.const(False, "i1")  # did an `exact` operation wrap so far
        self.env: dict[str, tuple[ir.Value, str]] = dict(params)
        self.memo: dict[Expr, tuple[ir.Value, str]] = {}
        self.records: dict[str, dict] = {}  # tiling call variable -> fields

    # -- expressions -------------------------------------------------------------------------
    def expr(self, e: Expr) -> tuple[ir.Value, str]:
        hit = self.memo.get(e)
        if hit is None:
            hit = self.memo[e] = self._node(e)
        return hit

    def int_expr(self, e: Expr) -> ir.Value:
        v, ty = self.expr(e)
        if ty != "i64":
            raise Unsupported(f"{str(e)!r} is not an integer expression")
        return v

    def _node(self, e: Expr) -> tuple[ir.Value, str]:
        fn, t = self.fn, type(e)
        if t is Const:
            if type(e.value) is bool:
                return fn.const(e.value, "i1"), "i1"
            if type(e.value) is int:
                return fn.const(e.value), "i64"
            return fn.const(e.value, "f64"), "f64"
        if t is Name and e.name in self.env:
            return self.env[e.name]
        if t is Field:
            record = self.records.get(e.var)
            if record is not None and e.field in record:
                return record[e.field], "i64"
        elif t is Neg:
            v, ty = self._node(e.operand)
            if ty == "i64":
                return self.exact("subi", fn.const(0), v), "i64"
            if ty == "f64":
                return arith.negf(v), "f64"
        elif t is BinOp:
            return self._binop(e)
        elif t is Compare:
            return self._compare(e.op, self._node(e.left), self._node(e.right))
        elif t is F64Bits:
            return arith.bitcast(i(64), self._float(self._node(e.operand))), "i64"
        raise Unsupported(f"expression {str(e)!r}")

    def _float(self, vt) -> ir.Value:
        v, ty = vt
        if ty == "f64":
            return v
        if ty == "i64":
            return arith.sitofp(scalar("f64"), v)
        raise Unsupported("a truth value used as a number")

    def _truth(self, vt) -> ir.Value:
        v, ty = vt
        if ty == "i1":
            return v
        if ty == "i64":
            return _cmpi("ne", v, self.fn.const(0))
        raise Unsupported("a float used as a truth value")

    def _nonzero_divisor(self, x, d) -> None:
        """Python raises on a zero divisor, and its ``MIN // -1`` does not wrap: leave such a
        shape to it."""
        fn = self.fn
        zero = _cmpi("eq", d, fn.const(0))
        minus1 = _cmpi("eq", d, fn.const(-1))
        least = _cmpi("eq", x, fn.const(-(1 << 63)))
        self._fallback_if(arith.ori(zero, arith.andi(minus1, least)))

    def _fallback_if(self, cond) -> None:
        ok = self.fn.label()
        cf.cond_br(cond, [], [], self.fallback, ok)
        self.fn.block(ok)

    def exact(self, op: str, x, y):
        """``x op y`` (addi, subi, muli) on i64, noting whether it wrapped where Python's integers
        do not (Python then decides: `check_exact`). The template's words and its guards --
        `decode`'s checks on those words (`bytecode.check_traced`) -- are computed from the same
        expressions, so exact arithmetic is what makes a guard that holds natively hold for the
        words written: a wrapped size could pass a bound check that the real one fails. LLVM's
        overflow intrinsics (an add or multiply and its overflow flag) with the flags OR-ed
        together, not a branch per operation: the set's JIT time grows with its code."""
        i64 = i(64)
        r = _OVERFLOW[op](llvm.StructType.get_literal([i64, i(1)]), x, y)
        wraps = llvm.extractvalue(i(1), r, [1])
        self._wrapped = arith.ori(self._wrapped, wraps)
        return llvm.extractvalue(i64, r, [0])

    def check_exact(self) -> None:
        """Python decides if anything so far wrapped (before a value is used for more than a
        guard: a tiling call, the words)."""
        self._fallback_if(self._wrapped)

    def _binop(self, e: BinOp) -> tuple[ir.Value, str]:
        a, b = self._node(e.left), self._node(e.right)
        op = e.op
        if op == "/":
            x, y = self._float(a), self._float(b)
            self._fallback_if(arith.cmpf(arith.CmpFPredicate.OEQ, y, self.fn.const(0.0, "f64")))
            return arith.divf(x, y), "f64"
        if a[1] == "i64" and b[1] == "i64":
            x, y = a[0], b[0]
            if op in _ARITH_I:
                return self.exact(_ARITH_I[op], x, y), "i64"
            if op in ("//", "%"):
                self._nonzero_divisor(x, y)
                q = arith.floordivsi(x, y)
                if op == "//":
                    return q, "i64"
                # |x - q·y| < |y|: exact mod 2^64 even where q·y alone wraps
                return arith.subi(x, arith.muli(q, y)), "i64"
        elif "i1" not in (a[1], b[1]) and op in _ARITH_F:
            x, y = self._float(a), self._float(b)
            return _ARITH_F[op](x, y), "f64"
        raise Unsupported(f"operator {str(e)!r}")

    def _compare(self, op: str, a, b) -> tuple[ir.Value, str]:
        if "i1" in (a[1], b[1]):
            raise Unsupported(f"comparison {op}")
        if a[1] == b[1] == "i64":
            return _cmpi(_CMPI[op], a[0], b[0]), "i1"
        x, y = self._float(a), self._float(b)
        return arith.cmpf(getattr(arith.CmpFPredicate, _CMPF[op].upper()), x, y), "i1"

    # -- statements --------------------------------------------------------------------------
    def guard(self, cond: Expr) -> None:
        """`cond` must hold or the next template is tried. A guard that held on a value that
        wrapped is caught by the `check_exact` before the words; one that failed on it at worst
        reports NONE_MATCHED, after which `template.compile_templated` asks the (exact) Python
        `fill` before tracing anything."""
        c = self._truth(self.expr(cond))
        ok = self.fn.label()
        cf.cond_br(c, [], [], ok, self.fail)
        self.fn.block(ok)

    def check(self, cond) -> None:
        """`cond` must hold or Python decides (Alg. 1 raising, ...)."""
        ok = self.fn.label()
        cf.cond_br(cond, [], [], ok, self.fallback)
        self.fn.block(ok)

    def assign(self, var: str, e: Expr) -> None:
        if type(e) is TilingCall and e.fn in ("tile_matmul", "tile_vector"):
            self.records[var] = getattr(self, "_" + e.fn)(e)
            return
        self.env[var] = self.expr(e)

    @staticmethod
    def _constant(x) -> int:
        if not (type(x) is Const and type(x.value) is int):
            raise Unsupported(f"non-constant tiling argument {x}")
        return x.value

    def _tile_matmul(self, call: TilingCall) -> dict:
        fn, i64 = self.fn, i(64)
        if len(call.args) != 6 or call.args[5] is not TARGET:
            raise Unsupported(f"tiling call {call}")
        m, n, k = (self.int_expr(a) for a in call.args[:3])
        n_live, itemsize = self._constant(call.args[3]), self._constant(call.args[4])
        for v in (m, n):
            self.check(_cmpi("sge", v, fn.const(1)))
        # no value @dvm_tile_matmul computes exceeds m·n·(10·k + ov) (a cost is waves·work with
        # waves <= mt·nt, mt·tm <= 2m, nt·tn <= 2n, tm + tn <= 2·tm·tn): where that fits i64 it
        # computes Python's result, else Python decides
        mn = self.exact("muli", m, n)
        self.exact("muli", mn, self.exact("addi", self.exact("muli", k, fn.const(10)),
                                          fn.const(self.target.tile_overhead)))
        self.check_exact()
        args = [m, n, k, fn.const(n_live * itemsize), fn.const(itemsize), fn.const(self.target.vector_elems(itemsize))]
        res = func.CallOp([i64, i64, i64, i64, i(1)], ir.FlatSymbolRefAttr.get("dvm_tile_matmul_memo"),
                          [self.fn.memo_buffer] + args).results
        self.check(res[4])
        return {"kind": "matmul", "args": [m, n, k], "tm": res[0], "tn": res[1], "tk": res[2], "cost": res[3]}

    def _tile_vector(self, call: TilingCall) -> dict:
        """Alg. 1 (`tiling.tile_vector`) unrolled over the call's static rank."""
        fn, i64 = self.fn, i(64)
        if len(call.args) != 5 or call.args[4] is not TARGET:
            raise Unsupported(f"tiling call {call}")
        shape, reduce = call.args[0], call.args[1]
        if not isinstance(shape, tuple) or not shape:
            raise Unsupported("tile_vector shape")
        if not isinstance(reduce, frozenset):
            raise Unsupported("tile_vector reduction dimensions")
        n_max, itemsize = self._constant(call.args[2]), self._constant(call.args[3])
        dims = [self.int_expr(e) for e in shape]
        rank = len(dims)
        reduce = {d % rank for d in reduce}
        align = self.target.vector_elems(itemsize)
        t_max = self.target.local_memory_bytes // (max(1, n_max) * itemsize)
        if t_max >= align:
            t_max -= t_max % align
        if t_max < 1:
            raise Unsupported("no tile fits local memory")
        for d in dims:
            self.check(_cmpi("sge", d, fn.const(1)))
        # inner[i] = prod(dims[i+1:]), outer[i] = prod(dims[:i]): a dimension is reached only when
        # every dimension before it was too big to tile, so its `outer` is their product
        inner = [fn.const(1)] * rank
        for j in range(rank - 2, -1, -1):
            inner[j] = self.exact("muli", dims[j + 1], inner[j + 1])
        outer = [fn.const(1)] * rank
        for j in range(1, rank):
            outer[j] = self.exact("muli", outer[j - 1], dims[j - 1])
        # no value @dvm_align_div computes exceeds numel·(ov + 8)·cores (its costs are
        # w·(t·inner + ov) with w <= outer·n/cores + 1 and t <= ceil(extent/n)): where that fits
        # i64 it computes Python's result, else Python decides. Every product below is <= numel.
        numel = self.exact("muli", outer[rank - 1], dims[rank - 1])
        self.exact("muli", numel, fn.const((self.target.tile_overhead + 8) * self.target.cores))
        self.check_exact()
        join = fn.label(i64, i64)
        tmax = fn.const(t_max)
        for j in range(rank):
            if j in reduce:
                whole = arith.muli(dims[j], inner[j])  # <= numel: exact
                self.check(_cmpi("sle", whole, tmax))
                cf.br([fn.const(j), dims[j]], join)
                break
            big = _cmpi("sgt", inner[j], tmax)
            fit, nxt = fn.label(), fn.label()
            cf.cond_br(big, [], [], nxt, fit)
            fn.block(fit)
            res = func.CallOp([i64, i(1)], ir.FlatSymbolRefAttr.get("dvm_align_div"),
                              [tmax, inner[j], dims[j], outer[j], fn.const(align)]).results
            self.check(res[1])
            cf.br([fn.const(j), res[0]], join)
            fn.block(nxt)
        else:  # the innermost dimension always fits in Python (an assertion there)
            cf.br([], self.fallback)
        fn.block(join)
        dim, tile = join.arguments
        return {"kind": "vector", "args": dims, "dim": dim, "tile": tile, "t_max": t_max, "n_max": n_max}


class NativeFill:
    """A `TemplateSet`'s per-shape compile, JIT-compiled: `fast(shapes, strides)` is the entry
    point every compile of the set goes through (see `kernel`); `__call__(params)` gives what the
    Python `fill` gives (``(index, tiling, words, output shapes)`` or None), for comparisons.

    The native function reads ``P = [mode, sizes..., strides...]`` (mode 1: dense inputs, the
    strides are computed natively, so the caller passes sizes only) and writes the words into
    ``W`` and ``I = [status, word count, output shapes..., tiling arguments, tiling fields]``
    (the output shapes at the same positions for every template of the set). `fast` unpacks the
    shapes into the preallocated parameter array, makes the one native call and builds the
    `CompiledKernel` from the info record (its tiling dataclass is made from the record when
    first read). `source` is the module as built (before lowering), for inspection."""

    def __init__(self, tset, opt_level: int = 2):
        self.tset = tset
        self.n_params = len(tset.templates[-1].params) if tset.templates else 0
        self.ranks = tset.templates[-1].ranks
        self._ctx = ir.Context()
        with self._ctx, ir.Location.unknown():
            module, self.words, meta, n_out = build_fill_module(tset)
            self.source = str(module)
            lower_to_llvm(module)
            self._engine = create_engine(module, opt_level)
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
        else already normalised (`compile.compile_graph`). Returns the `CompiledKernel`, or the
        info record (a list: ``[status, words needed, ...]``) when the native code decided nothing
        (no template matched, the word buffer is too small, or Python must decide); raises
        ValueError/TypeError for shapes of the wrong ranks or non-integer sizes (the general path
        then says what is wrong)."""

        tset = self.tset
        graph = tset.templates[-1].graph
        ranks = tuple(self.ranks)
        n_sizes = sum(ranks)
        out_slices, pos = [], 2
        for rank in map(len, tset.templates[-1].out_shapes):
            out_slices.append((pos, pos + rank))
            pos += rank
        assert pos == 2 + n_out and out_slices
        P, entry, packed, info, lock = self._params, self._entry, self._packed, self._info, self._lock
        dtypes, tilings = tset.templates[-1].output_dtypes, self.tilings
        reasons = [t.native_reason for t in tset.templates]
        word = np.dtype(np.int64)

        # C-level iteration only (map, sum, itemgetter): a comprehension's frame costs as much as
        # a step here. Shapes must be tuples (`sum`); anything else takes the general path.
        out_rows = itemgetter(*[slice(a, b) for a, b in out_slices])
        bounds, pos = [], 1
        for rank in ranks:
            bounds.append(slice(pos, pos + rank))
            pos += rank
        in_rows = itemgetter(*bounds)
        one_in, one_out = len(bounds) == 1, len(out_slices) == 1

        def fast(S, T):
            if tuple(map(len, S)) != ranks or (T is not None and tuple(map(len, T)) != ranks):
                raise ValueError(f"{graph.name}: inputs of ranks {tuple(map(len, S))}, expected {ranks}")
            with lock:  # the buffers are shared: one compile of the set at a time
                if T is None:
                    P[0:1 + n_sizes] = (1,) + sum(S, ())
                else:
                    P[0:1 + 2 * n_sizes] = (0,) + sum(S, ()) + sum(T, ())
                entry(packed)
                i = info.tolist()
                if i[0] < 0:
                    return i
                # read-only (valid as made: the template's guards) and cheaper than a writeable
                # copy whose flag is then cleared (0.37 vs 0.27 + 0.42 us)
                words = np.frombuffer(self._outmv[:i[1]].tobytes(), word)
                p = P[:]  # the sizes as ints (the general path's normalisation)
            if COVERAGE:
                record_hit(tset, i[0])
            shapes = (tuple(in_rows(p)),) if one_in else tuple(map(tuple, in_rows(p)))
            outs = (tuple(out_rows(i)),) if one_out else tuple(map(tuple, out_rows(i)))
            return CompiledKernel(graph, words, None, shapes, T, outs, dtypes, tilings[i[0]], i, reasons[i[0]])

        return fast

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


def _tiling_builder(kind: str, a: int, n_args: int, extra):
    """info record -> the tiling dataclass (arguments at ``a``, then the result fields)."""
    f = a + n_args
    if kind == "matmul":
        return lambda i: MatmulTiling(*i[a:f], *i[f:f + 4])
    t_max, n_max = extra
    return lambda i: VectorTiling(tuple(i[a:f]), i[f], i[f + 1], t_max, n_max)


def build_fill_module(tset) -> tuple[ir.Module, np.ndarray, list, int]:
    """(`@dvm_fill` and the runtime functions, built in the current context; the constant words;
    per template the layout of its info record; the number of output shape words in it)."""
    target: Target = tset.target
    templates = tset.templates
    ranks = templates[-1].ranks
    n_params = len(templates[-1].params)
    if any(len(t.params) != n_params or t.ranks != ranks for t in templates):
        raise Unsupported("templates with different parameter lists")
    if not any(ranks):
        raise Unsupported("a kernel without sized inputs")
    out_ranks = {tuple(len(shp) for shp in t.out_shapes) for t in templates}
    if len(out_ranks) != 1:  # pragma: no cover - the graph fixes its output ranks
        raise Unsupported("templates with different output ranks")
    i64, i1 = i(64), i(1)
    module = ir.Module.create()
    with ir.InsertionPoint(module.body):
        _runtime_functions(target)
        op, entry = function("dvm_fill", [memref_type(i64)] * 5)
    P, W, C, I, M = entry.arguments
    fn = _FillFunction(op)
    fn.memo_buffer, fn.words, fn.constants, fn.info = M, W, C, I
    with ir.InsertionPoint(entry):
        m0 = cidx(0)
        memref.store(const(i64, 0), M, [m0])
        # P = [mode, sizes..., strides...]; mode 1: dense inputs, each stride is 0 for a size-1
        # dimension, else the product of the inner sizes (`kernel.dense_strides`), computed here
        e_i0, e_0, e_1 = cidx(0), const(i64, 0), const(i64, 1)
        dense = _cmpi("eq", memref.load(P, [e_i0]), e_1)
        e_63 = const(i64, 63)
        wraps = const(i1, False)  # a dense stride does not fit i64: Python decides
        params, sizes, j = {}, {}, 0
        for kind in "st":
            for n, rank in enumerate(ranks):
                for d in range(rank):
                    name = templates[-1].params[j]
                    word = memref.load(P, [cidx(j + 1)])
                    if kind == "s":
                        v = sizes[n, d] = word
                    else:
                        inner = e_1
                        for e in range(d + 1, rank):  # exact, like every product here (`_Template.exact`)
                            prod = arith.MulSIExtendedOp(inner, sizes[n, e])
                            sign = arith.shrsi(prod.low, e_63)
                            wraps = arith.ori(wraps, _cmpi("ne", prod.high, sign))
                            inner = prod.low
                        unit = _cmpi("eq", sizes[n, d], e_1)
                        v = arith.select(dense, arith.select(unit, e_0, inner), word)
                    params[name] = (v, "i64")
                    j += 1
        fallback, none = fn.label(), fn.label()
        starts = [fn.label() for _ in templates] + [none]
        branch = cf.cond_br(arith.andi(dense, wraps), [], [], fallback, starts[0])
    fn.const_ip = ir.InsertionPoint(branch)
    words: list[int] = []
    meta = []
    for n, tmpl in enumerate(templates):
        fn.block(starts[n])
        t = _Template(fn, params, target, starts[n + 1], fallback)
        for kind, a, b in tmpl.stmts:
            if kind == "guard":
                t.guard(a)
            else:
                t.assign(a, b)
        meta.append(_emit_words(t, tmpl, n, words))
    for block, status in ((none, NONE_MATCHED), (fallback, ASK_PYTHON)):
        fn.block(block)
        memref.store(fn.const(status), I, [fn.const(0, "index")])
        func.ReturnOp([])
    fn.at(None)
    return module, np.array(words or [0], dtype=np.int64), meta, sum(out_ranks.pop())


def _emit_words(t: _Template, tmpl, n: int, words: list) -> tuple:
    """The template's words into %W (`template.KernelTemplate.writer`, natively) and its info
    record into %I: status, word count, tiling arguments and fields, output shapes."""
    fn = t.fn
    W, C, I = fn.words, fn.constants, fn.info
    (pre, pre_holes), block, post = tmpl.parts

    def cidx_(v: int):
        return fn.const(v, "index")

    def copy(src_off: int, count, dst) -> None:
        """%W[dst + q] = %C[src_off + q] for q < count (index values)."""
        loop = scf.ForOp(cidx_(0), count, cidx_(1))
        with ir.InsertionPoint(loop.body):
            q = loop.induction_variable
            s = arith.addi(q, cidx_(src_off))
            d = arith.addi(q, dst)
            memref.store(memref.load(C, [s]), W, [d])
            scf.YieldOp([])

    def at(base, j: int):
        return arith.addi(base, cidx_(j))

    # every hole value first (the branch may still fall back), then the room check, then the stores
    pre_vals = [(j, t.int_expr(e)) for j, e in pre_holes]
    zero = cidx_(0)
    if block is not None:
        (blk, blk_holes), step_pos = block
        count = arith.maxsi(t.int_expr(tmpl.count), fn.const(0))
        blk_vals = [(j, t.int_expr(e)) for j, e in blk_holes]
        steps = [(p, t.int_expr(s)) for p, s in zip(step_pos, tmpl.steps) if s != Const(0)]
        post_vals = [(j, t.int_expr(e)) for j, e in post[1]]
        nb = len(blk)
        # exact (a wrapped count would pass the room check below and overrun W)
        blk_words = t.exact("muli", count, fn.const(nb))
        total = t.exact("addi", blk_words, fn.const(len(pre) + len(post[0])))
        # room for the traced block written once even when it repeats zero times
        need = t.exact("addi", total, fn.const(nb))
    else:
        total = need = fn.const(len(pre))
    shape_vals = [[t.int_expr(d) for d in shp] for shp in tmpl.out_shapes]
    record = t.records[tmpl.tiling]
    t.check_exact()  # the words, their guards and the word count: as Python computes them
    cap = arith.index_cast(i(64), memref.dim(W, zero))
    room = _cmpi("sle", need, cap)
    ok, short = fn.label(), fn.label()
    cf.cond_br(room, [], [], ok, short)
    fn.block(short)
    memref.store(fn.const(NO_ROOM), I, [zero])
    memref.store(need, I, [cidx_(1)])
    func.ReturnOp([])
    fn.block(ok)
    base = len(words)
    words.extend(int(w) for w in pre)
    copy(base, cidx_(len(pre)), zero)
    for j, v in pre_vals:
        memref.store(v, W, [cidx_(j)])
    if block is not None:
        start = cidx_(len(pre))
        off_blk = len(words)
        words.extend(int(w) for w in blk)
        copy(off_blk, cidx_(nb), start)
        for j, v in blk_vals:
            memref.store(v, W, [cidx_(len(pre) + j)])
        # repetitions 1..count-1: the first one's words, plus r * step at the step positions
        n_idx = fn.index(count)
        one = cidx_(1)
        reps = scf.ForOp(one, n_idx, one)
        with ir.InsertionPoint(reps.body):
            r = reps.induction_variable
            dst = arith.addi(arith.muli(r, cidx_(nb)), start)
            inner = scf.ForOp(zero, cidx_(nb), one)
            with ir.InsertionPoint(inner.body):
                q = inner.induction_variable
                s = arith.addi(q, start)
                d = arith.addi(q, dst)
                memref.store(memref.load(W, [s]), W, [d])
                scf.YieldOp([])
            if steps:  # exact: |r * step| <= |(count-1) * step|, which a guard computed exactly
                r64 = arith.index_cast(i(64), r)
                for p, sv in steps:
                    first = memref.load(W, [cidx_(len(pre) + p)])
                    val = arith.addi(first, arith.muli(r64, sv))
                    memref.store(val, W, [at(dst, p)])
            scf.YieldOp([])
        span = arith.muli(n_idx, cidx_(nb))
        e = arith.addi(start, span)
        off_post = len(words)
        words.extend(int(w) for w in post[0])
        copy(off_post, cidx_(len(post[0])), e)
        for j, v in post_vals:
            memref.store(v, W, [at(e, j)])
    # the info record: status, words, tiling arguments, tiling fields, output shapes
    fields = [record["tm"], record["tn"], record["tk"], record["cost"]] if record["kind"] == "matmul" \
        else [record["dim"], record["tile"]]
    info = [total, *(v for shp in shape_vals for v in shp), *record["args"], *fields]
    status = fn.const(n)
    memref.store(status, I, [zero])
    for j, v in enumerate(info):
        memref.store(v, I, [cidx_(j + 1)])
    func.ReturnOp([])
    extra = (record["t_max"], record["n_max"]) if record["kind"] == "vector" else None
    return record["kind"], len(record["args"]), len(fields), extra, 1 + len(info)
