"""`codegen-gpu-im2col-convolutions`: a convolution becomes an im2col copy and a batch matmul.

The GPU schedules take contractions and copies (projected-permutation maps); a convolution reads
its input at `s*oh + d*kh + c`, which no schedule tiles, so it kept the naive mapping (one thread
per output element walking C·KH·KW products). At the kernel level (memrefs, padding already an
explicit zero-filled buffer, `linalg.map` + `linalg.copy` of the importer's pad) each 2-d
convolution generic with a plain channel reduction is rewritten, for the whole batch at once, into

1. a data-movement kernel `P[n, k..., oh, ow] = In[n, c, s*oh + d*kh + ph, s*ow + d*kw + pw]` (the
   k dimensions are the filter's after its features, in its order: c, kh, kw): the windows are a
   `memref.reinterpret_cast` of the input with one stride per dimension of P (overlapping: a tap
   and an output pixel advance through the same rows), so the copy is an identity-map
   `linalg.copy` the vector schedule takes;
2. a contraction `out[n, f, (oh, ow)] += W[f, (c, kh, kw)] * P[n, (c, kh, kw), (oh, ow)]` over
   `memref.collapse_shape` views: a batch matmul (batch n, M = F, N = OH·OW, K = C·KH·KW) with the
   convolution's own body (an f16 model's `extf`s included), which the contraction schedule puts on
   tensor cores (f16, bf16) or the SIMT kernel (f32); `codegen-gpu-pad-contractions` pads an f16 or
   bf16 one whose M, N or K is not a multiple of 16.

Grouped convolutions (groups > 1 with several channels per group) are the same rewrite per group.
The importer makes them `linalg.conv_2d_ngchw_gfchw` -- the input viewed `[N, G, C/G, H, W]`, the
filter `[G, F/G, C/G, KH, KW]`, the output `[N, G, F/G, OH, OW]` -- whose generic reads the group
g (linalg's `depth` dimension) in all three operands. g is then one more batch dimension of the
product, read by the filter too: P is `P[n, g, c, kh, kw, oh, ow]` and the contraction
`out[n, g, f, (oh, ow)] += W[g, f, (c, kh, kw)] * P[n, g, (c, kh, kw), (oh, ow)]`, a batch of G
GEMMs of M = F/G, N = OH·OW, K = C/G·KH·KW (a grouped 1x1 convolution: a batch matmul over the
groups reading the input as it is). Groups of one channel (depthwise, with or without a channel
multiplier) are not rewritten: K would be KH·KW alone, a product per tap, and the `threads`
schedule's window loops are the better kernel.

P holds C·KH·KW·OH·OW elements per image (9x a stride-1 3x3 convolution's input): the price of
running the convolution as a GEMM; it is freed after the product.

Values: the copy is exact; the product sums each output's C·KH·KW (per group C/G·KH·KW) products
in k order (c outer, then kh, kw), the order of the convolution's own loops, on the SIMT kernel
(f32): each output's sum is the naive mapping's; tensor cores (f16, bf16) sum 16-wide k slices in
the hardware. The rewritten kernel level run on the CPU is within rtol 1e-4 of PyTorch in f32, and
for grouped convolutions under the exact CPU schedules bitwise the convolution summed in k order
(`test_cuda_schedules.py`).

Convolutions that do not fit (depthwise, a filter whose groups and features do not lead, a
non-contiguous output row or filter, a dynamic layout, a kernel inside a loop) keep the naive
mapping or the `threads` schedule and are named in the report. A 1x1 stride-1 convolution over
whole image rows needs no copy: its input is the matrix P (collapsed), and it becomes the same
batch matmul, the filter first (the unit-dimension folding alone left it a contraction reading the
input first, which the tensor-core conversion refused: f16 1x1 convolutions kept the naive mapping).
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import linalg, memref

from ...passes.registry import Pass, register_pass
from ..bodies import iterator_attr
from ..decompose_convolutions import Im2col, collapse, generic_like, linear_terms
from .attach_schedule import top_level_kernels
from .contraction import contraction_sides
from .layouts import strides_and_offset


def _contiguous(t: ir.MemRefType, dims: list[int]) -> bool:
    """Whether the consecutive dimensions `dims` of `t` can be collapsed into one (static strides)."""
    found = strides_and_offset(t)
    if found is None:
        return False
    strides, _ = found
    return all(strides[i] == strides[i + 1] * t.shape[i + 1] for i in dims[:-1])


def _window_view(op, conv: Im2col, p_dims: list[int]) -> ir.Value | None:
    """The input's windows as a memref indexed by `p_dims` (a reinterpret_cast with one stride per
    dimension: Σ coefficient · the input's stride over the input results reading it), or None when
    the input's layout is dynamic."""
    source = op.operands[conv.input]
    t = ir.MemRefType(source.type)
    found = strides_and_offset(t)
    if found is None:
        return None
    in_strides, offset = found
    strides = dict.fromkeys(p_dims, 0)
    for stride, expr in zip(in_strides, conv.maps[conv.input].results):
        terms, const = linear_terms(expr)  # linear with positive coefficients: Im2col's input plan
        for d, c in terms.items():
            strides[d] += c * stride
        offset += const * stride
    if offset < 0:
        return None
    shape = [conv.ranges[d] for d in p_dims]
    view_type = ir.MemRefType.get(shape, t.element_type,
                                  ir.StridedLayoutAttr.get(offset, [strides[d] for d in p_dims]), t.memory_space)
    return memref.ReinterpretCastOp(view_type, source, [], [], [], [offset], shape,
                                    [strides[d] for d in p_dims]).result


def _input_matrix(op, conv: Im2col, batch: list[int], k_dims: list[int]) -> ir.Value | None:
    """The input of a 1x1 stride-1 convolution as the matrix [batch..., K, OH*OW] (a collapse_shape),
    or None when it is not laid out so: its dimensions the batch, the channels (in K's order) and
    whole contiguous image rows (OH x OW, no offset into the window)."""
    source = op.operands[conv.input]
    t = ir.MemRefType(source.type)
    channels = [d for d in k_dims if d in conv.channels]
    expected = [("batch", d) for d in batch] + [("channel", d) for d in channels]
    plan = conv.input_plan
    if [item[:2] for item in plan[:-2]] != expected or [item[:2] for item in plan[-2:]] != \
            [("image", conv.oh), ("image", conv.ow)] or any(item[4] for item in plan[-2:]):
        return None
    nb, nc = len(batch), len(channels)
    if list(t.shape[-2:]) != [conv.ranges[conv.oh], conv.ranges[conv.ow]] or \
            not _contiguous(t, list(range(nb, nb + nc))) or not _contiguous(t, [t.rank - 2, t.rank - 1]):
        return None
    return collapse(source, [[i] for i in range(nb)] + [list(range(nb, nb + nc)), [nb + nc, nb + nc + 1]])


def im2col_convolution(op) -> bool:
    """Rewrite one convolution generic (kernel level) as an im2col copy and a batch matmul, in place;
    False when it does not fit (see the module docstring)."""
    op = op.operation
    if op.name != "linalg.generic" or not all(isinstance(v.type, ir.MemRefType) for v in op.operands):
        return False
    if not linalg.isa_convolution_op(op):
        return False
    conv = Im2col(op, groups=True)
    if not conv.ok:
        return False
    pointwise = all(conv.ranges[d] == 1 for d in conv.window) and \
        all(item[2] == 1 for item in conv.input_plan if item[0] == "image")
    # The filter's leading dimensions: its groups and features (any order; groups = 1: the features).
    n_lead = len(conv.groups) + len(conv.features)
    filt_type, out_type = ir.MemRefType(op.operands[conv.filter].type), ir.MemRefType(op.operands[2].type)
    # The filter as the matrix [F, K] per group: its groups and features lead, the rest (K, in the
    # filter's order) collapse.
    if set(conv.filter_dims[:n_lead]) != set(conv.groups) | set(conv.features):
        return False
    k_dims = conv.filter_dims[n_lead:]
    if not _contiguous(filt_type, list(range(n_lead, filt_type.rank))):
        return False
    out_dims = [e.position for e in conv.maps[2].results]
    outer = out_dims[:-2]
    if not _contiguous(out_type, [out_type.rank - 2, out_type.rank - 1]):
        return False
    batch = [d for d in outer if d in conv.batch]
    p_dims = batch + k_dims + [conv.oh, conv.ow]
    element = ir.MemRefType(op.operands[conv.input].type).element_type
    nb, nk = len(batch), len(k_dims)
    with op.location, ir.InsertionPoint(op):
        panel = None
        if pointwise:
            # A 1x1 stride-1 convolution over whole image rows: the input is the matrix P already
            # (no copy). Otherwise (a view of part of the rows) the unit-dimension folding later in
            # the stage makes it a contraction of its own.
            matrix = _input_matrix(op, conv, batch, k_dims)
            if matrix is None:
                return False
        else:
            windows = _window_view(op, conv, p_dims)
            if windows is None:
                return False
            panel = memref.AllocOp(ir.MemRefType.get([conv.ranges[d] for d in p_dims], element), [], [],
                                   alignment=64).result
            linalg.copy(windows, outs=[panel])
            matrix = collapse(panel, [[i] for i in range(nb)] + [list(range(nb, nb + nk)), [nb + nk, nb + nk + 1]])
        weight = collapse(op.operands[conv.filter], [[i] for i in range(n_lead)] + [list(range(n_lead, filt_type.rank))])
        n_out = len(out_dims)
        out = collapse(op.operands[2], [[i] for i in range(n_out - 2)] + [[n_out - 2, n_out - 1]])
        # Loops: the output's outer dimensions (batch, features, its order), the pixels p, then k.
        # The filter is the matrix A (m, k): operand 0 and the product's left-hand side (the
        # vectorised contraction's lhs follows the multiplication's operands, and the tensor-core
        # conversion takes only A (m, k) there). Swapping a product's operands changes no value.
        position = {d: i for i, d in enumerate(outer)}
        p, k = ir.AffineDimExpr.get(len(outer)), ir.AffineDimExpr.get(len(outer) + 1)
        rank = len(outer) + 2
        maps = [ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(position[d]) for d in conv.filter_dims[:n_lead]] + [k]),
                ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(position[d]) for d in batch] + [k, p]),
                ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(position[d]) for d in outer] + [p])]
        iterators = [iterator_attr(op.context, "parallel")] * (len(outer) + 1) + [iterator_attr(op.context, "reduction")]
        product = generic_like(op, [weight, matrix, out], maps, iterators, sources=[conv.filter, conv.input, 2])
        sides = contraction_sides(product)
        if sides is not None and sides.lhs.args == [1]:
            lhs, rhs = sides.product.operands
            sides.product.operands[0], sides.product.operands[1] = rhs, lhs
        if panel is not None:
            memref.DeallocOp(panel)
    op.erase()
    return True


def im2col_convolutions(module_op) -> int:
    """Rewrite every convolution kernel directly in a function body; returns how many."""
    with module_op.context:
        return sum(1 for op in top_level_kernels(module_op) if im2col_convolution(op))


@register_pass
class Im2colConvolutions(Pass):
    name = "codegen-gpu-im2col-convolutions"
    summary = "Rewrite each convolution (memrefs) as an im2col copy of the batch's windows and a batch matmul"
    description = ("Kernel level (memrefs). A 2-d convolution generic with a channel reduction "
                   "becomes a linalg.copy of its input windows (a reinterpret_cast view) into a buffer "
                   "P[n, c, kh, kw, oh, ow] and a contraction out[n, f, (oh, ow)] += W[f, (c, kh, kw)] * "
                   "P[n, (c, kh, kw), (oh, ow)] that the GPU contraction schedule takes; a grouped one "
                   "(several channels per group) the same with the groups g as a batch dimension of "
                   "all three: out[n, g, f, (oh, ow)] += W[g, f, (c, kh, kw)] * P[n, g, (c, kh, kw), (oh, ow)].")

    def run(self, module):
        im2col_convolutions(module)
