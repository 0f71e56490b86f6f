"""The DVM bytecode program format (Fang et al., DVM, §4.2 "Bytecode encoding" and Fig. 7).

A program is a flat little-endian int64 array (``np.dtype('<i8')``): a code header followed by the
code body, the operation records one after another. Every word is an int64 so that a VM compiled to
native code or PTX reads the program with plain 64-bit loads, without unaligned accesses.

Header (word index: meaning)::

    0  MAGIC ("DVMB" little-endian)      5  tile_count (Fig. 7 "total number of tiles")
    1  VERSION                           6  local_bytes (local memory the program needs per core)
    2  header_words H                    7  num_args A
    3  kernel_type (Fig. 7 KernelType)   8  num_grid G
    4  code_size (words in the body)     9 .. 9+2A-1        per argument: dtype, numel
                                         9+2A .. 9+2A+3G-1  per grid dim: count, block, extent

Body: records ``[opcode, length, field...]`` with the layouts of `isa.FORMATS`; ``length`` counts the
whole record (the ``Insn_Len`` of Alg. 2), so a VM skips from one record to the next without
knowing the layout, and the body ends exactly at ``H + code_size``.

`decode` checks everything a VM would otherwise trust: truncation, unknown opcodes, record lengths,
enum values, argument indices, local addresses against ``local_bytes`` and every global access of
every tile against the argument's element count. A program that decodes runs without touching
memory outside its buffers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import VtmlirError
from .expr import F64Bits
from .isa import (
    BINARY_OPS,
    FORMATS,
    REDUCE_OPS,
    SCALAR_OPS,
    UNARY_OPS,
    ArgDesc,
    CmpType,
    DType,
    GridDim,
    Instr,
    KernelType,
    Opcode,
    Program,
    Repeat,
)
from .symbolic import Sym, f64bits, value

MAGIC = int.from_bytes(b"DVMB", "little")
VERSION = 1
WORD = np.dtype("<i8")
_FIXED_HEADER = 9


class BytecodeError(VtmlirError):
    """Malformed DVM bytecode (the message names the word or record at fault)."""


# ------------------------------------------------------------------------------------- encode
_KINDS = {op: tuple(kind for _, kind in fmt) for op, fmt in FORMATS.items()}


def _encode_record(ins: Instr, out: list) -> None:
    start = len(out)
    out.append(int(ins.op))
    out.append(0)  # length, patched below
    for kind, v in zip(_KINDS[ins.op], ins.args):
        if kind == "vec":
            out.append(len(v))
            out.extend(v)
        elif kind == "f64":
            out.append(Sym(f64bits(v.v), F64Bits(v.e), v.tr) if type(v) is Sym
                       else int(np.float64(v).view(np.int64)))
        else:
            out.append(v if type(v) is Sym else int(v))
    out[start + 1] = len(out) - start


# records whose fields are all single words (no vec, no f64): their args are copied as they are
_PLAIN = frozenset(op for op, kinds in _KINDS.items() if not {"vec", "f64"} & set(kinds))


def encode(program: Program) -> np.ndarray:
    """Encode a `Program` as the flat int64 bytecode array of Fig. 7."""
    return np.array(encode_words(program), dtype=WORD)


@dataclass(frozen=True)
class RepeatWords:
    """An `isa.Repeat` in `encode_words`' output: the words of one repetition, the repetition count
    and {word index in `words`: step per repetition}."""

    count: object
    words: list
    deltas: dict


def _field_word(ins: Instr, name: str) -> int:
    """The index of field `name`'s word in the encoded record of `ins` (after the vecs before it)."""
    w = 2
    for (fname, kind), v in zip(FORMATS[ins.op], ins.args):
        if fname == name:
            return w
        w += 1 + len(v) if kind == "vec" else 1
    raise KeyError(name)


def encode_words(program: Program) -> list:
    """The words of `encode` as a list (ints, or traced `Sym` sizes while `template.py` traces; a
    traced `Repeat` becomes one `RepeatWords` item)."""
    body: list[int] = []
    extra = 0  # words of `Repeat`s beyond their one item
    for ins in program.body:
        if type(ins) is Repeat:
            words, deltas = [], {}
            for i, rec in enumerate(ins.body):
                for (j, name), step in ins.deltas.items():
                    if j == i:
                        deltas[len(words) + _field_word(rec, name)] = step
                _encode_record(rec, words)
            body.append(RepeatWords(ins.count, words, deltas))
            extra += ins.count * len(words) - 1
        elif ins.op in _PLAIN:  # fast path: [opcode, length, fields...]
            body.append(ins.op)
            body.append(len(ins.args) + 2)
            body.extend(ins.args)
        else:
            _encode_record(ins, body)
    header = [MAGIC, VERSION, 0, int(program.kernel_type), len(body) + extra, program.tile_count,
              program.local_bytes, len(program.args), len(program.grid)]
    for a in program.args:
        header += [int(a.dtype), a.numel]
    for g in program.grid:
        header += [g.count, g.block, g.extent]
    header[2] = len(header)
    return header + body


# ------------------------------------------------------------------------------------- decode
def _enum(cls, value, what):
    try:
        return cls(value)
    except ValueError:
        raise BytecodeError(f"dvm bytecode: error: {what}: invalid {cls.__name__} {value}") from None


def decode(array) -> Program:
    """Decode and validate bytecode produced by `encode`; raise `BytecodeError` if malformed."""
    arr = np.asarray(array)
    if arr.ndim != 1 or arr.dtype.kind not in "iu":
        raise BytecodeError(f"dvm bytecode: error: expected a 1-d integer array, got {arr.dtype}{list(arr.shape)}")
    words = arr.astype(WORD, copy=False).tolist()
    n = len(words)
    if n < _FIXED_HEADER:
        raise BytecodeError(f"dvm bytecode: error: truncated header ({n} words, need {_FIXED_HEADER})")
    kernel_type, local_bytes, args, grid, hwords = _header(words, n)
    body: list[Instr] = []
    _records(words, hwords, n, hwords, local_bytes, args, grid, body)
    return Program(kernel_type, local_bytes, tuple(args), tuple(grid), tuple(body))


def _header(words, n):
    """Check the header in `words` (at least its fixed part) of a program of `n` words:
    ``(kernel_type, local_bytes, args, grid, header words)``."""
    magic, version, hwords, ktype, code_size, tile_count, local_bytes, nargs, ngrid = words[:_FIXED_HEADER]
    if magic != MAGIC:
        raise BytecodeError(f"dvm bytecode: error: bad magic 0x{magic & 0xFFFFFFFFFFFFFFFF:x}")
    if version != VERSION:
        raise BytecodeError(f"dvm bytecode: error: unsupported version {version} (expected {VERSION})")
    kernel_type = _enum(KernelType, ktype, "header word 3")
    if nargs < 0 or ngrid < 0 or local_bytes < 0 or code_size < 0:
        raise BytecodeError("dvm bytecode: error: negative count in header")
    if hwords != _FIXED_HEADER + 2 * nargs + 3 * ngrid:
        raise BytecodeError(f"dvm bytecode: error: header length {hwords} does not match "
                            f"{nargs} args and {ngrid} grid dims")
    if n < hwords or len(words) < hwords:
        raise BytecodeError(f"dvm bytecode: error: truncated header ({n} words, need {hwords})")
    if n != hwords + code_size:
        raise BytecodeError(f"dvm bytecode: error: {'truncated' if n < hwords + code_size else 'trailing words in'} "
                            f"body: header says {code_size} code words, found {n - hwords}")
    p = _FIXED_HEADER
    args = []
    for i in range(nargs):
        dt = _enum(DType, words[p], f"argument {i}")
        if words[p + 1] < 0:
            raise BytecodeError(f"dvm bytecode: error: argument {i}: negative element count")
        args.append(ArgDesc(dt, words[p + 1]))
        p += 2
    grid = []
    for d in range(ngrid):
        c, b, e = words[p : p + 3]
        # (count >= 1 follows: count * block >= extent >= 1 with block >= 1)
        if b < 1 or e < 1 or (c - 1) * b >= e or c * b < e:
            raise BytecodeError(f"dvm bytecode: error: grid dim {d}: count={c}, block={b} do not tile extent={e}")
        grid.append(GridDim(c, b, e))
        p += 3
    prog_tiles = 1
    for g in grid:
        prog_tiles *= g.count
    if tile_count != prog_tiles:
        raise BytecodeError(f"dvm bytecode: error: tile_count {tile_count} != product of grid counts {prog_tiles}")
    return kernel_type, local_bytes, args, grid, hwords


def _records(words, p, end, rec0, local_bytes, args, grid, body, starts=None) -> None:
    """Decode and check the records in ``words[p:end]`` (which must end at a record boundary),
    appending them to `body` (and their first word's index to `starts`); ``words[p]`` is body word
    `rec0` of the program (for messages)."""
    base = p
    while p < end:
        rec = rec0 + p - base
        if end - p < 2:
            raise BytecodeError(f"dvm bytecode: error: record at body word {rec}: truncated")
        op = words[p]
        try:
            op = Opcode(op)
        except ValueError:
            raise BytecodeError(f"dvm bytecode: error: record at body word {rec}: unknown opcode {op}") from None
        length = words[p + 1]
        if length < 2 or p + length > end:
            raise BytecodeError(f"dvm bytecode: error: record at body word {rec} ({op.name}): "
                                f"length {length} runs past the end of the body")
        q, rend, vals = p + 2, p + length, []
        for name, kind in FORMATS[op]:
            if q >= rend:
                raise BytecodeError(f"dvm bytecode: error: record at body word {rec} ({op.name}): "
                                    f"truncated before field {name!r}")
            w = words[q]
            if kind == "vec":
                if w < 0 or q + 1 + w > rend:
                    raise BytecodeError(f"dvm bytecode: error: record at body word {rec} ({op.name}): "
                                        f"field {name!r} of length {w} runs past the record")
                vals.append(tuple(words[q + 1 : q + 1 + w]))
                q += 1 + w
                continue
            if kind == "dtype":
                w = _enum(DType, w, f"record at body word {rec} ({op.name}) field {name!r}")
            elif kind == "cmp":
                w = _enum(CmpType, w, f"record at body word {rec} ({op.name}) field {name!r}")
            elif kind == "f64":
                if type(w) is not Sym:  # any bit pattern is a float64 (a traced one stays a word)
                    w = float(np.int64(w).view(np.float64))
            elif kind == "bool" and w not in (0, 1):
                raise BytecodeError(f"dvm bytecode: error: record at body word {rec} ({op.name}): "
                                    f"field {name!r} must be 0 or 1, got {w}")
            vals.append(w)
            q += 1
        if q != rend:
            raise BytecodeError(f"dvm bytecode: error: record at body word {rec} ({op.name}): "
                                f"length {length} but fields take {q - p} words")
        ins = Instr(op, tuple(vals))
        _check_operands(ins, rec, local_bytes, args, grid)
        body.append(ins)
        if starts is not None:
            starts.append(p)
        p = rend


# word 5 of every memory record (after opcode, length, dtype, local, arg) is its offset
_OFFSET_WORD = 5


def check_traced(words) -> Program:
    """Validate the words of a template trace as `decode` validates bytecode, for EVERY shape the
    template will admit (template.py; Fang et al., DVM §4.2: a new shape costs tiling + encoding
    only, so the checks must not run per shape in Python).

    `words` is `encode_words` of a lowering on traced sizes: ints (the template's constant words),
    `symbolic.Sym`s (its shape-dependent words, "holes") and at most one `RepeatWords` (a matmul's
    k-chunk block, repeated `count` times with its offsets advancing by a step per repetition).
    The checks of `decode` run here once on these words: a check on constant words is decided now
    (a `BytecodeError` at template build: opcodes, record layouts, enum values, argument indices
    and dtypes -- the template's structure), and a check on a hole compares `Sym`s, which records
    it as a guard of the trace. The template's `fill` (and its native compile) evaluates those
    guards with the others, so a shape whose words would fail `decode` never gets this template's
    words: it falls through to a new trace, whose checks raise the `BytecodeError` (the tracer's
    guards are the decisions `decode` took, so any shape that passes them passes `decode`).

    The repeated block is checked at its first and its last repetition (``count >= 1`` is a guard).
    Proof that this covers every repetition: repetition r's words are repetition 0's except at
    the step positions, which get ``+ r * step``; each step position is the offset field of a
    memory record (asserted below), and `decode` reads an offset only in ``offset >= 0`` and
    ``offset + c < numel`` with c independent of the offset (`_check_memory`). Both are linear
    in r, so they hold for every r in [0, count-1] iff they hold at r = 0 and r = count-1.

    Returns the `Program` of the structure (hole fields as `Sym`s, the block once), for what
    depends on the structure alone (`native.unsupported_reason`)."""
    runs = [i for i, w in enumerate(words) if type(w) is RepeatWords]
    if len(runs) > 1:
        raise BytecodeError("dvm bytecode: error: a trace with more than one repeated block")
    cut = runs[0] if runs else len(words)
    pre, post = words[:cut], words[cut + 1 :]
    rw = words[cut] if runs else None
    n = len(pre) + len(post) + (rw.count * len(rw.words) if rw is not None else 0)
    if len(pre) < _FIXED_HEADER:
        raise BytecodeError("dvm bytecode: error: a trace whose header is not constant-length")
    kernel_type, local_bytes, args, grid, hwords = _header(pre, n)
    body: list[Instr] = []
    _records(pre, hwords, len(pre), hwords, local_bytes, args, grid, body)
    rec0 = len(pre) - hwords
    if rw is not None:
        if rw.count < 1:
            raise BytecodeError(f"dvm bytecode: error: a block repeated {rw.count} times")
        starts: list[int] = []
        _records(rw.words, 0, len(rw.words), rec0, local_bytes, args, grid, body, starts)
        for pos in rw.deltas:
            j = max(i for i, s in enumerate(starts) if s <= pos)
            ins = body[len(body) - len(starts) + j]
            if ins.op not in (Opcode.LOAD, Opcode.STORE, Opcode.VIEW_LOAD, Opcode.VIEW_STORE) \
                    or pos != starts[j] + _OFFSET_WORD:
                raise BytecodeError(f"dvm bytecode: error: a repeated block advances word {pos}, "
                                    f"not the offset of a memory record")
        last = list(rw.words)
        for pos, step in rw.deltas.items():
            last[pos] = last[pos] + (rw.count - 1) * step
        _records(last, 0, len(last), rec0 + (value(rw.count) - 1) * len(last), local_bytes, args, grid, [])
        rec0 += value(rw.count) * len(rw.words)
    _records(post, 0, len(post), rec0, local_bytes, args, grid, body)
    return Program(kernel_type, local_bytes, tuple(args), tuple(grid), tuple(body))


# ------------------------------------------------------------------------------ operand checks
def _bad(rec, ins, msg):
    return BytecodeError(f"dvm bytecode: error: record at body word {rec} ({ins.op.name}): {msg}")


def _local(rec, ins, name, addr, nbytes, local_bytes):
    # nbytes > 0: every caller has checked its element counts positive (`_positive`)
    if addr < 0 or addr + nbytes > local_bytes:
        raise _bad(rec, ins, f"bad local operand {name}=0x{addr:x}: {nbytes} bytes past local memory "
                             f"of {local_bytes} bytes")


def _positive(rec, ins, **dims):
    for k, v in dims.items():
        if v < 1:
            raise _bad(rec, ins, f"{k} must be positive, got {v}")


_FLOAT_ONLY = frozenset({Opcode.SQRT, Opcode.LOG, Opcode.EXP, Opcode.ROUND, Opcode.FLOOR,
                         Opcode.DIV, Opcode.POW, Opcode.MATMUL})


def _check_operands(ins: Instr, rec: int, local_bytes: int, args, grid) -> None:
    op, f = ins.op, ins.fields()
    if op in (Opcode.LOAD, Opcode.STORE, Opcode.VIEW_LOAD, Opcode.VIEW_STORE):
        _check_memory(ins, rec, f, local_bytes, args, grid)
        return
    if op == Opcode.CAST:
        _positive(rec, ins, size=f["size"])
        _local(rec, ins, "src", f["src"], f["size"] * f["src_dtype"].itemsize, local_bytes)
        _local(rec, ins, "dst", f["dst"], f["size"] * f["dst_dtype"].itemsize, local_bytes)
        return
    es = f["dtype"].itemsize
    if op in _FLOAT_ONLY and not f["dtype"].is_float:
        raise _bad(rec, ins, f"needs a float dtype, got {f['dtype'].name}")
    if op in UNARY_OPS or op in SCALAR_OPS:
        _positive(rec, ins, size=f["size"])
        out_es = 1 if op == Opcode.IS_FINITE else es
        _local(rec, ins, "src", f["src"], f["size"] * es, local_bytes)
        _local(rec, ins, "dst", f["dst"], f["size"] * out_es, local_bytes)
    elif op in BINARY_OPS or op == Opcode.CMP:
        _positive(rec, ins, size=f["size"])
        for k in ("lhs", "rhs"):
            _local(rec, ins, k, f[k], f["size"] * es, local_bytes)
        _local(rec, ins, "dst", f["dst"], f["size"] * (1 if op == Opcode.CMP else es), local_bytes)
    elif op == Opcode.SELECT:
        _positive(rec, ins, size=f["size"])
        _local(rec, ins, "cond", f["cond"], f["size"], local_bytes)
        for k in ("lhs", "rhs", "dst"):
            _local(rec, ins, k, f[k], f["size"] * es, local_bytes)
    elif op == Opcode.BROADCAST or op in REDUCE_OPS:
        _positive(rec, ins, m=f["m"], size=f["size"], n=f["n"])
        big, small = f["m"] * f["size"] * f["n"] * es, f["m"] * f["n"] * es
        _local(rec, ins, "src", f["src"], small if op == Opcode.BROADCAST else big, local_bytes)
        _local(rec, ins, "dst", f["dst"], big if op == Opcode.BROADCAST else small, local_bytes)
    elif op == Opcode.MATMUL:
        m, k, n = f["m"], f["k"], f["n"]
        _positive(rec, ins, m=m, k=k, n=n)
        _local(rec, ins, "lhs", f["lhs"], m * k * es, local_bytes)
        _local(rec, ins, "rhs", f["rhs"], k * n * es, local_bytes)
        _local(rec, ins, "dst", f["dst"], m * n * es, local_bytes)
    else:  # pragma: no cover - FORMATS covers every opcode
        raise _bad(rec, ins, "no operand rule")


def _check_memory(ins, rec, f, local_bytes, args, grid) -> None:
    arg = f["arg"]
    if not 0 <= arg < len(args):
        raise _bad(rec, ins, f"bad argument index {arg} (kernel has {len(args)} arguments)")
    if args[arg].dtype != f["dtype"]:
        raise _bad(rec, ins, f"dtype {f['dtype'].name} does not match argument {arg} of type "
                             f"{args[arg].dtype.name}")
    gs = f["grid_strides"]
    if len(gs) != len(grid):
        raise _bad(rec, ins, f"{len(gs)} grid strides for a grid of {len(grid)} dims")
    if ins.op in (Opcode.LOAD, Opcode.STORE):
        sizes, strides, binds = (f["rows"], f["row"]), (f["row"], 1), (f["bind"], -1)
    else:
        sizes, strides, binds = f["sizes"], f["strides"], f["binds"]
        if not (len(sizes) == len(strides) == len(binds)):
            raise _bad(rec, ins, "sizes, strides and binds differ in length")
    _positive(rec, ins, **{f"size[{j}]": s for j, s in enumerate(sizes)})
    if f["offset"] < 0 or any(s < 0 for s in gs) or any(s < 0 for s in strides):
        raise _bad(rec, ins, "negative offset or stride")
    # the largest element index any tile touches: the last block of every grid dim, with the
    # tail-clamped sizes of bound tile dims (strides are non-negative, so this is the maximum)
    hi = f["offset"]
    for g, s in zip(grid, gs):
        hi += (g.count - 1) * g.block * s
    numel = 1
    for s, st, b in zip(sizes, strides, binds):
        if b != -1:
            if not 0 <= b < len(grid):
                raise _bad(rec, ins, f"bad grid dimension {b} (grid has {len(grid)})")
            g = grid[b]
            if s != g.block:
                raise _bad(rec, ins, f"tile size {s} bound to grid dim {b} of block {g.block}")
            s = g.extent - (g.count - 1) * g.block
        hi += (s - 1) * st
        numel *= s
    if hi >= args[arg].numel:
        raise _bad(rec, ins, f"tiles reach element {hi} of argument {arg} with {args[arg].numel} elements")
    full = 1
    for s in sizes:
        full *= s
    _local(rec, ins, "local", f["local"], full * f["dtype"].itemsize, local_bytes)
