"""The per-call path of compiled functions (issue 21 point 3; docs/codegen.md "Calling a compiled
function"): descriptors built once per signature, the fast path for contiguous tensors of the exact
dtypes and shapes, and the general path for everything else -- same results, same errors. The DVM's
native entry points likewise. No timing here: `benchmarks/call_overhead.py` measures."""

from __future__ import annotations

import builtins
import threading

import numpy as np
import pytest
import torch

import vtmlir
from vtmlir.backend.cpu.calling import data_pointer
from vtmlir.errors import VtmlirError

ADD = """func.func @main(%a: tensor<3x4xf32>, %b: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %e = tensor.empty() : tensor<3x4xf32>
  %r = linalg.add ins(%a, %b : tensor<3x4xf32>, tensor<3x4xf32>) outs(%e : tensor<3x4xf32>) -> tensor<3x4xf32>
  return %r : tensor<3x4xf32>
}"""


class MulAdd(torch.nn.Module):
    def forward(self, a, b):
        return a * b + a


class Mul(torch.nn.Module):
    def forward(self, a, b):
        return a * b


@pytest.fixture(scope="module")
def add():
    return vtmlir.compile(ADD, threads=1)


class _Counting:
    """Counts classes built (`class` statements and 3-argument `type`) while active."""

    def __init__(self, monkeypatch):
        self.count = 0
        build = builtins.__build_class__

        def counted(*args, **kwargs):
            self.count += 1
            return build(*args, **kwargs)

        monkeypatch.setattr(builtins, "__build_class__", counted)


def test_fast_path_builds_no_class_and_reuses_descriptors(add, monkeypatch):
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    add(x, y)  # the first call builds the descriptor table and the fast path
    words = add._table().words()
    counting = _Counting(monkeypatch)
    monkeypatch.setattr(type(add), "_run_general", lambda self, args: pytest.fail("general path taken"))
    outs = [add(x, y) for _ in range(5)]
    built = counting.count
    monkeypatch.undo()
    assert built == 0
    assert all(torch.equal(out, x + y) for out in outs)
    assert add._table().words() is words  # one buffer per thread, reused


def test_general_path_builds_no_class_per_call(add, monkeypatch):
    x = torch.randn(4, 3).t()  # strided: the general path copies it
    y = np.random.rand(3, 4).astype(np.float32)
    add(x, y)
    counting = _Counting(monkeypatch)
    outs = [add(x, y) for _ in range(3)]
    built = counting.count
    monkeypatch.undo()
    assert built == 0
    assert all(torch.equal(out, x + torch.from_numpy(y)) for out in outs)


@pytest.mark.parametrize("make", [
    lambda: torch.randn(4, 3).t(),                      # transposed
    lambda: torch.randn(3, 8)[:, ::2],                  # every other column
    lambda: torch.randn(6, 4)[::2],                     # every other row
    lambda: torch.randn(3, 4, dtype=torch.complex64).real,  # a view of half the bytes
    lambda: torch.randn(1, 4).expand(3, 4),             # stride 0
    lambda: torch.randn(3, 4).requires_grad_(),         # needs no detach to be read
    lambda: np.asfortranarray(np.random.rand(3, 4).astype(np.float32)),
    lambda: np.random.rand(3, 4).astype(np.float32)[::-1],  # negative strides
])
def test_strided_and_other_inputs_give_the_eager_result(add, make):
    x, y = make(), torch.randn(3, 4)
    tx = x if isinstance(x, torch.Tensor) else torch.from_numpy(x.copy())
    out = add(x, y)
    assert isinstance(out, torch.Tensor) and out.is_contiguous()
    assert torch.equal(out, (tx + y).detach())


def test_negated_view_is_resolved(add):
    z = torch.randn(3, 4, dtype=torch.complex64)
    neg = z.conj().imag  # a view with torch's negative bit set
    assert neg.is_neg()
    y = torch.zeros(3, 4)
    assert torch.equal(add(neg, y), neg.resolve_neg())


def test_results_are_fresh_and_outlive_the_inputs(add):
    x, y = torch.ones(3, 4), torch.ones(3, 4)
    first = add(x, y)
    second = add(x, y)
    assert first.data_ptr() != second.data_ptr()
    del x, y
    assert torch.equal(first, torch.full((3, 4), 2.0)) and torch.equal(second, first)


def test_errors_are_unchanged(add):
    with pytest.raises(VtmlirError, match=r"input 0 of @main must have dtype float32, got float64"):
        add(torch.randn(3, 4, dtype=torch.float64), torch.randn(3, 4))
    with pytest.raises(VtmlirError, match=r"input 1 of @main must have shape tensor<3x4xf32>, got \(4, 3\)"):
        add(torch.randn(3, 4), torch.randn(4, 3))
    with pytest.raises(VtmlirError, match=r"takes 2 inputs, got 1"):
        add(torch.randn(3, 4))
    with pytest.raises(VtmlirError, match=r"input 1 is a str"):
        add(torch.randn(3, 4), "x")


@pytest.mark.parametrize("dtype", [torch.float64, torch.int32, torch.uint8, torch.bfloat16, torch.complex64])
def test_dtypes_through_the_fast_and_general_paths(dtype):
    a = (torch.rand(2, 5) * 10).to(dtype)
    b = (torch.rand(2, 5) * 10).to(dtype)
    compiled = vtmlir.compile(Mul(), a, b, threads=1)
    expected = a * b
    fast = compiled(a, b)
    column_major = compiled(a.t().contiguous().t(), b.t().contiguous().t())  # the general path
    strided = compiled(torch.stack([a, a], -1)[..., 0], b)  # every other element: the general path
    for out in (fast, column_major, strided):
        assert out.dtype == dtype and torch.equal(out, expected)
    if dtype.is_complex:  # a conjugated view is resolved (the general path)
        assert torch.equal(compiled(a.conj(), b), a.conj() * b)


def test_zero_d_input_and_scalar_result():
    text = """func.func @main(%a: tensor<f32>, %b: tensor<2xf32>) -> (f32, tensor<2xf32>) {
      %v = tensor.extract %a[] : tensor<f32>
      %e = tensor.empty() : tensor<2xf32>
      %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                           iterator_types = ["parallel"]} ins(%b : tensor<2xf32>) outs(%e : tensor<2xf32>) {
      ^bb0(%x: f32, %o: f32):
        %s = arith.mulf %x, %v : f32
        linalg.yield %s : f32
      } -> tensor<2xf32>
      %w = arith.addf %v, %v : f32
      return %w, %r : f32, tensor<2xf32>
    }"""
    compiled = vtmlir.compile(text, threads=1)
    for a in (torch.tensor(3.0), np.float32(3.0), np.array(3.0, np.float32)):
        w, r = compiled(a, torch.tensor([1.0, 2.0]))
        assert type(w) is float and w == 6.0
        assert torch.equal(r, torch.tensor([3.0, 6.0]))


def _in_threads(work, n: int) -> None:
    """Run work(0), ..., work(n - 1) on n threads at once and wait for them."""
    threads = [threading.Thread(target=work, args=(s,)) for s in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_concurrent_calls_from_threads(add):
    """Each thread fills its own descriptors (ctypes releases the GIL during the call)."""
    errors = []

    def work(seed):
        g = torch.Generator().manual_seed(seed)
        for _ in range(200):
            x, y = torch.randn(3, 4, generator=g), torch.randn(3, 4, generator=g)
            if not torch.equal(add(x, y), x + y):
                errors.append(seed)
                return

    _in_threads(work, 4)
    assert not errors


def test_module_calling_convention_fast_and_structured():
    class Pair(torch.nn.Module):
        def forward(self, a, b):
            return a + b, a - b

    a, b = torch.randn(4), torch.randn(4)
    compiled = vtmlir.compile(Pair(), a, b, threads=1)
    s, d = compiled(a, b)  # plain positional tensors: no tree walk
    assert torch.equal(s, a + b) and torch.equal(d, a - b)
    with pytest.raises(VtmlirError, match=r"of the form \(\(\*, \*\), \{\}\), got \(\(\*,\), \{b: \*\}\)"):
        compiled(a, b=b)  # a keyword: the pytree path and its error
    with pytest.raises(VtmlirError, match="takes inputs of the form"):
        compiled(a, b, a)


def test_data_pointer_of_read_only_empty_and_views():
    a = np.arange(12, dtype=np.float32)
    assert data_pointer(a) == a.ctypes.data
    assert data_pointer(a[3:]) == a.ctypes.data + 12
    ro = a.copy()
    ro.flags.writeable = False
    assert data_pointer(ro) == ro.ctypes.data
    empty = np.empty(0, np.float32)
    assert data_pointer(empty) == empty.ctypes.data


def _addmul_kernel(seed: int):
    """A DVM kernel of x * y + x on 5x7 f32 and two random inputs."""
    from vtmlir.dvm import Graph, compile_graph

    g = Graph("addmul")
    x, y = g.input(2), g.input(2)
    g.output(x * y + x)
    rng = np.random.default_rng(seed)
    return (compile_graph(g, [(5, 7), (5, 7)]), rng.standard_normal((5, 7)).astype(np.float32),
            rng.standard_normal((5, 7)).astype(np.float32))


def test_dvm_native_kernel_builds_nothing_per_call(monkeypatch):
    from vtmlir.dvm.native import native_vm

    k, a, b = _addmul_kernel(0)
    (first,) = k(a, b, native=True)
    k(a, b, native=True, cores=3)  # the thread pool exists
    counting = _Counting(monkeypatch)
    outs = [k(a, b, native=True, cores=cores)[0] for cores in (1, 1, 3)]
    # run_valid on the kernel's words and caller-provided outputs
    dst = np.empty(35, np.float32)
    native_vm().run_valid(k.bytecode, [a.reshape(-1), b.reshape(-1), dst])
    built = counting.count
    monkeypatch.undo()
    assert built == 0
    for out in outs + [dst.reshape(5, 7)]:
        np.testing.assert_array_equal(out, first)
    np.testing.assert_array_equal(first, k(a, b)[0])  # the numpy reference VM


def test_dvm_function_repeated_calls():
    from vtmlir.dvm.runner import DvmFunction
    from vtmlir.dvm.tiling import Target

    a, b = torch.randn(3, 4), torch.randn(3, 4)
    fn = DvmFunction(vtmlir.import_torch(MulAdd(), a, b), native=True, target=Target(cores=1))
    for _ in range(3):
        (out,) = fn(a.numpy(), b.numpy())
        np.testing.assert_allclose(out, (a * b + a).numpy(), rtol=1e-6)
    with pytest.raises(VtmlirError, match="cannot take an array"):
        fn(a.numpy().astype(np.float64), b.numpy())


def test_descriptor_table_scalars_and_partly_known_shapes():
    """A `SCALAR` parameter is one word that args[i] points at; a memref's known sizes and the
    strides of the dimensions whose inner sizes are all known are written once (DVM's @dvm_vm takes
    three memref<?x...> and two i64)."""
    import ctypes

    from vtmlir.backend.cpu.calling import SCALAR, DescriptorTable

    table = DescriptorTable(0, [(None, 3, 4), SCALAR, (2, 5)])
    assert table.offsets == [0, 9, 10]
    words, packed = table.state()
    w = list(words)
    assert w[3:9] == [0, 3, 4, 12, 4, 1]  # sizes ?, 3, 4; strides 12, 4, 1
    assert w[13:17] == [2, 5, 5, 1]
    args = (ctypes.c_void_p * 3).from_address(packed)
    base = ctypes.addressof(words)
    assert args[1] == base + 8 * 9  # the scalar's word itself
    assert ctypes.c_void_p.from_address(args[0]).value == base  # a descriptor pointer
    table.set_shape(words, 0, (7, 3, 4))
    assert list(words)[3:9] == [7, 3, 4, 12, 4, 1]


def test_dvm_kernel_fast_path_falls_back_where_it_does_not_apply():
    """The prepared native call of a kernel (`kernel._NativeCall`) takes exactly the compiled
    shapes and dtypes, C-contiguous; anything else takes the checked path: a read-only array runs
    (same results), a strided view, another dtype, a wrong shape or count get its errors."""
    from vtmlir.dvm import GraphError

    k, a, b = _addmul_kernel(1)
    (ref,) = k(a, b)
    np.testing.assert_array_equal(k(a, b, native=True)[0], ref)
    assert k.native_call  # prepared at the first native run
    wide = np.zeros((5, 14), np.float32)
    wide[:, ::2] = a
    frozen = a.copy()
    frozen.flags.writeable = False
    np.testing.assert_array_equal(k(frozen, b, native=True)[0], ref)
    with pytest.raises(vtmlir.dvm.BytecodeError, match="float32"):
        k(a.astype(np.float64), b, native=True)
    with pytest.raises(GraphError, match="strides"):
        k(wide[:, ::2], b, native=True)
    with pytest.raises(GraphError, match="input 0 has shape"):
        k(a[:4], b[:4], native=True)
    with pytest.raises(GraphError, match="expected 2 inputs"):
        k(a, native=True)


def test_dvm_function_drops_glue_nothing_reads_and_runs_small_kernels_on_one_core():
    """`tensor.empty`s that only name a fused op's `outs` are not run per call; a kernel of a few
    KiB runs on one core whatever the target's count (the thread pool's hand-off costs more)."""
    from vtmlir.dvm.kernel import PARALLEL_MIN_BYTES, launch_cores
    from vtmlir.dvm.runner import DvmFunction
    from vtmlir.dvm.tiling import Target

    a, b = torch.randn(3, 4), torch.randn(3, 4)
    fn = DvmFunction(vtmlir.import_torch(MulAdd(), a, b), native=True, target=Target(cores=4))
    assert [getattr(u, "name", "kernel") for kind, u in fn.plan] == ["kernel", "func.return"]
    (out,) = fn(a.numpy(), b.numpy())
    np.testing.assert_allclose(out, (a * b + a).numpy(), rtol=1e-6)
    ((kernel, native, cores),) = fn.kernels[0].cache.values()
    assert native and cores == 1
    n = PARALLEL_MIN_BYTES // 12 + 1  # three f32 buffers of n elements
    from vtmlir.dvm import compile_graph

    big = compile_graph(kernel.graph, [(1, n), (1, n)])
    assert launch_cores(big, Target(cores=4)) == 4 and launch_cores(big, Target(cores=1)) == 1


# -- result buffers: a large result's memory is recycled once the caller has dropped it ---------

BIG = 256  # a 256x256 f32 result: 256 KiB, at least `RECYCLE_BYTES`


@pytest.fixture(scope="module")
def big_mul():
    return vtmlir.compile(Mul(), torch.randn(BIG, BIG), torch.randn(BIG, BIG), threads=1)


def test_a_dropped_large_result_is_recycled_and_a_held_one_never(big_mul):
    x, y = torch.randn(BIG, BIG), torch.randn(BIG, BIG)
    first = big_mul(x, y)
    address = first.data_ptr()
    second = big_mul(y, y)  # `first` is held: a buffer of its own
    assert second.data_ptr() != address and torch.equal(first, x * y)
    del first
    third = big_mul(x, x)
    assert third.data_ptr() == address  # taken back: no fresh pages
    assert torch.equal(third, x * x) and torch.equal(second, y * y)
    assert third is not second and third.data_ptr() != second.data_ptr()


@pytest.mark.parametrize("keep", ["row view", "numpy", "numpy view", "memoryview", "storage", "dlpack"])
def test_a_view_or_export_of_a_result_keeps_its_memory_from_later_calls(big_mul, keep):
    x = torch.randn(BIG, BIG)
    out = big_mul(x, x)
    address, expected = out.data_ptr(), x * x
    held = {"row view": lambda t: t[3], "numpy": lambda t: t.numpy(), "numpy view": lambda t: t.numpy()[1:],
            "memoryview": lambda t: memoryview(t.numpy()), "storage": lambda t: t.untyped_storage(),
            "dlpack": lambda t: torch.utils.dlpack.to_dlpack(t)}[keep](out)
    del out
    # more calls than the buffers kept per result, their results dropped at once or held
    later = [big_mul(x, x + 1) for _ in range(2)] + [big_mul(x, x + 2).data_ptr() for _ in range(3)]
    assert address not in [t.data_ptr() for t in later[:2]] + later[2:]
    if keep == "row view":
        assert torch.equal(held, expected[3])
    elif keep in ("numpy", "memoryview"):
        np.testing.assert_array_equal(np.asarray(held), expected.numpy())


def test_recycled_buffers_from_concurrent_threads(big_mul):
    """Each thread recycles its own buffers; a result a thread still holds is never written."""
    errors = []

    def work(seed):
        g = torch.Generator().manual_seed(seed)
        held = None
        for _ in range(40):
            x = torch.randn(BIG, BIG, generator=g)
            out = big_mul(x, x)
            if held is not None and not torch.equal(held[1], held[0] * held[0]):
                errors.append(seed)
                return
            held = (x, out)  # alive across the next call

    _in_threads(work, 4)
    assert not errors


@pytest.fixture
def recycle_everything(monkeypatch):
    """Every result recycled, however small (`ResultBuffers` reads the threshold when built)."""
    from vtmlir.backend.cpu import calling

    monkeypatch.setattr(calling, "RECYCLE_BYTES", 0)


def _decode_layer(name):
    from vtmlir.models import get
    from vtmlir.models.vtc_workloads import SMALL_SIZES

    model, inputs = get(name).builder(batch=2, seed=0, **SMALL_SIZES[name])
    return model.eval(), tuple(inputs)


@pytest.mark.parametrize("name", ["vtc_gemma2_decode", "vtc_llama3_decode"])
def test_kv_cache_layer_writes_every_element_of_a_recycled_buffer_and_leaves_its_inputs(name, recycle_everything):
    """A decode layer updates its KV caches (`index_copy_`/slice assignment on a clone): the
    compiled function copies each cache into its result and writes the new slot there. A
    recycled result buffer holds the last call's values (here NaN): a call must write all of it,
    on the fast path and the general one, and the caller's caches stay untouched."""
    model, inputs = _decode_layer(name)
    before = [t.clone() for t in inputs]
    with torch.no_grad():
        expected = model(*inputs)
    compiled = vtmlir.compile(model, *inputs, threads=1)
    strided = tuple(t.transpose(-1, -2).contiguous().transpose(-1, -2) if t.dim() == 4 else t for t in inputs)
    for args in (inputs, strided):  # the fast path, then the general one (column-major caches)
        out = compiled(*args)
        addresses = [t.data_ptr() for t in out]
        for t in out:
            t.fill_(float("nan"))
        del out, t
        again = compiled(*args)
        assert [t.data_ptr() for t in again] == addresses  # the poisoned buffers, taken back
        for got, want in zip(again, expected):
            torch.testing.assert_close(got, want, rtol=2e-5, atol=2e-5)
        del again
    assert all(torch.equal(t, b) for t, b in zip(inputs, before))


def test_donated_caches_and_recycled_out_parameters(recycle_everything):
    """Donated caches are updated in place (their results are the inputs themselves); the other
    result comes from a recycled buffer; each call's hidden state is its own tensor."""
    model, inputs = _decode_layer("vtc_llama3_decode")
    x, k, v = inputs
    with torch.no_grad():
        want_x, want_k, want_v = model(x, k, v)
    compiled = vtmlir.compile(model, x, k.clone(), v.clone(), donate=(1, 2), threads=1)
    k2, v2 = k.clone(), v.clone()
    h1, kr, vr = compiled(x, k2, v2)
    assert kr.data_ptr() == k2.data_ptr() and vr.data_ptr() == v2.data_ptr()
    torch.testing.assert_close(h1, want_x, rtol=2e-5, atol=2e-5)
    torch.testing.assert_close(k2, want_k, rtol=2e-5, atol=2e-5)
    torch.testing.assert_close(v2, want_v, rtol=2e-5, atol=2e-5)
    h2, *_ = compiled(x, k.clone(), v.clone())
    assert h2.data_ptr() != h1.data_ptr()  # h1 is held
    torch.testing.assert_close(h2, h1, rtol=0, atol=0)


def test_dvm_replay_and_native_kernel_recycle_released_results():
    from vtmlir.dvm.runner import DvmFunction
    from vtmlir.dvm.tiling import Target

    a, b = torch.randn(BIG, BIG), torch.randn(BIG, BIG)
    fn = DvmFunction(vtmlir.import_torch(MulAdd(), a, b), native=True, target=Target(cores=1))
    expected = (a * b + a).numpy()
    for _ in range(3):  # the second call records the shape's replay, the third replays it
        fn(a.numpy(), b.numpy())
    (first,) = fn(a.numpy(), b.numpy())
    (second,) = fn(b.numpy(), b.numpy())  # `first` held
    assert first.ctypes.data != second.ctypes.data
    np.testing.assert_allclose(first, expected, rtol=1e-6)
    np.testing.assert_allclose(second, (b * b + b).numpy(), rtol=1e-6)
    address = first.ctypes.data
    first[:] = np.nan
    del first
    (third,) = fn(a.numpy(), b.numpy())
    assert third.ctypes.data == address
    np.testing.assert_allclose(third, expected, rtol=1e-6)

    k, x, y = _addmul_kernel(0)
    big_x, big_y = np.random.rand(BIG, BIG).astype(np.float32), np.random.rand(BIG, BIG).astype(np.float32)
    from vtmlir.dvm import compile_graph

    big = compile_graph(k.graph, [big_x.shape, big_y.shape])
    (one,) = big(big_x, big_y, native=True)
    (two,) = big(big_x, big_y, native=True)  # `one` held
    assert one.ctypes.data != two.ctypes.data
    np.testing.assert_array_equal(one, big_x * big_y + big_x)
    np.testing.assert_array_equal(two, one)
    address = one.ctypes.data
    del one
    (three,) = big(big_x, big_y, native=True)
    assert three.ctypes.data == address
    np.testing.assert_array_equal(three, two)


# -- donated inputs on the fast path --------------------------------------------------------------

UPDATE = """
func.func @main(%c: tensor<4xf32>, %x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %s = tensor.extract_slice %x[0] [2] [1] : tensor<4xf32> to tensor<2xf32>
  %u = tensor.insert_slice %s into %c[2] [2] [1] : tensor<2xf32> into tensor<4xf32>
  %e = tensor.empty() : tensor<4xf32>
  %d = linalg.add ins(%x, %x : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  return %u, %d : tensor<4xf32>, tensor<4xf32>
}"""


def test_donated_input_takes_the_fast_path_and_is_updated_in_place(monkeypatch):
    exe = vtmlir.compile(UPDATE, donate=0, threads=1)
    assert exe.aliases == {0: 0}
    c, x = torch.zeros(4), torch.tensor([1.0, 2.0, 3.0, 4.0])
    exe(c.clone(), x)  # builds the fast path
    monkeypatch.setattr(type(exe), "_run_general", lambda self, args: pytest.fail("general path taken"))
    updated, doubled = exe(c, x)
    assert torch.equal(c, torch.tensor([0.0, 0.0, 1.0, 2.0]))  # in place
    assert updated is not c and updated.data_ptr() == c.data_ptr() and torch.equal(updated, c)
    assert torch.equal(doubled, 2 * x) and torch.equal(x, torch.tensor([1.0, 2.0, 3.0, 4.0]))


@pytest.mark.parametrize("case", ["same tensor", "overlapping view", "numpy", "strided"])
def test_donated_inputs_the_fast_path_cannot_take_go_the_general_way(case):
    """A donated input that overlaps another input is copied first (the other keeps its values); a
    numpy or strided donated input is converted -- the general path's results, bitwise."""
    exe = vtmlir.compile(UPDATE, donate=0, threads=1)
    base = torch.arange(8, dtype=torch.float32)
    if case == "same tensor":
        c, x = base[:4], base[:4]
    elif case == "overlapping view":
        c, x = base[:4], base[2:6]
    elif case == "numpy":
        c, x = np.zeros(4, np.float32), torch.ones(4)
    else:
        c, x = torch.zeros(4, 2)[:, 0], torch.ones(4)
    before_x = torch.as_tensor(x).clone()
    expected = torch.as_tensor(c).clone()
    expected[2:] = before_x[:2]
    updated, doubled = exe(c, x)
    assert torch.equal(updated, expected) and torch.equal(doubled, 2 * before_x)
    if case in ("same tensor", "overlapping view"):
        assert torch.equal(base, torch.arange(8, dtype=torch.float32))  # the copy was written, not `base`


def test_written_and_donated_input_of_a_module():
    """`acc.add_(x)` on a donated input: the new value is computed into an out-parameter (the
    product reads it too) and copied back into `acc` (the general path's write-back)."""

    class Accumulate(torch.nn.Module):
        def forward(self, acc, x):
            acc.add_(x)
            return acc * 2

    acc, x = torch.zeros(8), torch.ones(8)
    exe = vtmlir.compile(Accumulate(), acc.clone(), x, donate=(0,), threads=1)
    for step in range(1, 4):
        out = exe(acc, x)
        assert torch.equal(acc, torch.full((8,), float(step)))
        assert torch.equal(out, 2 * acc) and out.data_ptr() != acc.data_ptr()


def test_dynamic_compile_replay_recycles_released_results():
    """`vtmlir.compile(..., dynamic_shapes=...)` on a replayed shape: a held result keeps its
    memory, a dropped one's is taken back, every value right."""
    from torch.export import Dim

    x = torch.randn(BIG, BIG)
    n = Dim("n", min=2, max=4096)  # more points than compile prebuilds: the shape is built at its call
    dyn = vtmlir.compile(MulAdd(), x, x + 1, dynamic_shapes={"a": {0: n}, "b": {0: n}}, threads=1)
    y = torch.randn(BIG, BIG)
    for _ in range(3):  # the shape's second call records its replay
        dyn(x, y)
    first = dyn(x, y)
    second = dyn(y, y)  # `first` held
    assert first.data_ptr() != second.data_ptr()
    torch.testing.assert_close(first, x * y + x, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(second, y * y + y, rtol=1e-6, atol=1e-6)
    address = first.data_ptr()
    first.fill_(float("nan"))
    del first
    third = dyn(x, y)
    assert third.data_ptr() == address
    torch.testing.assert_close(third, x * y + x, rtol=1e-6, atol=1e-6)
