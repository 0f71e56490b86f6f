"""The reference DVM virtual machine (Alg. 2): every instruction vs numpy, composite kernels vs
PyTorch on random dynamic shapes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from vtmlir.dvm import BytecodeError, DType, Graph, Opcode, Target, compile_graph, decode, execute
from vtmlir.dvm.workloads import layernorm

RNG = np.random.default_rng(7)
SMALL = Target(cores=3, vector_bytes=32, local_memory_bytes=16 * 1024)  # forces many tiles and tails


def rand_shape(rank, lo=1, hi=40):
    return tuple(int(s) for s in RNG.integers(lo, hi + 1, size=rank))


def opcodes(kernel):
    return {ins.op for ins in kernel.program.body}


def run(g, arrays, target=SMALL, cores=None):
    k = compile_graph(g, [a.shape for a in arrays], target)
    return k, k(*arrays, cores=cores)


UNARY = {Opcode.SQRT: np.sqrt, Opcode.ABS: np.abs, Opcode.LOG: np.log, Opcode.EXP: np.exp,
         Opcode.ROUND: np.rint, Opcode.FLOOR: np.floor, Opcode.IS_FINITE: np.isfinite, Opcode.COPY: np.copy}


@pytest.mark.parametrize("op", list(UNARY), ids=lambda o: o.name)
def test_unary(op):
    for _ in range(3):
        x = (RNG.standard_normal(rand_shape(2)) * 3).astype(np.float32)
        if op in (Opcode.SQRT, Opcode.LOG):
            x = np.abs(x) + 0.1
        if op == Opcode.IS_FINITE:
            x.flat[:: 3] = np.inf
        g = Graph()
        g.output(g.unary(op, g.input(2)))
        k, (out,) = run(g, [x])
        assert op in opcodes(k)
        np.testing.assert_allclose(out, UNARY[op](x), rtol=1e-6)


BINARY = {Opcode.ADD: np.add, Opcode.SUB: np.subtract, Opcode.MUL: np.multiply, Opcode.DIV: np.divide,
          Opcode.MIN: np.minimum, Opcode.MAX: np.maximum, Opcode.POW: np.power}


@pytest.mark.parametrize("op", list(BINARY), ids=lambda o: o.name)
def test_binary_with_broadcast(op):
    for _ in range(3):
        shape = rand_shape(3, hi=20)
        a = RNG.random(shape).astype(np.float32) + 0.5
        bshape = tuple(1 if RNG.random() < 0.4 else s for s in shape)[RNG.integers(0, 2):]
        b = RNG.random(bshape).astype(np.float32) + 0.5
        g = Graph()
        g.output(g.binary(op, g.input(3), g.input(len(bshape))))
        k, (out,) = run(g, [a, b])
        assert op in opcodes(k)
        np.testing.assert_allclose(out, BINARY[op](a, b), rtol=1e-5)


def test_broadcast_instruction_is_used():
    a, b = RNG.random((30, 1, 9)).astype(np.float32), RNG.random((1, 17, 9)).astype(np.float32)
    g = Graph()
    g.output(g.input(3) + g.input(3))
    k, (out,) = run(g, [a, b])
    assert Opcode.BROADCAST in opcodes(k)
    np.testing.assert_allclose(out, a + b)


@pytest.mark.parametrize("op,value", [(Opcode.ADDS, 2.5), (Opcode.MULS, -1.75)])
def test_scalar(op, value):
    x = RNG.standard_normal(rand_shape(3)).astype(np.float32)
    g = Graph()
    g.output(g.scalar(op, g.input(3), value))
    k, (out,) = run(g, [x])
    assert op in opcodes(k)
    np.testing.assert_allclose(out, x + value if op == Opcode.ADDS else x * value, rtol=1e-6)


@pytest.mark.parametrize("cmp", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_cmp_and_select(cmp):
    a = RNG.integers(0, 4, rand_shape(2)).astype(np.float32)
    b = RNG.integers(0, 4, a.shape[-1:]).astype(np.float32)
    g = Graph()
    x, y = g.input(2), g.input(1)
    c = g.cmp(x, y, cmp)
    g.output(c, g.select(c, x, y))
    k, (mask, sel) = run(g, [a, b])
    ref = getattr(np, {"eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal",
                       "gt": "greater", "ge": "greater_equal"}[cmp])(a, b)
    assert {Opcode.CMP, Opcode.SELECT} <= opcodes(k)
    assert mask.dtype == np.bool_ and np.array_equal(mask, ref)
    np.testing.assert_array_equal(sel, np.where(ref, a, b))


@pytest.mark.parametrize("src,dst", [("float32", "float16"), ("float32", "int32"), ("int32", "float64"),
                                     ("float16", "float32"), ("int8", "int64")])
def test_cast(src, dst):
    x = (RNG.standard_normal(rand_shape(2)) * 50).astype(src)
    g = Graph()
    g.output(g.cast(g.input(2, src), dst))
    k, (out,) = run(g, [x])
    assert Opcode.CAST in opcodes(k) and out.dtype == np.dtype(dst)
    np.testing.assert_array_equal(out, x.astype(dst))


@pytest.mark.parametrize("op,ref", [(Opcode.SUM, np.sum), (Opcode.REDUCE_MAX, np.max), (Opcode.REDUCE_MIN, np.min)],
                         ids=["sum", "max", "min"])
@pytest.mark.parametrize("axes", [(-1,), (0,), (1,), (0, 2), (1, 2), (0, 1, 2)])
def test_reductions(op, ref, axes):
    x = RNG.standard_normal(rand_shape(3, hi=25)).astype(np.float32)
    g = Graph()
    g.output(g.reduce(op, g.input(3), axes))
    # an outer reduction keeps its whole inner slab in one tile (see docs/dvm.md): 256 KiB
    k, (out,) = run(g, [x], target=Target(cores=3))
    assert op in opcodes(k)
    np.testing.assert_allclose(out, ref(x, axis=axes, keepdims=True), rtol=1e-5, atol=1e-5)


def test_matmul_tile():
    for m, n, kk in [(1, 1, 1), (5, 40, 7), (67, 33, 300)]:
        a, b = RNG.standard_normal((m, kk)).astype(np.float32), RNG.standard_normal((kk, n)).astype(np.float32)
        g = Graph()
        g.output(g.input(2) @ g.input(2))
        k, (out,) = run(g, [a, b])
        assert Opcode.MATMUL in opcodes(k)
        np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)


def test_strided_input_uses_view_load():
    x = RNG.standard_normal((23, 41)).astype(np.float32)
    xt = x.T  # [41, 23], not contiguous
    y = RNG.standard_normal((41, 23)).astype(np.float32)
    g = Graph()
    g.output(g.exp(g.input(2)) + g.input(2))
    k = compile_graph(g, [xt.shape, y.shape], SMALL, input_strides=[(1, 41), (23, 1)])
    assert Opcode.VIEW_LOAD in opcodes(k)
    (out,) = k(xt, y)
    np.testing.assert_allclose(out, np.exp(xt) + y, rtol=1e-6)


@pytest.mark.parametrize("cores", [1, 2, 5, 64])
def test_result_independent_of_core_count(cores):
    x = RNG.standard_normal((50, 70)).astype(np.float32)
    g = Graph()
    v = g.input(2)
    g.output(g.exp(v - g.max(v, -1)))
    _, (out,) = run(g, [x], cores=cores)
    np.testing.assert_allclose(out, np.exp(x - x.max(-1, keepdims=True)), rtol=1e-6)


# ------------------------------------------------------------------ composite kernels vs torch
def test_layernorm_dynamic_shapes():
    g = layernorm()
    for _ in range(6):
        b, s, h = int(RNG.integers(1, 5)), int(RNG.integers(1, 300)), int(RNG.choice([16, 100, 256, 1024]))
        x = torch.randn(b, s, h)
        w, bias = torch.randn(h), torch.randn(h)
        k = compile_graph(g, [(b, s, h), (h,), (h,)], Target(cores=4))
        (out,) = k(x.numpy(), w.numpy(), bias.numpy())
        ref = torch.nn.functional.layer_norm(x, (h,), w, bias, 1e-5)
        torch.testing.assert_close(torch.from_numpy(out), ref, rtol=1e-4, atol=1e-4)


def test_softmax_dynamic_shapes():
    g = Graph("softmax")
    x = g.input(2)
    e = g.exp(x - g.max(x, -1))
    g.output(e / g.sum(e, -1))
    for _ in range(6):
        shape = (int(RNG.integers(1, 400)), int(RNG.integers(1, 700)))
        t = torch.randn(*shape) * 4
        (out,) = compile_graph(g, [shape], SMALL)(t.numpy())
        torch.testing.assert_close(torch.from_numpy(out), torch.softmax(t, -1), rtol=1e-5, atol=1e-6)


def test_addmm_dynamic_shapes():
    g = Graph("addmm")
    bias, a, b = g.input(1), g.input(2), g.input(2)
    g.output(g.matmul(a, b) * 0.5 + bias * 2.0)
    for target in (SMALL, Target(cores=4)):
        for _ in range(3):
            m, kk, n = int(RNG.integers(1, 200)), int(RNG.integers(1, 700)), int(RNG.integers(1, 150))
            ta, tb, tc = torch.randn(m, kk), torch.randn(kk, n), torch.randn(n)
            k = compile_graph(g, [(n,), (m, kk), (kk, n)], target)
            (out,) = k(tc.numpy(), ta.numpy(), tb.numpy())
            ref = torch.addmm(tc, ta, tb, beta=2.0, alpha=0.5)
            torch.testing.assert_close(torch.from_numpy(out), ref, rtol=1e-4, atol=1e-3)


def test_vm_rejects_bad_arguments():
    g = Graph()
    g.output(g.exp(g.input(1)))
    k = compile_graph(g, [(10,)], SMALL)
    with pytest.raises(BytecodeError, match="takes 2 arguments"):
        execute(k.bytecode, [np.zeros(10, np.float32)])
    with pytest.raises(BytecodeError, match="argument 1"):
        execute(k.bytecode, [np.zeros(10, np.float32), np.zeros(3, np.float32)])
    assert decode(k.bytecode).args[0].dtype == DType.F32
