"""The bytecode checks of template-made kernels (`bytecode.check_traced`): `decode`'s checks are
decided once per template on its constant words and become guards on its shape-dependent ones, so
a new shape's first native run decodes nothing (DVM §4.2: a new shape costs tiling + encoding),
and a shape whose words would leave the VM's buffers is still refused -- in the Python `fill`,
in its native compile, and for bytecode given to the VM directly (`decode`)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import vtmlir
from vtmlir.dvm import BytecodeError, Graph, Target, bytecode, codegen, compile_graph, isa, native
from vtmlir.dvm import kernel as kernel_module
from vtmlir.dvm.native_fill import ASK_PYTHON, NONE_MATCHED
from vtmlir.dvm.symbolic import Tracer
from vtmlir.dvm.template import prebuild, templates_of
from vtmlir.dvm.workloads import addmm

SMALL = Target(cores=3, vector_bytes=32, local_memory_bytes=16 * 1024)  # tiles, tails, k chunks


@pytest.fixture
def no_decode(monkeypatch):
    """Make every decode of bytecode fail the test (the modules that call it hold it by name)."""
    calls = []

    def refuse(array):
        calls.append(len(array))
        raise AssertionError("decode called on a template-made kernel's path")

    monkeypatch.setattr(bytecode, "decode", refuse)
    monkeypatch.setattr(native, "decode", refuse)
    monkeypatch.setattr(kernel_module, "decode", refuse)
    return calls


def n_templates(g):
    return sum(len(ts) for ts in templates_of(g).values())


def test_a_template_kernels_first_native_run_decodes_nothing(no_decode):
    g = addmm()
    prebuild(g, lambda m: [(m, 16), (m, 300), (300, 16)], {"m": [1, 2, 5, 8, 9, 40]}, SMALL)
    assert all(ts.native is not None for ts in templates_of(g).values())
    rng = np.random.default_rng(3)
    for m in (3, 17, 33):  # new shapes: the native entry's kernels, run natively at once
        c, a, b = (rng.standard_normal(s).astype(np.float32) for s in ((m, 16), (m, 300), (300, 16)))
        k = compile_graph(g, [c.shape, a.shape, b.shape], SMALL)
        assert k.native_reason is None and not k.bytecode.flags.writeable
        (out,) = k(c, a, b, native=True)
        np.testing.assert_allclose(out, a @ b + c, rtol=1e-4, atol=1e-4)
    g2 = Graph("strided")  # the Python fill's kernels (a set not compiled natively) likewise
    x = g2.input(2)
    g2.output(g2.exp(x) * 2.0)
    base = rng.standard_normal((7, 13)).astype(np.float32)
    view = base[:, 1:12]
    k = compile_graph(g2, [view.shape], SMALL, input_strides=[(13, 1)])
    (out,) = k(view, native=True)
    np.testing.assert_allclose(out, np.exp(view) * 2, rtol=1e-6)
    assert no_decode == []


def test_dvm_function_and_stream_fuser_decode_nothing(no_decode):
    from vtmlir.dvm.runner import DvmFunction
    from vtmlir.dvm.stream import StreamFuser
    from vtmlir.models.bert import build_bert_encoder, dynamic_shapes

    model, (x,) = build_bert_encoder(batch=2, seq=8, layers=1, hidden=32, heads=2, ffn=64)
    fn = DvmFunction(vtmlir.import_torch(model, x, dynamic_shapes=dynamic_shapes()), native=True)
    rng = np.random.default_rng(4)
    for batch in (2, 3):  # new batches: every kernel (and the batch_matmul glue's) is new
        xb = rng.standard_normal((batch, 8, 32)).astype(np.float32)
        (out,) = fn(xb)
        np.testing.assert_allclose(out, model(torch.from_numpy(xb)).detach().numpy(), rtol=1e-4, atol=2e-4)
    admitted = [e for k in fn.kernels for e in k.cache.values()] + list(fn._bmm_kernels.values())
    # the native VM's coverage came from the templates: every kernel
    assert all(use_native for _, use_native, _ in admitted)
    f = StreamFuser(native=True)
    a, b = rng.standard_normal((5, 6)).astype(np.float32), rng.standard_normal((5, 6)).astype(np.float32)
    np.testing.assert_allclose((f.tensor(a) * 2.0 + f.tensor(b)).numpy(), a * 2 + b, rtol=1e-6)
    assert no_decode == []


def test_bytecode_no_template_made_is_decoded_at_its_first_native_run(monkeypatch):
    calls = []
    real = bytecode.decode
    monkeypatch.setattr(kernel_module, "decode", lambda array: calls.append(1) or real(array))
    g = addmm()
    k = compile_graph(g, [(4, 16), (4, 40), (40, 16)], SMALL, template=False)
    assert k.native_reason is None and calls == [1]
    k(*(np.ones(s, np.float32) for s in k.input_shapes), native=True)
    assert calls == [1]  # once


def test_malformed_bytecode_given_to_the_vm_is_refused():
    k = compile_graph(addmm(), [(4, 16), (4, 40), (40, 16)], SMALL, template=False)
    args = [np.ones(int(np.prod(s)), np.float32) for s in (*k.input_shapes, *k.output_shapes)]
    bad = k.bytecode.copy()
    bad[-3] += 1 << 20  # the store's tile size: past local memory and the output
    with pytest.raises(BytecodeError):
        native.run(bad, args)
    with pytest.raises(BytecodeError):
        native.run(k.bytecode[:-1], args)


def test_a_shape_whose_words_leave_an_argument_is_refused(monkeypatch):
    """A lowering that reads `extent % 3` elements past its load offset is in bounds at m = 3 and
    m = 6 and out of bounds at m = 4, 5, 7: the template traced at m = 3 carries the bound check
    as a guard, so m = 6 reuses it and the others are refused (by the Python fill and natively),
    never given out-of-bounds words."""
    real = codegen._mem_instr

    def shifted(is_load, dtype, local, arg, offset, grid_strides, sizes, strides, binds, grid):
        if is_load:
            offset = offset + grid[-1].extent % 3
        return real(is_load, dtype, local, arg, offset, grid_strides, sizes, strides, binds, grid)

    monkeypatch.setattr(codegen, "_mem_instr", shifted)
    g = Graph("shifted")
    g.output(g.exp(g.input(1)))
    compile_graph(g, [(3,)], SMALL)
    assert n_templates(g) == 1
    x = np.arange(6, dtype=np.float32)
    (out,) = compile_graph(g, [(6,)], SMALL)(x, native=True)  # offset 0 again: valid, same template
    np.testing.assert_allclose(out, np.exp(x), rtol=1e-6)
    assert n_templates(g) == 1
    for m in (4, 5):
        with pytest.raises(BytecodeError, match=f"tiles reach element {m + m % 3 - 1} of argument 0 with {m}"):
            compile_graph(g, [(m,)], SMALL)
    assert n_templates(g) == 1  # refused: no template, no kernel
    (tset,) = templates_of(g).values()
    tset.compile_native()
    assert tset.native is not None
    assert tset.native.kernel(((4,),), None) == NONE_MATCHED  # the native guard refuses it too
    assert tset.native.kernel(((6,),), None).bytecode[21] == 0
    with pytest.raises(BytecodeError):
        compile_graph(g, [(7,)], SMALL)


def test_every_repetition_of_a_k_chunk_block_is_checked(monkeypatch):
    """A matmul whose repeated k-chunk block advances twice as far as it should: in bounds with
    one repetition (k = 350: chunks 0, 1 and a tail), out of bounds at the last of two (k = 500),
    although the traced words (one repetition) never show it."""
    real = codegen.Repeat
    monkeypatch.setattr(codegen, "Repeat",
                        lambda count, body, deltas: real(count, body, {f: 2 * s for f, s in deltas.items()}))
    g = Graph("mm")
    g.output(g.matmul(g.input(2), g.input(2)))
    compile_graph(g, [(16, 350), (350, 16)], SMALL)
    compile_graph(g, [(16, 450), (450, 16)], SMALL)  # two full chunks: one repetition, in bounds
    assert n_templates(g) == 1
    with pytest.raises(BytecodeError, match="tiles reach element 8139 of argument 0 with 8000"):
        compile_graph(g, [(16, 500), (500, 16)], SMALL)
    (tset,) = templates_of(g).values()
    tset.compile_native()
    assert tset.native.kernel(((16, 500), (500, 16)), None) == NONE_MATCHED
    assert n_templates(g) == 1


def test_a_repeated_word_that_is_not_an_offset_is_refused():
    tr = Tracer()
    n = tr.param("s0_0", 3)
    load = isa.make(isa.Opcode.LOAD, dtype=isa.DType.F32, local=0, arg=0, offset=0, grid_strides=(0,),
                    rows=1, row=4, bind=-1)
    prog = isa.Program(isa.KernelType.VECTOR, 64, (isa.ArgDesc(isa.DType.F32, 4 * n),),
                       (isa.GridDim(1, 1, 1),), (isa.Repeat(n, (load,), {(0, "row"): 1}),))
    with pytest.raises(BytecodeError, match="not the offset of a memory record"):
        bytecode.check_traced(bytecode.encode_words(prog))


def test_words_beyond_int64_are_refused_natively_and_in_python():
    g = Graph("huge")
    g.output(g.matmul(g.input(2), g.input(2)))
    prebuild(g, lambda m: [(m, 128), (128, 128)], {"m": [1, 2, 3, 7, 8, 9, 100, 4097]}, SMALL)
    (tset,) = templates_of(g).values()
    big = ((1 << 40, 128), (128, 128))  # large, but every word fits: compiled natively
    assert tset.native.kernel(big, None).bytecode[10] == (1 << 40) * 128
    huge = ((1 << 56, 128), (128, 128))  # the first argument's 2^63 elements do not fit a word
    assert tset.native.kernel(huge, None) == ASK_PYTHON  # exact arithmetic: no wrapped word
    with pytest.raises(BytecodeError, match="does not fit int64"):
        compile_graph(g, list(huge), SMALL)
    assert len(tset) == 4
