"""The DVM VM compiled once through vtmlir's MLIR pipeline (native CPU code) against the numpy
reference VM (Alg. 2, `vm.py`): bitwise where the instruction is exact in IEEE f32, a tight
tolerance for exp/log/pow, sums and matmul; composite kernels against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from vtmlir.dvm import BytecodeError, Graph, Opcode, Target, compile_graph, encode, execute
from vtmlir.dvm.isa import Program
from vtmlir.dvm.native import native_vm, unsupported_reason

RNG = np.random.default_rng(11)
SMALL = Target(cores=3, vector_bytes=32, local_memory_bytes=16 * 1024)  # many tiles, tail tiles

EXACT_UNARY = [Opcode.SQRT, Opcode.ABS, Opcode.ROUND, Opcode.FLOOR, Opcode.IS_FINITE, Opcode.COPY]
EXACT_BINARY = [Opcode.ADD, Opcode.SUB, Opcode.MUL, Opcode.DIV, Opcode.MIN, Opcode.MAX]


def shape(rank, hi=40):
    return tuple(int(s) for s in RNG.integers(1, hi + 1, size=rank))


def both(k, arrays, cores=2):
    """(native outputs, numpy-VM outputs) of a compiled kernel."""
    return k(*arrays, native=True, cores=cores), k(*arrays)


def same(a, b, exact=True):
    assert a.dtype == b.dtype and a.shape == b.shape
    if exact:
        assert np.array_equal(a.view(np.uint8), b.view(np.uint8)), np.abs(a.astype(float) - b).max()
    else:
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-6)


def test_compiled_once_through_the_cpu_pipeline():
    vm = native_vm()
    assert vm is native_vm()
    assert {"vm", "llvm"} <= set(vm.stages)
    assert "scf.index_switch" in vm.stages["vm"] and "scf.while" in vm.stages["vm"]
    assert "llvm.func @_mlir_ciface_dvm_vm" in vm.stages["llvm"]


def _random_program_graph():
    """A random elementwise/broadcast/reduction program over one 3-d input and a broadcast one."""
    g = Graph("random")
    x, y = g.input(3), g.input(3)
    vals = [x, y]
    ops = []
    for _ in range(int(RNG.integers(3, 9))):
        kind = RNG.choice(["unary", "binary", "scalar", "cmpsel", "reduce"])
        a = vals[int(RNG.integers(len(vals)))]
        b = vals[int(RNG.integers(len(vals)))]
        if kind == "unary":
            f32_unary = [o for o in EXACT_UNARY if o != Opcode.IS_FINITE]  # keep values f32
            op = f32_unary[int(RNG.integers(len(f32_unary)))]
            v = g.unary(op, g.abs(a) if op == Opcode.SQRT else a)
        elif kind == "binary":
            op = EXACT_BINARY[int(RNG.integers(len(EXACT_BINARY)))]
            v = g.binary(op, a, b)
        elif kind == "scalar":
            v = g.scalar(Opcode.ADDS if RNG.random() < 0.5 else Opcode.MULS, a, float(RNG.normal()))
        elif kind == "cmpsel":
            v = g.select(g.cmp(a, b, str(RNG.choice(["lt", "ge", "ne"]))), a, b)
        else:
            op = [Opcode.REDUCE_MAX, Opcode.REDUCE_MIN][int(RNG.integers(2))]
            v = g.reduce(op, a, [int(RNG.choice([-1, 1]))])
        ops.append(kind)
        vals.append(v)
    g.output(vals[-1], vals[-2])
    return g


@pytest.mark.parametrize("seed", range(12))
def test_random_programs_bitwise(seed):
    g = _random_program_graph()
    s = shape(3, hi=30)
    ys = tuple(1 if RNG.random() < 0.4 else d for d in s)
    arrays = [RNG.standard_normal(s).astype(np.float32) * 3, RNG.standard_normal(ys).astype(np.float32)]
    for target in (SMALL, Target(cores=4)):
        k = compile_graph(g, [a.shape for a in arrays], target)
        native, ref = both(k, arrays, cores=int(RNG.integers(1, 4)))
        for a, b in zip(native, ref):
            same(a, b)


@pytest.mark.parametrize("op", EXACT_UNARY + [Opcode.EXP, Opcode.LOG], ids=lambda o: o.name)
def test_unary(op):
    x = (RNG.standard_normal(shape(2, hi=90)) * 3).astype(np.float32)
    if op in (Opcode.SQRT, Opcode.LOG):
        x = np.abs(x) + 0.1
    x.flat[::7] = 2.5  # round half to even
    if op == Opcode.IS_FINITE:
        x.flat[::3], x.flat[1::5] = np.inf, np.nan
    g = Graph()
    g.output(g.unary(op, g.input(2)))
    (a,), (b,) = both(compile_graph(g, [x.shape], SMALL), [x])
    same(a, b, exact=op in EXACT_UNARY)


@pytest.mark.parametrize("op", EXACT_BINARY + [Opcode.POW], ids=lambda o: o.name)
def test_binary_with_broadcast(op):
    s = shape(3, hi=20)
    a = RNG.random(s).astype(np.float32) + 0.5
    b = RNG.random(tuple(1 if RNG.random() < 0.5 else d for d in s)).astype(np.float32) + 0.5
    g = Graph()
    g.output(g.binary(op, g.input(3), g.input(3)))
    k = compile_graph(g, [a.shape, b.shape], SMALL)
    (x,), (y,) = both(k, [a, b])
    same(x, y, exact=op != Opcode.POW)


def test_cmp_select_cast_families():
    a = RNG.integers(-3, 4, (37, 53)).astype(np.float32)
    b = RNG.integers(-3, 4, (53,)).astype(np.float32)
    casts = [lambda g, x, y: g.cast(x * 7.5, "int32"),
             lambda g, x, y: g.cast(g.cast(g.cast(x * 7.5, "int32"), "bool"), "int32"),
             lambda g, x, y: g.cast(g.cast(x * 1.3, "float16"), "float32"),
             lambda g, x, y: g.cast(g.cast(x * 1.3, "int32"), "float32"),
             lambda g, x, y: g.cast(x, "bool"),
             lambda g, x, y: g.cast(g.cmp(x, y, "lt"), "float32")]
    groups = [[lambda g, x, y, c=c: g.cmp(x, y, c), lambda g, x, y, c=c: g.select(g.cmp(x, y, c), x, y)]
              for c in ["eq", "ne", "lt", "le", "gt", "ge"]] + [casts[:3], casts[3:]]
    for group in groups:
        g = Graph()
        x, y = g.input(2), g.input(1)
        g.output(*[f(g, x, y) for f in group])
        k = compile_graph(g, [a.shape, b.shape], SMALL)
        native, ref = both(k, [a, b])
        for u, v in zip(native, ref):
            same(u, v)


@pytest.mark.parametrize("op", [Opcode.SUM, Opcode.REDUCE_MAX, Opcode.REDUCE_MIN], ids=["sum", "max", "min"])
def test_reductions(op):
    for axes in [(-1,), (1,), (1, 2), (0, 1, 2)]:
        x = RNG.standard_normal(shape(3, hi=25)).astype(np.float32)
        g = Graph()
        g.output(g.reduce(op, g.input(3), axes))
        k = compile_graph(g, [x.shape], Target(cores=3))
        (a,), (b,) = both(k, [x])
        if op == Opcode.SUM:  # sequential sum vs numpy's pairwise sum
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-4)
        else:
            same(a, b)


def test_strided_views_and_int_data_movement():
    x = RNG.standard_normal((23, 41)).astype(np.float32)
    g = Graph()
    g.output(g.exp(g.input(2)) + g.input(2))
    k = compile_graph(g, [(41, 23), (41, 23)], SMALL, input_strides=[(1, 41), (23, 1)])
    assert Opcode.VIEW_LOAD in {i.op for i in k.program.body}
    y = RNG.standard_normal((41, 23)).astype(np.float32)
    (a,), (b,) = both(k, [x.T, y])
    same(a, b, exact=False)
    # int64 / int8 tiles only move (load, broadcast, store) -- bitwise
    for dt in ("int64", "int8", "float16"):
        u = RNG.integers(-100, 100, (19, 1, 33)).astype(dt)
        g = Graph()
        v = g.input(3, dt)
        g.output(g.copy(v), g.select(g.cmp(g.input(3), g.input(3), "lt"), g.input(3), g.input(3)))
        p, q = RNG.random((19, 17, 33)).astype(np.float32), RNG.random((19, 17, 33)).astype(np.float32)
        k = compile_graph(g, [u.shape, p.shape, q.shape, p.shape, q.shape], SMALL)
        native, ref = both(k, [u, p, q, p, q])
        for c, d in zip(native, ref):
            same(c, d)


def test_matmul_and_addmm():
    g = Graph("addmm")
    bias, a, b = g.input(1), g.input(2), g.input(2)
    g.output(g.matmul(a, b) * 0.5 + bias * 2.0)
    for m, kk, n in [(1, 1, 1), (37, 300, 45), (130, 77, 9)]:
        arrays = [RNG.standard_normal(n).astype(np.float32), RNG.standard_normal((m, kk)).astype(np.float32),
                  RNG.standard_normal((kk, n)).astype(np.float32)]
        k = compile_graph(g, [x.shape for x in arrays], SMALL)
        (x,), (y,) = both(k, arrays)
        np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul_register_blocks_keep_the_ikj_order(dtype):
    """The CPU VM's MatMul computes blocks of 8 rows (4 without AVX-512), then of 2 and 1 rows, x
    one vector of columns in registers and the other columns i-k-j (m = 63 = 7 * 8 + 3 * 2 + 1 and
    13 = 8 + 2 * 2 + 1 take every block size): every element is still 0 (or dst, when k is split into chunks)
    plus a[i, q] * b[q, j] for q in order, one multiply and one add each -- bitwise what a loop over
    q of rounded products and sums gives (numpy's BLAS matmul sums in another order)."""
    g = Graph("mm")
    a, b = g.input(2, dtype), g.input(2, dtype)
    g.output(g.matmul(a, b))
    shapes = [(1, 3, 5), (4, 8, 8), (5, 9, 17), (8, 2, 3), (63, 32, 64), (13, 700, 23), (130, 77, 9)]
    small = Target(cores=1, local_memory_bytes=16 * 1024)  # k in chunks: the accumulating MatMul
    for (m, kk, n), target in [(s, Target(cores=1)) for s in shapes] + [((37, 300, 45), small)]:
        x, y = RNG.standard_normal((m, kk)).astype(dtype), RNG.standard_normal((kk, n)).astype(dtype)
        k = compile_graph(g, [(m, kk), (kk, n)], target)
        expected = np.zeros((m, n), dtype)
        for q in range(kk):
            expected = expected + np.outer(x[:, q], y[q, :])
        if target is small:
            assert k.tiling.tk < kk
            np.testing.assert_allclose(k(x, y, native=True)[0], expected, rtol=1e-12 if dtype == np.float64 else 1e-5,
                                       atol=1e-12 if dtype == np.float64 else 1e-5)
        else:
            np.testing.assert_array_equal(k(x, y, native=True)[0], expected)


def test_layernorm_and_softmax_vs_torch():
    g = Graph("layernorm")
    x, w, b = g.input(3), g.input(1), g.input(1)
    mu = g.mean(x, -1)
    xc = x - mu
    g.output(xc / g.sqrt(g.mean(xc * xc, -1) + 1e-5) * w + b)
    for _ in range(5):
        bb, s, h = int(RNG.integers(1, 5)), int(RNG.integers(1, 300)), int(RNG.choice([16, 100, 256, 1024]))
        t, tw, tb = torch.randn(bb, s, h), torch.randn(h), torch.randn(h)
        k = compile_graph(g, [(bb, s, h), (h,), (h,)], Target(cores=4))
        (out,) = k(t.numpy(), tw.numpy(), tb.numpy(), native=True, cores=2)
        ref = torch.nn.functional.layer_norm(t, (h,), tw, tb, 1e-5)
        torch.testing.assert_close(torch.from_numpy(out), ref, rtol=1e-4, atol=1e-4)
    g = Graph("softmax")
    x = g.input(2)
    e = g.exp(x - g.max(x, -1))
    g.output(e / g.sum(e, -1))
    for _ in range(5):
        shp = (int(RNG.integers(1, 400)), int(RNG.integers(1, 700)))
        t = torch.randn(*shp) * 4
        (out,) = compile_graph(g, [shp], SMALL)(t.numpy(), native=True)
        torch.testing.assert_close(torch.from_numpy(out), torch.softmax(t, -1), rtol=1e-5, atol=1e-6)


def test_core_count_does_not_change_results():
    x = RNG.standard_normal((50, 70)).astype(np.float32)
    g = Graph()
    v = g.input(2)
    g.output(g.exp(v - g.max(v, -1)))
    k = compile_graph(g, [x.shape], SMALL)
    outs = [k(x, native=True, cores=c)[0] for c in (1, 2, 5, 64)]
    for o in outs[1:]:
        same(o, outs[0])


def test_rejects_what_it_cannot_run():
    g = Graph()
    g.output(g.exp(g.input(1)))
    k = compile_graph(g, [(10,)], SMALL)
    vm = native_vm()
    with pytest.raises(BytecodeError, match="takes 2 arguments"):
        vm.run(k.bytecode, [np.zeros(10, np.float32)])
    with pytest.raises(BytecodeError, match="argument 1"):
        vm.run(k.bytecode, [np.zeros(10, np.float32), np.zeros(3, np.float64)])
    with pytest.raises(BytecodeError, match="bad magic"):
        vm.run(k.bytecode * 2, [np.zeros(10, np.float32)] * 2)
    g = Graph()
    g.output(g.input(1, "int32") + g.input(1, "int32"))  # integer arithmetic: the numpy VM's
    p = compile_graph(g, [(10,), (10,)], SMALL).program
    assert "ADD on I32" in unsupported_reason(p)
    i32 = [np.zeros(10, np.int32) for _ in range(3)]
    with pytest.raises(BytecodeError, match="unsupported program"):
        vm.run(encode(p), i32)
    # an empty body runs (and does nothing)
    empty = Program(p.kernel_type, p.local_bytes, p.args, p.grid, ())
    out = np.full(10, 3, np.int32)
    execute(encode(empty), i32[:2] + [out])
    assert unsupported_reason(empty) is None
    vm.run(encode(empty), i32[:2] + [out])
    assert (out == 3).all()


def test_f64_arithmetic_and_f32_f64_casts_match_the_numpy_vm():
    """Every arithmetic family on f64 (the dtype torch-mlir's LayerNorm variance uses) and the
    f32 <-> f64 casts, native vs the numpy VM."""
    g = Graph("f64")
    x, w = g.input(3, "float64"), g.input(1, "float64")
    mu = g.mean(x, -1)
    xc = x - mu
    gt = g.cmp(x, mu, "GT")
    g.output(g.cast(xc / g.sqrt(g.mean(xc * xc, -1) + 1e-5) * w, "float32"), gt,
             g.select(gt, x, mu * 2.0), g.exp(x) + g.log(g.abs(x)) - g.floor(x) + g.round(x),
             g.maximum(x, mu) - g.minimum(x, mu) + g.max(x, -1) - g.min(x, -1),
             g.pow(g.abs(x), w) + g.cast(g.cast(x, "float32"), "float64"))
    rng = np.random.default_rng(3)
    for shape in ((2, 3, 16), (3, 5, 33)):
        a, b = rng.standard_normal(shape), rng.standard_normal(shape[-1:])
        k = compile_graph(g, [shape, shape[-1:]], SMALL)
        assert unsupported_reason(k.program) is None
        for ref, nat in zip(k(a, b), k(a, b, native=True, cores=2)):
            np.testing.assert_allclose(nat, ref, rtol=1e-12, atol=1e-12)
    g = Graph("mm64")
    g.output(g.matmul(g.input(2, "float64"), g.input(2, "float64")) + 1.0)
    a, b = rng.standard_normal((9, 13)), rng.standard_normal((13, 5))
    (out,) = compile_graph(g, [(9, 13), (13, 5)], SMALL)(a, b, native=True)
    np.testing.assert_allclose(out, a @ b + 1.0, rtol=1e-12, atol=1e-12)


def _wide_graph(n_inputs):
    """`n_inputs` inputs of mixed dtypes (f32, f64, int8) combined elementwise into several outputs:
    each argument is read by its own records, so a wrong argument number changes a result."""
    g = Graph("wide")
    xs = [g.input(2, "float64" if i % 5 == 3 else "int8" if i % 7 == 6 else "float32") for i in range(n_inputs)]
    f32 = [x for i, x in enumerate(xs) if i % 5 != 3 and i % 7 != 6]
    acc = f32[0]
    for i, x in enumerate(f32[1:]):
        acc = g.binary(EXACT_BINARY[i % len(EXACT_BINARY)], acc, x * float(i + 1))
    f64 = [x for i, x in enumerate(xs) if i % 5 == 3]
    acc64 = f64[0]
    for x in f64[1:]:
        acc64 = acc64 - x * 0.5
    outs = [acc, acc64, g.cast(acc64, "float32") + acc] + [g.copy(x) for i, x in enumerate(xs) if i % 7 == 6]
    g.output(*outs)
    return g, xs


def test_any_number_of_arguments_bitwise():
    """The argument table is as long as the header says (no MAX_ARGS): kernels of 23 and 70
    arguments with mixed dtypes, native vs the numpy VM, bitwise, on 1 and 3 cores."""
    for n_inputs in (16, 60):
        g, xs = _wide_graph(n_inputs)
        shp = (37, 29)
        arrays = []
        for i in range(n_inputs):
            dt = "float64" if i % 5 == 3 else "int8" if i % 7 == 6 else "float32"
            arrays.append((RNG.standard_normal(shp) * 4).astype(dt) if dt != "int8"
                          else RNG.integers(-100, 100, shp).astype(dt))
        k = compile_graph(g, [shp] * n_inputs, SMALL)
        assert len(k.program.args) > 8 and unsupported_reason(k.program) is None
        assert max(i.arg for i in k.program.body if i.op in (Opcode.LOAD, Opcode.STORE)) == len(k.program.args) - 1
        for cores in (1, 3):
            native, ref = both(k, arrays, cores=cores)
            for a, b in zip(native, ref):
                same(a, b)


def test_argument_checks_hold_for_every_argument():
    g, _ = _wide_graph(16)
    shp = (5, 7)
    k = compile_graph(g, [shp] * 16, SMALL)
    args = [np.zeros(a.numel, a.dtype.numpy) for a in k.program.args]
    vm = native_vm()
    vm.run_valid(k.bytecode, args)
    with pytest.raises(BytecodeError, match=f"takes {len(args)} arguments"):
        vm.run_valid(k.bytecode, args[:-1])
    last = len(args) - 1
    other = np.float32 if args[last].dtype != np.float32 else np.float64
    for bad in (args[last].astype(other),  # dtype
                args[last][:-1],  # length
                np.zeros(2 * args[last].size, args[last].dtype)[::2]):  # not dense
        with pytest.raises(BytecodeError, match=f"argument {last} must be"):
            vm.run_valid(k.bytecode, args[:-1] + [bad])
        with pytest.raises(BytecodeError, match=f"argument {last} must be"):
            vm.run(k.bytecode, args[:-1] + [bad])
    with pytest.raises(BytecodeError, match="arguments in the header"):
        vm.run_valid(k.bytecode[:20].copy(), args)


def test_a_record_naming_an_argument_past_the_table_touches_nothing():
    """Valid bytecode never names an argument past the header's count (`decode`, the templates'
    guards); the VM still bounds the table lookup, so bytecode given to `run_valid` that does
    (here: the store's argument number raised) writes nowhere."""
    g = Graph()
    g.output(g.exp(g.input(1)))
    k = compile_graph(g, [(10,)], SMALL)
    code = k.bytecode.copy()
    p, end = int(code[2]), int(code[2]) + int(code[4])
    stores = 0
    while p < end:
        if code[p] == Opcode.STORE:
            code[p + 4] = 2  # dtype, local, arg: the kernel has arguments 0 and 1
            stores += 1
        p += int(code[p + 1])
    assert stores
    with pytest.raises(BytecodeError, match="bad argument index"):
        native_vm().run(code, [np.ones(10, np.float32), np.zeros(10, np.float32)])
    out = np.full(10, 7.0, np.float32)
    native_vm().run_valid(code, [np.ones(10, np.float32), out])
    assert (out == 7.0).all()


def test_bert_encoder_runs_every_kernel_natively(monkeypatch):
    """DvmFunction on the BERT-style encoder (the benchmark's model, small): every kernel -- the
    widest fused groups included -- runs on the native VM; the numpy VM never runs. A kernel returns
    only what is read outside its group (wide argument tables: `_wide_graph` above)."""
    import vtmlir
    from vtmlir.dvm import kernel as kernel_module
    from vtmlir.dvm import vm
    from vtmlir.dvm.runner import DvmFunction
    from vtmlir.models.bert import build_bert_encoder, dynamic_shapes

    model, (x,) = build_bert_encoder(batch=2, seq=4, layers=1, hidden=16, heads=2, ffn=32)
    fn = DvmFunction(vtmlir.import_torch(model, x, dynamic_shapes=dynamic_shapes()), native=True)

    def refuse(*a, **kw):
        raise AssertionError("the numpy VM ran a kernel")

    monkeypatch.setattr(vm, "execute", refuse)
    monkeypatch.setattr(kernel_module, "execute", refuse)   # the kernels hold it by name
    for batch in (2, 5):
        xb = RNG.standard_normal((batch, 4, 16)).astype(np.float32)
        (out,) = fn(xb)
        with torch.no_grad():
            ref = model(torch.from_numpy(xb)).numpy()
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=2e-4)
    admitted = [e for k in fn.kernels for e in k.cache.values()] + list(fn._bmm_kernels.values())
    assert all(use_native for _, use_native, _ in admitted)
    assert max(len(k.input_shapes) for k, _, _ in admitted) >= 5
    for unit in fn.kernels:  # every result a kernel writes has a reader outside the group
        members = {op.operation for op in unit.ops}
        assert all(any(u.owner.operation not in members for u in r.uses) for r in unit.results)


@pytest.mark.parametrize("dtype", ["float16", "float64"])
def test_every_arithmetic_instruction_on_f16_and_f64(dtype):
    """Each instruction on f16 (computed in f32, rounded back once per instruction: numpy's half
    loops) and f64, native vs the numpy VM: bitwise where the instruction is exact, a few ulp for
    exp/log/pow, and the sum's order (sequential in f32 here, pairwise in numpy)."""
    dt = np.dtype(dtype)
    exact = {"sqrt": lambda g, x, y: g.sqrt(g.abs(x)), "abs": lambda g, x, y: g.abs(x),
             "round": lambda g, x, y: g.round(x * 4.0), "floor": lambda g, x, y: g.floor(x),
             "isfinite": lambda g, x, y: g.isfinite(x / y), "copy": lambda g, x, y: g.copy(x),
             "adds": lambda g, x, y: g.scalar(Opcode.ADDS, x, 1.0009765625 + 2.0 ** -40),
             "muls": lambda g, x, y: g.scalar(Opcode.MULS, x, 0.1),
             **{op.name.lower(): (lambda g, x, y, op=op: g.binary(op, x, y)) for op in EXACT_BINARY},
             **{f"cmp_{c}": (lambda g, x, y, c=c: g.cmp(x, y, c)) for c in ("eq", "ne", "lt", "le", "gt", "ge")},
             "select": lambda g, x, y: g.select(g.cmp(x, y, "lt"), x, y),
             "max": lambda g, x, y: g.max(x, -1), "min": lambda g, x, y: g.min(x, 1),
             "matmul": lambda g, x, y: g.matmul(g.input(2, dtype), g.input(2, dtype))}
    close = {"exp": lambda g, x, y: g.exp(x), "log": lambda g, x, y: g.log(g.abs(x)),
             "pow": lambda g, x, y: g.pow(g.abs(x), y), "sum": lambda g, x, y: g.sum(x, -1),
             "sum_outer": lambda g, x, y: g.sum(x, 0)}
    rng = np.random.default_rng(5)
    m, k, n = 37, 300, 9
    x = (rng.standard_normal((m, k)) * 3).astype(dt)
    x.flat[::11] = x.flat[1::11]  # equal pairs for the comparisons
    y = (rng.standard_normal((m, k)) + 0.1).astype(dt)
    y.flat[::13] = 0  # x / 0: inf and nan for IsFinite
    y.flat[5::13] = x.flat[5::13]
    # a k of 2000: chunked by SMALL's local memory (MatMul with accumulate)
    mm = [rng.standard_normal((m, 2000)).astype(dt), rng.standard_normal((2000, n)).astype(dt)]
    for name, f in {**exact, **close}.items():
        g = Graph(name)
        a, b = g.input(2, dtype), g.input(2, dtype)
        g.output(f(g, a, b))
        arrays = [x, y, *mm] if name == "matmul" else [x, y]
        # an outer reduction needs its whole [37, 300] slab in one tile: more local memory
        kern = compile_graph(g, [u.shape for u in arrays], Target(cores=3) if name == "sum_outer" else SMALL)
        assert unsupported_reason(kern.program) is None, name
        if name == "matmul":
            assert {i.accumulate for i in kern.program.body if i.op == Opcode.MATMUL} == {0, 1}
        (nat,), (ref,) = both(kern, arrays)
        if name in exact and not (name == "matmul" and dt == np.float64):  # f64: numpy's is BLAS
            assert np.array_equal(nat.view(np.uint8), ref.view(np.uint8)), name
        else:
            tol = 2e-3 if dt == np.float16 else 1e-12
            np.testing.assert_allclose(nat.astype(np.float64), ref.astype(np.float64), rtol=tol, atol=tol, err_msg=name)


def _cast_input(rng, src: np.dtype, dst: np.dtype, n=4000):
    """Values of `src` whose conversion to `dst` numpy defines (no float -> int out of range)."""
    if src == np.bool_:
        return rng.integers(0, 2, n).astype(bool)
    if src.kind in "iu":
        info = np.iinfo(src)
        return rng.integers(info.min, int(info.max) + 1, n, dtype=np.int64).astype(src)
    if dst.kind in "iu":
        lo, hi = (-128, 127) if dst.itemsize == 1 and dst.kind == "i" else (0, 255) if dst.kind == "u" else (-3e4, 3e4)
        v = rng.uniform(lo, hi, n)
        v[::7] = np.round(v[::7]) + 0.5  # halves truncate toward zero
        return v.astype(src)
    v = rng.standard_normal(n) * np.exp(rng.uniform(-30, 14, n))
    one = 1 + 2.0 ** -11  # ties of f16 (to even), and just above a tie: one rounding, not two
    v[:8] = [one, one + 2.0 ** -40, -(one + 2.0 ** -40), 65519.99, 65520.0, 2.0 ** -25 * 1.0000001, np.nan, -np.inf]
    v[8:12] = [0.0, -0.0, 1e300, -1e-300]
    with np.errstate(over="ignore"):
        return v.astype(src)


def test_every_cast_matches_numpy():
    """CAST between every pair of dtypes, native vs the numpy VM (numpy's ``astype``) bitwise:
    f64 -> f16 rounds once (ties, just above a tie), int -> int wraps, float -> int truncates,
    anything -> bool is != 0."""
    from vtmlir.dvm.isa import DType

    rng = np.random.default_rng(9)
    for s in DType:
        g = Graph(f"cast_{s.name}")
        x = g.input(1, s.numpy)
        others = [d for d in DType if d != s]
        g.output(*[g.cast(x, d.numpy) for d in others])
        for d in others:
            v = _cast_input(rng, s.numpy, d.numpy)
            gd = Graph(f"cast_{s.name}_{d.name}")
            gd.output(gd.cast(gd.input(1, s.numpy), d.numpy))
            kern = compile_graph(gd, [v.shape], SMALL)
            assert unsupported_reason(kern.program) is None
            with np.errstate(all="ignore"):
                (nat,), (ref,) = both(kern, [v])
            assert np.array_equal(nat.view(np.uint8), ref.view(np.uint8)), (s.name, d.name)
