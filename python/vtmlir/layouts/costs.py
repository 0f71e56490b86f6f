"""The time model `layout-select-ilp{cost=time}` minimises (docs/layouts.md "Cost model").

What a layout costs on vtmlir's CPU code generator (docs/codegen.md), as an analytical model whose
constants are calibrated with `benchmarks/layout_costs.py` on the development machine (thread CPU time
of the profiled kernels, 1 thread):

- a **convolution** (or depthwise convolution, or pooling) in a layout costs
  `fixed + taps·per_tap + MACs·per_mac / lanes + gathered·per_gather + weights·per_weight`: the
  codegen vectorises along the output's contiguous dimension, so what fills the 16 lanes of a vector
  decides the speed — the output pixels in NCHW (the im2col contraction's N; a row of OW for a
  depthwise one, and a stride along it keeps scalar loops), the channel block in nChw16c / nChw8c,
  the output channels in NHWC. `lanes` is the share of 16-lane vectors those elements fill (a
  dimension under 16 wide fills a fraction, a single element is scalar loops); a 1x1 stride-1
  convolution of a 1x1 image is a Linear layer over the batch in NCHW, vectors along the features
  and one of the register tile's 12 rows per image; `per_tap` charges
  the per-tap calls, `per_gather` NCHW's im2col copies, `per_weight` the per-tap layouts' filter
  streaming; kernels in a layout other than NCHW are charged `1 + UNCERTAINTY` times that;
- a **conversion** is the transposing copy `layout-materialize` emits: `fixed + bytes·per_byte·factor`
  with `factor` its measured cost over a plain copy of the same bytes, by direction and size.

Units: nanoseconds. The ILP compares sums of these, so only their ratios matter: a graph whose NCHW
input and output must be converted around a few small convolutions keeps NCHW, a network whose NCHW
kernels leave most lanes idle (convolutions of 1x1 or 2x2 images) is laid out.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch_mlir import ir

from ..dialects.memory_layout import Layout
from ..ir_types import shaped_bytes

VECTOR_LANES = 16  # f32 lanes of the widest vector the codegen uses (AVX-512; docs/codegen.md)
REGISTER_ROWS = 12  # rows of a contraction's register tile (AVX-512: 12 x 16; docs/codegen.md)


@dataclass(frozen=True)
class ConvShape:
    """What the model needs of a convolution-like kernel: input channels, output channels, output
    height and width (per image), filter taps (kh·kw), stride, groups (= channels: depthwise; 0:
    pooling), batch."""

    channels: int
    filters: int
    out_h: int
    out_w: int
    taps: int
    stride: int = 1
    groups: int = 1
    batch: int = 1

    @property
    def depthwise(self) -> bool:
        return self.groups != 1

    @property
    def macs(self) -> int:
        per_group = self.channels // self.groups if self.groups > 0 else 1
        return self.batch * self.filters * self.out_h * self.out_w * self.taps * per_group

    @property
    def linear(self) -> bool:
        """A 1x1 stride-1 convolution of a 1x1 image: the codegen runs it as a Linear layer over
        the batch, vectors along the output features (docs/codegen.md)."""
        return self.groups == 1 and self.taps == 1 and self.stride == 1 and self.out_h * self.out_w == 1


@dataclass(frozen=True)
class KernelCoefficients:
    fixed: float          # ns per kernel (its pad and fill included)
    per_tap: float        # ns per filter tap (a contraction call per tap; NCHW's im2col copy per tap)
    per_mac: float        # ns per multiply-add with all 16 lanes busy
    per_gather: float = 0.0  # ns per element NCHW's im2col gathers (C/g·taps·OH·OW; not a 1x1 stride-1 conv)
    per_weight: float = 0.0  # ns per filter element (streamed once per call)


# Calibrated with benchmarks/layout_costs.py (2026-11-26, the shared 2-core AVX-512 machine at load
# 3-7, 1 thread, thread CPU time of the kernels, median of 15 calls), on the code generator that runs
# a 1x1 convolution of a 1x1 image as a Linear: non-negative least squares on relative error over
# 36 convolutions (8-2048 channels, 1x1-64x64 images, 1x1 and 3x3, stride 1 and 2) and 6 depthwise
# ones; conversions from the same builds' own conversion kernels (medians of ns per byte over
# tensors of 16 KiB and more). docs/layouts.md "Cost model" gives the fit.
# nChw16c and nChw8c re-fitted 2026-11-27 after the blocked convolutions' channel blocks moved
# inside the register tile (8 rows x 2 output blocks, ee6a3ba; NCHW's and NHWC's code unchanged,
# checked on the generated LLVM IR): `layout_costs.py --fit nChw16c,nChw8c --anchor` over the
# medians of 3 runs (--repeat 15, load 3-5), each kernel's time taken relative to its own NCHW
# kernel's in the same run times NCHW's prediction: the unchanged NCHW kernels took 1.16x their
# predicted time at the median that day, and 1.7-2.4x on the filter-bound ones (1x1 images,
# 512-2048 channels), so the raw times would have charged the blocked layouts the machine's state
# (the raw fit kept 13 fewer nChw16c convolutions in ResNet-50: 1.06x its time). Predicted /
# anchored time: nChw16c median 0.97, 90 % within 0.37-1.35; nChw8c 0.92, 0.51-1.31.
CONV = {
    "nchw": KernelCoefficients(738.7, 0.0, 0.01412, per_gather=0.2067),
    "nChw16c": KernelCoefficients(808.6, 106.7, 0.01421, per_weight=0.05834),
    "nChw8c": KernelCoefficients(0.0, 146.9, 0.01266, per_weight=0.07098),
    "nhwc": KernelCoefficients(0.0, 95.54, 0.0198, per_gather=0.004239, per_weight=0.1168),
}
DEPTHWISE = {   # depthwise convolutions and pooling (taps unrolled)
    "nchw": KernelCoefficients(2637.0, 0.0, 0.005307),
    "nChw16c": KernelCoefficients(699.1, 0.0, 0.008868),
    "nChw8c": KernelCoefficients(569.5, 0.0, 0.01937),
    "nhwc": KernelCoefficients(676.9, 0.0, 0.0384),
}
# The model's error: 90 % of the 161 calibrated kernels fall within 0.69-1.24 of their prediction,
# so a kernel is charged its prediction times (1 + UNCERTAINTY) in any layout but row-major: a
# layout is chosen only where it wins even when its kernels run that much slower than predicted
# (the NCHW kernels are what the graph already runs; keeping them risks nothing).
UNCERTAINTY = 0.35
# A plain copy: fixed + bytes·per_byte; a conversion: the same times its factor over a plain copy
# of the same bytes -- into a layout from NCHW (a strided read gathering each pixel's channels),
# or from it back to NCHW -- by size: from LARGE_TENSOR_BYTES on (beyond the 1 MiB L2 once read
# and written) the factors measured in the networks' own conversion kernels. A conversion of a
# 1x1 image (H·W = 1) is a reshape: free.
COPY_FIXED_NS, COPY_NS_PER_BYTE = 112.0, 0.0181
CONVERT_INTO = {"nChw16c": 4.5, "nChw8c": 3.6, "nhwc": 4.5, "other": 4.5}
CONVERT_FROM = {"nChw16c": 2.1, "nChw8c": 1.4, "nhwc": 1.8, "other": 4.5}
LARGE_TENSOR_BYTES = 256 * 1024
CONVERT_INTO_LARGE, CONVERT_FROM_LARGE = 8.0, 3.0


def _fill(n: int) -> float:
    """Share of the 16 lanes `n` contiguous elements fill (vectors of 16, the rest peeled); a single
    element is scalar loops, measured twice as slow as a one-lane share."""
    if n == 1:
        return 1.0 / (2 * VECTOR_LANES)
    if n < VECTOR_LANES:
        return n / VECTOR_LANES
    full, rest = divmod(n, VECTOR_LANES)
    vectors = full + (1 if rest else 0)
    return n / (vectors * VECTOR_LANES)


def lanes(shape: ConvShape, layout: str) -> float:
    """Share of vector lanes the kernel's innermost (output-contiguous) loop fills in `layout`."""
    if layout == "nchw":
        if shape.depthwise:
            return 1.0 / (2 * VECTOR_LANES) if shape.stride > 1 else _fill(shape.out_w)
        if shape.linear:  # a Linear: one row of the register tile per image, vectors along the features
            return _fill(shape.filters) * min(shape.batch, REGISTER_ROWS) / REGISTER_ROWS
        return _fill(shape.out_h * shape.out_w)
    if layout.startswith("nChw"):
        return int(layout[4:-1]) / VECTOR_LANES
    return _fill(shape.filters)


def conv_terms(shape: ConvShape, layout: str) -> tuple[float, float, float, float, float]:
    """What each of `KernelCoefficients`' fields multiplies for this kernel in `layout`: (1, taps,
    MACs / lanes, gathered elements, filter elements); `conv_ns` is their sum weighted by the
    coefficients (benchmarks/layout_costs.py --fit regresses on them)."""
    per_group = shape.channels // shape.groups if shape.groups > 0 else 1
    gathered = (shape.batch * per_group * shape.taps * shape.out_h * shape.out_w
                if shape.taps > 1 or shape.stride > 1 else 0)
    return (1.0, float(shape.taps), shape.macs / lanes(shape, layout), float(gathered),
            float(shape.filters * per_group * shape.taps))


def conv_ns(shape: ConvShape, layout: str) -> float:
    """Predicted time of one convolution-like kernel in `layout` ("nchw", "nChw16c", "nChw8c", "nhwc")."""
    k = (DEPTHWISE if shape.depthwise else CONV)[layout]
    one, taps, mac_vectors, gathered, weights = conv_terms(shape, layout)
    return (k.fixed * one + taps * k.per_tap + mac_vectors * k.per_mac + gathered * k.per_gather
            + weights * k.per_weight)


def copy_ns(nbytes: int) -> float:
    """A plain copy (an element-wise kernel) of `nbytes`."""
    return COPY_FIXED_NS + nbytes * COPY_NS_PER_BYTE


def convert_ns(nbytes: int, layout: str, *, into: bool = True) -> float:
    """A run-time conversion of `nbytes` from NCHW into `layout` (`into`), or from `layout` to NCHW."""
    if nbytes == 0:
        return 0.0
    if nbytes >= LARGE_TENSOR_BYTES:
        factor = CONVERT_INTO_LARGE if into else CONVERT_FROM_LARGE
    else:
        table = CONVERT_INTO if into else CONVERT_FROM
        factor = table.get(layout, table["other"])
    return COPY_FIXED_NS + nbytes * COPY_NS_PER_BYTE * factor


# -- the model on the IR (what layout-select-ilp{cost=time} calls) ------------------------------------

CONV_OPS = {"linalg.conv_2d_nchw_fchw": "conv", "linalg.depthwise_conv_2d_nchw_chw": "depthwise",
            "linalg.pooling_nchw_max": "pooling", "linalg.pooling_nchw_sum": "pooling"}
# A kernel run in a non-row-major layout whose speed the model does not know (a matmul's B
# transposed) costs this much more: ties go to row-major, so a graph the model sees no gain in is
# left as it was.
UNMODELLED_NS = 1.0


def _stride(op) -> int:
    if "strides" not in op.attributes:
        return 1
    return max(int(s) for s in ir.DenseIntElementsAttr(op.attributes["strides"]))


def conv_shape(site) -> ConvShape | None:
    """The `ConvShape` of a convolution, depthwise convolution or pooling site (NCHW logical
    shapes, as imported), or None for any other op."""
    kind = CONV_OPS.get(site.name)
    if kind is None or len(site.op.operands) < 2 or not site.op.results:
        return None
    x, w, out = site.operand_shape(0), site.operand_shape(1), site.result_shape(0)
    if x is None or w is None or out is None or min(x + w + out) < 1:
        return None
    n, c, _, _ = x
    _, f, oh, ow = out
    taps = w[-1] * w[-2]
    groups = {"conv": 1, "depthwise": c, "pooling": 0}[kind]
    return ConvShape(c, f, oh, ow, taps, _stride(site.op), groups, n)


def layout_kind(layout: Layout | None) -> str:
    """"nchw" (row-major), "nChw<b>c" (channels blocked by b), "nhwc", or "other"."""
    if layout is None or layout.is_identity:
        return "nchw"
    if layout.rank == 4 and layout.perm == (0, 1, 2, 3) and len(layout.blocks) == 1 and layout.blocks[0][0] == 1:
        return f"nChw{layout.blocks[0][1]}c"
    if layout.rank == 4 and layout.perm == (0, 2, 3, 1) and not layout.blocks:
        return "nhwc"
    return "other"


def kernel_ns(site, decision) -> float:
    """What the kernel at `site` costs run with `decision`'s layouts (a `resolve.Decision`): the
    convolution model where the site is one and its layout is modelled; otherwise 0 in row-major
    and `UNMODELLED_NS` in any other layout."""
    shape = conv_shape(site)
    kind = layout_kind(decision.operands[0] if decision.operands else None)
    if shape is not None and kind in CONV:
        return conv_ns(shape, kind) * (1.0 if kind == "nchw" else 1.0 + UNCERTAINTY)
    laid_out = any(l is not None and not l.is_identity for l in list(decision.operands) + list(decision.results))
    return UNMODELLED_NS if laid_out else 0.0


def conversion_ns(value, src: Layout, dst: Layout) -> float:
    """What converting `value` from `src` to `dst` at run time costs (the transposing copy)."""
    nbytes = shaped_bytes(value.type) or 0
    shape = list(ir.RankedTensorType(value.type).shape)
    if len(shape) == 4 and shape[2] * shape[3] == 1 and "other" not in (layout_kind(src), layout_kind(dst)):
        return 0.0  # a 1x1 image: every NCHW-family layout holds it in the same order (a reshape)
    into, out_of = layout_kind(dst), layout_kind(src)
    if into == "nchw":
        return convert_ns(nbytes, out_of, into=False)
    return convert_ns(nbytes, into, into=True)
