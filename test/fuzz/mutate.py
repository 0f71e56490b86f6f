"""Malformed `.mlir` from the lit corpus: seeded mutations of the project's own test files.

Every mutation takes a `random.Random` and bytes and returns bytes, so a case is reproduced from
its seed alone. The kinds are those a hostile or careless user produces: token swaps and
substitutions, deleted/duplicated/swapped lines, changed element types and dimensions (including
2^32 + 1 and 10^11), changed integers, truncation, random and non-UTF-8 bytes, NUL bytes, splices
of another test, and deep nesting (modules, regions, attribute arrays, affine expressions, types)
at depths around and far beyond vtmlir's limit.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

_TOKEN = re.compile(
    rb'"(?:[^"\\\n]|\\.)*"|[%^@#!][\w$.\-]+|[A-Za-z_][\w$.]*|0x[0-9A-Fa-f]+|-?\d+(?:\.\d+)?(?:e[-+]?\d+)?|->|\S'
)
_DIM = re.compile(rb"(?<=[<x])(\d+)(?=x)")
_INTEGER = re.compile(rb"(?<![\w.%#^@])-?\d+(?![\w.])")
_ELEMENT_TYPE = re.compile(rb"\b(?:f16|bf16|f32|f64|i1|i8|i16|i32|i64|index|ui8)\b")
ELEMENT_TYPES = [b"f32", b"f16", b"bf16", b"f64", b"i1", b"i8", b"i32", b"i64", b"index", b"ui8", b"i4",
                 b"f8E4M3FN", b"complex<f32>", b"none", b"tensor<2xf32>", b"!vt.float<e3m2>"]
EDGE_DIMS = [b"0", b"1", b"2", b"3", b"7", b"64", b"?", b"4294967297", b"2147483648", b"99999999999", b"65536"]
EDGE_INTEGERS = [b"0", b"1", b"-1", b"2", b"7", b"-7", b"255", b"256", b"2147483647", b"2147483648",
                 b"-2147483649", b"4294967297", b"9223372036854775807", b"-9223372036854775808",
                 b"99999999999999999999999"]
NON_UTF8 = [b"\xff", b"\xc3", b"\xe2\x82", b"\x80", b"\xed\xa0\x80", b"\xfe\xff", b"\xc0\xaf"]
DEPTHS = [64, 200, 255, 256, 257, 300, 1000, 5000, 20000]


def corpus_seeds(root: Path = REPO / "test") -> list[tuple[str, bytes]]:
    """(name, text) of every `// -----` chunk of every `.mlir` under test/ (sorted: reproducible)."""
    seeds = []
    for path in sorted(root.rglob("*.mlir")):
        if "fuzz" in path.relative_to(root).parts:
            continue
        data = path.read_bytes()
        for i, chunk in enumerate(re.split(rb"(?m)^// -----\s*$", data)):
            if chunk.strip():
                seeds.append((f"{path.relative_to(root)}#{i}", chunk))
    return seeds


def _tokens(data: bytes) -> list[re.Match]:
    return list(_TOKEN.finditer(data))


def _replace(data: bytes, start: int, end: int, new: bytes) -> bytes:
    return data[:start] + new + data[end:]


def swap_tokens(rng, data, corpus):
    toks = _tokens(data)
    if len(toks) < 2:
        return data
    a, b = sorted(rng.sample(range(len(toks)), 2))
    ta, tb = toks[a], toks[b]
    return data[: ta.start()] + tb.group() + data[ta.end() : tb.start()] + ta.group() + data[tb.end() :]


def swap_adjacent_tokens(rng, data, corpus):
    toks = _tokens(data)
    if len(toks) < 2:
        return data
    a = rng.randrange(len(toks) - 1)
    ta, tb = toks[a], toks[a + 1]
    return data[: ta.start()] + tb.group() + data[ta.end() : tb.start()] + ta.group() + data[tb.end() :]


def replace_token(rng, data, corpus):
    toks = _tokens(data)
    other = _tokens(rng.choice(corpus)[1])
    if not toks or not other:
        return data
    t = rng.choice(toks)
    return _replace(data, t.start(), t.end(), rng.choice(other).group())


def delete_token(rng, data, corpus):
    toks = _tokens(data)
    if not toks:
        return data
    t = rng.choice(toks)
    return _replace(data, t.start(), t.end(), b"")


def _lines(data):
    return data.split(b"\n")


def delete_line(rng, data, corpus):
    lines = _lines(data)
    del lines[rng.randrange(len(lines))]
    return b"\n".join(lines)


def duplicate_line(rng, data, corpus):
    lines = _lines(data)
    i = rng.randrange(len(lines))
    lines.insert(rng.randrange(len(lines) + 1), lines[i])
    return b"\n".join(lines)


def swap_lines(rng, data, corpus):
    lines = _lines(data)
    if len(lines) < 2:
        return data
    a, b = rng.sample(range(len(lines)), 2)
    lines[a], lines[b] = lines[b], lines[a]
    return b"\n".join(lines)


def change_dim(rng, data, corpus):
    dims = list(_DIM.finditer(data))
    if not dims:
        return data
    d = rng.choice(dims)
    return _replace(data, d.start(), d.end(), rng.choice(EDGE_DIMS))


def change_all_dims(rng, data, corpus):
    """One dimension value replaced everywhere it occurs (keeps the IR consistent more often)."""
    dims = list(_DIM.finditer(data))
    if not dims:
        return data
    old = rng.choice(dims).group()
    new = rng.choice(EDGE_DIMS)
    return _DIM.sub(lambda m: new if m.group() == old else m.group(), data)


def change_element_type(rng, data, corpus):
    types = list(_ELEMENT_TYPE.finditer(data))
    if not types:
        return data
    if rng.random() < 0.5:  # everywhere: often still valid IR, which reaches the passes
        old = rng.choice(types).group()
        new = rng.choice(ELEMENT_TYPES)
        return _ELEMENT_TYPE.sub(lambda m: new if m.group() == old else m.group(), data)
    t = rng.choice(types)
    return _replace(data, t.start(), t.end(), rng.choice(ELEMENT_TYPES))


def change_integer(rng, data, corpus):
    ints = list(_INTEGER.finditer(data))
    if not ints:
        return data
    t = rng.choice(ints)
    return _replace(data, t.start(), t.end(), rng.choice(EDGE_INTEGERS))


def truncate(rng, data, corpus):
    return data[: rng.randrange(len(data) + 1)]


def random_bytes(rng, data, corpus):
    n = rng.choice([1, 1, 2, 4, 16])
    blob = bytes(rng.randrange(256) for _ in range(n))
    at = rng.randrange(len(data) + 1)
    if rng.random() < 0.5:
        return data[:at] + blob + data[at + n :]
    return data[:at] + blob + data[at:]


def non_utf8(rng, data, corpus):
    at = rng.randrange(len(data) + 1)
    return data[:at] + rng.choice(NON_UTF8) + data[at:]


def nul_byte(rng, data, corpus):
    at = rng.randrange(len(data) + 1)
    return data[:at] + b"\x00" + data[at:]


def splice(rng, data, corpus):
    other = _lines(rng.choice(corpus)[1])
    lines = _lines(data)
    a = rng.randrange(len(other))
    piece = other[a : a + rng.randint(1, 6)]
    at = rng.randrange(len(lines) + 1)
    return b"\n".join(lines[:at] + piece + lines[at:])


def deep_nesting(rng, data, corpus):
    """A deeply nested input of one of several shapes, standalone or inside the seed's module."""
    n = rng.choice(DEPTHS)
    kind = rng.randrange(7)
    if kind == 0:
        return b"module {" * n + b"}" * n
    if kind == 1:
        return b"module attributes {x.a = " + b"[" * n + b"]" * n + b"} {}"
    if kind == 2:
        return b"#map = affine_map<(d0) -> (" + b"(" * n + b"d0" + b")" * n + b")>\nmodule {}"
    if kind == 3:
        body = b"%c = arith.constant 0 : i32\n"
        for _ in range(n):
            body = b"scf.execute_region {\n" + body + b"scf.yield\n}\n"
        return b"func.func @f() {\n" + body + b"return\n}\n"
    if kind == 4:
        return b"module attributes {x.a = " + b"tuple<" * n + b"i32" + b">" * n + b"} {}"
    if kind == 5:
        inner = b'"test.op"() : () -> ()'
        for _ in range(n):
            inner = b'"test.op"() ({\n' + inner + b"\n}) : () -> ()"
        return inner
    lines = _lines(data)
    at = rng.randrange(len(lines) + 1)
    return b"\n".join(lines[:at] + [b"[" * n + b"]" * n] + lines[at:])


MUTATORS = [swap_tokens, swap_adjacent_tokens, replace_token, delete_token, delete_line, duplicate_line,
            swap_lines, change_dim, change_all_dims, change_element_type, change_integer, truncate,
            random_bytes, non_utf8, nul_byte, splice, deep_nesting]
# Relative frequencies: structure-preserving edits most often (they reach the passes), the rest enough.
WEIGHTS = [6, 4, 6, 3, 5, 3, 2, 5, 5, 5, 5, 3, 2, 1, 1, 2, 1]


def mutate(rng: random.Random, seed: bytes, corpus) -> tuple[bytes, list[str]]:
    """1-3 mutations of `seed`; the result and the names of the mutations applied."""
    data, names = seed, []
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        m = rng.choices(MUTATORS, WEIGHTS)[0]
        data = m(rng, data, corpus)
        names.append(m.__name__)
    return data, names
