"""`codegen-outline-kernels`: a very large function's kernels as noinline functions of their own,
bitwise the same results; a function below the threshold untouched."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch_mlir import ir

import vtmlir
from vtmlir.codegen import outline_kernels
from vtmlir.context import make_context
from vtmlir.ir_utils import walk_ops
from vtmlir.models import ZOO
from vtmlir.passes import run_pipeline


def _build(name: str):
    model, inputs = ZOO[name].build(batch=1, seed=0)
    return model.eval(), tuple(inputs)


@pytest.mark.parametrize("threads", [1, 2])
def test_outlined_kernels_compute_bitwise_the_inlined_ones(monkeypatch, threads):
    model, inputs = _build("resnet_basic_block")
    inlined = vtmlir.compile(model, *inputs, threads=threads)
    monkeypatch.setattr(outline_kernels, "DEFAULT_MIN_OPS", 0)
    outlined = vtmlir.compile(model, *inputs, threads=threads)
    with torch.no_grad():
        expected = model(*inputs).numpy()
    got = np.asarray(torch.as_tensor(outlined(*inputs)))
    assert np.array_equal(got, np.asarray(torch.as_tensor(inlined(*inputs))))
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def _loops_stage(threads: int = 1) -> str:
    model, inputs = _build("mlp")
    return vtmlir.compile(model, *inputs, threads=threads).stages["loops"]


def _functions(module: ir.Module) -> dict[str, ir.Operation]:
    return {ir.StringAttr(f.attributes["sym_name"]).value: f for f in walk_ops(module.operation, "func.func")}


def test_each_kernel_becomes_a_noinline_function_called_in_its_place():
    with make_context():
        module = ir.Module.parse(_loops_stage())
        (name,) = [n for n, f in _functions(module).items() if len(f.regions[0].blocks)]
        before = [op.operation for op in _functions(module)[name].regions[0].blocks[0].operations
                  if len(op.operation.regions) and not len(op.operation.results)]
        assert before, "the model's kernels are loop nests in its function"
        run_pipeline(module, "builtin.module(codegen-outline-kernels{min-ops=0})")
        functions = _functions(module)
        kernels = {n: f for n, f in functions.items() if n != name}
        assert len(kernels) == len(before)
        for fn in kernels.values():
            assert ir.StringAttr(fn.attributes["sym_visibility"]).value == "private"
            assert [ir.StringAttr(a).value for a in ir.ArrayAttr(fn.attributes["passthrough"])] == ["noinline"]
        main_body = functions[name].regions[0].blocks[0]
        calls = [op.operation for op in main_body.operations if op.operation.name == "func.call"]
        assert sorted(ir.FlatSymbolRefAttr(c.attributes["callee"]).value for c in calls) == sorted(kernels)
        # The kernels' constants and views are cloned into them (their offsets and bounds stay
        # static); buffers and computed values are passed.
        for call in calls:
            for value in call.operands:
                owner = value.owner
                if not isinstance(owner, ir.Block):
                    assert owner.operation.name not in outline_kernels._CLONED
        assert not [op for op in main_body.operations
                    if len(op.operation.regions) and not len(op.operation.results)]
        module.operation.verify()


def test_a_function_below_the_threshold_is_left_as_it_is():
    with make_context():
        module = ir.Module.parse(_loops_stage())
        before = str(module)
        run_pipeline(module, "builtin.module(codegen-outline-kernels)")
        assert len(_functions(module)) == len(_functions(ir.Module.parse(before)))
        assert str(module) == before
