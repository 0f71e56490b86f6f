"""`codegen-approximate-math`: f32 `math.exp`, `math.erf` and `math.tanh` as polynomials (vector code).

LLVM has no vector exp, erf or tanh of its own: `convert-math-to-llvm` makes `llvm.intr.exp` of a
vector, which the backend splits into one libm call per element, and erf and tanh go to libm
directly (`convert-math-to-libm`). A softmax, a GELU or a SiLU then spends its time in scalar calls.
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
NaN in gives NaN out; ±inf give the limits.

Coefficients: least-squares fits (relative weights) on 4000 Chebyshev nodes of each interval, in
float64, rounded to f32. Measured over every f32 input of the ranges (test_codegen.py): exp within
2 ulp, erf within 3 ulp, tanh within 3 ulp of the correctly rounded value; glibc's libm and PyTorch's
SLEEF-based kernels are within 1 ulp, so results differ from theirs by a few ulp (docs/codegen.md).

The same expansion applies to scalar ops (loops of kernels left unvectorised, peeled remainders), so
every kernel computes a given element the same way whatever its schedule or thread count. f64 and
other types keep libm.
"""

from __future__ import annotations

import math

from torch_mlir import ir
from torch_mlir.dialects import arith
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

EXP_HIGH = 88.8   # exp(88.73) overflows f32
EXP_LOW = -104.0  # exp(-103.98) is below half the smallest subnormal
LN2_HI = 0.693115234375  # ln 2 to 12 significant bits: k · LN2_HI is exact for |k| < 2^12
LN2_LO = 3.194618329871446e-05  # ln 2 − LN2_HI, rounded to f32


class _Emitter:
    """Builds f32 arithmetic of one type (f32 or a vector of f32) at the current insertion point."""

    def __init__(self, value_type: ir.Type):
        self.type = value_type
        f32, i32 = ir.F32Type.get(), ir.IntegerType.get_signless(32)
        if isinstance(value_type, ir.VectorType):
            self.int_type = ir.VectorType.get(value_type.shape, i32)
        else:
            self.int_type = i32
        self._f32, self._i32 = f32, i32
        self._constants: dict[tuple[str, float], ir.Value] = {}

    def const(self, value: float) -> ir.Value:
        return self._constant(self.type, ir.FloatAttr.get(self._f32, value), ("f", value))

    def iconst(self, value: int) -> ir.Value:
        return self._constant(self.int_type, ir.IntegerAttr.get(self._i32, value), ("i", value))

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


_EXPANSIONS = {"math.exp": _Emitter.exp, "math.erf": _Emitter.erf, "math.tanh": _Emitter.tanh}


def _is_f32(value_type: ir.Type) -> bool:
    elem = value_type.element_type if isinstance(value_type, ir.VectorType) else value_type
    return isinstance(elem, ir.F32Type)


def approximate_math(module_op) -> int:
    """Replace every f32 exp, erf and tanh under `module_op`; returns how many."""
    found = []

    def visit(op):
        if op.name in _EXPANSIONS and _is_f32(op.results[0].type):
            found.append(op)
        return ir.WalkResult.ADVANCE

    module_op.walk(visit)
    for op in found:
        with ir.InsertionPoint(op), op.location:
            emitter = _Emitter(op.results[0].type)
            value = _EXPANSIONS[op.name](emitter, op.operands[0])
        op.results[0].replace_all_uses_with(value)
        op.erase()
    return len(found)


@register_pass
class ApproximateMath(Pass):
    name = "codegen-approximate-math"
    summary = "Expand f32 math.exp/erf/tanh (scalar or vector) into polynomial arithmetic that vectorises"

    def run(self, module):
        approximate_math(module)
