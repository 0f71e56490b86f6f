"""layout-hoist (VTensor §5.2 LHO): shared conversions at branch nodes, folded chains, same results."""

from __future__ import annotations

import pytest
import torch

import vtmlir
from vtmlir.frontend import as_module
from vtmlir.ir_utils import walk_ops
from vtmlir.layouts.resolve import conversion_units, functions
from vtmlir.models import get
from vtmlir.passes import get_pass, run_pipeline


@pytest.fixture(scope="module")
def bottleneck():
    model, inputs = get("resnet_bottleneck_block").build(batch=1, seed=0)
    text = str(vtmlir.import_torch(model, *inputs))
    return inputs, text, vtmlir.compile(as_module(text), opt_level=0)(*inputs)


def _units(module) -> list:
    with module.context:
        return [u for f in functions(module.operation) for u in conversion_units(f)]


def _run(module, *passes):
    """Run the passes in order; their reports."""
    out = []
    with module.context:
        for name, options in passes:
            out.append(get_pass(name)(**options).run(module.operation))
    assert module.operation.verify()
    return out


@pytest.mark.parametrize("target", ["paper-mkl", "cpu-nhwc"])
def test_hoist_shares_the_branch_conversions(bottleneck, target):
    """The block's input feeds the main path and the projection shortcut: naive resolution converts it
    once per use, LHO once. Every unit left converts a distinct (value, layout)."""
    _, text, _ = bottleneck
    module = as_module(text)
    resolve, hoist = _run(module, ("layout-resolve", {"target": target}), ("layout-hoist", {}))
    totals = hoist.totals()
    assert totals["conversions_before"] == resolve.totals()["conversions"]
    assert totals["conversions"] == len(_units(module)) < totals["conversions_before"]
    assert totals["shared"] == totals["conversions_before"] - totals["conversions"]
    keys = [(u.base, u.src, u.dst) for u in _units(module)]
    assert len(keys) == len(set(keys))
    # The same as resolving with one conversion per (value, layout) from the start.
    shared = as_module(text)
    (p,) = _run(shared, ("layout-resolve", {"target": target, "share": True}))
    assert p.totals()["conversions"] == totals["conversions"]
    # Idempotent.
    (again,) = _run(module, ("layout-hoist", {}))
    assert again.totals()["shared"] == 0


def test_hoisted_conversion_dominates_its_users(bottleneck):
    """Shared units sit right after the producer (here: the function's first ops, for its argument)."""
    _, text, _ = bottleneck
    module = as_module(text)
    _run(module, ("layout-resolve", {"target": "cpu-nhwc"}), ("layout-hoist", {}))
    func = functions(module.operation)[0]
    first = list(func.regions[0].blocks[0].operations)[0]
    assert first.operation.name == "layout.convert"
    assert first.operands[0] == func.regions[0].blocks[0].arguments[0]


def test_hoisted_pipeline_is_bitwise_identical(bottleneck):
    inputs, text, expected = bottleneck
    module = as_module(text)
    run_pipeline(module, "builtin.module(layout-resolve{target=cpu}, layout-hoist, layout-materialize)")
    assert not [op for op in walk_ops(module.operation) if op.name.split(".")[0] in ("vt", "layout")]
    assert torch.equal(vtmlir.compile(module, opt_level=0)(*inputs), expected)


def test_strip_after_hoist_restores_the_function(bottleneck):
    """layout-select-ilp strips hoisted units like any others (they are ordinary units)."""
    _, text, _ = bottleneck
    module = as_module(text)
    _run(module, ("layout-resolve", {"target": "paper-mkl"}), ("layout-hoist", {}),
         ("layout-select-ilp", {"target": "paper-mkl"}))
    direct = as_module(text)
    (ewo,) = _run(direct, ("layout-select-ilp", {"target": "paper-mkl"}))
    assert len(_units(module)) == len(_units(direct)) == ewo.totals()["conversions"]
