"""Compact storage of n-bit codes in bytes, with no bit gaps (Tilus §6.1, Fig. 7).

Tilus stores low-precision values "compactly within bytes": consecutive values leave no bit gaps, so
a value may span two bytes (b[1] in Fig. 7). vtmlir fixes the bit order as **little-endian**:

    element i occupies stream bits [i*n, (i+1)*n); its bit j (j = 0 is the least significant) is
    stream bit i*n + j; stream bit k is bit (k mod 8) of byte k // 8 (bit 0 = least significant).

Equivalently the packed bytes, read as one little-endian integer, equal sum_i code_i << (i*n).
n = 8 is the identity on uint8; n = 4 puts element 2k in the low nibble of byte k (low nibble
first); n = 6 puts 4 elements in 3 bytes, element 1 spanning bytes 0 and 1.

Every 8 elements fill exactly n bytes, so both directions work on groups of 8: `pack_bits` builds a
64-bit little-endian word per group (sum code_k << k*n) and keeps its n low bytes; `unpack_bits`
does what Fig. 7(b) describes and `subbyte-lower` will emit: for element i, take byte b = i*n // 8 and
its successor, OR them into a 16-bit window (the second byte only matters when the value spans the
byte boundary, i*n mod 8 + n > 8), SHIFT right by i*n mod 8, AND with 2^n - 1.
"""

from __future__ import annotations

import numpy as np


def packed_nbytes(count: int, bits: int) -> int:
    """Bytes needed for `count` codes of `bits` bits: ceil(count * bits / 8)."""
    _check_bits(bits)
    return (count * bits + 7) // 8


def pack_bits(codes, bits: int) -> np.ndarray:
    """Flatten `codes` (row-major; each < 2^bits) into a 1-D uint8 array of `packed_nbytes` bytes."""
    _check_bits(bits)
    c = np.asarray(codes).reshape(-1)
    if c.size and (c.min() < 0 or c.max() >= (1 << bits)):
        raise ValueError(f"{bits}-bit codes lie in [0, {1 << bits}); got [{c.min()}, {c.max()}]")
    count = c.size
    groups = (count + 7) // 8
    padded = np.zeros(groups * 8, dtype=np.uint64)
    padded[:count] = c
    shifts = np.arange(8, dtype=np.uint64) * np.uint64(bits)
    words = np.bitwise_or.reduce(padded.reshape(groups, 8) << shifts, axis=1)  # disjoint bits: OR = sum
    data = words.astype("<u8").view(np.uint8).reshape(groups, 8)[:, :bits].reshape(-1)
    return np.ascontiguousarray(data[: packed_nbytes(count, bits)])


def unpack_bits(packed, bits: int, count: int) -> np.ndarray:
    """The first `count` codes of a compact little-endian stream, as a 1-D uint8 array (§6.1 load)."""
    _check_bits(bits)
    p = np.asarray(packed, dtype=np.uint8).reshape(-1)
    need = packed_nbytes(count, bits)
    if p.size < need:
        raise ValueError(f"{count} codes of {bits} bits need {need} bytes; got {p.size}")
    start = np.arange(count, dtype=np.int64) * bits
    byte, offset = start >> 3, start & 7
    window = np.zeros(need + 1, dtype=np.uint16)  # one byte of slack: the successor of the last byte
    window[:need] = p[:need]
    word = window[byte] | (window[byte + 1] << np.uint16(8))
    return ((word >> offset.astype(np.uint16)) & np.uint16((1 << bits) - 1)).astype(np.uint8)


def _check_bits(bits: int) -> None:
    if not isinstance(bits, (int, np.integer)) or not 1 <= bits <= 8:
        raise ValueError(f"bit width must be an integer in 1..8, not {bits!r}")
