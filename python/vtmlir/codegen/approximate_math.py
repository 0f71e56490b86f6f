"""`codegen-approximate-math`: f32 `math.exp`, `erf`, `tanh`, `sin` and `cos` as polynomials (vector code).

LLVM has no vector exp, erf, tanh, sin or cos of its own: `convert-math-to-llvm` makes `llvm.intr.exp`
of a vector, which the backend splits into one libm call per element, and erf and tanh go to libm
directly (`convert-math-to-libm`). A softmax, a GELU or a SiLU then spends its time in scalar calls.

A libm call has a second cost: results that depend on the program's structure. LLVM folds a call on
a constant argument at compile time, in double precision rounded to f32, which is not always glibc's
f32 result; whether the argument is constant to LLVM depends on the kernel (a rotary table read from
a constant global through a view at opt level 2 is folded, the same table copied into a buffer at
level 0 is not), so a data-movement change moved RoPE's cos by 1 ulp and opt levels 0 and 2 of the
Llama decode layer disagreed (`benchmarks/vtc.py`: `bitwise_identical` false). Arithmetic folds
exactly, so an expanded op gives the same bits folded or not.
This pass replaces each f32 op (scalar or vector) with arithmetic that vectorises: range reduction,
a polynomial evaluated with `math.fma` (Horner), and selects for the special cases. Upstream MLIR's
`math` polynomial approximations (`populateMathPolynomialApproximationPatterns`) are not exposed by
the bundled MLIR (no pass, no transform op), so the approximations are built here.

- exp(x) = 2^k · p(r), k = round(x / ln 2), r = x − k·ln 2 (ln 2 in two parts, fused multiply-adds:
  r is exact), p a degree-7 polynomial on [−ln2/2, ln2/2]; 2^k as two factors 2^(k/2)·2^(k−k/2) made
  from exponent bits, so results down to the subnormals are right. x > 88.8 gives inf, x < −104 0.
- erf(x) = x · P(x²) for |x| < 1 (degree 6 in x²), a degree-12 polynomial in |x| − 2.46 on
  [1, 3.92], and ±1 beyond (erf rounds to 1 in f32 there); the sign by `copysign`.
- tanh(x) = x + x³ · Q(x²) for |x| < 0.625 (degree 5 in x²), else 1 − 2/(exp(2|x|) + 1) with the exp
  above; the sign by `copysign`.
- sin(x), cos(x): x = k·π/2 + r in f64 (k = round(2x/π), π/2 in two f64 parts, fused multiply-adds:
  r within 2^-53 of exact for |x| < 2^30), r rounded to f32, then r + r³·S(r²) or 1 + r²·(−1/2 +
  r²·C(r²)) by k's quadrant (degree 3 in r² on |r| ≤ 0.9, π/4 plus k's rounding slack). A vector with
  any |x| ≥ 2^30 (or ±inf) takes libm's call instead (`scf.if`: exact reduction there needs
  Payne–Hanek; rotary angles stay far below, 2^30 rad is a position of a billion tokens); sin(±0) = ±0.
NaN in gives NaN out; ±inf give the limits (NaN for sin and cos).

Coefficients: least-squares fits (relative weights) on 4000 Chebyshev nodes of each interval, in
float64, rounded to f32. Measured over every f32 input of the ranges (test_codegen.py): exp within
2 ulp, erf within 3 ulp, tanh within 3 ulp, sin and cos within 2 ulp of the correctly rounded value; glibc's libm and PyTorch's
SLEEF-based kernels are within 1 ulp, so results differ from theirs by a few ulp (docs/codegen.md).

The same expansion applies to scalar ops (loops of kernels left unvectorised, peeled remainders), so
every kernel computes a given element the same way whatever its schedule or thread count. f64 and
other types keep libm.
"""

from __future__ import annotations

import math

from torch_mlir import ir
from torch_mlir.dialects import arith, scf, vector
from torch_mlir.dialects import math as math_d

from ..passes.registry import Pass, register_pass

# p(r) ≈ e^r on [-ln2/2, ln2/2], coefficients of r^0..r^7.
EXP_POLY = (1.0, 1.0, 0.5, 0.1666666567325592, 0.04166622459888458, 0.008333578705787659,
            0.0013948134146630764, 0.00019766918558161706)
# erf(x)/x ≈ P(x²) on [0, 1].
ERF_SMALL_POLY = (1.128379225730896, -0.3761262893676758, 0.11283612251281738, -0.026854807510972023,
                  0.0051900530233979225, -0.000802435155492276, 7.898201874922961e-05)
# erf(x) ≈ P(x - 2.46) on [1, 3.92].
ERF_LARGE_CENTER = 2.46
ERF_LARGE_POLY = (0.9994966983795166, 0.0026562130078673363, -0.006535782478749752, 0.009832789190113544,
                  -0.00990477204322815, 0.006798258051276207, -0.002963519422337413, 0.00046145665692165494,
                  0.00039104913594201207, -0.00030131349922157824, 5.173898534849286e-05,
                  2.535396379244048e-05, -9.141928785538767e-06)
ERF_ONE = 3.92  # erf(x) rounds to 1.0f for x above 3.9192
# (tanh(x) - x)/x³ ≈ Q(x²) on [0, 0.625].
TANH_SMALL_POLY = (-0.3333333432674408, 0.13333310186862946, -0.053960226476192474, 0.021774930879473686,
                   -0.008359912782907486, 0.002307977993041277)
TANH_SMALL = 0.625
# (sin(r) - r)/r³ ≈ S(r²) and (cos(r) - 1 + r²/2)/r⁴ ≈ C(r²) on |r| ≤ 0.9.
SIN_POLY = (-0.1666666716337204, 0.008333324454724789, -0.00019837866420857608, 2.70621535491955e-06)
COS_POLY = (0.0416666679084301, -0.0013888876419514418, 2.47978405241156e-05, -2.709168711589882e-07)
PIO2_HI = math.pi / 2  # π/2 in two f64 parts: k · π/2 to 106 bits
PIO2_LO = 6.123233995736766e-17  # π/2 − PIO2_HI
SINCOS_REDUCED = 2.0 ** 30  # |x| below: the f64 reduction; at or above: libm

EXP_HIGH = 88.8   # exp(88.73) overflows f32
EXP_LOW = -104.0  # exp(-103.98) is below half the smallest subnormal
LN2_HI = 0.693115234375  # ln 2 to 12 significant bits: k · LN2_HI is exact for |k| < 2^12
LN2_LO = 3.194618329871446e-05  # ln 2 − LN2_HI, rounded to f32


class _Emitter:
    """Builds float arithmetic of one type (f32 or f64, or a vector of it) at the current insertion
    point; its integer type is the same width."""

    def __init__(self, value_type: ir.Type):
        self.type = value_type
        elem = value_type.element_type if isinstance(value_type, ir.VectorType) else value_type
        self._float = elem
        self._int = ir.IntegerType.get_signless(64 if isinstance(elem, ir.F64Type) else 32)
        self.int_type = self.like(self._int)
        self._constants: dict[tuple[str, float], ir.Value] = {}

    def like(self, elem: ir.Type) -> ir.Type:
        """`elem`, or a vector of it of this emitter's shape."""
        return ir.VectorType.get(self.type.shape, elem) if isinstance(self.type, ir.VectorType) else elem

    def const(self, value: float) -> ir.Value:
        return self._constant(self.type, ir.FloatAttr.get(self._float, value), ("f", value))

    def iconst(self, value: int) -> ir.Value:
        return self._constant(self.int_type, ir.IntegerAttr.get(self._int, value), ("i", value))

    def _constant(self, type_, scalar_attr, key):
        if key not in self._constants:
            attr = (ir.DenseElementsAttr.get_splat(type_, scalar_attr) if isinstance(type_, ir.VectorType)
                    else scalar_attr)
            self._constants[key] = arith.ConstantOp(type_, attr).result
        return self._constants[key]

    def fma(self, a, b, c):
        return math_d.FmaOp(a, b, c).result

    def mul(self, a, b):
        return arith.MulFOp(a, b).result

    def add(self, a, b):
        return arith.AddFOp(a, b).result

    def sub(self, a, b):
        return arith.SubFOp(a, b).result

    def select(self, predicate: str, lhs, rhs, if_true, if_false):
        cond = arith.CmpFOp(getattr(arith.CmpFPredicate, predicate.upper()), lhs, rhs).result
        return arith.SelectOp(cond, if_true, if_false).result

    def horner(self, coefficients, x):
        acc = self.const(coefficients[-1])
        for c in reversed(coefficients[:-1]):
            acc = self.fma(acc, x, self.const(c))
        return acc

    def bits(self, x):
        return arith.BitcastOp(self.int_type, x).result

    def from_bits(self, i):
        return arith.BitcastOp(self.type, i).result

    def abs(self, x):
        return self.from_bits(arith.AndIOp(self.bits(x), self.iconst(0x7FFFFFFF)).result)

    def copysign(self, magnitude, sign):
        """`magnitude` (non-negative) with the sign bit of `sign`. Integer ops rather than
        math.copysign/absf: convert-math-to-llvm leaves math ops inside OpenMP regions alone, and
        convert-math-to-libm would then turn vector copysigns into scalar calls."""
        sign_bit = arith.AndIOp(self.bits(sign), self.iconst(-0x80000000)).result
        return self.from_bits(arith.OrIOp(self.bits(magnitude), sign_bit).result)

    def pow2(self, k_int):
        """2^k for an i32 k whose exponent field k + 127 is in [1, 254]."""
        return self.from_bits(arith.ShLIOp(arith.AddIOp(k_int, self.iconst(127)).result, self.iconst(23)).result)

    def exp(self, x):
        clamped = self.select("ugt", x, self.const(EXP_HIGH), self.const(EXP_HIGH), x)  # NaN -> high
        clamped = self.select("olt", clamped, self.const(EXP_LOW), self.const(EXP_LOW), clamped)
        k = math_d.FloorOp(self.fma(clamped, self.const(1 / math.log(2)), self.const(0.5))).result
        r = self.fma(k, self.const(-LN2_HI), clamped)
        r = self.fma(k, self.const(-LN2_LO), r)
        p = self.horner(EXP_POLY, r)
        k_int = arith.FPToSIOp(self.int_type, k).result  # in [-150, 128]
        half = arith.ShRSIOp(k_int, self.iconst(1)).result
        rest = arith.SubIOp(k_int, half).result
        y = self.mul(self.mul(p, self.pow2(half)), self.pow2(rest))
        return self.select("uno", x, x, x, y)  # NaN stays NaN

    def erf(self, x):
        a = self.abs(x)
        small = self.mul(a, self.horner(ERF_SMALL_POLY, self.mul(a, a)))
        large = self.horner(ERF_LARGE_POLY, self.sub(a, self.const(ERF_LARGE_CENTER)))
        # ult: NaN takes the polynomial (NaN); above 3.92 (inf included) exactly 1.
        large = self.select("ult", a, self.const(ERF_ONE), large, self.const(1.0))
        result = self.select("olt", a, self.const(1.0), small, large)
        return self.copysign(result, x)

    def tanh(self, x):
        a = self.abs(x)
        u = self.mul(a, a)
        small = self.fma(self.mul(a, u), self.horner(TANH_SMALL_POLY, u), a)
        e = self.exp(self.add(a, a))
        large = self.sub(self.const(1.0), arith.DivFOp(self.const(2.0), self.add(e, self.const(1.0))).result)
        result = self.select("olt", a, self.const(TANH_SMALL), small, large)
        return self.copysign(result, x)

    def sin(self, x):
        return self._sin_cos(x, quadrant_shift=0)

    def cos(self, x):
        return self._sin_cos(x, quadrant_shift=1)  # cos(x) = sin(x + π/2)

    def _sin_cos(self, x, quadrant_shift: int):
        """sin(x + quadrant_shift · π/2) for |x| < SINCOS_REDUCED (and NaN)."""
        wide = _Emitter(self.like(ir.F64Type.get()))
        xd = arith.ExtFOp(wide.type, x).result
        k = math_d.FloorOp(wide.fma(xd, wide.const(2 / math.pi), wide.const(0.5))).result
        k = wide.select("uno", k, k, wide.const(0.0), k)  # NaN: k = 0, and r stays NaN
        r = wide.fma(k, wide.const(-PIO2_HI), xd)
        r = wide.fma(k, wide.const(-PIO2_LO), r)
        # k mod 4, exact in f64 for every finite k; then the quadrant as an i32.
        k_mod_4 = wide.fma(math_d.FloorOp(wide.mul(k, wide.const(0.25))).result, wide.const(-4.0), k)
        quadrant = arith.FPToSIOp(self.int_type, k_mod_4).result
        if quadrant_shift:
            quadrant = arith.AddIOp(quadrant, self.iconst(quadrant_shift)).result
        r = arith.TruncFOp(self.type, r).result
        u = self.mul(r, r)
        sin_r = self.fma(self.mul(r, u), self.horner(SIN_POLY, u), r)
        cos_r = self.fma(u, self.fma(u, self.horner(COS_POLY, u), self.const(-0.5)), self.const(1.0))
        odd = arith.CmpIOp(arith.CmpIPredicate.ne, arith.AndIOp(quadrant, self.iconst(1)).result,
                           self.iconst(0)).result
        value = arith.SelectOp(odd, cos_r, sin_r).result
        # Quadrants 2 and 3 negate: bit 1 of the quadrant moved to the sign bit.
        sign = arith.ShLIOp(arith.AndIOp(quadrant, self.iconst(2)).result, self.iconst(30)).result
        value = self.from_bits(arith.XOrIOp(self.bits(value), sign).result)
        if not quadrant_shift:
            value = self.select("oeq", x, self.const(0.0), x, value)  # sin(-0) = -0
        return value


_EXPANSIONS = {"math.exp": _Emitter.exp, "math.erf": _Emitter.erf, "math.tanh": _Emitter.tanh,
               "math.sin": _Emitter.sin, "math.cos": _Emitter.cos}
# Expanded only for arguments of magnitude below a bound; the op itself (libm) handles the rest.
_BOUNDED = {"math.sin": SINCOS_REDUCED, "math.cos": SINCOS_REDUCED}


def _is_f32(value_type: ir.Type) -> bool:
    elem = value_type.element_type if isinstance(value_type, ir.VectorType) else value_type
    return isinstance(elem, ir.F32Type)


def approximate_math(module_op) -> int:
    """Replace every f32 exp, erf, tanh, sin and cos under `module_op`; returns how many."""
    found = []

    def visit(op):
        if op.name in _EXPANSIONS and _is_f32(op.results[0].type):
            found.append(op)
        return ir.WalkResult.ADVANCE

    module_op.walk(visit)
    for op in found:
        with ir.InsertionPoint(op), op.location:
            if op.name in _BOUNDED:
                value = _expand_below_bound(op, _BOUNDED[op.name])
            else:
                value = _EXPANSIONS[op.name](_Emitter(op.results[0].type), op.operands[0])
        op.results[0].replace_all_uses_with(value)
        op.erase()
    return len(found)


def _expand_below_bound(op: ir.Operation, bound: float) -> ir.Value:
    """`scf.if` any |x| ≥ bound (or ±inf): a clone of the op (libm); else the expansion."""
    x, result_type = op.operands[0], op.results[0].type
    emitter = _Emitter(result_type)
    large = arith.CmpFOp(arith.CmpFPredicate.OGE, emitter.abs(x), emitter.const(bound)).result
    if isinstance(result_type, ir.VectorType):
        large = vector.ReductionOp(ir.IntegerType.get_signless(1), vector.CombiningKind.OR, large).result
    branch = scf.IfOp(large, [result_type], has_else=True)
    with ir.InsertionPoint(branch.then_block):
        scf.YieldOp([op.clone().results[0]])
    with ir.InsertionPoint(branch.else_block):
        scf.YieldOp([_EXPANSIONS[op.name](_Emitter(result_type), x)])
    return branch.results[0]


@register_pass
class ApproximateMath(Pass):
    name = "codegen-approximate-math"
    summary = "Expand f32 math.exp/erf/tanh/sin/cos (scalar or vector) into polynomial arithmetic that vectorises"

    def run(self, module):
        approximate_math(module)
