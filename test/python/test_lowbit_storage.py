"""Compact sub-byte storage (vtmlir.dialects.lowbit_storage, Tilus §6.1): round trips for every width 1–8,
agreement with a bit-string reference of the documented little-endian order, no bit gaps."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vtmlir.lowbit import pack_bits, packed_nbytes, unpack_bits


def reference_pack(codes, bits: int) -> bytes:
    """The documented order, spelt with strings: element i's bit j is stream bit i*bits + j; stream
    bit k is bit k % 8 of byte k // 8."""
    stream = "".join(format(int(c), f"0{bits}b")[::-1] for c in codes)  # LSB first
    stream += "0" * (-len(stream) % 8)
    return bytes(int(stream[i : i + 8][::-1], 2) for i in range(0, len(stream), 8))


@st.composite
def codes_and_bits(draw):
    bits = draw(st.integers(1, 8))
    codes = draw(st.lists(st.integers(0, (1 << bits) - 1), max_size=70))
    return np.array(codes, dtype=np.uint8), bits


@pytest.mark.parametrize("bits", range(1, 9))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_round_trip_every_width(bits, data):
    codes = np.array(data.draw(st.lists(st.integers(0, (1 << bits) - 1), max_size=90)), dtype=np.uint8)
    packed = pack_bits(codes, bits)
    assert packed.dtype == np.uint8 and packed.size == packed_nbytes(codes.size, bits) == -(-codes.size * bits // 8)
    assert np.array_equal(unpack_bits(packed, bits, codes.size), codes)


@settings(max_examples=150, deadline=None)
@given(codes_and_bits())
def test_matches_bit_string_reference(cb):
    codes, bits = cb
    assert pack_bits(codes, bits).tobytes() == reference_pack(codes, bits)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 8), st.binary(min_size=0, max_size=40))
def test_unpack_then_pack_is_identity_on_whole_bytes(bits, raw):
    # No bit gaps: any byte string whose bit length is a multiple of `bits` is a valid stream.
    count = len(raw) * 8 // bits
    raw = raw[: packed_nbytes(count, bits)]
    if count * bits % 8 == 0:
        assert pack_bits(unpack_bits(np.frombuffer(raw, np.uint8), bits, count), bits).tobytes() == raw


def test_documented_examples():
    # 4 bits: element 2k in the low nibble of byte k.
    assert list(pack_bits([0x1, 0x2, 0x3], 4)) == [0x21, 0x03]
    # 6 bits: 4 elements in 3 bytes; element 1 spans bytes 0 and 1 (Tilus Fig. 7's b[1]).
    packed = pack_bits([0b111111, 0b000011, 0, 0], 6)
    assert list(packed) == [0b11111111, 0b00000000, 0]
    packed = pack_bits([0, 0b110000, 0, 0], 6)
    assert list(packed) == [0, 0b00001100, 0]
    # 8 bits is the identity, 1 bit is LSB-first bit order.
    assert list(pack_bits([7, 200], 8)) == [7, 200]
    assert list(pack_bits([1, 0, 0, 0, 0, 0, 0, 0, 1], 1)) == [1, 1]
    # Multi-dimensional input is flattened row-major.
    assert list(pack_bits(np.array([[1, 2], [3, 4]]), 4)) == [0x21, 0x43]


def test_errors():
    with pytest.raises(ValueError, match="lie in"):
        pack_bits([16], 4)
    with pytest.raises(ValueError, match="bit width"):
        pack_bits([0], 9)
    with pytest.raises(ValueError, match="need 2 bytes"):
        unpack_bits(np.zeros(1, np.uint8), 3, 5)
