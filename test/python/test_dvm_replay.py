"""A shape's kernels replayed in one native call (`dvm.replay.ShapeReplay`, `@dvm_seq`), and the
native VM's Broadcast of a column (n == 1): bitwise what the walk of the plan / the numpy VM give."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch
from torch.export import Dim

import vtmlir
from vtmlir.dvm import Graph, Target, compile_graph
from vtmlir.dvm import kernel as kernel_module
from vtmlir.dvm.native import Sequence
from vtmlir.dvm.replay import ShapeReplay
from vtmlir.dvm.runner import DvmFunction
from vtmlir.models.bert import build_bert_encoder, dynamic_shapes

BATCH = Dim("batch", min=1, max=64)
RNG = np.random.default_rng(23)


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2 = torch.nn.Linear(32, 64), torch.nn.Linear(64, 16)

    def forward(self, x):
        return self.l2(torch.relu(self.l1(x)))


@pytest.fixture(scope="module")
def mlp():
    torch.manual_seed(0)
    model = MLP().eval()
    return model, vtmlir.import_torch(model, torch.randn(4, 32), dynamic_shapes={"x": {0: BATCH}})


def _bits(a):
    return np.ascontiguousarray(a).view(np.uint8)


def test_second_call_records_and_replays_bitwise(mlp):
    """The first call of a shape walks the plan, the second records it, later ones replay it: every
    result bitwise what a function that never replays gives, on new inputs each time."""
    model, m = mlp
    fn, walk = DvmFunction(m, native=True, target=Target(cores=1)), DvmFunction(m, native=True, replay=False,
                                                                               target=Target(cores=1))
    for batch in (1, 5, 33, 64):
        for call in range(4):
            x = RNG.standard_normal((batch, 32)).astype(np.float32)
            (got,), (want,) = fn(x), walk(x)
            assert np.array_equal(_bits(got), _bits(want)), (batch, call)
            assert isinstance(fn.replays.get(((batch, 32),)), ShapeReplay) == (call >= 1)
        np.testing.assert_allclose(got, model(torch.from_numpy(x)).detach().numpy(), rtol=1e-5, atol=1e-5)
    assert walk.replays == {}


def test_replayed_call_is_one_native_call(mlp, monkeypatch):
    """A replayed call runs every kernel of the shape in one `Sequence.run` (`@dvm_seq`): no kernel
    is launched on its own, and nothing is compiled or looked up."""
    _, m = mlp
    fn = DvmFunction(m, native=True, target=Target(cores=1))
    x = RNG.standard_normal((7, 32)).astype(np.float32)
    fn(x), fn(x)  # walk, record
    runs = []
    original = Sequence.run
    monkeypatch.setattr(Sequence, "run", lambda self: (runs.append(self), original(self))[1])

    def refuse(*args, **kwargs):
        raise AssertionError("a kernel launched on its own")

    monkeypatch.setattr(kernel_module._NativeCall, "__call__", refuse)
    monkeypatch.setattr(kernel_module.CompiledKernel, "__call__", refuse)
    before = fn.compile_seconds
    (out,) = fn(x)
    assert len(runs) == 1 and fn.compile_seconds == before
    assert len(fn.replays[((7, 32),)].sequence.kernels) == 2  # both kernels of the MLP
    (again,) = fn(x)
    assert len(runs) == 2 and np.array_equal(_bits(out), _bits(again))
    assert out is not again and not np.shares_memory(out, again)  # fresh results each call


def test_compile_dynamic_runs_torch_tensors_through_the_replay(mlp):
    """`vtmlir.compile(..., dynamic_shapes=...)`: torch tensors go to the replay without numpy
    conversions (their data pointers); results bitwise those of the walk, fresh tensors."""
    torch.manual_seed(0)
    model = MLP().eval()
    dyn = vtmlir.compile(model, torch.randn(4, 32), dynamic_shapes={"x": {0: Dim("batch", min=1, max=8)}},
                         threads=1)
    walk = DvmFunction(dyn.graph, dyn.function.fusion.name, native=True, replay=False, target=Target(cores=1))
    for batch in (3, 8):
        x = torch.randn(batch, 32)
        outs = [dyn(x) for _ in range(4)]
        (want,) = walk(x.numpy())
        assert isinstance(dyn.function.replays[((batch, 32),)], ShapeReplay)
        for out in outs:
            assert isinstance(out, torch.Tensor) and np.array_equal(_bits(out.numpy()), _bits(want))
        assert outs[-1].data_ptr() != outs[-2].data_ptr()
        # a view that is not contiguous takes the converting path, with the same result
        wide = torch.randn(batch, 64)[:, ::2]
        assert np.array_equal(_bits(dyn(wide).numpy()), _bits(walk(np.ascontiguousarray(wide.numpy()))[0]))
        # another thread's call walks the plan (the replay's tables are the recording thread's)
        other = {}
        thread = threading.Thread(target=lambda: other.setdefault("out", dyn(x)))
        thread.start()
        thread.join()
        assert np.array_equal(_bits(other["out"].numpy()), _bits(want))


def test_other_threads_walk_the_plan(mlp):
    """The replay's tables are the recording thread's: another thread's call walks the plan (and
    gets the same bits)."""
    _, m = mlp
    fn = DvmFunction(m, native=True, target=Target(cores=1))
    x = RNG.standard_normal((9, 32)).astype(np.float32)
    fn(x), fn(x)
    (here,) = fn(x)
    result = {}
    thread = threading.Thread(target=lambda: result.setdefault("out", fn(x)[0]))
    thread.start()
    thread.join()
    assert np.array_equal(_bits(result["out"]), _bits(here))


def test_data_computed_by_glue_is_not_replayed():
    """A BERT layer's batch_matmul glue runs its per-slice kernels from Python and gives a fresh
    array each call: nothing locates it, so the shape is not replayed (and stays correct)."""
    model, (x,) = build_bert_encoder(batch=2, seq=8, layers=1, hidden=32, heads=2, ffn=64)
    m = vtmlir.import_torch(model, x, dynamic_shapes=dynamic_shapes())
    fn = DvmFunction(m, native=True, target=Target(cores=1))
    xb = RNG.standard_normal((2, 8, 32)).astype(np.float32)
    outs = [fn(xb)[0] for _ in range(3)]
    assert fn.replays[((2, 8, 32),)] is False
    assert all(np.array_equal(_bits(o), _bits(outs[0])) for o in outs)


def test_aliased_arguments_are_not_replayed():
    """The same array passed as two arguments cannot be told apart by address: not replayed."""

    class Add(torch.nn.Module):
        def forward(self, x, y):
            return x * 2 + y

    m = vtmlir.import_torch(Add(), torch.randn(4, 8), torch.randn(4, 8),
                            dynamic_shapes={"x": {0: BATCH}, "y": {0: BATCH}})
    fn = DvmFunction(m, native=True, target=Target(cores=1))
    x = RNG.standard_normal((4, 8)).astype(np.float32)
    fn(x, x), fn(x, x)
    assert fn.replays[((4, 8), (4, 8))] is False
    y = RNG.standard_normal((4, 8)).astype(np.float32)
    np.testing.assert_array_equal(fn(x, y)[0], x * 2 + y)
    x, y = x[:3].copy(), y[:3].copy()  # distinct arguments: replayed
    fn(x, y), fn(x, y)
    assert isinstance(fn.replays[((3, 8), (3, 8))], ShapeReplay)
    np.testing.assert_array_equal(fn(x, y)[0], x * 2 + y)
    np.testing.assert_array_equal(fn(y, x)[0], y * 2 + x)


@pytest.mark.parametrize("shape,operand", [((5, 37), (5, 1)), ((1, 300), (1, 1)), ((6, 4, 3), (6, 1, 3)),
                                           ((3, 70, 1), (3, 1, 1))])
def test_broadcast_native_bitwise(shape, operand):
    """Broadcast `[m, 1, n] -> [m, size, n]`, the column (n == 1) case filled in one loop per run:
    bitwise the numpy VM, for every element width."""
    for dtype in (np.float32, np.float64, np.float16):
        g = Graph("bc")
        a, b = g.input(len(shape), dtype), g.input(len(shape), dtype)
        g.output(a + b)
        x = RNG.standard_normal(shape).astype(dtype)
        y = RNG.standard_normal(operand).astype(dtype)
        k = compile_graph(g, [shape, operand], Target(cores=1))
        assert any(ins.op.name == "BROADCAST" for ins in k.program.body)
        (nat,), (ref,) = k(x, y, native=True), k(x, y)
        assert np.array_equal(_bits(nat), _bits(ref)), dtype
