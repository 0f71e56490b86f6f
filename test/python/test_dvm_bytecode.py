"""DVM bytecode (Fig. 7): encode/decode round trip and errors on malformed programs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vtmlir.dvm import (ArgDesc, BytecodeError, CmpType, DType, Graph, GridDim, KernelType, Opcode,
                        Program, Target, compile_graph, decode, encode, make)
from vtmlir.dvm.bytecode import MAGIC
from vtmlir.dvm.isa import FORMATS, MEMORY_OPS

FLOATS = [DType.F32, DType.F16, DType.F64]
NUMEL = 1 << 20
LOCAL = 1 << 16


@st.composite
def programs(draw):
    grid = tuple(GridDim(c, b, (c - 1) * b + draw(st.integers(1, b)))
                 for c, b in draw(st.lists(st.tuples(st.integers(1, 4), st.integers(1, 16)), min_size=1, max_size=3)))
    args = tuple(ArgDesc(d, NUMEL) for d in draw(st.lists(st.sampled_from(list(DType)), min_size=1, max_size=4)))
    body = []
    for op in draw(st.lists(st.sampled_from(list(Opcode)), max_size=12)):
        fields = {}
        for name, kind in FORMATS[op]:
            if kind == "dtype":
                fields[name] = draw(st.sampled_from(FLOATS))
            elif kind == "cmp":
                fields[name] = draw(st.sampled_from(list(CmpType)))
            elif kind == "f64":
                fields[name] = draw(st.floats(allow_nan=False, width=64))
            elif kind == "bool":
                fields[name] = draw(st.booleans())
            elif kind == "local":
                fields[name] = draw(st.integers(0, 64)) * 32
            elif kind == "arg":
                fields[name] = draw(st.integers(0, len(args) - 1))
            elif kind == "vec":
                fields[name] = ()
            else:
                fields[name] = draw(st.integers(1, 8))
        if op in MEMORY_OPS:
            fields["dtype"] = args[fields["arg"]].dtype
            fields["grid_strides"] = draw(st.lists(st.integers(0, 64), min_size=len(grid), max_size=len(grid)))
            fields["offset"] = draw(st.integers(0, 100))
            if op in (Opcode.LOAD, Opcode.STORE):
                bind = draw(st.integers(-1, len(grid) - 1))
                fields["bind"] = bind
                fields["rows"] = grid[bind].block if bind >= 0 else draw(st.integers(1, 8))
            else:
                nd = draw(st.integers(0, 3))
                binds = draw(st.lists(st.integers(-1, len(grid) - 1), min_size=nd, max_size=nd))
                fields["binds"] = binds
                fields["sizes"] = [grid[b].block if b >= 0 else draw(st.integers(1, 8)) for b in binds]
                fields["strides"] = draw(st.lists(st.integers(0, 64), min_size=nd, max_size=nd))
        body.append(make(op, **fields))
    return Program(draw(st.sampled_from(list(KernelType))), LOCAL, args, grid, tuple(body))


@settings(max_examples=200, deadline=None)
@given(programs())
def test_round_trip(program):
    code = encode(program)
    assert code.dtype == np.dtype("<i8") and code.ndim == 1
    assert code[3] == program.kernel_type and code[5] == program.tile_count
    assert code[4] == len(code) - code[2]  # CodeSize
    back = decode(code)
    assert back == program
    assert np.array_equal(encode(back), code)


def _layernorm_code():
    g = Graph("ln")
    x, w = g.input(2), g.input(1)
    mu = g.mean(x, -1)
    g.output((x - mu) * w)
    return compile_graph(g, [(37, 50), (50,)], Target(cores=3)).bytecode


def test_compiled_kernel_round_trips():
    code = _layernorm_code()
    assert np.array_equal(encode(decode(code)), code)
    # records are self-delimiting: walking Insn_Len from the body start ends at CodeSize
    p, end = int(code[2]), len(code)
    n = 0
    while p < end:
        p += int(code[p + 1])
        n += 1
    assert p == end and n == len(decode(code).body)


def test_truncated_programs_are_rejected():
    code = _layernorm_code()
    for n in range(len(code)):
        with pytest.raises(BytecodeError):
            decode(code[:n])
    with pytest.raises(BytecodeError, match="trailing"):
        decode(np.concatenate([code, [0]]))


def _body_start(code):
    return int(code[2])


def test_unknown_opcode():
    code = _layernorm_code().copy()
    code[_body_start(code)] = 9999
    with pytest.raises(BytecodeError, match="unknown opcode 9999"):
        decode(code)


def test_bad_header():
    code = _layernorm_code().copy()
    bad = code.copy()
    bad[0] = MAGIC + 1
    with pytest.raises(BytecodeError, match="magic"):
        decode(bad)
    bad = code.copy()
    bad[5] += 1
    with pytest.raises(BytecodeError, match="tile_count"):
        decode(bad)
    bad = code.copy()
    bad[3] = 77
    with pytest.raises(BytecodeError, match="KernelType"):
        decode(bad)
    with pytest.raises(BytecodeError, match="1-d integer"):
        decode(code.astype(np.float64))


def _program(*body, local=256):
    return Program(KernelType.VECTOR, local, (ArgDesc(DType.F32, 64), ArgDesc(DType.F32, 64)),
                   (GridDim(4, 16, 64),), tuple(body))


def test_bad_operands():
    load = dict(dtype=DType.F32, local=0, offset=0, grid_strides=(1,), rows=16, row=1, bind=0)
    decode(encode(_program(make(Opcode.LOAD, arg=1, **load))))
    with pytest.raises(BytecodeError, match="bad argument index 2"):
        decode(encode(_program(make(Opcode.LOAD, arg=2, **load))))
    with pytest.raises(BytecodeError, match="bad local operand"):
        decode(encode(_program(make(Opcode.LOAD, arg=0, **load), local=32)))
    with pytest.raises(BytecodeError, match="reach element"):
        decode(encode(_program(make(Opcode.LOAD, arg=0, **{**load, "offset": 1}))))
    with pytest.raises(BytecodeError, match="bad grid dimension"):
        decode(encode(_program(make(Opcode.LOAD, arg=0, **{**load, "bind": 3}))))
    with pytest.raises(BytecodeError, match="does not match argument"):
        decode(encode(_program(make(Opcode.LOAD, arg=0, **{**load, "dtype": DType.F16}))))
    with pytest.raises(BytecodeError, match="bad local operand rhs"):
        decode(encode(_program(make(Opcode.ADD, dtype=DType.F32, dst=0, lhs=0, rhs=200, size=16))))
    with pytest.raises(BytecodeError, match="float dtype"):
        decode(encode(_program(make(Opcode.EXP, dtype=DType.I32, dst=0, src=0, size=4))))


def test_bad_record_length():
    code = encode(_program(make(Opcode.ADD, dtype=DType.F32, dst=0, lhs=0, rhs=64, size=16)))
    bad = code.copy()
    bad[_body_start(code) + 1] = 3
    with pytest.raises(BytecodeError, match="truncated before field"):
        decode(bad)
    bad[_body_start(code) + 1] = 50
    with pytest.raises(BytecodeError, match="runs past"):
        decode(bad)


def test_disassembly_names_instructions():
    text = decode(_layernorm_code()).disassemble()
    assert "sum.fp32" in text and "broadcast.fp32" in text and "load.fp32" in text and "store.fp32" in text
