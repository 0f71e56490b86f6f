"""layout-resolve / layout-select-ilp on imported zoo models, and the kernel convention tables."""

from __future__ import annotations

import pytest

import vtmlir
from vtmlir.dialects import layout as layout_dialect
from vtmlir.dialects.memory_layout import Layout
from vtmlir.frontend import as_module
from vtmlir.ir_utils import walk_ops
from vtmlir.layouts import (
    KernelConvention,
    Target,
    Variant,
    get_target,
    register_target,
    resolve_function,
    strip_conversions,
)
from vtmlir.layouts.conventions import KernelSite, elementwise_roles
from vtmlir.layouts.resolve import apply_resolution, functions
from vtmlir.models import get
from vtmlir.passes import get_pass, run_pipeline


@pytest.fixture(scope="module")
def imported():
    """Zoo ResNet blocks at linalg-on-tensors level, as text (re-parsed per test)."""
    out = {}
    for name in ("resnet_basic_block", "resnet_bottleneck_block"):
        model, inputs = get(name).build(batch=1)
        out[name] = str(vtmlir.import_torch(model, *inputs))
    return out


def _ops(module, name):
    return [op for op in walk_ops(module.operation, name)]


def test_passes_are_registered():
    assert get_pass("layout-resolve").name == "layout-resolve"
    assert get_pass("layout-select-ilp").name == "layout-select-ilp"


@pytest.mark.parametrize("name", ["resnet_basic_block", "resnet_bottleneck_block"])
def test_resolve_imported_block(imported, name):
    module = as_module(imported[name])
    with module.context:
        p = get_pass("layout-resolve")()
        result = p.run(module.operation)
        assert module.operation.verify()
        convs = _ops(module, "linalg.conv_2d_nchw_fchw")
        assert convs
        for conv in convs:
            produced = layout_dialect.produced_layouts(conv)
            required = layout_dialect.required_layouts(conv)
            assert len(required) == len(conv.operands)
            # Every zoo conv has channels divisible by 16 or 8: a blocked variant was chosen.
            assert produced[0].blocks and produced[0].blocks[0][0] == 1
        report = result.functions[0]
        converts = _ops(module, "layout.convert")
        assert len(converts) == report.conversions == report.naive_conversions > 0
        # The function's inputs arrive and its results leave row-major.
        ret = _ops(module, "func.return")[0]
        assert all(l.is_identity for l in layout_dialect.required_layouts(ret))


@pytest.mark.parametrize("name", ["resnet_basic_block", "resnet_bottleneck_block"])
@pytest.mark.parametrize("target", ["cpu", "paper-mkl"])
def test_select_ilp_never_worse_than_resolution(imported, name, target):
    module = as_module(imported[name])
    with module.context:
        p = get_pass("layout-select-ilp")(target=target)
        r = p.run(module.operation).functions[0]
        assert module.operation.verify()
        assert r.bytes <= r.naive_bytes and r.conversions <= r.naive_conversions
        assert r.ilp_status == "Optimal" and r.ilp_variables > 0 and r.ilp_constraints > 0
        assert len(_ops(module, "layout.convert")) == r.conversions
        if target == "paper-mkl":
            assert r.conversions < r.naive_conversions  # EWO removes the NHWC round trips


def test_resolution_round_trips(imported):
    """Conversion units compute the identity: stripping them gives back the original IR."""
    text = imported["resnet_bottleneck_block"]
    module = as_module(text)
    reference = as_module(text)
    with module.context:
        func = functions(module.operation)[0]
        res = resolve_function(func, get_target("paper-mkl"))
        expected = len(res.conversions())  # a Resolution describes the IR before it is applied
        inserted = apply_resolution(res)
        assert inserted == expected > 0
        assert strip_conversions(func) == inserted
    strip = lambda m: "\n".join(l for l in str(m).splitlines() if "dense_resource" not in l
                                and not l.strip().startswith("torch_tensor"))
    assert strip(module) == strip(reference)


def test_pipeline_reruns_are_stable(imported):
    module = as_module(imported["resnet_basic_block"])
    run_pipeline(module, "builtin.module(layout-resolve, layout-select-ilp, layout-select-ilp)")
    once = as_module(imported["resnet_basic_block"])
    run_pipeline(once, "builtin.module(layout-select-ilp)")
    assert len(_ops(module, "layout.convert")) == len(_ops(once, "layout.convert"))


CONV = """
func.func @f(%x: tensor<1x{c}x8x8x{t}>) -> tensor<1x16x8x8x{t}> {{
  %w = arith.constant dense<1.0> : tensor<16x{c}x1x1x{t}>
  %zero = arith.constant 0.0 : {t}
  %e = tensor.empty() : tensor<1x16x8x8x{t}>
  %init = linalg.fill ins(%zero : {t}) outs(%e : tensor<1x16x8x8x{t}>) -> tensor<1x16x8x8x{t}>
  %c = linalg.conv_2d_nchw_fchw {{dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}}
      ins(%x, %w : tensor<1x{c}x8x8x{t}>, tensor<16x{c}x1x1x{t}>) outs(%init : tensor<1x16x8x8x{t}>) -> tensor<1x16x8x8x{t}>
  return %c : tensor<1x16x8x8x{t}>
}}
"""


def _conv_variant(target, c=16, t="f32"):
    module = as_module(CONV.format(c=c, t=t))
    with module.context:
        res = resolve_function(functions(module.operation)[0], get_target(target))
        return [d.variant for op, d in res.entries if op.name == "linalg.conv_2d_nchw_fchw"][0]


def test_priorities_and_guidelines():
    assert _conv_variant("cpu", c=16) == "nChw16c"
    assert _conv_variant("cpu", c=8) == "nChw8c"
    assert _conv_variant("cpu", c=3) == "nhwc"
    assert _conv_variant("cuda", c=16) == "nchw"
    assert _conv_variant("cuda", c=16, t="f16") == "nhwc"  # the cuDNN guideline: tensor cores


def test_a_new_target_is_one_entry():
    register_target(Target("test-nhwc-only", "every conv in NHWC", (
        KernelConvention("conv2d", ("linalg.conv_2d_nchw_fchw",), operand_dims=("NCHW", "OIHW", "NCHW"),
                         variants=(Variant("nhwc", ("NHWC", "HWIO", "NHWC")),)),)))
    module = as_module(CONV.format(c=16, t="f32"))
    run_pipeline(module, "builtin.module(layout-resolve{target=test-nhwc-only})")
    converts = _ops(module, "layout.convert")
    dsts = [Layout.from_attr(op.attributes["dst_layout"]).name() for op in converts]
    assert dsts == ["NHWC", "NCHW"]


def test_elementwise_roles():
    text = """
#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#bc = affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>
#tr = affine_map<(d0, d1, d2, d3) -> (d0, d2, d1, d3)>
func.func @f(%a: tensor<1x4x4x4xf32>, %b: tensor<4x1x1xf32>) -> (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) {
  %e = tensor.empty() : tensor<1x4x4x4xf32>
  %0 = linalg.generic {indexing_maps = [#id, #bc, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%a, %b : tensor<1x4x4x4xf32>, tensor<4x1x1xf32>) outs(%e : tensor<1x4x4x4xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %s = arith.addf %i, %j : f32
    linalg.yield %s : f32
  } -> tensor<1x4x4x4xf32>
  %1 = linalg.generic {indexing_maps = [#tr, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%a : tensor<1x4x4x4xf32>) outs(%e : tensor<1x4x4x4xf32>) {
  ^bb0(%i: f32, %o: f32):
    linalg.yield %i : f32
  } -> tensor<1x4x4x4xf32>
  return %0, %1 : tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>
}
"""
    module = as_module(text)
    with module.context:
        generics = _ops(module, "linalg.generic")
        assert elementwise_roles(KernelSite(generics[0])) == ["aligned", "broadcast", "aligned"]
        assert elementwise_roles(KernelSite(generics[1])) is None  # a transpose is not ANY
        cpu = get_target("cpu")
        assert cpu.convention_for(generics[0]).name == "elementwise"
        assert cpu.convention_for(generics[1]).name == "default"
        assert get_target("paper-mkl").convention_for(generics[0]).name == "eigen_broadcast_elementwise"


def test_unknown_target_is_an_error():
    module = as_module(CONV.format(c=16, t="f32"))
    with pytest.raises(vtmlir.VtmlirError, match="unknown layout target 'nope'"):
        run_pipeline(module, "builtin.module(layout-resolve{target=nope})")
