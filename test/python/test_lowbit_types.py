"""Low-bit value sets (vtmlir.dialects.lowbit_types): bit-exact decode of every code of every type against an
independent reference (bit fields → value with exact rationals), RNE + saturating encode, ml_dtypes
cross-checks for the types it has, and the builtin MLIR type mapping."""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from torch_mlir import ir

from vtmlir.dialects.vt import lowbit_mlir_type, lowbit_type_of
from vtmlir.lowbit import NAMED_FLOATS, LowBitType, all_types, parse_dtype

SPECIAL_VARIANTS = [LowBitType.float(4, 3, "ieee"), LowBitType.float(3, 4, "ieee"), LowBitType.float(4, 3, "finite"),
                    LowBitType.float(5, 2, "finite"), LowBitType.float(3, 2, "nan"), LowBitType.float(6, 1, "ieee")]
TYPES = all_types() + SPECIAL_VARIANTS


def reference_value(t: LowBitType, code: int):
    """Value of `code` from its bit string, written independently of the decoder: exact Fraction,
    or 'nan' / ±inf. The sign/exponent/mantissa fields are sliced out of a binary string."""
    bits = format(code, f"0{t.bits}b")
    if t.kind == "uint":
        return Fraction(int(bits, 2))
    if t.kind == "int":
        return Fraction(int(bits, 2) - (2 ** t.bits if bits[0] == "1" else 0))
    s, e_str, m_str = bits[0], bits[1 : 1 + t.exponent], bits[1 + t.exponent :]
    sign = -1 if s == "1" else 1
    e, m = int(e_str, 2), int(m_str, 2) if m_str else 0
    bias = 2 ** (t.exponent - 1) - 1
    if t.specials == "ieee" and e_str == "1" * t.exponent:
        return sign * math.inf if m == 0 else "nan"
    if t.specials == "nan" and e_str == "1" * t.exponent and m_str == "1" * t.mantissa:
        return "nan"
    if e == 0:  # subnormal: 0.m * 2^(1 - bias)
        mag = Fraction(m, 2 ** t.mantissa) * Fraction(2) ** (1 - bias)
    else:
        mag = (1 + Fraction(m, 2 ** t.mantissa)) * Fraction(2) ** (e - bias)
    return sign * mag


@pytest.mark.parametrize("t", TYPES, ids=lambda t: t.name)
def test_decode_every_code_bit_exact(t):
    got = t.decode(np.arange(t.num_codes))
    assert got.dtype == np.float32
    for code in range(t.num_codes):
        ref = reference_value(t, code)
        value = got[code]
        if ref == "nan":
            assert np.isnan(value), (t.name, code)
            continue
        ref32 = np.float32(float(ref))
        assert float(ref32) == float(ref), "every low-bit value is exact in float32"
        negative_zero = ref == 0 and format(code, f"0{t.bits}b")[0] == "1" and t.kind == "float"
        expected = np.float32(-0.0) if negative_zero else ref32
        assert value.view(np.uint32) == expected.view(np.uint32), (t.name, code, value, expected)


@pytest.mark.parametrize("t", TYPES, ids=lambda t: t.name)
def test_encode_inverts_decode(t):
    codes = np.arange(t.num_codes)
    values = t.decode(codes)
    keep = ~np.isnan(values)
    assert np.array_equal(t.encode(values[keep]), codes[keep])
    if t.has_nan:
        assert np.isnan(t.decode(t.encode(np.array([np.nan], np.float32))))[0]


@pytest.mark.parametrize("t", TYPES, ids=lambda t: t.name)
def test_encode_rounds_to_nearest_even_and_saturates(t):
    finite = t.finite_values()
    rng = np.random.default_rng(t.bits * 31 + t.exponent)
    x = rng.uniform(t.min * 1.5, t.max * 1.5, 2000).astype(np.float32)
    # Brute-force nearest value (saturating), ties resolved below.
    got = t.decode(t.encode(x)).astype(np.float64)
    clipped = np.clip(x.astype(np.float64), t.min, t.max)
    dist = np.abs(clipped[:, None] - finite[None, :])
    best = dist.min(axis=1)
    assert np.all(np.abs(got - clipped) == best)
    # Exact ties: the midpoint of two adjacent non-negative values goes to the even code.
    pos = finite[finite >= 0]
    mids = ((pos[:-1] + pos[1:]) / 2).astype(np.float32)
    assert np.all(mids.astype(np.float64) == (pos[:-1] + pos[1:]) / 2)
    codes = t.encode(mids)
    lo_codes, hi_codes = t.encode(pos[:-1].astype(np.float32)), t.encode(pos[1:].astype(np.float32))
    if t.kind == "float":
        assert np.all(codes % 2 == 0)
        assert np.all((codes == lo_codes) | (codes == hi_codes))
    else:  # ints: round half to even value
        assert np.array_equal(t.decode(codes), np.rint(mids))
    # Saturation.
    big = np.array([t.max * 4, t.min * 4, 1e30, -1e30], np.float32)
    assert list(t.decode(t.encode(big))) == [t.max, t.min, t.max, t.min]
    inf = t.decode(t.encode(np.array([np.inf, -np.inf], np.float32)))
    assert list(inf) == ([np.inf, -np.inf] if t.has_inf else [t.max, t.min])


@pytest.mark.parametrize("t", [t for t in TYPES if not t.has_nan], ids=lambda t: t.name)
def test_nan_refused_without_nan(t):
    with pytest.raises(ValueError, match="no NaN"):
        t.encode(np.array([1.0, np.nan], np.float32))


# Types ml_dtypes implements with the same value set: decode all codes, encode in-range values.
ML_DTYPES = {
    "f8e4m3": ml_dtypes.float8_e4m3fn,
    "f8e5m2": ml_dtypes.float8_e5m2,
    "f8e4m3ieee": ml_dtypes.float8_e4m3,
    "f8e3m4ieee": ml_dtypes.float8_e3m4,
    "f6e3m2": ml_dtypes.float6_e3m2fn,
    "f6e2m3": ml_dtypes.float6_e2m3fn,
    "f4e2m1": ml_dtypes.float4_e2m1fn,
}


@pytest.mark.parametrize("name", sorted(ML_DTYPES))
def test_agrees_with_ml_dtypes(name):
    t, md = parse_dtype(name), ML_DTYPES[name]
    codes = np.arange(t.num_codes, dtype=np.uint8)
    theirs = codes.view(md).astype(np.float32)
    ours = t.decode(codes)
    assert np.array_equal(np.isnan(ours), np.isnan(theirs))
    keep = ~np.isnan(ours)
    assert np.array_equal(ours[keep].view(np.uint32), theirs[keep].view(np.uint32))
    x = np.random.default_rng(0).uniform(t.min, t.max, 5000).astype(np.float32)
    x = np.concatenate([x, x / 300, ((t.finite_values()[1:] + t.finite_values()[:-1]) / 2).astype(np.float32)])
    assert np.array_equal(t.encode(x), x.astype(md).view(np.uint8))


@pytest.mark.parametrize("bits", [2, 4])
def test_ints_agree_with_ml_dtypes(bits):
    for t, md in ((LowBitType.int(bits), getattr(ml_dtypes, f"int{bits}")), (LowBitType.uint(bits), getattr(ml_dtypes, f"uint{bits}"))):
        codes = np.arange(t.num_codes, dtype=np.uint8)
        assert np.array_equal(t.decode(codes), codes.view(md).astype(np.float32))


def test_value_ranges_of_named_types():
    expect = {
        "e4m3": (448.0, 2.0**-9), "e5m2": (57344.0, 2.0**-16), "e3m3": (30.0, 2.0**-5), "e3m2": (28.0, 2.0**-4),
        "e2m3": (7.5, 0.125), "e2m2": (7.0, 0.25), "e2m1": (6.0, 0.5), "e1m1": (3.0, 1.0),
    }
    assert set(expect) == set(NAMED_FLOATS)
    for name, (mx, tiny) in expect.items():
        t = parse_dtype(name)
        assert (t.max, t.min, t.smallest_subnormal) == (mx, -mx, tiny), name
    assert [(parse_dtype(f"i{b}").min, parse_dtype(f"i{b}").max) for b in (2, 8)] == [(-2, 1), (-128, 127)]
    assert [(parse_dtype(f"u{b}").min, parse_dtype(f"u{b}").max) for b in (1, 8)] == [(0, 1), (0, 255)]


def test_parse_dtype_names():
    assert parse_dtype("int4") == parse_dtype("i4") == LowBitType.int(4)
    assert parse_dtype("uint3") == parse_dtype("u3") == LowBitType.uint(3)
    assert parse_dtype("float6_e3m2") == parse_dtype("f6e3m2") == parse_dtype("e3m2") == LowBitType.float(3, 2)
    assert parse_dtype("e4m3").specials == "nan" and parse_dtype("e5m2").specials == "ieee"
    assert parse_dtype("e4m3ieee") == LowBitType.float(4, 3, "ieee")
    for t in TYPES:
        assert parse_dtype(t.name) == t
    for bad in ("i1", "i9", "u0", "u9", "f7e3m2", "e0m2", "e4m4", "bogus"):
        with pytest.raises(ValueError):
            parse_dtype(bad)
    assert len(all_types()) == 7 + 8 + 27


BUILTIN = {"f8e4m3": "f8E4M3FN", "f8e5m2": "f8E5M2", "f6e3m2": "f6E3M2FN", "f6e2m3": "f6E2M3FN", "f4e2m1": "f4E2M1FN",
           "f8e4m3ieee": "f8E4M3", "f8e3m4ieee": "f8E3M4", "i4": "i4", "u1": "i1", "i8": "i8"}


def test_builtin_mlir_types():
    with ir.Context():
        for name, printed in BUILTIN.items():
            t = parse_dtype(name)
            assert t.mlir_builtin_name == printed
            assert str(lowbit_mlir_type(t)) == printed
            # The printed form parses back to the same type.
            assert ir.Type.parse(printed) == lowbit_mlir_type(t)
            assert lowbit_type_of(lowbit_mlir_type(t), signed=t.kind != "uint") == t


def test_vt_float_types_for_the_rest():
    """Floats without a builtin get `!vt.float<e, m, "specials">`; it round-trips through the parser
    and back to the same LowBitType; invalid parameters are refused."""
    from vtmlir.context import make_context
    from vtmlir.dialects.vt import FloatType, element_bits, float_type, float_type_params

    with make_context(), ir.Location.unknown():
        for name in ("e3m3", "e2m2", "e1m1", "e5m1", "e3m1", "e4m3finite", "e3m2nan", "e2m0"):
            t = parse_dtype(name)
            assert t.mlir_builtin_name is None
            mt = lowbit_mlir_type(t)
            assert isinstance(mt, FloatType)
            assert str(mt) == f'!vt.float<{t.exponent} : i64, {t.mantissa} : i64, "{t.specials}">'
            assert ir.Type.parse(str(mt)) == mt
            assert ir.Type.parse(f'!vt.float<{t.exponent}, {t.mantissa}, "{t.specials}">') == mt
            assert lowbit_type_of(mt) == t
            assert element_bits(mt) == t.bits
            assert element_bits(ir.RankedTensorType.get([4], mt).element_type) == t.bits
        for bad in ((0, 2, "finite"), (4, 4, "finite"), (1, 1, "ieee"), (3, 3, "inf")):
            with pytest.raises(ValueError):
                float_type(*bad)
        # The parser accepts any parameters of the right kinds; the value check reports them.
        with pytest.raises(ValueError, match="invalid !vt.float<7, 3"):
            float_type_params(ir.Type.parse('!vt.float<7, 3, "finite">'))
        assert float_type_params(ir.F32Type.get()) is None and element_bits(ir.F32Type.get()) == 32
