"""Kernel layout conventions: VTensor's "library descriptions" (Gao et al., VTensor, §4.2) as a table.

A *target* is a list of `KernelConvention`s, one per compute kernel the target's code generator (or
library) provides. A convention says which graph-level ops it implements and which physical layouts
it accepts and produces, in one of two forms:

- **variants** (`Variant`): alternative implementations, each fixing one layout per operand (and per
  result), with a `priority` (VTensor's library priority, §4.2 "Library Descriptor") and an optional
  applicability test `when`. Without a `guideline`, the highest-priority variant whose layouts can
  hold the operand shapes (blocked dims divisible) and whose `when` holds is chosen. A `guideline`
  function (§4.2 "Layout Guideline", `LAYOUT LayoutGuideLine(PTensor)`) may pick another one.
- **any** (`AnyLayout`): VTensor's `LAYOUT::ANY` (§4.1) — the kernel runs in whatever layout its
  input arrives in (element-wise ops, padding, fill, concat). Layout resolution (Fig. 8 lines 10–16)
  makes the result inherit the first (non-constant) aligned input's layout; `accepts` rejects layouts
  the kernel cannot run in (a blocked dim that is padded, a broadcast operand that cannot be held in
  the layout, §5.2 "Element-Wise Operators with Broadcast Semantics").

`flexible=True` marks the ops element-wise optimisation may re-layout (EWO, §5.2: "selecting the
layout for element-wise operators"); other kernels keep the variant layout resolution chose ("we
assume that this specification cannot be altered").

Ops stay layout-oblivious: nothing here changes an op; the table only says what each kernel wants.
Kernels are recognised at linalg-on-tensors level, as the torch-mlir importer emits them
(`linalg.conv_2d_nchw_fchw`, `linalg.pooling_nchw_max`, `linalg.matmul`, element-wise and reduction
`linalg.generic`s, `tensor.pad`, ...). Anything no convention matches gets `DEFAULT_CONVENTION`:
row-major (identity) operands and results, which is always correct.

Adding a kernel is one `KernelConvention` in a target's list; adding a target is one
`register_target(Target(...))`. No pass changes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from torch_mlir import ir

from ..dialects.memory_layout import Layout
from ..errors import VtmlirError
from ..ir_utils import iterator_kinds

# Canonical dim letters per rank, the names layouts are written over when a convention does not say.
CANONICAL_DIMS = {1: "C", 2: "MN", 3: "BMN", 4: "NCHW", 5: "NCDHW"}


def canonical_dims(rank: int) -> str:
    return CANONICAL_DIMS.get(rank, "ABCDEFGHIJKLMNOP"[:rank])


def layout_named(name: str | None, rank: int, dims: str | None = None) -> Layout:
    """The layout `name` (oneDNN-style, over `dims`) for a tensor of `rank`; None is identity."""
    if name is None:
        return Layout.identity(rank)
    return Layout.from_name(name, logical=dims or canonical_dims(rank))


def layout_label(layout: Layout) -> str:
    """A readable name for reports: "NCHW16c" over the canonical dims of its rank."""
    dims = canonical_dims(layout.rank)
    return layout.name(dims) if len(dims) == layout.rank else str(layout)


# -- what a convention sees of an op ---------------------------------------------------------------


def _ranked(t) -> ir.RankedTensorType | None:
    try:
        return ir.RankedTensorType(t)
    except ValueError:
        return None


class KernelSite:
    """One op as a kernel convention sees it: operand/result shapes, element types, linalg maps.

    VTensor's guideline functions take a `PTensor` (shape, dims); here they take the whole site so a
    guideline can look at every operand (e.g. channels of input and filter)."""

    def __init__(self, op):
        self.op = op.operation if hasattr(op, "operation") else op
        self.name = self.op.name

    @cached_property
    def operand_types(self) -> list[ir.RankedTensorType | None]:
        return [_ranked(v.type) for v in self.op.operands]

    @cached_property
    def result_types(self) -> list[ir.RankedTensorType | None]:
        return [_ranked(r.type) for r in self.op.results]

    def operand_shape(self, i: int) -> list[int] | None:
        t = self.operand_types[i]
        return list(t.shape) if t is not None else None

    def result_shape(self, i: int) -> list[int] | None:
        t = self.result_types[i]
        return list(t.shape) if t is not None else None

    @property
    def is_linalg(self) -> bool:
        return self.name.startswith("linalg.") and "operandSegmentSizes" in self.op.attributes

    @cached_property
    def num_inputs(self) -> int:
        """Number of `ins` operands of a destination-passing linalg op (all operands otherwise)."""
        if "operandSegmentSizes" in self.op.attributes:
            sizes = list(ir.DenseI32ArrayAttr(self.op.attributes["operandSegmentSizes"]))
            return sizes[0]
        return len(self.op.operands)

    @cached_property
    def indexing_maps(self) -> list[ir.AffineMap] | None:
        if "indexing_maps" not in self.op.attributes:
            return None
        return [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(self.op.attributes["indexing_maps"])]

    @cached_property
    def iterator_types(self) -> list[str]:
        if "iterator_types" not in self.op.attributes:
            return []
        return iterator_kinds(self.op)

    @cached_property
    def element_type(self) -> ir.Type | None:
        for t in self.result_types + self.operand_types:
            if t is not None:
                return t.element_type
        return None


def _aligned_map(amap: ir.AffineMap, rank: int) -> bool:
    """Result k is d_k or the constant 0 (a size-1 broadcast dim): the operand is positionally
    aligned with the iteration space, so it can be held in the same layout as the result."""
    if amap.n_dims != rank or len(amap.results) != rank:
        return False
    for k, e in enumerate(amap.results):
        if isinstance(e, ir.AffineDimExpr) and e.position == k:
            continue
        if isinstance(e, ir.AffineConstantExpr) and e.value == 0:
            continue
        return False
    return True


def _is_identity_map(amap: ir.AffineMap, rank: int) -> bool:
    return amap.n_dims == rank and amap == ir.AffineMap.get_identity(rank)


def elementwise_roles(site: KernelSite) -> list[str] | None:
    """For an element-wise `linalg.generic`/`linalg.map`/`linalg.fill`: a role per operand —
    "aligned" (same rank, positionally aligned: takes the op's layout), "broadcast" (lower rank or
    a map that is not aligned: read in identity layout), "scalar". None if the op is not
    element-wise (reductions, transposes, gathers)."""
    if site.name == "linalg.fill":
        return ["scalar"] + ["aligned"] * (len(site.op.operands) - 1)
    if site.name != "linalg.generic" or "reduction" in site.iterator_types:
        return None
    maps = site.indexing_maps
    rank = len(site.iterator_types)
    if maps is None or any(t is None or t.rank != rank for t in site.result_types):
        return None
    roles = []
    for i, v in enumerate(site.op.operands):
        t = site.operand_types[i]
        if t is None:
            roles.append("scalar")
            continue
        if i >= site.num_inputs:  # outs: must be the identity (the result's own index space)
            if not _is_identity_map(maps[i], rank):
                return None
            roles.append("aligned")
        elif t.rank == rank and _aligned_map(maps[i], rank):
            roles.append("aligned")
        elif t.rank < rank:
            roles.append("broadcast")
        else:
            return None  # a transposing / gathering read: not layout-agnostic
    return roles


def has_broadcast(site: KernelSite) -> bool:
    """VTensor §5.2 "element-wise operators with broadcast semantics": an operand is broadcast."""
    roles = elementwise_roles(site)
    if roles is None:
        return False
    if "broadcast" in roles:
        return True
    maps = site.indexing_maps or []
    rank = len(site.iterator_types)
    return any(roles[i] == "aligned" and i < site.num_inputs and not _is_identity_map(maps[i], rank)
               for i in range(len(roles)))


def is_elementwise(site: KernelSite) -> bool:
    return elementwise_roles(site) is not None


def is_reduction(site: KernelSite) -> bool:
    return site.name == "linalg.generic" and "reduction" in site.iterator_types


# -- conventions ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    """One kernel implementation: a layout name per operand (and per result).

    Names are oneDNN-style (`Layout.from_name`) over the convention's `operand_dims` (None: the
    identity). `results=None` means destination-passing: result k has the layout of the k-th `outs`
    operand."""

    name: str
    operands: tuple[str | None, ...]
    results: tuple[str | None, ...] | None = None
    priority: int = 0
    when: Callable[[KernelSite], bool] | None = None


@dataclass(frozen=True)
class AnyLayout:
    """`LAYOUT::ANY`: the kernel runs in any layout `accepts(site, layout)` allows (default: any
    layout that can hold every aligned operand's shape)."""

    accepts: Callable[[KernelSite, Layout], bool] | None = None


@dataclass(frozen=True)
class KernelConvention:
    """A library description entry (§4.2): the ops it implements and the layouts it accepts.

    - `ops`: op names it matches; `match` narrows them further (e.g. element-wise generics only);
    - `variants` or `any`: see the module docstring; `guideline(site, applicable)` may choose among
      the applicable variants (highest priority first) and returns one of them, or None to fall
      back to the default layouts;
    - `operand_dims` / `result_dims`: the logical dim letters variant layout names are written over
      (per operand, `ins` then `outs`; results default to the `outs`');
    - `flexible`: element-wise optimisation may choose this op's layout (§5.2 EWO);
    - `default`: for `flexible` ops whose resolution is not ANY-inheritance, a layout name per rank
      used by naive resolution (TensorFlow's conservative NHWC for broadcasting element-wise ops,
      §5.2 Fig. 9(a)).
    """

    name: str
    ops: tuple[str, ...]
    match: Callable[[KernelSite], bool] | None = None
    variants: tuple[Variant, ...] = ()
    any: AnyLayout | None = None
    guideline: Callable[[KernelSite, list[Variant]], Variant | None] | None = None
    operand_dims: tuple[str | None, ...] = ()
    result_dims: tuple[str | None, ...] | None = None
    flexible: bool = False
    default: dict[int, str] = field(default_factory=dict)

    def matches(self, site: KernelSite) -> bool:
        return site.name in self.ops and (self.match is None or self.match(site))


#: What ops no convention claims get: row-major operands and results (always correct).
DEFAULT_CONVENTION = KernelConvention("default", ())


@dataclass(frozen=True)
class Target:
    """A code-generation target's kernel table (one library description per kernel family).

    `candidates`: per logical rank, the layout names element-wise optimisation always offers an
    element-wise op besides its neighbours' layouts (§5.2: "{the layout of inputs, NHWC, NCHW}")."""

    name: str
    description: str
    conventions: tuple[KernelConvention, ...]
    candidates: dict[int, tuple[str, ...]] = field(default_factory=dict)

    def convention_for(self, op) -> KernelConvention:
        site = op if isinstance(op, KernelSite) else KernelSite(op)
        for conv in self.conventions:
            if conv.matches(site):
                return conv
        return DEFAULT_CONVENTION

    def candidate_layouts(self, rank: int) -> list[Layout]:
        return [layout_named(n, rank) for n in self.candidates.get(rank, ())] or [Layout.identity(rank)]


TARGETS: dict[str, Target] = {}


def register_target(target: Target) -> Target:
    """Add (or replace) a target's kernel table."""
    TARGETS[target.name] = target
    return target


def get_target(name: str) -> Target:
    try:
        return TARGETS[name]
    except KeyError:
        raise VtmlirError(f"error: unknown layout target '{name}'; known: {', '.join(TARGETS)}") from None


# -- shape tests used by the tables -------------------------------------------------------------------


def channels_divisible(*operand_dims: tuple[int, int], by: int) -> Callable[[KernelSite], bool]:
    """`when` test: each (operand, dim) extent is static and divisible by `by`."""

    def test(site: KernelSite) -> bool:
        for operand, dim in operand_dims:
            shape = site.operand_shape(operand)
            if shape is None or shape[dim] < 0 or shape[dim] % by:
                return False
        return True

    return test


def low_precision(site: KernelSite) -> bool:
    t = site.element_type
    return t is not None and (isinstance(t, (ir.F16Type, ir.BF16Type)) or str(t) in ("f16", "bf16"))


def _pad_accepts(site: KernelSite, layout: Layout) -> bool:
    """tensor.pad runs in any layout that does not block a padded dim."""
    shape = site.operand_shape(0)
    out = site.result_shape(0)
    if shape is None or out is None or layout.check_shape(shape) or layout.check_shape(out):
        return False
    padded = {d for d in range(len(shape)) if shape[d] != out[d]}
    return not any(layout.block_factor(d) > 1 for d in padded)


def _concat_accepts(site: KernelSite, layout: Layout) -> bool:
    """tensor.concat runs in any layout that can hold every piece (blocks divide each extent)."""
    shapes = [site.operand_shape(i) for i in range(len(site.op.operands))] + [site.result_shape(0)]
    return all(s is not None and not layout.check_shape(s) for s in shapes)


def _elementwise_accepts(site: KernelSite, layout: Layout) -> bool:
    """Every aligned operand (and result) can be held in `layout` (§5.2: "if tensor A cannot be
    represented by LB ... the candidate set excludes LB")."""
    roles = elementwise_roles(site)
    if roles is None:
        return False
    for i, role in enumerate(roles):
        if role == "aligned":
            shape = site.operand_shape(i)
            if shape is None or layout.check_shape(shape):
                return False
    return all(s is not None and not layout.check_shape(s)
               for s in (site.result_shape(i) for i in range(len(site.op.results))))


def _elementwise_no_broadcast(site: KernelSite) -> bool:
    return is_elementwise(site) and not has_broadcast(site)


def _elementwise_broadcast(site: KernelSite) -> bool:
    return is_elementwise(site) and has_broadcast(site)


ELEMENTWISE = KernelConvention(
    "elementwise", ("linalg.generic", "linalg.fill"), match=is_elementwise,
    any=AnyLayout(_elementwise_accepts), flexible=True)
PAD = KernelConvention("pad", ("tensor.pad",), any=AnyLayout(_pad_accepts), flexible=True)
CONCAT = KernelConvention("concat", ("tensor.concat",), any=AnyLayout(_concat_accepts), flexible=True)
REDUCTION = KernelConvention("reduction", ("linalg.generic",), match=is_reduction,
                             variants=(Variant("row-major", ()),))


def _conv_variants(blocks: Sequence[int], nhwc_priority: int) -> tuple[Variant, ...]:
    """conv_2d_nchw_fchw (ins: input NCHW, filter OIHW; outs: NCHW): NCHWxc blocked (oneDNN
    nChw16c/nChw8c with OIhw16i16o weights), NHWC (HWIO weights), NCHW."""
    out = [Variant(f"nChw{b}c", (f"NCHW{b}c", f"OIhw{b}i{b}o", f"NCHW{b}c"), priority=20 + b,
                   when=channels_divisible((0, 1), (1, 0), by=b)) for b in blocks]
    out.append(Variant("nhwc", ("NHWC", "HWIO", "NHWC"), priority=nhwc_priority))
    out.append(Variant("nchw", ("NCHW", "OIHW", "NCHW"), priority=0))
    return tuple(out)


def _depthwise_variants(blocks: Sequence[int], nhwc_priority: int) -> tuple[Variant, ...]:
    out = [Variant(f"nChw{b}c", (f"NCHW{b}c", f"Chw{b}c", f"NCHW{b}c"), priority=20 + b,
                   when=channels_divisible((0, 1), by=b)) for b in blocks]
    out.append(Variant("nhwc", ("NHWC", "HWC", "NHWC"), priority=nhwc_priority))
    out.append(Variant("nchw", ("NCHW", "CHW", "NCHW"), priority=0))
    return tuple(out)


def _pool_variants(blocks: Sequence[int], nhwc_priority: int) -> tuple[Variant, ...]:
    # ins: input, window (a shape-only tensor.empty); outs: output.
    out = [Variant(f"nChw{b}c", (f"NCHW{b}c", None, f"NCHW{b}c"), priority=20 + b,
                   when=channels_divisible((0, 1), by=b)) for b in blocks]
    out.append(Variant("nhwc", ("NHWC", None, "NHWC"), priority=nhwc_priority))
    out.append(Variant("nchw", ("NCHW", None, "NCHW"), priority=0))
    return tuple(out)


POOLING_OPS = ("linalg.pooling_nchw_max", "linalg.pooling_nchw_sum")
CONV_DIMS = ("NCHW", "OIHW", "NCHW")
DEPTHWISE_DIMS = ("NCHW", "CHW", "NCHW")
POOL_DIMS = ("NCHW", "HW", "NCHW")

#: Matmul operand majorness: A [M,K] row-major; B [K,N] either "NK"-major (transposed, the
#: reduction dim innermost: contiguous for a k-innermost loop nest) or row-major.
MATMUL = KernelConvention(
    "matmul", ("linalg.matmul",), operand_dims=("MK", "KN", "MN"),
    variants=(Variant("b-col-major", ("MK", "NK", "MN"), priority=10),
              Variant("b-row-major", ("MK", "KN", "MN"), priority=0)))
BATCH_MATMUL = KernelConvention(
    "batch_matmul", ("linalg.batch_matmul",), operand_dims=("BMK", "BKN", "BMN"),
    variants=(Variant("b-col-major", ("BMK", "BNK", "BMN"), priority=10),
              Variant("b-row-major", ("BMK", "BKN", "BMN"), priority=0)))


#: oneDNN-style convolutions and pooling: nChw16c / nChw8c where channels divide, else NHWC, then
#: NCHW (shared by the `cpu` and `paper-mkl` targets).
BLOCKED_CONV_KERNELS = (
    KernelConvention("conv2d", ("linalg.conv_2d_nchw_fchw",), operand_dims=CONV_DIMS,
                     variants=_conv_variants((16, 8), nhwc_priority=10)),
    KernelConvention("depthwise_conv2d", ("linalg.depthwise_conv_2d_nchw_chw",),
                     operand_dims=DEPTHWISE_DIMS, variants=_depthwise_variants((16, 8), 10)),
    KernelConvention("pooling", POOLING_OPS, operand_dims=POOL_DIMS,
                     variants=_pool_variants((16, 8), 10)),
)


register_target(Target(
    "cpu",
    "vtmlir's CPU kernels, described like oneDNN: blocked NCHW16c/NCHW8c convolutions and pooling "
    "(NHWC, then NCHW, when channels do not divide), B-transposed matmuls, element-wise ops, pad and "
    "concat in any layout, reductions row-major",
    (
        *BLOCKED_CONV_KERNELS,
        MATMUL, BATCH_MATMUL, REDUCTION, ELEMENTWISE, PAD, CONCAT,
    ),
    candidates={4: ("NCHW", "NHWC")},
))


register_target(Target(
    "paper-mkl",
    "the CPU setting of VTensor §6 (TensorFlow + MKL-DNN): MKL-DNN convolutions and pooling in "
    "nChw16c/nChw8c, Eigen element-wise ops with broadcast restricted to NHWC (Fig. 9(a)), other "
    "element-wise ops ANY; used to reproduce Fig. 13's conversion counts",
    (
        *BLOCKED_CONV_KERNELS,
        MATMUL, BATCH_MATMUL, REDUCTION,
        KernelConvention("eigen_broadcast_elementwise", ("linalg.generic",),
                         match=_elementwise_broadcast, any=AnyLayout(_elementwise_accepts),
                         flexible=True, default={4: "NHWC"}),
        KernelConvention("elementwise", ("linalg.generic", "linalg.fill"),
                         match=_elementwise_no_broadcast, any=AnyLayout(_elementwise_accepts),
                         flexible=True),
        PAD, CONCAT,
    ),
    candidates={4: ("NCHW", "NHWC")},
))


def _cudnn_guideline(site: KernelSite, applicable: list[Variant]) -> Variant | None:
    """cuDNN: NCHW, except tensor-core convolutions (f16/bf16, channels % 8 == 0) in NHWC."""
    want = "nhwc" if low_precision(site) and channels_divisible((0, 1), (1, 0), by=8)(site) else "nchw"
    for v in applicable:
        if v.name == want:
            return v
    return applicable[0] if applicable else None


register_target(Target(
    "cuda",
    "cuDNN-like GPU kernels: NCHW convolutions and pooling (NHWC for f16/bf16 tensor-core "
    "convolutions, chosen by a guideline), row-major matmuls, element-wise ops in any layout",
    (
        KernelConvention("conv2d", ("linalg.conv_2d_nchw_fchw",), operand_dims=CONV_DIMS,
                         variants=(Variant("nhwc", ("NHWC", "HWIO", "NHWC"), priority=1),
                                   Variant("nchw", ("NCHW", "OIHW", "NCHW"), priority=0)),
                         guideline=_cudnn_guideline),
        KernelConvention("pooling", POOLING_OPS, operand_dims=POOL_DIMS,
                         variants=(Variant("nchw", ("NCHW", None, "NCHW")),)),
        REDUCTION, ELEMENTWISE, PAD, CONCAT,
    ),
    candidates={4: ("NCHW", "NHWC")},
))


register_target(Target(
    "cpu-nhwc",
    "channels-last CPU kernels (XNNPACK/TFLite-like): NHWC convolutions (HWIO weights), depthwise "
    "convolutions (HWC) and pooling, B-transposed matmuls, element-wise ops, pad and concat in any "
    "layout, reductions row-major; permutation layouts only, so layout-materialize lowers all of it",
    (
        KernelConvention("conv2d", ("linalg.conv_2d_nchw_fchw",), operand_dims=CONV_DIMS,
                         variants=_conv_variants((), nhwc_priority=10)),
        KernelConvention("depthwise_conv2d", ("linalg.depthwise_conv_2d_nchw_chw",),
                         operand_dims=DEPTHWISE_DIMS, variants=_depthwise_variants((), 10)),
        KernelConvention("pooling", POOLING_OPS, operand_dims=POOL_DIMS,
                         variants=_pool_variants((), 10)),
        MATMUL, BATCH_MATMUL, REDUCTION, ELEMENTWISE, PAD, CONCAT,
    ),
    candidates={4: ("NCHW", "NHWC")},
))
