"""`convert-tm-tensor-to-scf`: torch-mlir's TMTensor ops as scf/tensor/linalg ops on tensors.

torch-mlir lowers the torch ops that no structured linalg op expresses to its own `tm_tensor`
dialect: `scatter` (index_put, scatter/scatter_add/scatter_reduce, bincount, index_add, max_unpool,
the backward of nll_loss and of max_pool), `scan` (cumsum, cumprod, logcumsumexp, and what torch
decomposes into them: masked_scatter, nonzero, repeat_interleave), `sort` (sort, argsort, and topk
through a sort), `topk` (kthvalue) and `attention` (scaled_dot_product_attention, when torch does not
decompose it). This pass rewrites each into graph-level ops every vtmlir backend compiles.

Why not torch-mlir's own passes (both are in the bundled bindings): `tm-tensor-bufferize` is a
dialect-conversion bufferization that wraps its buffers in `bufferization.to_tensor` without
`restrict`, which the one-shot bufferization of `vtmlir.backend.bufferize` refuses; `tm-tensor-to-loops`
works on buffers only, sorts by bubble sort (quadratic), and its attention ignores the op's `scale`.

The rows an op treats independently are the iterations of an `scf.forall` (the dimensions other than
the scanned/sorted one; the update dimensions a scatter's indices do not address). The CPU runs it as
loops (`scf-forall-to-for`); the CUDA backend makes each iteration one GPU thread
(`gpu-sequentialize-forall`). Inside, a row is a 1-D (or rank-reduced) tensor slice, worked on by a
sequential `scf.for` nest with `tensor.extract`/`tensor.insert` and written back with
`tensor.parallel_insert_slice`; bufferization makes all of it in place. The op's region (the scan's
combiner, the sort's comparator, the scatter's update) is cloned into the loop body.

- scan: `out[0] = x[0]` (inclusive) or `acc` (exclusive), then `out[i] = f(out[i-1], x[i])` (or
  `x[i-1]`); the accumulator result is the last value computed (its input when the row has one element).
- sort: a bottom-up merge sort (O(n log n)), stable: of two elements it keeps the earlier first
  when the comparator holds for (earlier, later) -- the order torch-mlir's bubble sort gives; two
  buffers per operand, ping-ponged two passes at a time so that bufferization copies nothing.
- scatter: for each update, in order (non-unique indices accumulate), the element at the position
  its indices (plus its own offsets in the update dimensions) address is combined with the update.
  A negative index counts from the end of its dimension (PyTorch's index_put; torch-mlir passes
  the index on unchanged). An update whose position still lies outside the result is skipped
  (PyTorch raises an index error; the compiled code must not write outside its buffer).
- topk: each element of a row is inserted into the k-list as torch-mlir defines it (ties: the first
  index wins).
- attention: `softmax(Q Kᵀ · scale + mask) V` as `linalg.generic` ops (mask: added, or for i1
  `select(m, 0, -inf)`; `scale` defaults to 1/√d); a row whose mask excludes every key gives zeros,
  as PyTorch does. f16/bf16 are computed in f32.
"""

from __future__ import annotations

import math as pymath

from torch_mlir import ir
from torch_mlir.dialects import arith, bufferization, linalg, scf, tensor
from torch_mlir.dialects import math as math_d

from ..ir_utils import walk_ops
from .registry import Pass, PassFailure, register_pass

DYNAMIC = -9223372036854775808  # ShapedType::kDynamic, for sizes, offsets and strides alike


# -- small builders (all at the current insertion point and location) --------------------------------


def _index(value: int) -> ir.Value:
    return arith.ConstantOp(ir.IndexType.get(), value).result


def _as_value(v) -> ir.Value:
    return _index(v) if isinstance(v, int) else v


def _size(value: ir.Value, dim: int):
    """Size of `dim` of a ranked tensor: an int when static, else a `tensor.dim` value."""
    t = ir.RankedTensorType(value.type)
    if not t.is_dynamic_dim(dim):
        return t.get_dim_size(dim)
    return tensor.DimOp(value, _index(dim)).result


def _mixed(values) -> tuple[list, list[int]]:
    """(dynamic values, static list with DYNAMIC holes) of a list of ints and index values."""
    dyn, static = [], []
    for v in values:
        if isinstance(v, int):
            static.append(v)
        else:
            dyn.append(v)
            static.append(DYNAMIC)
    return dyn, static


def _slice_type(sizes, element_type) -> ir.RankedTensorType:
    return ir.RankedTensorType.get([s if isinstance(s, int) else DYNAMIC for s in sizes], element_type)


def _extract_slice(source, offsets, sizes, keep: list[int]) -> ir.Value:
    """`source[offsets : offsets + sizes]` keeping only the dimensions in `keep` (the others have size 1)."""
    elt = ir.RankedTensorType(source.type).element_type
    d_off, s_off = _mixed(offsets)
    d_size, s_size = _mixed(sizes)
    result = _slice_type([sizes[d] for d in keep], elt)
    return tensor.ExtractSliceOp(result, source, d_off, d_size, [], s_off, s_size, [1] * len(sizes)).result


def _parallel_insert_slice(source, dest, offsets, sizes) -> None:
    d_off, s_off = _mixed(offsets)
    d_size, s_size = _mixed(sizes)
    tensor.ParallelInsertSliceOp(source, dest, d_off, d_size, [], s_off, s_size, [1] * len(sizes))


def _select(cond, a, b) -> ir.Value:
    return arith.SelectOp(cond, a, b).result


def _cmpi(predicate: str, a, b) -> ir.Value:
    return arith.CmpIOp(getattr(arith.CmpIPredicate, predicate), a, b).result


def _min(a, b) -> ir.Value:
    return arith.MinSIOp(_as_value(a), _as_value(b)).result


def _add(a, b) -> ir.Value:
    return arith.AddIOp(_as_value(a), _as_value(b)).result


def _for(lower, upper, step, iter_args, body) -> list[ir.Value]:
    """`scf.for` whose body is `body(iv, *iter_args) -> values to yield`; returns its results."""
    loop = scf.ForOp(_as_value(lower), _as_value(upper), _as_value(step), list(iter_args))
    with ir.InsertionPoint(loop.body):
        scf.YieldOp(list(body(loop.induction_variable, *loop.inner_iter_args)))
    return list(loop.results)


def _if(cond, result_types, then_body, else_body) -> list[ir.Value]:
    op = scf.IfOp(cond, list(result_types), has_else=True)
    with ir.InsertionPoint(op.then_block):
        scf.YieldOp(list(then_body()))
    with ir.InsertionPoint(op.else_block):
        scf.YieldOp(list(else_body()))
    return list(op.results)


def _inline(block: ir.Block, args: list) -> list[ir.Value]:
    """Clone the ops of `block` (a TMTensor region) at the insertion point with its arguments bound to
    `args`; returns the values its `tm_tensor.yield` yields."""
    mapping = {arg: value for arg, value in zip(block.arguments, args)}
    yielded = []
    for op in block.operations:
        op = op.operation
        if op.name == "tm_tensor.yield":
            yielded = [mapping.get(v, v) for v in op.operands]
            break
        clone = op.clone()
        for nested in walk_ops(clone):
            for i, operand in enumerate(nested.operands):
                if operand in mapping:
                    nested.operands[i] = mapping[operand]
        for old, new in zip(op.results, clone.results):
            mapping[old] = new
    return yielded


def _forall_rows(sizes: list, shared: list, body) -> list[ir.Value]:
    """`scf.forall` over `sizes` (one iteration when empty) with `shared` outputs; `body(ivs, outs)`
    builds an iteration and returns [(slice, dest, offsets, sizes)] to insert in parallel."""
    bounds = sizes or [1]
    loop = scf.ForallOp([0] * len(bounds), bounds, [1] * len(bounds), shared)
    with ir.InsertionPoint(loop.body):
        ivs = list(loop.induction_variables)[: len(sizes)]
        inserts = body(ivs, list(loop.inner_iter_args))
        terminator = scf.InParallelOp()
    with ir.InsertionPoint(terminator.block):
        for source, dest, offsets, sizes_ in inserts:
            _parallel_insert_slice(source, dest, offsets, sizes_)
    return list(loop.results)


def _segments(op) -> tuple[list, list]:
    """(inputs, outputs) of a TMTensor op (AttrSizedOperandSegments)."""
    n_in, n_out = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    operands = list(op.operands)
    return operands[:n_in], operands[n_in:n_in + n_out]


def _int_attr(op, name: str) -> int:
    return ir.IntegerAttr(op.attributes[name]).value


# -- scan ---------------------------------------------------------------------------------------------


def _lower_scan(op) -> list[ir.Value]:
    (x,), (out, acc) = _segments(op)
    dim = _int_attr(op, "dimension")
    inclusive = ir.BoolAttr(op.attributes["inclusive"]).value
    rank = ir.RankedTensorType(x.type).rank
    elt = ir.RankedTensorType(x.type).element_type
    others = [d for d in range(rank) if d != dim]
    n = _size(x, dim)
    combine = op.regions[0].blocks[0]

    def row(ivs, shared):
        out_s, acc_s = shared
        offsets = [0] * rank
        sizes = [1] * rank
        for d, iv in zip(others, ivs):
            offsets[d] = iv
        sizes[dim] = n
        x_row = _extract_slice(x, offsets, sizes, [dim])
        out_row = _extract_slice(out_s, offsets, sizes, [dim])
        acc0 = tensor.ExtractOp(acc_s, ivs).result

        def step(i, values, carry):
            def first():
                return [tensor.ExtractOp(x_row, [i]).result if inclusive else carry, carry]

            def later():
                before = arith.SubIOp(i, _index(1)).result
                previous = tensor.ExtractOp(values, [before]).result
                operand = tensor.ExtractOp(x_row, [i if inclusive else before]).result
                (value,) = _inline(combine, [previous, operand])
                return [value, value]

            value, carry = _if(_cmpi("eq", i, _index(0)), [elt, elt], first, later)
            return [tensor.InsertOp(value, values, [i]).result, carry]

        values, last = _for(0, n, 1, [out_row, acc0], step)
        last_t = tensor.FromElementsOp(ir.RankedTensorType.get([], elt), [last]).result
        return [(values, out_s, offsets, sizes), (last_t, acc_s, list(ivs), [1] * len(ivs))]

    return _forall_rows([_size(x, d) for d in others], [out, acc], row)


# -- sort ---------------------------------------------------------------------------------------------


def _merge_pass(src: list, dst: list, width, n, compare) -> list[ir.Value]:
    """Merge the sorted runs of length `width` of the rows `src` into `dst` (stable)."""

    def run(lo, *dst_rows):
        mid = _min(_add(lo, width), n)
        hi = _min(_add(lo, arith.MulIOp(width, _index(2)).result), n)
        last_left = arith.SubIOp(mid, _index(1)).result
        last = arith.SubIOp(_as_value(n), _index(1)).result

        def element(k, i, j, *rows):
            left = [tensor.ExtractOp(s, [_min(i, last_left)]).result for s in src]
            right = [tensor.ExtractOp(s, [_min(j, last)]).result for s in src]
            (ordered,) = compare([v for pair in zip(left, right) for v in pair])
            left_open = _cmpi("slt", i, mid)
            right_done = _cmpi("sge", j, hi)
            take_left = arith.AndIOp(left_open, arith.OrIOp(right_done, ordered).result).result
            rows = [tensor.InsertOp(_select(take_left, a, b), r, [k]).result for a, b, r in zip(left, right, rows)]
            one = arith.IndexCastUIOp(ir.IndexType.get(), take_left).result
            return [_add(i, one), _add(j, arith.SubIOp(_index(1), one).result), *rows]

        return _for(lo, hi, 1, [lo, mid, *dst_rows], element)[2:]

    step = arith.MulIOp(width, _index(2)).result
    return _for(0, n, step, dst, run)


def _sort_passes(n) -> ir.Value:
    """Number of pairs of merge passes that sort `n` elements: ceil(ceil(log2 n) / 2)."""
    if isinstance(n, int):
        passes = max(0, (n - 1).bit_length())
        return _index((passes + 1) // 2)
    i64 = ir.IntegerType.get_signless(64)
    m = arith.IndexCastOp(i64, arith.SubIOp(n, _index(1)).result).result
    passes = arith.SubIOp(arith.ConstantOp(i64, 64).result, math_d.CountLeadingZerosOp(m).result).result
    pairs = arith.DivUIOp(arith.AddIOp(passes, arith.ConstantOp(i64, 1).result).result,
                          arith.ConstantOp(i64, 2).result).result
    return arith.IndexCastOp(ir.IndexType.get(), pairs).result


def _lower_sort(op) -> list[ir.Value]:
    inputs, outs = _segments(op)
    if inputs:
        raise PassFailure("convert-tm-tensor-to-scf: tm_tensor.sort with inputs is not supported", op.location)
    dim = _int_attr(op, "dimension")
    rank = ir.RankedTensorType(outs[0].type).rank
    others = [d for d in range(rank) if d != dim]
    n = _size(outs[0], dim)
    comparator = op.regions[0].blocks[0]

    def compare(args):
        return _inline(comparator, args)

    def row(ivs, shared):
        offsets, sizes = [0] * rank, [1] * rank
        for d, iv in zip(others, ivs):
            offsets[d] = iv
        sizes[dim] = n
        rows = [_extract_slice(s, offsets, sizes, [dim]) for s in shared]
        # `bufferization.alloc_tensor`, not `tensor.empty`: cse would merge the empties of two
        # operands of one type, and bufferization would then give both spare rows one buffer
        spare = [bufferization.AllocTensorOp(_slice_type([n], ir.RankedTensorType(s.type).element_type),
                                             [] if isinstance(n, int) else [n]).result for s in shared]
        k = len(rows)

        def two_passes(q, *buffers):
            a, b = list(buffers[:k]), list(buffers[k:])
            width = arith.ShLIOp(_index(1), arith.MulIOp(q, _index(2)).result).result
            b = _merge_pass(a, b, width, n, compare)
            a = _merge_pass(b, a, arith.ShLIOp(width, _index(1)).result, n, compare)
            return a + b

        sorted_rows = _for(0, _sort_passes(n), 1, rows + spare, two_passes)[:k]
        return [(r, s, offsets, sizes) for r, s in zip(sorted_rows, shared)]

    return _forall_rows([_size(outs[0], d) for d in others], outs, row)


# -- scatter ------------------------------------------------------------------------------------------


def _lower_scatter(op) -> list[ir.Value]:
    (updates, indices), (original,) = _segments(op)
    dim_map = list(ir.DenseI64ArrayAttr(op.attributes["dimension_map"]))
    u_type, o_type = ir.RankedTensorType(updates.type), ir.RankedTensorType(original.type)
    rank, k = o_type.rank, u_type.rank - 1
    # update dimension j (after the batch dimension 0) addresses result dimension rank - k + j
    free = [j for j in range(k) if rank - k + j not in dim_map]   # independent rows: parallel
    bound = [j for j in range(k) if j not in free]                 # offsets added to the indices
    kept = [d for d in range(rank) if d not in {rank - k + j for j in free}]
    combine = op.regions[0].blocks[0]
    index_type = ir.IndexType.get()

    def row(ivs, shared):
        (orig_s,) = shared
        full = [_as_value(_size(orig_s, d)) for d in range(rank)]
        o_off, o_size = [0] * rank, [_size(orig_s, d) for d in range(rank)]
        u_off, u_size = [0] * (k + 1), [_size(updates, d) for d in range(k + 1)]
        for j, iv in zip(free, ivs):
            o_off[rank - k + j], o_size[rank - k + j] = iv, 1
            u_off[1 + j], u_size[1 + j] = iv, 1
        part = _extract_slice(orig_s, o_off, o_size, kept)
        u_part = _extract_slice(updates, u_off, u_size, [0] + [1 + j for j in bound])
        extents = [o_size[d] for d in kept]

        def update(i, current):
            def nest(level, ivs_bound, value):
                if level < len(bound):
                    return _for(0, _size(updates, 1 + bound[level]), 1, [value],
                                lambda iv, v: nest(level + 1, ivs_bound + [iv], v))
                start = {rank - k + j: iv for j, iv in zip(bound, ivs_bound)}
                for t, d in enumerate(dim_map):
                    raw = tensor.ExtractOp(indices, [i, _index(t)]).result
                    idx = arith.IndexCastOp(index_type, raw).result
                    # a negative index counts from the end (PyTorch's index_put; torch-mlir passes it on)
                    idx = _select(_cmpi("slt", idx, _index(0)), _add(idx, full[d]), idx)
                    start[d] = _add(idx, start[d]) if d in start else idx
                position = [start.get(d, _index(0)) for d in kept]
                inside = None
                for p, extent in zip(position, extents):
                    ok = arith.AndIOp(_cmpi("sge", p, _index(0)), _cmpi("slt", p, _as_value(extent))).result
                    inside = ok if inside is None else arith.AndIOp(inside, ok).result

                def write():
                    new = tensor.ExtractOp(u_part, [i, *ivs_bound]).result
                    old = tensor.ExtractOp(value, position).result
                    (combined,) = _inline(combine, [new, old])
                    return [tensor.InsertOp(combined, value, position).result]

                if inside is None:
                    return write()
                return _if(inside, [value.type], write, lambda: [value])

            return nest(0, [], current)

        (result,) = _for(0, _size(indices, 0), 1, [part], update)
        return [(result, orig_s, o_off, o_size)]

    return _forall_rows([_size(updates, 1 + j) for j in free], [original], row)


# -- topk ---------------------------------------------------------------------------------------------


def _lower_topk(op) -> list[ir.Value]:
    inputs, (out_values, out_indices) = _segments(op)
    values, indices = inputs[0], (inputs[1] if len(inputs) > 1 else None)
    dim = _int_attr(op, "dimension")
    rank = ir.RankedTensorType(values.type).rank
    others = [d for d in range(rank) if d != dim]
    index_elt = ir.RankedTensorType(out_indices.type).element_type
    compare = op.regions[0].blocks[0]

    def row(ivs, shared):
        v_s, i_s = shared
        offsets, in_sizes, out_sizes = [0] * rank, [1] * rank, [1] * rank
        for d, iv in zip(others, ivs):
            offsets[d] = iv
        in_sizes[dim], out_sizes[dim] = _size(values, dim), _size(out_values, dim)
        x_row = _extract_slice(values, offsets, in_sizes, [dim])
        i_row = _extract_slice(indices, offsets, in_sizes, [dim]) if indices is not None else None
        kv, ki = _extract_slice(v_s, offsets, out_sizes, [dim]), _extract_slice(i_s, offsets, out_sizes, [dim])

        def insert(n, best_v, best_i):
            value = tensor.ExtractOp(x_row, [n]).result
            index = tensor.ExtractOp(i_row, [n]).result if i_row is not None else \
                arith.IndexCastOp(index_elt, n).result

            def slot(j, carry_v, carry_i, rows_v, rows_i):
                held_v = tensor.ExtractOp(rows_v, [j]).result
                held_i = tensor.ExtractOp(rows_i, [j]).result
                (forward,) = _inline(compare, [carry_v, held_v])
                (backward,) = _inline(compare, [held_v, carry_v])
                tie_first = arith.AndIOp(_cmpi("eq", forward, backward), _cmpi("slt", carry_i, held_i)).result
                take_index = arith.OrIOp(forward, tie_first).result
                rows_v = tensor.InsertOp(_select(forward, carry_v, held_v), rows_v, [j]).result
                rows_i = tensor.InsertOp(_select(take_index, carry_i, held_i), rows_i, [j]).result
                return [_select(forward, held_v, carry_v), _select(take_index, held_i, carry_i), rows_v, rows_i]

            return _for(0, out_sizes[dim], 1, [value, index, best_v, best_i], slot)[2:]

        best_v, best_i = _for(0, in_sizes[dim], 1, [kv, ki], insert)
        return [(best_v, v_s, offsets, out_sizes), (best_i, i_s, offsets, out_sizes)]

    return _forall_rows([_size(values, d) for d in others], [out_values, out_indices], row)


# -- attention ----------------------------------------------------------------------------------------


def _generic(inputs, init, maps, iterators, body) -> ir.Value:
    """A one-result `linalg.generic`; `body(*block args)` returns the value to yield."""
    op = linalg.GenericOp([init.type], list(inputs), [init],
                          ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]),
                          [getattr(linalg.IteratorType, i) for i in iterators])
    types = [ir.RankedTensorType(v.type).element_type for v in list(inputs) + [init]]
    block = op.regions[0].blocks.append(*types)
    with ir.InsertionPoint(block):
        linalg.YieldOp([body(*block.arguments)])
    return op.results[0]


def _filled(sizes, elt, value) -> ir.Value:
    empty = tensor.EmptyOp(sizes, elt).result
    return linalg.fill(value, outs=[empty])


def _lower_attention(op) -> list[ir.Value]:
    inputs, _ = _segments(op)   # the output operand is only a shape: the result is a fresh tensor
    q, k, v = inputs[:3]
    mask = inputs[3] if len(inputs) > 3 else None
    q_type = ir.RankedTensorType(q.type)
    rank, elt = q_type.rank, q_type.element_type
    nb = rank - 2
    f32 = ir.F32Type.get()
    wide = elt if isinstance(elt, ir.F64Type) else f32
    batch = [_size(q, d) for d in range(nb)]
    m, d_k = _size(q, nb), _size(q, nb + 1)
    n_k, d_v = _size(k, nb), _size(v, nb + 1)
    if "scale" in op.attributes:
        scale = ir.FloatAttr(op.attributes["scale"]).value
    elif isinstance(d_k, int):
        scale = 1.0 / pymath.sqrt(d_k)
    else:
        raise PassFailure("convert-tm-tensor-to-scf: tm_tensor.attention with a dynamic head dimension "
                          "needs a scale attribute", op.location)

    def widen(x):
        return x if x.type == wide else arith.ExtFOp(wide, x).result

    dims = [ir.AffineDimExpr.get(i) for i in range(nb + 3)]
    b, (i, j, c) = dims[:nb], dims[nb:]

    def amap(*exprs):
        return ir.AffineMap.get(nb + 3, 0, list(exprs))

    def amap2(*exprs):
        return ir.AffineMap.get(nb + 2, 0, list(exprs))

    b2, (i2, j2) = dims[:nb], dims[nb:nb + 2]
    zero = arith.ConstantOp(wide, 0.0).result
    neg_inf = arith.ConstantOp(wide, float("-inf")).result
    factor = arith.ConstantOp(wide, scale).result
    par2, red = ["parallel"] * (nb + 2), ["parallel"] * (nb + 2) + ["reduction"]

    # scores[b, i, j] = scale * sum_c q[b, i, c] k[b, j, c] (+ mask)
    scores = _generic([q, k], _filled(batch + [m, n_k], wide, zero),
                      [amap(*b, i, c), amap(*b, j, c), amap(*b, i, j)], red,
                      lambda x, y, acc: arith.AddFOp(acc, arith.MulFOp(widen(x), widen(y)).result).result)
    ins, maps = [scores], [amap2(*b2, i2, j2)]
    if mask is not None:
        ins.append(mask)
        maps.append(amap2(*b2, i2, j2))

    def scaled(s, *rest):
        s = arith.MulFOp(s, factor).result
        if mask is None:
            return s
        w = rest[0]
        if isinstance(w.type, ir.IntegerType):
            return arith.AddFOp(s, _select(w, zero, neg_inf)).result
        return arith.AddFOp(s, widen(w)).result

    scores = _generic(ins, tensor.EmptyOp(batch + [m, n_k], wide).result, maps + [amap2(*b2, i2, j2)], par2,
                      lambda *args: scaled(*args[:-1]))
    # row maximum, exponentials (zero for a row the mask closes entirely), their sum
    row_max = _generic([scores], _filled(batch + [m], wide, neg_inf), [amap2(*b2, i2, j2), amap2(*b2, i2)],
                       ["parallel"] * (nb + 1) + ["reduction"],
                       lambda s, acc: arith.MaximumFOp(acc, s).result)

    def exponential(s, mx, _out):
        closed = arith.CmpFOp(arith.CmpFPredicate.OEQ, mx, neg_inf).result
        return _select(closed, zero, math_d.ExpOp(arith.SubFOp(s, mx).result).result)

    exps = _generic([scores, row_max], tensor.EmptyOp(batch + [m, n_k], wide).result,
                    [amap2(*b2, i2, j2), amap2(*b2, i2), amap2(*b2, i2, j2)], par2, exponential)
    sums = _generic([exps], _filled(batch + [m], wide, zero), [amap2(*b2, i2, j2), amap2(*b2, i2)],
                    ["parallel"] * (nb + 1) + ["reduction"], lambda e, acc: arith.AddFOp(acc, e).result)

    def probability(e, total, _out):
        empty_row = arith.CmpFOp(arith.CmpFPredicate.OEQ, total, zero).result
        return _select(empty_row, zero, arith.DivFOp(e, total).result)

    probs = _generic([exps, sums], tensor.EmptyOp(batch + [m, n_k], wide).result,
                     [amap2(*b2, i2, j2), amap2(*b2, i2), amap2(*b2, i2, j2)], par2, probability)
    # out[b, i, c] = sum_j p[b, i, j] v[b, j, c]   (here c ranges over the value dimension)
    result = _generic([probs, v], _filled(batch + [m, d_v], wide, zero),
                      [amap(*b, i, j), amap(*b, j, c), amap(*b, i, c)], ["parallel"] * (nb + 1) + ["reduction", "parallel"],
                      lambda p, x, acc: arith.AddFOp(acc, arith.MulFOp(p, widen(x)).result).result)
    if wide != elt:
        result = _generic([result], tensor.EmptyOp(batch + [m, d_v], elt).result,
                          [amap2(*b2, i2, j2)] * 2, par2, lambda x, _o: arith.TruncFOp(elt, x).result)
    return [result]


# -- the pass -----------------------------------------------------------------------------------------

_LOWERINGS = {
    "tm_tensor.scan": _lower_scan,
    "tm_tensor.sort": _lower_sort,
    "tm_tensor.scatter": _lower_scatter,
    "tm_tensor.topk": _lower_topk,
    "tm_tensor.attention": _lower_attention,
}


def convert_tm_tensor_to_scf(module) -> int:
    """Rewrite every TMTensor op of `module` (on tensors); returns how many."""
    ops = [op for op in walk_ops(module) if op.name.startswith("tm_tensor.") and op.name != "tm_tensor.yield"]
    for op in ops:
        lower = _LOWERINGS.get(op.name)
        if lower is None:
            raise PassFailure(f"convert-tm-tensor-to-scf: no lowering for '{op.name}'", op.location)
        if any(not isinstance(r.type, ir.RankedTensorType) for r in op.results) or not len(op.results):
            raise PassFailure(f"convert-tm-tensor-to-scf: '{op.name}' on buffers is not supported "
                              "(run the pass before bufferization)", op.location)
        with ir.InsertionPoint(op), op.location:
            new = lower(op)
        for old, value in zip(op.results, new):
            old.replace_all_uses_with(value)
        op.erase()
    return len(ops)


@register_pass
class ConvertTmTensorToScf(Pass):
    name = "convert-tm-tensor-to-scf"
    summary = "Lower torch-mlir's TMTensor ops (scatter, scan, sort, topk, attention) to scf/tensor/linalg on tensors"

    def run(self, module) -> None:
        convert_tm_tensor_to_scf(module)
