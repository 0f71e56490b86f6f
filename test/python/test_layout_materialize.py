"""layout-materialize: physical layouts made real, results bitwise those of the unoptimised pipeline."""

from __future__ import annotations

import pytest
import torch

import vtmlir
from vtmlir.errors import VtmlirError
from vtmlir.frontend import as_module
from vtmlir.ir_utils import walk_ops
from vtmlir.models import get
from vtmlir.passes import get_pass, run_pipeline

BLOCKS = ("conv_bn_relu_residual", "resnet_basic_block", "resnet_bottleneck_block")


@pytest.fixture(scope="module")
def blocks():
    """Zoo ResNet blocks: inputs, imported text and the unoptimised compiled outputs."""
    out = {}
    for name in BLOCKS:
        model, inputs = get(name).build(batch=1, seed=0)
        text = str(vtmlir.import_torch(model, *inputs))
        out[name] = (inputs, text, vtmlir.compile(as_module(text))(*inputs))
    return out


def _materialized(text: str, target: str):
    module = as_module(text)
    run_pipeline(module, f"builtin.module(layout-select-ilp{{target={target}}}, layout-materialize)")
    return module


def test_pass_is_registered():
    assert get_pass("layout-materialize").name == "layout-materialize"


@pytest.mark.parametrize("name", BLOCKS)
def test_nhwc_blocks_are_bitwise_identical(blocks, name):
    inputs, text, expected = blocks[name]
    module = _materialized(text, "cpu-nhwc")
    assert not [op for op in walk_ops(module.operation) if op.name.split(".")[0] in ("vt", "layout")]
    assert "layout." not in str(module)
    transposes = list(walk_ops(module.operation, "linalg.transpose"))
    assert transposes  # conversions and weight re-layouts became transposes
    # Convolutions now read NHWC activations: a generic over the conv's 7 loops whose input map ends in c.
    assert "(d0, d2 + d5, d3 + d6, d4)" in str(module) or "(d0, d2 * 2 + d5, d3 * 2 + d6, d4)" in str(module)
    got = vtmlir.compile(module)(*inputs)
    assert torch.equal(got, expected)


def test_nchw_target_needs_no_transpose_and_is_bitwise(blocks):
    inputs, text, expected = blocks["resnet_basic_block"]
    module = _materialized(text, "cuda")
    assert not list(walk_ops(module.operation, "linalg.transpose"))  # f32 convs stay NCHW on cuda
    assert "layout." not in str(module)
    assert torch.equal(vtmlir.compile(module)(*inputs), expected)


def test_blocked_layouts_are_refused_by_name(blocks):
    _, text, _ = blocks["resnet_basic_block"]
    with pytest.raises(VtmlirError, match=r"cannot materialise the blocked layout NCHW(16|8)c"):
        _materialized(text, "cpu")


def test_unresolved_module_is_left_alone(blocks):
    """Without layout attributes there is nothing to materialise: only the generalisation runs."""
    inputs, text, expected = blocks["conv_bn_relu_residual"]
    module = as_module(text)
    run_pipeline(module, "builtin.module(layout-materialize)")
    assert not list(walk_ops(module.operation, "linalg.transpose"))
    assert torch.equal(vtmlir.compile(module)(*inputs), expected)


def test_compile_takes_the_layout_pipeline(blocks):
    """`vtmlir.compile(..., pipeline=...)` runs selection and materialisation before code generation."""
    inputs, text, expected = blocks["conv_bn_relu_residual"]
    exe = vtmlir.compile(as_module(text), pipeline="layout-select-ilp{target=cpu-nhwc}, layout-materialize")
    assert torch.equal(exe(*inputs), expected)
