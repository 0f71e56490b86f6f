"""`codegen-decompose-convolutions`: a convolution becomes contractions the schedules take.

At the kernel level a convolution is a `linalg.generic` whose input map reads `s*oh + d*kh` (stride
s, dilation d). The vectoriser takes only projected-permutation maps, so the convolution is
rewritten into ops that have them, in one of two ways:

- **im2col in row panels** (a convolution whose output ends in its image dimensions, NCHW, with a
  constant filter): for each image of the batch and each panel of R output rows (R·OW ≥ 128 pixels,
  R dividing OH; fewer rows where that makes R·OW a multiple of the vector width), a copy kernel per filter tap gathers the tap's input rows into a stack buffer
  `P[kh, kw, c, r, ow]`, and one contraction `out[f, (r, ow)] += W[f, (kh, kw, c)] · P[(kh, kw, c), (r, ow)]`
  reads it as a matrix (K = KH·KW·C, N = R·OW: a long contiguous pixel dimension however narrow the
  image rows are). The filter is re-laid out `[f, kh, kw, c]` at compile time (`weights.Globals`).
  On several threads the loop over images and panels is the parallel loop where it gives each
  thread work (`_panel_rows`, `_parallel_panels`): an `scf.forall` whose iterations each fill a
  panel of their own and run their contraction on one thread. A 1x1 stride-1 convolution over a contiguous image needs no copy: the input is the matrix; over
  a 1x1 image it is a Linear layer over the batch (vectors along the features).
- **taps unrolled** (a depthwise convolution in any layout, a pooling: every loop but the window's
  parallel, at most `MAX_UNROLLED_TAPS` taps): one elementwise kernel over the output that reads
  each tap through its own shifted, strided subview of the input (and the tap's filter slice) and
  applies the body once per tap, in the window's order. The output is read and written once (per
  tap it made a round trip through memory per tap), the input rows stay in cache from one output
  row to the next, and every output is the loops' sum in the loops' order: bitwise the loops.
  Where the output was just filled with a constant (the importer's zero accumulator, max
  pooling's -inf), the first tap starts from that constant and the fill goes: the output is only
  written (the fill was a pass over it through memory, the kernel's read another). The same
  constant, the same operations: bitwise. Where the input is a padded buffer made for this kernel
  alone (filled, its interior written by one kernel), the kernel runs one plane at a time on a
  padded stack copy (`_stage_padded_input`): the padded buffer, its fill and its strided write go.
- **per tap** (grouped convolutions, blocked layouts, a filter computed at run time, a large
  pooling window): an `scf.for` per filter dimension, and inside it the same generic over the
  remaining dimensions reading a strided, shifted subview of the input and the tap's slice of the
  filter: for NCHW `out[f, p] += W_tap[f, c] · In_tap[c, p]` (a contraction).

im2col and per tap sum each output over the taps outer and the channels inner (the loops: channels
outer, taps inner): the result differs from the scalar loops by the rounding of a reordered f32 sum
(docs/codegen.md has the tolerance), identically in both decompositions (an NCHW16c convolution is
bitwise its NCHW original) and for any thread count.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import arith, linalg, memref, scf

from ..passes.registry import Option, Pass, register_pass
from ..ir_utils import fill_value
from ..passes.memref_dealloc_at_last_use import VIEW_OPS, users_in_block
from .bodies import buffer_root, clone_ops, expr_dims, iterator_attr
from .delinearize_loops import collapse, subview_type
from .kernels import KernelKind, classify, element_bits_of, indexing_maps_of, loop_ranges_of, rewrite_generics
from .schedules import PARALLEL_MIN_ITERATIONS
from .target import host_target
from .weights import Globals

# An im2col panel holds at least this many output pixels (the contraction's N: enough columns for
# the register tiles; whole output rows, so narrow images take several rows per panel).
PANEL_PIXELS = 128
# The fewest output pixels of a panel made smaller so that the threads have a panel each (`_panel_rows`).
MIN_PANEL_PIXELS = 32
# The fewest output pixels of a panel made smaller so that its width is a whole number of vectors.
MIN_ALIGNED_PANEL_PIXELS = PANEL_PIXELS // 2


def linear_terms(expr) -> tuple[dict[int, int], int] | None:
    """`expr` as ({dim: coefficient}, constant), or None when it is not linear in the dims."""
    if isinstance(expr, ir.AffineDimExpr):
        return {expr.position: 1}, 0
    if isinstance(expr, ir.AffineConstantExpr):
        return {}, expr.value
    if isinstance(expr, ir.AffineAddExpr):
        lhs, rhs = linear_terms(expr.lhs), linear_terms(expr.rhs)
        if lhs is None or rhs is None:
            return None
        terms = dict(lhs[0])
        for d, c in rhs[0].items():
            terms[d] = terms.get(d, 0) + c
        return terms, lhs[1] + rhs[1]
    if isinstance(expr, ir.AffineMulExpr):
        lhs, rhs = linear_terms(expr.lhs), linear_terms(expr.rhs)
        if lhs is None or rhs is None:
            return None
        if not rhs[0]:
            return {d: c * rhs[1] for d, c in lhs[0].items()}, lhs[1] * rhs[1]
        if not lhs[0]:
            return {d: c * lhs[1] for d, c in rhs[0].items()}, lhs[1] * rhs[1]
    return None


def _tap_plans(op, window: list[int], order: list[int] | None = None):
    """How each operand of a window generic reads the window: (loop ranges, the other loop
    dimensions in `order` (default: theirs), per operand (map results over those dimensions, None
    for a filter dimension the tap's slice drops; per result (tap terms, constant, size, stride), or
    None when the operand reads no window)), or None when a read is not linear in the loops."""
    maps = indexing_maps_of(op)
    ranges = loop_ranges_of(op, maps) if maps else None
    if ranges is None or len(op.opview.outputs) != 1:
        return None
    keep = order if order is not None else [d for d in range(len(ranges)) if d not in window]
    renumber = {d: i for i, d in enumerate(keep)}
    plans = []
    for operand, amap in zip(op.operands, maps):
        shape = list(operand.type.shape)
        exprs, slices, sliced = [], [], False
        for size, expr in zip(shape, amap.results):
            lin = linear_terms(expr)
            if lin is None:
                return None
            terms, const = lin
            taps = {d: c for d, c in terms.items() if d in window}
            rest = {d: c for d, c in terms.items() if d not in window}
            if not taps and len(rest) <= 1 and const == 0 and all(c == 1 for c in rest.values()):
                exprs.append(ir.AffineDimExpr.get(renumber[next(iter(rest))]) if rest
                             else ir.AffineConstantExpr.get(0))
                slices.append(({}, 0, size, 1))
                continue
            if len(rest) > 1 or any(c <= 0 for c in rest.values()):
                return None
            sliced = True
            if rest:
                (d, stride), = rest.items()
                exprs.append(ir.AffineDimExpr.get(renumber[d]))
                slices.append((taps, const, ranges[d], stride))
            else:  # a filter dimension: the tap's slice, dropped from the operand (rank-reducing)
                exprs.append(None)
                slices.append((taps, const, 1, 1))
        plans.append((exprs, slices if sliced else None))
    return ranges, keep, plans


def _tap_view(operand, exprs, slices, offsets):
    """The subview of `operand` one tap reads (`offsets`: per result, a value or an int), without
    the filter dimensions the tap fixes."""
    sizes, strides = [s for _, _, s, _ in slices], [st for _, _, _, st in slices]
    full = memref.subview(operand, offsets, sizes, strides)
    if any(e is None for e in exprs):
        reduced = _drop_dims(full.type, [i for i, e in enumerate(exprs) if e is None])
        full.owner.erase()
        full = memref.subview(operand, offsets, sizes, strides, result_type=reduced)
    return full


def decompose_convolution(op, window: list[int] | None = None) -> bool:
    """Rewrite one convolution (or pooling, whose `window` dimensions are given) generic per tap, in
    place (moved into its tap loops); False if it does not fit."""
    op = op.operation
    if not all(isinstance(v.type, ir.MemRefType) for v in op.operands):
        return False  # a convolution on tensors (before bufferization) is not the kernel level
    if window is None:
        window = _filter_loops(op)
    if not window:
        return False
    found = _tap_plans(op, window)
    if found is None:
        return False
    ranges, keep, plans = found
    with op.location:
        index = ir.IndexType.get()
        ip, ivs, loop = ir.InsertionPoint(op), {}, None
        for d in window:  # the tap loops, outermost first, where the convolution stood
            with ip:
                lb, ub, step = (arith.ConstantOp(index, v).result for v in (0, ranges[d], 1))
                loop = scf.ForOp(lb, ub, step)
                with ir.InsertionPoint(loop.body):
                    terminator = scf.YieldOp([])
            ivs[d] = loop.induction_variable
            ip = ir.InsertionPoint(terminator)
        new_operands = []
        with ip:
            for operand, (exprs, slices) in zip(op.operands, plans):
                if slices is None:
                    new_operands.append(operand)
                    continue
                offsets = [_offset(taps, const, ivs, index) for taps, const, _, _ in slices]
                new_operands.append(_tap_view(operand, exprs, slices, offsets))
    op.move_before(terminator.operation)
    for i, v in enumerate(new_operands):
        op.operands[i] = v
    op.attributes["indexing_maps"] = ir.ArrayAttr.get(
        [ir.AffineMapAttr.get(ir.AffineMap.get(len(keep), 0, [e for e in exprs if e is not None]))
         for exprs, _ in plans])
    iterators = ir.ArrayAttr(op.attributes["iterator_types"])
    op.attributes["iterator_types"] = ir.ArrayAttr.get([iterators[d] for d in keep])
    if "linalg.memoized_indexing_maps" in op.attributes:
        del op.attributes["linalg.memoized_indexing_maps"]
    return True


def _filter_loops(op) -> list[int]:
    dims = linalg.infer_convolution_dimensions(op)  # None where isa_convolution_op's looser check held
    return sorted(dims.filter_loop) if dims is not None else []


# The most window taps one kernel takes unrolled (a 7x7 filter: 49); a larger window (a global
# pooling) is decomposed per tap.
MAX_UNROLLED_TAPS = 49


def unroll_taps(op, window: list[int] | None = None, parts: int = 1) -> bool:
    """Rewrite a window generic whose other loops are all parallel (a depthwise convolution, a
    pooling) as one elementwise kernel over the output that reads every tap: an input per tap (its
    shifted, strided subview; a filter's slice) and the body applied once per tap in the window's
    order, out = body(tap_last, ... body(tap_0, out)). Each output is then read and written once
    (per tap, the output made a round trip through memory per tap), and every element is computed
    with the loops' operations in the loops' order: bitwise the scalar loops. The loops run in the
    output's order (batch and channels outer, its contiguous dimension innermost: the vectors run
    along it, the rows read by one output row are read again by the next); False if it does not fit."""
    op = op.operation
    if not all(isinstance(v.type, ir.MemRefType) for v in op.operands):
        return False
    if window is None:
        window = _filter_loops(op)
    maps = indexing_maps_of(op)
    if not window or maps is None:
        return False
    iterators = list(ir.ArrayAttr(op.attributes["iterator_types"]))
    reduction = iterator_attr(op.context, "reduction")
    if any(iterators[d] == reduction for d in range(len(iterators)) if d not in window):
        return False  # a reduction over channels too (a grouped convolution): per tap
    out_dims = [e.position for e in maps[-1].results if isinstance(e, ir.AffineDimExpr)]
    if any(d in window for d in out_dims):
        return False
    order = [d for d in out_dims if d not in window]
    order += [d for d in range(len(iterators)) if d not in window and d not in order]
    found = _tap_plans(op, window, order)
    if found is None:
        return False
    ranges, keep, plans = found
    if plans[-1][1] is not None:
        return False  # the output read through the window
    taps = [()]
    for d in window:
        taps = [tap + (v,) for tap in taps for v in range(ranges[d])]
    if len(taps) > MAX_UNROLLED_TAPS:
        return False
    block = op.regions[0].blocks[0]
    if any(inner.operation.name == "linalg.index" for inner in block.operations):
        return False  # the body reads loop indices, which the unrolled kernel renumbers
    n_inputs = len(op.operands) - 1
    fill = _filled_before(op, op.operands[n_inputs])
    staged = _stage_padded_input(op, window, parts)
    if staged is not None:  # the same kernel, over one plane, inside the staging loops
        op = staged
        ranges, keep, plans = _tap_plans(op, window, order)
        block = op.regions[0].blocks[0]
    operands, maps_out, sources = [], [], []  # per new input: value, map, (original input, tap index)
    with op.location, ir.InsertionPoint(op):
        for i, (operand, (exprs, slices)) in enumerate(zip(list(op.operands)[:n_inputs], plans)):
            new_map = ir.AffineMap.get(len(keep), 0, [e for e in exprs if e is not None])
            if slices is None:
                operands.append(operand), maps_out.append(new_map), sources.append((i, None))
                continue
            for t_index, tap in enumerate(taps):
                values = dict(zip(window, tap))
                offsets = [const + sum(c * values[d] for d, c in terms.items()) for terms, const, _, _ in slices]
                operands.append(_tap_view(operand, exprs, slices, offsets))
                maps_out.append(new_map), sources.append((i, t_index))
        out_exprs = plans[-1][0]
        maps_out.append(ir.AffineMap.get(len(keep), 0, [e for e in out_exprs if e is not None]))
        unrolled = linalg.GenericOp([], operands, [op.operands[n_inputs]],
                                    ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps_out]),
                                    ir.ArrayAttr.get([iterators[d] for d in keep]))
        new_block = unrolled.regions[0].blocks.append(
            *[block.arguments[i].type for i, _ in sources], block.arguments[n_inputs].type)
        args = {}
        for arg, source in zip(new_block.arguments, sources):
            args[source] = arg
        body = list(block.operations)
        with ir.InsertionPoint(new_block):
            # Filled just before: the fill's constant, not a read of it.
            acc = fill[1] if fill is not None else new_block.arguments[len(sources)]
            for t_index in range(len(taps)):
                mapping = {block.arguments[n_inputs]: acc}
                for i in range(n_inputs):
                    mapping[block.arguments[i]] = args.get((i, t_index), args.get((i, None)))
                clone_ops(body[:-1], mapping)
                acc = mapping.get(body[-1].operands[0], body[-1].operands[0])
            linalg.YieldOp([acc])
    op.erase()
    if fill is not None:
        fill[0].erase()
    return True


# The largest padded plane staged on the stack (`_stage_padded_input`): NCHW planes of up to 126x126
# f32; an NHWC image (the plane holds every channel) is usually larger and keeps its padded buffer.
MAX_STAGED_PLANE_BYTES = 64 * 1024


def _stage_padded_input(op, window: list[int], parts: int):
    """A window kernel (depthwise convolution, pooling) reading a padded buffer P -- allocated here,
    filled with a constant, its interior written by one kernel W (the producer's epilogue, or a copy
    of the producer's buffer), read by this kernel alone -- reads the interior X instead, one plane
    at a time padded on the stack: a loop over the dimensions before the image (images and channels:
    an `scf.forall` on several threads) whose body fills a plane buffer with the constant, copies the
    plane's interior from X and runs the kernel on it. P -- a fill and a strided write through
    memory, one more read by the kernel -- goes; W writes X contiguously (a copy of a buffer the
    kernel may read directly goes too, X being that buffer). Each output reads the same values with
    the same operations: bitwise. Returns the kernel in the loops (`op` erased), or None (nothing
    changed)."""
    maps = indexing_maps_of(op)
    padded = op.operands[0]
    if maps is None or isinstance(padded, ir.BlockArgument) or padded.owner.operation.name != "memref.alloc":
        return None
    alloc = padded.owner.operation
    p_type = ir.MemRefType(padded.type)
    if alloc.block != op.block or not p_type.has_static_shape or p_type.get_strides_and_offset()[1] != 0:
        return None
    results = list(maps[0].results)
    spatial = [i for i, e in enumerate(results) if expr_dims(e) & set(window)]
    if not spatial:
        return None
    outer = list(range(spatial[0]))  # the plane's loops: P's dimensions before the image
    loop_of = {}  # P's outer dimension -> the kernel's loop reading it
    for i in outer:
        if not isinstance(results[i], ir.AffineDimExpr):
            return None
        loop_of[i] = results[i].position
    plane_shape = [1 if i in loop_of else n for i, n in enumerate(p_type.shape)]
    plane_bytes = element_bits_of(padded) // 8
    for n in plane_shape:
        plane_bytes *= n
    if not outer or plane_bytes > MAX_STAGED_PLANE_BYTES:
        return None
    found = _padded_buffer_uses(alloc, op)
    if found is None:
        return None
    fill, view, writer, dealloc = found
    offsets = list(ir.DenseI64ArrayAttr(view.attributes["static_offsets"]))
    sizes = list(ir.DenseI64ArrayAttr(view.attributes["static_sizes"]))
    if any(offsets[i] != 0 or sizes[i] != p_type.shape[i] for i in outer):
        return None  # the interior must hold every plane whole
    # Where each other operand reads a plane loop: the loops become unit dimensions of its subview.
    plane_loops = set(loop_of.values())
    for value, amap in zip(list(op.operands)[1:], maps[1:]):
        for e in amap.results:
            if expr_dims(e) & plane_loops and not isinstance(e, ir.AffineDimExpr):
                return None
    fill_op, fill_value = fill
    with op.location:
        index = ir.IndexType.get()
        element = p_type.element_type
        interior_type = ir.MemRefType.get(sizes, element)
        source = _copied_from(writer, interior_type, op)
        if source is None:  # the writer writes X, a buffer of the interior's shape, in P's place
            with ir.InsertionPoint(alloc):
                interior = memref.AllocOp(interior_type, [], [], alignment=alloc.attributes["alignment"]).result \
                    if "alignment" in alloc.attributes else memref.AllocOp(interior_type, [], []).result
            writer.operands[len(writer.operands) - 1] = interior
            with ir.InsertionPoint(dealloc):
                memref.DeallocOp(interior)
        else:  # the writer was a copy of `source`: the kernel reads `source` itself
            interior = source
            writer.erase()
        view.erase()
        fill_op.erase()
        dealloc.erase()
        extents = [p_type.shape[i] for i in outer]
        parallel = parts > 1
        ip = ir.InsertionPoint(op)
        with ip:
            if parallel:
                loops = scf.ForallOp([0] * len(outer), extents, [1] * len(outer))
                with ir.InsertionPoint(loops.body):
                    scf.InParallelOp()
                ivs = list(loops.induction_variables)
                inner = ir.InsertionPoint(loops.body.operations[0])
            else:
                scope = memref.AllocaScopeOp([])  # the planes' stack space is released after the kernel
                scope_block = scope.bodyRegion.blocks.append()
                with ir.InsertionPoint(scope_block):
                    end = memref.AllocaScopeReturnOp([])
                inner, ivs = ir.InsertionPoint(end), []
                for extent in extents:
                    with inner:
                        c0, cn, c1 = (arith.ConstantOp(index, v).result for v in (0, extent, 1))
                        for_op = scf.ForOp(c0, cn, c1)
                        with ir.InsertionPoint(for_op.body):
                            terminator = scf.YieldOp([])
                    ivs.append(for_op.induction_variable)
                    inner = ir.InsertionPoint(terminator)
        iv_of = dict(zip(outer, ivs))
        loop_iv = {loop_of[i]: iv_of[i] for i in outer}
        with inner:
            plane = memref.AllocaOp(ir.MemRefType.get(plane_shape, element), [], [],
                                    alignment=ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 64)).result
            linalg.fill(fill_value, outs=[plane])
            rank = p_type.rank
            interior_sizes = [1 if i in loop_of else sizes[i] for i in range(rank)]
            plane_interior = memref.subview(plane, [0 if i in loop_of else offsets[i] for i in range(rank)],
                                            interior_sizes, [1] * rank)
            plane_source = memref.subview(interior, [iv_of.get(i, 0) for i in range(rank)], interior_sizes,
                                          [1] * rank)
            linalg.copy(plane_source, outs=[plane_interior])
            operands = [plane]
            for value, amap in zip(list(op.operands)[1:], maps[1:]):
                shape = ir.MemRefType(value.type).shape
                picks = [loop_iv.get(e.position) if isinstance(e, ir.AffineDimExpr) else None for e in amap.results]
                if all(p is None for p in picks):
                    operands.append(value)
                    continue
                operands.append(memref.subview(value, [p if p is not None else 0 for p in picks],
                                               [1 if p is not None else n for p, n in zip(picks, shape)],
                                               [1] * len(shape)))
            staged = op.clone()
        for i, v in enumerate(operands):
            staged.operands[i] = v
    op.erase()
    alloc.erase()
    return staged


def _padded_buffer_uses(alloc, op):
    """(fill, interior view, writer, dealloc) where `alloc`'s buffer is filled with a constant, then
    its interior (one static `memref.subview`, unit strides) written whole by one kernel that does not
    read it, then read by `op` alone, then freed, in that order and by nothing else; else None."""
    buffer = alloc.results[0]
    users = users_in_block(buffer, op.parent)
    direct = [u.owner.operation for u in buffer.uses]
    views = [u for u in direct if u.name == "memref.subview"]
    if len(views) != 1:
        return None
    view = views[0]
    if any(v != 1 for v in ir.DenseI64ArrayAttr(view.attributes["static_strides"])) or \
            any(ir.ShapedType.is_dynamic_size(v) for v in ir.DenseI64ArrayAttr(view.attributes["static_offsets"])):
        return None
    deallocs = [u for u in direct if u.name == "memref.dealloc"]
    fill = _fill_of(next((u for u in direct if u != op and u.name != "memref.dealloc" and u != view), None), buffer)
    writers = [u.owner.operation for u in view.results[0].uses]
    # Nothing else: the fill, the view, the writer, the kernel and the free are its users.
    if fill is None or len(deallocs) != 1 or len(writers) != 1 or len(users) != 5:
        return None
    writer = writers[0]
    if writer.block != op.block or not _writes_only(writer, view.results[0]):
        return None
    order = [fill[0], view, writer, op, deallocs[0]]
    if not all(a.is_before_in_block(b) for a, b in zip(order, order[1:])):
        return None
    return fill, view, writer, deallocs[0]


def _writes_only(op, target) -> bool:
    """Whether `op` writes every element of `target` (its last operand) and reads none."""
    if op.name == "memref.copy" or op.name == "linalg.copy":
        return list(op.operands)[-1] == target and op.operands[0] != target
    if op.name != "linalg.generic" or list(op.opview.outputs) != [target] or target in list(op.opview.inputs):
        return False
    maps = indexing_maps_of(op)
    iterators = list(ir.ArrayAttr(op.attributes["iterator_types"]))
    if maps is None or not all(i == iterator_attr(op.context, "parallel") for i in iterators):
        return False
    out = maps[-1]
    rank = ir.MemRefType(target.type).rank
    if len(out.results) != rank or any(not isinstance(e, ir.AffineDimExpr) or e.position != i
                                       for i, e in enumerate(out.results)) or len(iterators) != rank:
        return False
    block = op.regions[0].blocks[0]
    return not list(block.arguments[len(block.arguments) - 1].uses)  # the output's old values unread


def _copied_from(writer, interior_type, op):
    """The buffer a copy `writer` reads, where `op` may read it instead: the interior's shape, and
    nothing between the copy and `op` writes or frees it; else None."""
    if writer.name not in ("memref.copy", "linalg.copy"):
        return None
    source = writer.operands[0]
    if list(ir.MemRefType(source.type).shape) != list(interior_type.shape):
        return None
    for user in users_in_block(buffer_root(source), op.parent):
        if writer.is_before_in_block(user) and user.is_before_in_block(op) and user.name not in VIEW_OPS:
            outputs = list(user.opview.outputs) if hasattr(user.opview, "outputs") else list(user.operands)
            if user.name == "memref.dealloc" or any(buffer_root(v) == buffer_root(source) for v in outputs
                                                    if isinstance(v.type, ir.MemRefType)):
                return None
    return source


def _fill_of(kernel, out) -> tuple[ir.Operation, ir.Value] | None:
    """(kernel, its value) where `kernel` fills exactly `out` (`ir_utils.fill_value`); else None."""
    if kernel is None or kernel.operands[len(kernel.operands) - 1] != out:
        return None
    value = fill_value(kernel)
    return None if value is None else (kernel, value)


def _filled_before(op, out) -> tuple[ir.Operation, ir.Value] | None:
    """(the fill, its value) where the last op before `op` in its block that touches `out`'s buffer
    is a kernel filling exactly `out` with a value defined outside it (`linalg.fill`, or a generic
    or `linalg.map` without inputs yielding such a value); else None."""
    block_owner = op.parent
    users = [u for u in users_in_block(buffer_root(out), block_owner)
             if u.name not in VIEW_OPS and u.is_before_in_block(op)]
    last = None
    for user in users:
        if last is None or last.is_before_in_block(user):
            last = user
    return _fill_of(last, out)


def _drop_dims(t: ir.MemRefType, dropped: list[int]) -> ir.MemRefType:
    """`t` without the (unit) dimensions `dropped`: the type of a rank-reducing subview."""
    strides, offset = t.get_strides_and_offset()
    keep = [i for i in range(t.rank) if i not in dropped]
    layout = ir.StridedLayoutAttr.get(offset, [strides[i] for i in keep])
    return ir.MemRefType.get([t.shape[i] for i in keep], t.element_type, layout, t.memory_space)


def _offset(taps: dict[int, int], const: int, ivs: dict, index) -> ir.Value | int:
    """Σ coefficient · iv + const as index arithmetic (an int when there is no tap)."""
    value = None
    for d, c in sorted(taps.items()):
        term = ivs[d]
        if c != 1:
            term = arith.MulIOp(term, arith.ConstantOp(index, c).result).result
        value = term if value is None else arith.AddIOp(value, term).result
    if value is None:
        return const
    if const:
        value = arith.AddIOp(value, arith.ConstantOp(index, const).result).result
    return value


class Im2col:
    """The facts an im2col needs about one convolution generic (also `codegen-gpu-im2col-convolutions`),
    or `ok = False`: its loop `ranges` and `maps`, the loop dimensions by role (`batch`, `features`,
    `channels`, `window`, the output image's `oh` and `ow`, which end the output and are contiguous
    there), which input is the `filter` (reading features, channels and taps as plain dimensions, in
    the order `filter_dims`) and which the `input`, and how the input reads each dimension
    (`input_plan`).

    With `groups` a grouped convolution is taken too (`codegen-gpu-im2col-convolutions`: a batch of
    GEMMs over the groups; the CPU's panels take one filter matrix, groups = 1 only): linalg's
    `depth` dimensions, read by the input, the filter and the output alike (`conv_2d_ngchw_gfchw`'s
    g), are `self.groups` and also part of `batch` (the input and output read them as they read the
    batch; only the filter, which leads with them, tells them apart). A convolution without a
    channel reduction or with one channel per group (depthwise, with or without a channel
    multiplier) is refused: its implicit GEMM would have K = KH·KW at most."""

    def __init__(self, op, groups: bool = False):
        self.ok = False
        maps = indexing_maps_of(op)
        ranges = loop_ranges_of(op, maps) if maps else None
        if ranges is None or len(op.opview.outputs) != 1 or len(op.opview.inputs) != 2:
            return
        dims = linalg.infer_convolution_dimensions(op)
        if (dims is None or (list(dims.depth) and not groups) or not list(dims.input_channel)
                or len(dims.output_image) != 2):
            return
        self.ranges, self.maps = ranges, maps
        self.window, self.channels = sorted(dims.filter_loop), sorted(dims.input_channel)
        self.groups = sorted(dims.depth)
        if self.groups and all(ranges[d] == 1 for d in self.channels):
            return
        self.batch, self.features = list(dims.batch) + self.groups, list(dims.output_channel)
        out = [e.position if isinstance(e, ir.AffineDimExpr) else None for e in maps[2].results]
        if None in out or set(out[-2:]) != set(dims.output_image) or not self.features:
            return
        if set(out[:-2]) != set(self.batch) | set(self.features):
            return
        self.oh, self.ow = out[-2], out[-1]
        out_type = ir.MemRefType(op.operands[2].type)
        strides, _ = out_type.get_strides_and_offset()
        if strides[-1] != 1 or strides[-2] != out_type.shape[-1]:
            return  # the output rows must be contiguous to be one matrix dimension
        # Which input is the filter: the one that reads the filter dimensions as plain results.
        plain = [{e.position for e in m.results if isinstance(e, ir.AffineDimExpr)} for m in maps[:2]]
        self.filter = next((i for i in (0, 1) if set(self.window) <= plain[i]), None)
        if self.filter is None:
            return
        self.input = 1 - self.filter
        filt = [e.position if isinstance(e, ir.AffineDimExpr) else None for e in maps[self.filter].results]
        if None in filt or set(filt) != set(self.groups) | set(self.features) | set(self.window) | set(self.channels):
            return
        self.filter_dims = filt
        self.input_plan = self._plan_input(maps[self.input])
        self.ok = self.input_plan is not None

    def _plan_input(self, amap):
        """Per input result: ("batch", d) | ("channel", d) | ("image", image dim, stride, {tap: dilation}, const)."""
        plan = []
        for expr in amap.results:
            lin = linear_terms(expr)
            if lin is None:
                return None
            terms, const = lin
            image = [d for d in terms if d in (self.oh, self.ow)]
            taps = {d: c for d, c in terms.items() if d in self.window}
            if len(terms) == 1 and not const and not taps and not image:
                (d, c), = terms.items()
                if c != 1 or d not in self.batch + self.channels:
                    return None
                plan.append(("batch" if d in self.batch else "channel", d))
            elif len(image) == 1 and len(terms) == 1 + len(taps) and terms[image[0]] > 0 and all(v > 0 for v in taps.values()):
                plan.append(("image", image[0], terms[image[0]], taps, const))
            else:
                return None
        images = [p[1] for p in plan if p[0] == "image"]
        if sorted(images) != sorted([self.oh, self.ow]):
            return None
        return plan


def _im2col_convolution(op, globals_: Globals, parts: int = 1, vector_bits: int = 0) -> bool:
    """Rewrite one convolution as im2col panels and contractions (see the module docstring); with
    `parts` threads, the image and panel loops become one `scf.forall` where `_parallel_panels` says so."""
    op = op.operation
    conv = Im2col(op)
    if not conv.ok:
        return False
    weight = globals_.constant_value(op.operands[conv.filter])
    if weight is None:
        return False
    # The filter re-laid out [features (its order), taps, channels (loop order)]: K = (taps, channels).
    filt = conv.filter_dims
    order = [d for d in filt if d in conv.features] + conv.window + conv.channels
    weight = weight.transpose([filt.index(d) for d in order])
    if _direct_product(op, conv, weight, globals_):
        return True
    ranges = conv.ranges
    OH, OW = ranges[conv.oh], ranges[conv.ow]
    index = ir.IndexType.get()
    element = ir.MemRefType(op.operands[conv.input].type).element_type
    taps = [ranges[d] for d in conv.window]
    chans = [ranges[d] for d in conv.channels]
    k_extent = 1
    for e in taps + chans:
        k_extent *= e
    outer = conv.batch + [conv.oh]  # the image loops, then the panels
    lanes = max(1, vector_bits // max(1, element_bits_of(op.operands[-1])))
    rows, parallel = _panel_rows(conv, k_extent * max(1, element_bits_of(op.operands[conv.input]) // 8), parts, lanes)
    extents = [ranges[d] if d != conv.oh else OH // rows for d in outer]
    with op.location:
        def const(v):
            return arith.ConstantOp(index, v).result

        def loop(extent):
            for_op = scf.ForOp(const(0), const(extent), const(1))
            with ir.InsertionPoint(for_op.body):
                scf.YieldOp([])
            return for_op

        def new_panel():
            """The stack panel P[taps, channels, rows, ow] and P as the matrix [K, rows * ow]."""
            panel = memref.AllocaOp(ir.MemRefType.get(taps + chans + [rows, OW], element), [], [],
                                    alignment=ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 64)).result
            n_k = len(taps) + len(chans)
            return panel, collapse(panel, [list(range(n_k)), [n_k, n_k + 1]])

        scoped = op.parent.name == "func.func" and not parallel
        ip = ir.InsertionPoint(op)
        if scoped:  # the panel's stack space is released after this convolution
            with ip:
                scope = memref.AllocaScopeOp([])
                block = scope.bodyRegion.blocks.append()
                with ir.InsertionPoint(block):
                    end = memref.AllocaScopeReturnOp([])
            ip = ir.InsertionPoint(end)
        with ip:
            weight = globals_.read_relaid(op.operands[conv.filter], weight, "im2col")
            n_feat = len(conv.features)
            weight2 = collapse(weight, [[i] for i in range(n_feat)] + [list(range(n_feat, n_feat + len(taps) + len(chans)))])
            ivs = {}
            if parallel:
                # One parallel loop over images and panels; each iteration (each thread) fills a
                # panel of its own, allocated in the loop's body (`codegen-hoist-static-allocas` gives
                # that body an alloca scope and never hoists the buffer out of it: shared, it would be
                # a data race), and runs its contraction alone (`Kernel.in_parallel_loop`).
                forall = scf.ForallOp([0] * len(outer), extents, [1] * len(outer))
                with ir.InsertionPoint(forall.body):
                    scf.InParallelOp()
                ivs.update(zip(outer, forall.induction_variables))
                inner = ir.InsertionPoint(forall.body.operations[0])
                with inner:
                    panel, matrix = new_panel()
            else:
                panel, matrix = new_panel()
                inner = ip
                for d, extent in zip(outer, extents):
                    with inner:
                        for_op = loop(extent)
                    ivs[d] = for_op.induction_variable
                    inner = ir.InsertionPoint(for_op.body.operations[0])
            with inner:
                row0 = arith.MulIOp(ivs[conv.oh], const(rows)).result
                tap_inner = inner
                for d in conv.window:
                    with tap_inner:
                        for_op = loop(ranges[d])
                    ivs[d] = for_op.induction_variable
                    tap_inner = ir.InsertionPoint(for_op.body.operations[0])
                with tap_inner:
                    _copy_tap(op, conv, panel, ivs, row0, rows, OW, const)
                out = _output_rows(op, conv, ivs, row0, rows, const)
                _panel_product(op, conv, matrix, weight2, out, k_extent, rows * OW)
    op.erase()
    return True


# A thread's im2col panel lives on its stack (libomp's workers get 8 MiB here, KMP_STACKSIZE; 4 MiB
# is libomp's usual default): a larger panel keeps the sequential image and panel loops, on the
# calling thread's stack, with the contraction split over the threads.
PARALLEL_PANEL_BYTES = 2 << 20
# The least share of the threads' time the parallel image/panel loop keeps busy (static chunks of
# whole panels: 5 panels on 2 threads keep 5/6 of it).
PARALLEL_PANEL_BALANCE = 0.8


def _panel_rows(conv: Im2col, column_bytes: int, parts: int, lanes: int = 1) -> tuple[int, bool]:
    """(output rows per panel, whether the image and panel loop is the parallel loop). A panel has
    the fewest whole rows that make `PANEL_PIXELS`; where their pixels are no whole number of
    `lanes`-wide vectors, the most rows below that make one (of at least `MIN_ALIGNED_PANEL_PIXELS`):
    else every register tile of the contraction ends in a partial vector and the N extent rules out
    the wide AVX-512 tile (1x128x28x28, 3x3, one thread: 7 rows, 196 pixels, 99 GF/s; 4 rows, 112
    pixels, 142; eager 143). Where its images and panels cannot be the
    parallel loop (too few for the threads: one image of one panel, ResNet's 14x14 and 8x8 layers at
    batch 1; unevenly shared; a panel too large for a thread's stack), smaller panels of at least
    `MIN_PANEL_PIXELS` where they can: the split contraction would cut the panel's columns as finely
    anyway (its N tiles), but after one thread had filled the whole panel."""
    OH, OW = conv.ranges[conv.oh], conv.ranges[conv.ow]
    images = 1
    for d in conv.batch:
        images *= conv.ranges[d]
    rows = next((r for r in range(1, OH + 1) if OH % r == 0 and r * OW >= PANEL_PIXELS), OH)
    if (rows * OW) % lanes:
        rows = next((r for r in range(rows - 1, 0, -1) if OH % r == 0 and (r * OW) % lanes == 0
                     and r * OW >= MIN_ALIGNED_PANEL_PIXELS), rows)
    candidates = [rows] + [r for r in range(rows - 1, 0, -1) if OH % r == 0 and r * OW >= MIN_PANEL_PIXELS]
    for r in candidates:
        if _parallel_panels(conv, images * (OH // r), column_bytes * r * OW, parts):
            return r, True
    return rows, False


def _parallel_panels(conv: Im2col, count: int, panel_bytes: int, parts: int) -> bool:
    """Whether the image and panel loop (`count` iterations) is the parallel loop, each iteration with its
    own panel and a single-threaded contraction, rather than sequential loops around contractions
    split over the threads. The split contraction forks a team per panel, and its panel, filled by
    the calling thread, moves to the other cores each time (a 16-channel 3x3 convolution at batch 8:
    16 forks of 4.6 us of work per thread). The outer loop needs work for `parts` threads (at least
    one panel each, evenly shared: `PARALLEL_PANEL_BALANCE`) and a panel that fits a thread's stack;
    a small convolution stays on one thread (`PARALLEL_MIN_ITERATIONS`, as the schedules')."""
    if parts <= 1 or panel_bytes > PARALLEL_PANEL_BYTES:
        return False
    iterations = 1
    for r in conv.ranges:
        iterations *= r
    if iterations < PARALLEL_MIN_ITERATIONS:
        return False
    return count >= parts and count / (parts * -(-count // parts)) >= PARALLEL_PANEL_BALANCE


def _direct_product(op, conv: Im2col, relaid, globals_: Globals) -> bool:
    """A 1x1, stride-1 convolution over whole, contiguous image rows: the input is the matrix
    [channels, pixels] already, so the product reads it (and the output) with (oh, ow) collapsed."""
    plan, ranges = conv.input_plan, conv.ranges
    source = op.operands[conv.input]
    t = ir.MemRefType(source.type)
    strides, _ = t.get_strides_and_offset()
    if any(ranges[d] != 1 for d in conv.window) or [p[0] for p in plan[-2:]] != ["image", "image"]:
        return False
    if [p[1] for p in plan[-2:]] != [conv.oh, conv.ow] or any(p[2] != 1 or p[4] for p in plan[-2:]):
        return False
    if list(t.shape[-2:]) != [ranges[conv.oh], ranges[conv.ow]] or strides[-1] != 1 or strides[-2] != t.shape[-1]:
        return False
    # A 1x1 image (the last stages of a classifier): no pixel dimension at all, the product is a
    # Linear layer `out[b, f] += In[b, c] * W[f, c]` whose vectors run along the features (with a
    # pixel dimension of one they ran along it, a scalar at a time: MobileNetV2's 320 -> 1280 at batch 1,
    # 275 -> 137 us).
    pixels = [] if ranges[conv.oh] * ranges[conv.ow] == 1 else [0]
    with op.location, ir.InsertionPoint(op):
        n_in = len(plan)
        matrix = collapse(source, [[i] for i in range(n_in - 2)] + [[n_in - 2, n_in - 1]]) if pixels \
            else _without_image(source)
        weight = globals_.read_relaid(op.operands[conv.filter], relaid.reshape(
            relaid.shape[:len(conv.features)] + relaid.shape[len(conv.features) + len(conv.window):]), "im2col")
        out_dims = [e.position for e in conv.maps[2].results]
        n_out = len(out_dims)
        out = collapse(op.operands[2], [[i] for i in range(n_out - 2)] + [[n_out - 2, n_out - 1]]) if pixels \
            else _without_image(op.operands[2])
        # Loops: the output's dimensions with (oh, ow) as one pixel dimension p, then the channels.
        outer = out_dims[:-2]
        rank = len(outer) + len(pixels) + len(conv.channels)
        position = {d: i for i, d in enumerate(outer)}
        position.update({d: len(outer) + len(pixels) + i for i, d in enumerate(conv.channels)})
        p = [ir.AffineDimExpr.get(len(outer))] if pixels else []
        maps = [None, None]
        maps[conv.input] = ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(position[q[1]]) for q in plan[:-2]] + p)
        maps[conv.filter] = ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(position[d]) for d in conv.features]
                                             + [ir.AffineDimExpr.get(position[d]) for d in conv.channels])
        maps.append(ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(position[d]) for d in outer] + p))
        operands = [None, None]
        operands[conv.input], operands[conv.filter] = matrix, weight
        iterators = ([iterator_attr(op.context, "parallel")] * (len(outer) + len(pixels))
                     + [iterator_attr(op.context, "reduction")] * len(conv.channels))
        generic_like(op, operands + [out], maps, iterators)
    op.erase()
    return True


def _without_image(value):
    """`value` (an NCHW-like buffer whose two image dimensions are 1) without them: a rank-reducing subview."""
    t = ir.MemRefType(value.type)
    reduced = _drop_dims(t, [t.rank - 2, t.rank - 1])
    return memref.subview(value, [0] * t.rank, list(t.shape), [1] * t.rank, result_type=reduced)


def _copy_tap(op, conv: Im2col, panel, ivs, row0, rows: int, OW: int, const) -> None:
    """panel[tap, :, :, :] = the tap's input rows (a data-movement kernel)."""
    source = op.operands[conv.input]
    offsets, sizes, strides, dropped, src_dims = [], [], [], [], []
    for i, item in enumerate(conv.input_plan):
        if item[0] == "batch":
            offsets.append(ivs[item[1]]), sizes.append(1), strides.append(1), dropped.append(i)
        elif item[0] == "channel":
            offsets.append(0), sizes.append(conv.ranges[item[1]]), strides.append(1), src_dims.append(item[1])
        else:
            _, image, stride, taps, c = item
            start = _offset(taps, c, ivs, ir.IndexType.get())
            if image == conv.oh:
                scaled = arith.MulIOp(row0, const(stride)).result if stride != 1 else row0
                start = arith.AddIOp(scaled, start if isinstance(start, ir.Value) else const(start)).result
                sizes.append(rows)
            else:
                sizes.append(OW)
            offsets.append(start), strides.append(stride), src_dims.append(image)
    view = memref.subview(source, offsets, sizes, strides)
    if dropped:
        reduced = _drop_dims(view.type, dropped)
        view.owner.erase()
        view = memref.subview(source, offsets, sizes, strides, result_type=reduced)
    n_taps = len(conv.window)
    dst_dims = conv.channels + [conv.oh, conv.ow]
    dst_sizes = [1] * n_taps + [conv.ranges[d] for d in conv.channels] + [rows, OW]
    dst_full = memref.subview(panel, [ivs[d] for d in conv.window] + [0] * (len(dst_dims)), dst_sizes,
                              [1] * len(dst_sizes))
    reduced = _drop_dims(dst_full.type, list(range(n_taps)))
    dst_full.owner.erase()
    dst = memref.subview(panel, [ivs[d] for d in conv.window] + [0] * (len(dst_dims)), dst_sizes,
                         [1] * len(dst_sizes), result_type=reduced)
    rank = len(dst_dims)
    src_map = ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(dst_dims.index(d)) for d in src_dims])
    copy = linalg.GenericOp([], [view], [dst],
                            ir.ArrayAttr.get([ir.AffineMapAttr.get(src_map),
                                              ir.AffineMapAttr.get(ir.AffineMap.get_identity(rank))]),
                            ir.ArrayAttr.get([iterator_attr(op.context, "parallel")] * rank))
    body = copy.regions[0].blocks.append(reduced.element_type, reduced.element_type)
    with ir.InsertionPoint(body):
        linalg.YieldOp([body.arguments[0]])


def _output_rows(op, conv: Im2col, ivs, row0, rows: int, const):
    """The output's panel rows as a [features..., pixels] matrix."""
    out = op.operands[2]
    out_dims = [e.position for e in conv.maps[2].results]
    offsets = [ivs[d] if d in conv.batch else (row0 if d == conv.oh else 0) for d in out_dims]
    sizes = [1 if d in conv.batch else (rows if d == conv.oh else conv.ranges[d]) for d in out_dims]
    view = memref.subview(out, offsets, sizes, [1] * len(out_dims))
    dropped = [i for i, d in enumerate(out_dims) if d in conv.batch]
    if dropped:
        reduced = _drop_dims(view.type, dropped)
        view.owner.erase()
        view = memref.subview(out, offsets, sizes, [1] * len(out_dims), result_type=reduced)
    rank = len(out_dims) - len(dropped)
    return collapse(view, [[i] for i in range(rank - 2)] + [[rank - 2, rank - 1]])


def _panel_product(op, conv: Im2col, matrix, weight, out, k_extent: int, pixels: int) -> None:
    """out[f..., p] += weight[f..., k] * matrix[k, p] with the convolution's own body."""
    n_feat = len(conv.features)
    rank = n_feat + 2  # (features..., p, k)
    f_dims = [ir.AffineDimExpr.get(i) for i in range(n_feat)]
    p, k = ir.AffineDimExpr.get(n_feat), ir.AffineDimExpr.get(n_feat + 1)
    maps = [None, None]
    maps[conv.input] = ir.AffineMap.get(rank, 0, [k, p])
    maps[conv.filter] = ir.AffineMap.get(rank, 0, f_dims + [k])
    maps.append(ir.AffineMap.get(rank, 0, f_dims + [p]))
    operands = [None, None]
    operands[conv.input], operands[conv.filter] = matrix, weight
    iterators = [iterator_attr(op.context, "parallel")] * (n_feat + 1) + [iterator_attr(op.context, "reduction")]
    generic_like(op, operands + [out], maps, iterators)


def generic_like(op, operands, maps, iterators, sources=None):
    """A generic over `operands` (inputs, then the output) with `op`'s body; operand i stands for
    the body's argument `sources[i]` (default: i)."""
    product = linalg.GenericOp([], operands[:-1], [operands[-1]],
                               ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]), ir.ArrayAttr.get(iterators))
    old = op.regions[0].blocks[0]
    sources = list(sources) if sources is not None else list(range(len(old.arguments)))
    block = product.regions[0].blocks.append(*[old.arguments[i].type for i in sources])
    mapping = {old.arguments[i]: b for i, b in zip(sources, block.arguments)}
    ops = list(old.operations)
    with ir.InsertionPoint(block):
        clone_ops(ops, mapping)
    return product


def merge_loops(op, maps, groups: list[list[int]]):
    """Replace the generic `op` (indexing `maps`) by one with each group of `groups` -- consecutive
    loop numbers that every operand reads as consecutive dimensions, contiguous together, or not
    at all -- merged into one loop over the group's row-major product: the operands reading a group
    seen through `collapse` views (no copy), the loops' order and so every sum's order unchanged.
    `op` is erased; returns the new generic."""
    rank = maps[0].n_dims
    merged = {d: g[0] for g in groups for d in g[1:]}
    kept = [d for d in range(rank) if d not in merged]
    new_of = {d: i for i, d in enumerate(kept)}
    renumber = ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(new_of[merged.get(d, d)]) for d in range(rank)])
    firsts = {g[0]: g for g in groups}
    iterators = list(ir.ArrayAttr(op.attributes["iterator_types"]))
    operands, new_maps = [], []
    with op.location, ir.InsertionPoint(op):
        for value, amap in zip(op.operands, maps):
            results, reassociation = [], []
            for at, e in enumerate(amap.results):
                d = e.position if isinstance(e, ir.AffineDimExpr) else None
                if d in merged:
                    continue        # read as part of its group's first loop's dimension
                group = firsts.get(d)
                reassociation.append(list(range(at, at + len(group))) if group else [at])
                results.append(e.compose(renumber))
            if len(results) < len(amap.results):
                value = collapse(value, reassociation)
            operands.append(value)
            new_maps.append(ir.AffineMap.get(len(kept), 0, results))
        product = generic_like(op, operands, new_maps, [iterators[d] for d in kept])
    op.erase()
    return product


_POOLING_OPS = ("arith.maximumf", "arith.minimumf", "arith.maxnumf", "arith.minnumf", "arith.addf",
                 "arith.maxsi", "arith.minsi", "arith.maxui", "arith.minui", "arith.addi")


def _pooling_window(op) -> list[int] | None:
    """A pooling generic's window dimensions (its reduction dimensions), or None for any other kernel."""
    kernel = classify(op)
    if kernel.kind is not KernelKind.POOLING or len(op.opview.outputs) != 1:
        return None
    block = op.regions[0].blocks[0]
    body = list(block.operations)
    # A pooling body combines the window's element with the output by one op (max, min, add): a
    # product (a blocked convolution linalg does not recognise) is no pooling; a body reading its
    # loop indices (max pooling's indices) would read them moved by the tap loops.
    if len(body) != 2 or len(body[0].results) != 1 or body[1].operands[0] != body[0].results[0]:
        return None
    if block.arguments[len(block.arguments) - 1] not in list(body[0].operands):
        return None
    if body[0].name not in _POOLING_OPS:
        return None
    return list(kernel.reduction_dims)


def _unwrapped(expr, ranges):
    """`expr` with `d mod N` -> `d` and `d floordiv N` -> 0 where d's loop range is at most N."""
    if isinstance(expr, (ir.AffineModExpr, ir.AffineFloorDivExpr)):
        lhs, rhs = expr.lhs, expr.rhs
        if isinstance(lhs, ir.AffineDimExpr) and isinstance(rhs, ir.AffineConstantExpr) and \
                ranges[lhs.position] <= rhs.value:
            return lhs if isinstance(expr, ir.AffineModExpr) else ir.AffineConstantExpr.get(0)
        return expr
    if isinstance(expr, (ir.AffineAddExpr, ir.AffineMulExpr)):
        lhs, rhs = _unwrapped(expr.lhs, ranges), _unwrapped(expr.rhs, ranges)
        return lhs + rhs if isinstance(expr, ir.AffineAddExpr) else lhs * rhs
    return expr


def _drop_redundant_wraps(op) -> None:
    """A view folded into a convolution may index its channels as `c mod 16` with c < 8 (a
    periodic concat buffer, vt-lower-views): the identity, which linalg's convolution matcher and
    the per-tap split do not see through. Without it the convolution kept its loops, which sum
    channels outer, and was no longer bitwise the im2col GEMM of the plain pipeline (fuzz seed
    2611 case 5154). The operand becomes a subview of c's extent where it is wider, as linalg
    infers each loop's range from the operand dims a bare loop index addresses."""
    if not all(isinstance(v.type, ir.MemRefType) for v in op.operands):
        return   # the kernel level only (as decompose_convolution)
    maps = indexing_maps_of(op)
    ranges = loop_ranges_of(op, maps) if maps else None
    if ranges is None:
        return
    new_maps, views = [], {}
    for k, (operand, amap) in enumerate(zip(op.operands, maps)):
        results = [_unwrapped(e, ranges) for e in amap.results]
        new_maps.append(ir.AffineMap.get(amap.n_dims, amap.n_symbols, results))
        source = ir.MemRefType(operand.type)
        sizes = [ranges[e.position] if isinstance(e, ir.AffineDimExpr) and e != old else size
                 for e, old, size in zip(results, amap.results, source.shape)]
        if sizes != list(source.shape):
            views[k] = (operand, sizes)
    if new_maps == maps:
        return
    with op.context, op.location, ir.InsertionPoint(op):
        for k, (operand, sizes) in views.items():
            zeros = [0] * len(sizes)
            op.operands[k] = memref.subview(operand, zeros, sizes, [1] * len(sizes),
                                            result_type=subview_type(ir.MemRefType(operand.type), zeros, sizes, []))
    op.attributes["indexing_maps"] = ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in new_maps])


def decompose_convolutions(module_op, threads: int = 0, vector_bits: int = 0) -> int:
    """Decompose every convolution generic of the kernel level; returns how many. `threads` (0: the
    host's cores) decides where an im2col convolution's parallel loop is (`_parallel_panels`),
    `vector_bits` (0: the host's) its panels' widths; the values never depend on them."""
    globals_ = Globals(module_op)
    parts = threads if threads > 0 else host_target().cores
    vector_bits = vector_bits or host_target().vector_bits

    def rewrite(op):
        _drop_redundant_wraps(op)
        if linalg.isa_convolution_op(op):
            return (_im2col_convolution(op, globals_, parts, vector_bits) or unroll_taps(op, parts=parts)
                    or decompose_convolution(op))
        window = _pooling_window(op)
        return bool(window) and (unroll_taps(op, window, parts) or decompose_convolution(op, window))

    count = rewrite_generics(module_op, rewrite)
    globals_.erase_unread()
    return count


@register_pass
class DecomposeConvolutions(Pass):
    name = "codegen-decompose-convolutions"
    summary = ("Rewrite each convolution (memrefs) as im2col panels and a contraction, contractions per filter "
               "tap, or (depthwise, pooling) one elementwise kernel reading every tap")

    options = (Option("threads", int, 0, "threads the code runs on (0: the host's cores); 1: sequential "
                                         "image and panel loops"),
               Option("vector-bits", int, 0, "vector register width the panels are sized for (0: the host's; "
                                             "tests fix it)"))

    def run(self, module):
        decompose_convolutions(module, threads=self.threads, vector_bits=self.vector_bits)
