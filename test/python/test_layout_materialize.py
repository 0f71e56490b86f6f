"""layout-materialize: physical layouts made real, results bitwise those of the unoptimised pipeline."""

from __future__ import annotations

import pytest
import torch

import vtmlir
from vtmlir.dialects import layout as layout_dialect
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
        out[name] = (inputs, text, vtmlir.compile(as_module(text), opt_level=0)(*inputs))
    return out


def _materialized(text: str, target: str, report: list | None = None):
    module = as_module(text)
    run_pipeline(module, f"builtin.module(layout-select-ilp{{target={target}}})")
    p = get_pass("layout-materialize")()
    result = p.run(module.operation)
    if report is not None:
        report.append(result.totals())
    return module


def test_pass_is_registered():
    assert get_pass("layout-materialize").name == "layout-materialize"


@pytest.mark.parametrize("name", BLOCKS)
def test_nhwc_blocks_are_bitwise_identical(blocks, name):
    inputs, text, expected = blocks[name]
    report = []
    module = _materialized(text, "cpu-nhwc", report)
    assert not [op for op in walk_ops(module.operation) if op.name.split(".")[0] in ("vt", "layout")]
    assert "layout." not in str(module)
    transposes = list(walk_ops(module.operation, "linalg.transpose"))
    # Only the two activation conversions (NCHW argument -> NHWC, NHWC result -> NCHW) run, as
    # copies or as free views (views=auto): every weight was laid out (HWIO) at compile time, as a
    # new constant.
    assert report[0]["conversions"] == 2 and report[0]["constants_at_run_time"] == 0
    assert len(transposes) == report[0]["copies"]
    sources = [t.operands[0].owner for t in transposes]
    assert all(not hasattr(o, "operation") or o.operation.name != "arith.constant" for o in sources)
    # Convolutions now read NHWC activations: a generic over the conv's 7 loops, reordered to
    # (n, oh, ow | c, kh, kw | f), whose input map ends in c.
    assert "(d0, d1 + d4, d2 + d5, d3)" in str(module) or "(d0, d1 * 2 + d4, d2 * 2 + d5, d3)" in str(module)
    got = vtmlir.compile(module, opt_level=0)(*inputs)
    assert torch.equal(got, expected)


def test_nchw_target_needs_no_transpose_and_is_bitwise(blocks):
    inputs, text, expected = blocks["resnet_basic_block"]
    module = _materialized(text, "cuda")
    assert not list(walk_ops(module.operation, "linalg.transpose"))  # f32 convs stay NCHW on cuda
    assert "layout." not in str(module)
    assert torch.equal(vtmlir.compile(module, opt_level=0)(*inputs), expected)


@pytest.mark.parametrize("name,target", [(name, "cpu") for name in BLOCKS]
                         + [("resnet_bottleneck_block", "paper-mkl")])
def test_blocked_blocks_are_bitwise_identical(blocks, name, target):
    """nChw16c / nChw8c activations and OIhw16i16o weights: kernels run with split loops on 5-D
    arrays, conversions are expand_shape + transpose; results are bitwise the unoptimised ones."""
    inputs, text, expected = blocks[name]
    module = _materialized(text, target)
    assert "layout." not in str(module)
    generics = list(walk_ops(module.operation, "linalg.generic"))
    five_d = [g for g in generics if any(len(getattr(r.type, "shape", ())) == 5 for r in g.results)]
    assert five_d, "no kernel runs on a blocked (5-D) array"
    assert list(walk_ops(module.operation, "tensor.expand_shape"))
    # Weights were blocked at compile time: no transpose reads a constant.
    for t in walk_ops(module.operation, "linalg.transpose"):
        owner = t.operands[0].owner
        assert not hasattr(owner, "operation") or owner.operation.name != "arith.constant"
    assert torch.equal(vtmlir.compile(module, opt_level=0)(*inputs), expected)


def test_logical_loop_order_is_bitwise_identical_too(blocks):
    """`loop-order=logical` keeps every kernel's original loop nest (split loops in place)."""
    inputs, text, expected = blocks["resnet_bottleneck_block"]
    module = as_module(text)
    run_pipeline(module, "builtin.module(layout-select-ilp{target=cpu}, layout-materialize{loop-order=logical})")
    assert torch.equal(vtmlir.compile(module, opt_level=0)(*inputs), expected)


def test_blocked_pad_of_channels_is_refused_by_name():
    text = """
    func.func @f(%x: tensor<1x16x4x4xf32>) -> tensor<1x32x4x4xf32> {
      %zero = arith.constant 0.0 : f32
      %p = tensor.pad %x low[0, 0, 0, 0] high[0, 16, 0, 0] {
      ^bb0(%i: index, %j: index, %k: index, %l: index):
        tensor.yield %zero : f32
      } {layout.required = [{perm = array<i64: 0, 1, 2, 3>, block_dims = array<i64: 1>, block_sizes = array<i64: 16>}],
         layout.produced = [{perm = array<i64: 0, 1, 2, 3>, block_dims = array<i64: 1>, block_sizes = array<i64: 16>}]}
         : tensor<1x16x4x4xf32> to tensor<1x32x4x4xf32>
      return %p : tensor<1x32x4x4xf32>
    }"""
    with pytest.raises(VtmlirError, match=r"cannot materialise a tensor.pad of a blocked dim in NCHW16c"):
        run_pipeline(as_module(text), "builtin.module(layout-materialize)")


def test_unresolved_module_is_left_alone(blocks):
    """Without layout attributes there is nothing to materialise: only the generalisation runs."""
    inputs, text, expected = blocks["conv_bn_relu_residual"]
    module = as_module(text)
    run_pipeline(module, "builtin.module(layout-materialize)")
    assert not list(walk_ops(module.operation, "linalg.transpose"))
    assert torch.equal(vtmlir.compile(module, opt_level=0)(*inputs), expected)


def test_compile_takes_the_layout_pipeline(blocks):
    """`vtmlir.compile(..., pipeline=...)` runs selection and materialisation before code generation."""
    inputs, text, expected = blocks["conv_bn_relu_residual"]
    exe = vtmlir.compile(as_module(text), pipeline="layout-select-ilp{target=cpu-nhwc}, layout-materialize")
    assert torch.equal(exe(*inputs), expected)


@pytest.mark.parametrize("name,dims", [("NCHW16c", "NCHW"), ("NHWC", "NCHW"), ("OIhw16i16o", "OIHW"),
                                       ("HWIO", "OIHW"), ("OIhw4i16o4i", "OIHW")])
def test_physical_array_puts_each_element_where_the_layout_says(name, dims):
    """`Layout.physical_array` (compile-time re-layout of constants) agrees with `Layout.apply`."""
    import itertools

    import numpy as np

    from vtmlir.dialects.memory_layout import Layout

    layout = Layout.from_name(name, dims)
    shape = (32, 64, 3, 2)
    logical = np.arange(np.prod(shape)).reshape(shape)
    physical = layout.physical_array(logical)
    assert list(physical.shape) == layout.physical_shape(shape)
    for index in itertools.product(*[range(s) for s in shape]):
        assert physical[layout.apply(index)] == logical[index]


class _ConvInterpolateConv(torch.nn.Module):
    """MobileViT's unfold at an odd size: a convolution's output resized by interpolation (a gather:
    `tensor.extract` in the body of a generic) and convolved again."""

    def __init__(self, mode: str):
        super().__init__()
        self.c1, self.c2 = torch.nn.Conv2d(24, 32, 1), torch.nn.Conv2d(32, 24, 3, padding=1)
        self.mode = mode

    def forward(self, x):
        size = (2 * x.shape[2], 2 * x.shape[3])
        return self.c2(torch.nn.functional.interpolate(self.c1(x), size=size, mode=self.mode))


@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
@pytest.mark.parametrize("size", [1, 3])
def test_a_value_read_inside_a_kernel_body_stays_row_major(mode, size):
    """The interpolation reads the first convolution's output by logical index inside its body, where
    no conversion can go: that output stays row-major. The time ILP laid it out otherwise and the
    interpolation read garbage (1e22 and more; transformers' MobileViT was 4.5e-4 off)."""
    torch.manual_seed(0)
    model, x = _ConvInterpolateConv(mode).eval(), torch.randn(2, 24, size, size)
    module = vtmlir.import_torch(model, x)
    run_pipeline(module, "builtin.module(layout-select-ilp{target=cpu cost=time})")
    conv = next(op for op in walk_ops(module.operation, "linalg.conv_2d_nchw_fchw")
                if any(u.owner.operation.parent.name != "func.func" for u in op.results[0].uses))
    assert all(layout.is_identity for layout in layout_dialect.produced_layouts(conv) or [])
    plain = vtmlir.compile(model, x, opt_level=0)(x)
    laid_out = vtmlir.compile(model, x, pipeline="layout-select-ilp{target=cpu cost=time},layout-materialize")(x)
    assert torch.equal(plain, laid_out)
