"""Low-precision element types: signed int 2–8, unsigned int 1–8, floats of 3–8 bits (Tilus §6).

Tilus (Ding et al., "A Virtual Machine for Arbitrary Low-Precision GPGPU Computation in LLM
Serving", §1, §6, §8.3) supports int2..int8, uint1..uint8 and float3..float8 "with arbitrary
exponent and mantissa distribution" (e4m3, e3m3, e3m2, e2m2, e2m1, e1m1 in Fig. 10). The paper does
not fix the value sets, so vtmlir fixes them here (docs/lowbit.md has the tables):

- A value of a `LowBitType` is held as its *code*: the n-bit pattern, in the low bits of a uint8.
- Signed ints are two's complement; unsigned ints are plain binary.
- A float `eXmY` is 1 sign bit, X exponent bits, Y mantissa bits (1 + X + Y = bits), sign-magnitude,
  bias 2^(X-1) - 1, subnormals when the exponent field is 0
  (value = (-1)^s * 2^(1-bias) * m/2^Y), normals otherwise ((-1)^s * 2^(e-bias) * (1 + m/2^Y)).
  Special values follow one of three conventions (`FloatSpecials`):
  * `"finite"` (default for every split; OCP MX FP6/FP4 style): every code is a finite number, no
    inf, no NaN; -0 exists.
  * `"nan"` (OCP OFP8 E4M3FN style, the default for e4m3): only S.1…1.1…1 is NaN, no inf.
  (Not called "fn": in LLVM/MLIR names `FN` means "no infinities" and says nothing about NaN —
  f8E4M3FN has a NaN, f6E3M2FN has none.)
  * `"ieee"` (OCP OFP8 E5M2, the default for e5m2): the all-ones exponent is inf (mantissa 0) or NaN.
- Encoding (float32 → code) rounds to nearest, ties to the even code (for Y ≥ 1 this is the even
  mantissa, i.e. IEEE round-to-nearest-even); magnitudes beyond the largest finite value — and
  ±inf in types without inf — *saturate* to ±max. ±inf stays ±inf where the type has inf. NaN
  becomes the canonical NaN code where the type has NaN and raises `ValueError` elsewhere. Ints
  round half to even and saturate to [min, max].

`vtmlir.dialects.vt.lowbit_mlir_type(t)` gives the builtin MLIR type where one has exactly these semantics (`f8E4M3FN`,
`f8E5M2`, `f6E3M2FN`, `f6E2M3FN`, `f4E2M1FN`, `f8E4M3`/`f8E3M4` for the "ieee" splits, `iN`); the
other float splits need a `vt` type (see docs/lowbit.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

import numpy as np

FLOAT_SPECIALS = ("finite", "nan", "ieee")

# Builtin MLIR float types whose semantics equal ours: (exponent, mantissa, specials) -> type name
# as printed, and the torch_mlir.ir class that builds it.
BUILTIN_FLOATS = {
    (4, 3, "nan"): ("f8E4M3FN", "Float8E4M3FNType"),
    (5, 2, "ieee"): ("f8E5M2", "Float8E5M2Type"),
    (4, 3, "ieee"): ("f8E4M3", "Float8E4M3Type"),
    (3, 4, "ieee"): ("f8E3M4", "Float8E3M4Type"),
    (3, 2, "finite"): ("f6E3M2FN", "Float6E3M2FNType"),
    (2, 3, "finite"): ("f6E2M3FN", "Float6E2M3FNType"),
    (2, 1, "finite"): ("f4E2M1FN", "Float4E2M1FNType"),
}


@dataclass(frozen=True)
class LowBitType:
    """An element type of 1–8 bits: `kind` is "int", "uint" or "float".

    Build with `LowBitType.int(bits)`, `.uint(bits)`, `.float(exponent, mantissa, specials=None)` or
    `parse_dtype("i4" | "u3" | "e3m2" | "f6e3m2" | "float6_e3m2" | ...)`.
    """

    kind: str
    bits: int
    exponent: int = 0
    mantissa: int = 0
    specials: str = "finite"

    def __post_init__(self):
        if self.kind == "int":
            if not 2 <= self.bits <= 8:
                raise ValueError(f"signed ints have 2 to 8 bits, not {self.bits}")
        elif self.kind == "uint":
            if not 1 <= self.bits <= 8:
                raise ValueError(f"unsigned ints have 1 to 8 bits, not {self.bits}")
        elif self.kind == "float":
            if self.exponent < 1 or self.mantissa < 0 or 1 + self.exponent + self.mantissa != self.bits:
                raise ValueError(f"a float needs 1 sign + e >= 1 exponent + m >= 0 mantissa bits = bits; "
                                 f"got e{self.exponent}m{self.mantissa} in {self.bits} bits")
            if not 3 <= self.bits <= 8:
                raise ValueError(f"low-bit floats have 3 to 8 bits, not {self.bits}")
            if self.specials not in FLOAT_SPECIALS:
                raise ValueError(f"specials must be one of {FLOAT_SPECIALS}, not {self.specials!r}")
            if self.specials == "ieee" and (self.exponent < 2 or self.mantissa < 1):
                raise ValueError("an 'ieee' float needs at least 2 exponent bits and 1 mantissa bit "
                                 "(the top exponent holds inf and NaN)")
            if self.specials == "nan" and self.mantissa == 0 and self.exponent < 2:
                raise ValueError("a 'nan' float needs more than one non-zero code")
        else:
            raise ValueError(f"kind must be 'int', 'uint' or 'float', not {self.kind!r}")

    # ---- constructors ------------------------------------------------------------------------
    @staticmethod
    def int(bits: int) -> "LowBitType":  # noqa: A003 - reads as the type name
        return LowBitType("int", bits)

    @staticmethod
    def uint(bits: int) -> "LowBitType":
        return LowBitType("uint", bits)

    @staticmethod
    def float(exponent: int, mantissa: int, specials: str | None = None) -> "LowBitType":  # noqa: A003
        """`specials` defaults to "nan" for e4m3, "ieee" for e5m2 and "finite" for every other split."""
        if specials is None:
            specials = {(4, 3): "nan", (5, 2): "ieee"}.get((exponent, mantissa), "finite")
        return LowBitType("float", 1 + exponent + mantissa, exponent, mantissa, specials)

    # ---- names -------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        """`i4`, `u3`, `f6e3m2`; floats with non-default specials get a suffix (`f8e4m3ieee`)."""
        if self.kind == "int":
            return f"i{self.bits}"
        if self.kind == "uint":
            return f"u{self.bits}"
        default = LowBitType.float(self.exponent, self.mantissa).specials
        suffix = "" if self.specials == default else self.specials
        return f"f{self.bits}e{self.exponent}m{self.mantissa}{suffix}"

    def __str__(self) -> str:
        return self.name

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def signed(self) -> bool:
        return self.kind != "uint"

    @property
    def num_codes(self) -> int:
        return 1 << self.bits

    @property
    def bias(self) -> int:
        """Exponent bias 2^(e-1) - 1 (floats only)."""
        self._require_float()
        return (1 << (self.exponent - 1)) - 1

    @property
    def has_inf(self) -> bool:
        return self.kind == "float" and self.specials == "ieee"

    @property
    def has_nan(self) -> bool:
        return self.kind == "float" and self.specials in ("nan", "ieee")

    # ---- value set ---------------------------------------------------------------------------
    @cached_property
    def _table64(self) -> np.ndarray:
        """The value of every code 0..2^bits-1 as float64 (exact: at most 8 significant bits)."""
        codes = np.arange(self.num_codes, dtype=np.int64)
        if self.kind == "uint":
            return codes.astype(np.float64)
        if self.kind == "int":
            return np.where(codes >= self.num_codes // 2, codes - self.num_codes, codes).astype(np.float64)
        m_bits, e_bits = self.mantissa, self.exponent
        sign = np.where(codes >> (self.bits - 1) == 1, -1.0, 1.0)
        efield = (codes >> m_bits) & ((1 << e_bits) - 1)
        mfield = codes & ((1 << m_bits) - 1)
        frac = mfield / float(1 << m_bits)
        normal = np.ldexp(1.0 + frac, (efield - self.bias).astype(np.int32))
        subnormal = np.ldexp(frac, 1 - self.bias)
        values = sign * np.where(efield == 0, subnormal, normal)
        top = efield == (1 << e_bits) - 1
        if self.specials == "ieee":
            values = np.where(top & (mfield == 0), sign * np.inf, values)
            values = np.where(top & (mfield != 0), np.nan, values)
        elif self.specials == "nan":
            values = np.where(top & (mfield == (1 << m_bits) - 1), np.nan, values)
        return values

    @cached_property
    def table(self) -> np.ndarray:
        """float32 value of every code (index = code): the decode table."""
        t = self._table64.astype(np.float32)
        t.setflags(write=False)
        return t

    @property
    def max(self) -> float:
        """Largest finite value."""
        t = self._table64
        return float(t[np.isfinite(t)].max())

    @property
    def min(self) -> float:
        """Smallest (most negative) finite value."""
        t = self._table64
        return float(t[np.isfinite(t)].min())

    @property
    def smallest_subnormal(self) -> float:
        """Smallest positive value (a subnormal for floats with a mantissa)."""
        t = self._table64
        return float(t[np.isfinite(t) & (t > 0)].min())

    def finite_values(self) -> np.ndarray:
        """Sorted distinct finite values (−0 and +0 count once)."""
        t = self._table64
        return np.unique(t[np.isfinite(t)] + 0.0)

    @property
    def nan_code(self) -> int | None:
        """The canonical (positive, all-ones-mantissa) NaN code, if the type has NaN."""
        if not self.has_nan:
            return None
        return (1 << (self.bits - 1)) - 1

    # ---- encode / decode ---------------------------------------------------------------------
    def decode(self, codes) -> np.ndarray:
        """Codes (any integer array, values < 2^bits) → float32 values (vectorised table lookup)."""
        codes = np.asarray(codes)
        if codes.size and (codes.min() < 0 or codes.max() >= self.num_codes):
            raise ValueError(f"{self.name} codes lie in [0, {self.num_codes}); got [{codes.min()}, {codes.max()}]")
        return self.table[codes.astype(np.intp)]

    def encode(self, values) -> np.ndarray:
        """float32 values → uint8 codes: round to nearest (ties to even), saturate (module docstring)."""
        x = np.asarray(values, dtype=np.float32).astype(np.float64)
        if self.kind == "float":
            return self._encode_float(x)
        if np.isnan(x).any():
            raise ValueError(f"{self.name} has no NaN; cannot encode NaN")
        lo, hi = self.min, self.max
        q = np.clip(np.rint(np.clip(x, lo - 1, hi + 1)), lo, hi).astype(np.int64)
        return (q & (self.num_codes - 1)).astype(np.uint8)

    @cached_property
    def _positive_magnitudes(self) -> np.ndarray:
        """Values of the positive finite codes 0..K, which are ascending in code order."""
        t = self._table64[: self.num_codes // 2]
        finite = t[np.isfinite(t)]
        assert np.all(np.diff(finite) > 0)
        return finite

    def _encode_float(self, x: np.ndarray) -> np.ndarray:
        nan = np.isnan(x)
        if nan.any() and not self.has_nan:
            raise ValueError(f"{self.name} has no NaN; cannot encode NaN")
        mags = self._positive_magnitudes
        a = np.abs(np.where(nan, 0.0, x))
        # Nearest magnitude: mags[i-1] < a <= mags[i]. Midpoints of adjacent low-bit values are exact
        # in float64, so comparing against them is exact round-to-nearest.
        i = np.clip(np.searchsorted(mags, a, side="left"), 1, len(mags) - 1)
        lo, hi = i - 1, i
        mid = (mags[lo] + mags[hi]) * 0.5
        code = np.where(a < mid, lo, np.where(a > mid, hi, np.where(lo % 2 == 0, lo, hi)))
        code = np.where(a <= mags[0], 0, code)
        code = np.where(a >= mags[-1], len(mags) - 1, code)  # saturate (incl. inf without inf)
        if self.has_inf:
            inf_code = len(mags)  # first code after the largest finite one: exponent all-ones, mantissa 0
            code = np.where(np.isinf(a), inf_code, code)
        sign = np.signbit(x) & ~nan
        code = code | (sign.astype(np.int64) << (self.bits - 1))
        if nan.any():
            code = np.where(nan, self.nan_code, code)
        return code.astype(np.uint8)

    def quantize_dequantize(self, values) -> np.ndarray:
        """decode(encode(values)): the value each input becomes in this type."""
        return self.decode(self.encode(values))

    # ---- MLIR --------------------------------------------------------------------------------
    @property
    def mlir_builtin_name(self) -> str | None:
        """The builtin MLIR type with exactly this value set, as printed, or None.

        Ints map to signless `iN` (arith's convention: signedness lives in the ops that read them,
        `arith.extsi` vs `arith.extui`); floats map only where semantics match bit for bit.
        """
        if self.kind in ("int", "uint"):
            return f"i{self.bits}"
        entry = BUILTIN_FLOATS.get((self.exponent, self.mantissa, self.specials))
        return entry[0] if entry else None

    def _require_float(self):
        if self.kind != "float":
            raise ValueError(f"{self.name} is not a float type")


_PATTERNS = [
    (re.compile(r"^(?:i|int|s|si)(\d)b?$"), lambda m: LowBitType.int(int(m[1]))),
    (re.compile(r"^(?:u|ui|uint)(\d)b?$"), lambda m: LowBitType.uint(int(m[1]))),
    (re.compile(r"^(?:f|fp|float)?(\d)?_?e(\d)m(\d)(finite|nan|ieee)?$"), None),
]


def parse_dtype(spec) -> LowBitType:
    """A `LowBitType` from a name: `i4`/`int4`, `u3`/`uint3`, `e3m2`/`f6e3m2`/`float6_e3m2`,
    optionally with a specials suffix (`e4m3ieee`, `e3m2nan`, `e4m3finite`), or a `LowBitType` (returned as is)."""
    if isinstance(spec, LowBitType):
        return spec
    s = str(spec).strip().lower()
    for pattern, make in _PATTERNS[:2]:
        m = pattern.match(s)
        if m:
            return make(m)
    m = _PATTERNS[2][0].match(s)
    if m:
        e, mant = int(m[2]), int(m[3])
        if m[1] is not None and int(m[1]) != 1 + e + mant:
            raise ValueError(f"'{spec}': {m[1]} bits but 1 + e{e} + m{mant} = {1 + e + mant}")
        return LowBitType.float(e, mant, m[4])
    raise ValueError(f"unknown low-bit type '{spec}'; expected iN (2-8), uN (1-8) or eXmY / fNeXmY (3-8 bits)")


def all_types() -> list[LowBitType]:
    """Every int/uint width and every float split of 3–8 bits with its default specials."""
    out = [LowBitType.int(b) for b in range(2, 9)] + [LowBitType.uint(b) for b in range(1, 9)]
    for bits in range(3, 9):
        for e in range(1, bits):
            out.append(LowBitType.float(e, bits - 1 - e))
    return out


# The float splits the issue names, plus the paper's Fig. 10 choices.
NAMED_FLOATS = ("e4m3", "e5m2", "e3m3", "e3m2", "e2m3", "e2m2", "e2m1", "e1m1")


__all__ = ["FLOAT_SPECIALS", "LowBitType", "NAMED_FLOATS", "all_types", "parse_dtype"]
