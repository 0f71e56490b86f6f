"""Pieces of `linalg.generic` bodies, shared by the passes that split a kernel in two
(`codegen-split-checks`, `codegen-split-prologues`, `codegen-split-row-invariants`): the ops a value
is computed from, copies of them in a new body, and a kernel of its own for such a value."""

from __future__ import annotations

import math

from torch_mlir import ir
from torch_mlir.dialects import linalg, memref

from ..ir_utils import iterator_type
from ..passes.memref_dealloc_at_last_use import VIEW_OPS, users_in_block

# Ops that may be copied out of a body into another kernel: pure, elementwise, no memory access.
PURE_DIALECTS = ("arith", "math")
# What a gather adds to `backward_slice` (`make_gather_prologue`): index arithmetic, reads of buffers defined outside the body
# (a concat VTC made virtual: one `memref.load` per piece, `arith.select` choosing one) and the
# importer's asserts on the values read.
GATHER_OPS = ("linalg.index", "affine.apply", "memref.load", "cf.assert")


def result_owners(block: ir.Block) -> dict:
    """The op of `block` that defines each of its results."""
    owners = {}
    for op in block.operations:
        for r in op.results:
            owners[r] = op.operation
    return owners


def backward_slice(block: ir.Block, values, owners: dict | None = None,
                   allowed: tuple = ()) -> tuple[list, set[int]] | None:
    """(the ops of `block` that compute `values`, in block order; the numbers of the block arguments
    they read), or None if one of those ops is not pure arith/math (or named in `allowed`). Values
    defined outside the body are used as they are. `owners`: `result_owners(block)` when the caller
    has it already."""
    needed, args, work = set(), set(), list(values)
    if owners is None:
        owners = result_owners(block)
    while work:
        value = work.pop()
        if isinstance(value, ir.BlockArgument):
            if value.owner == block:
                args.add(value.arg_number)
            continue
        op = owners.get(value)
        if op is None:
            continue  # defined outside the body: usable as it is
        if op.name.split(".", 1)[0] not in PURE_DIALECTS and op.name not in allowed:
            return None
        if op not in needed:
            needed.add(op)
            work.extend(op.operands)
    ordered = [op.operation for op in block.operations if op.operation in needed]
    return ordered, args


def clone_ops(ops, mapping: dict) -> None:
    """Clone `ops` at the current insertion point, their operands looked up in (and their results
    added to) `mapping`."""
    for inner in ops:
        clone = inner.clone()
        for i, operand in enumerate(clone.operands):
            if operand in mapping:
                clone.operands[i] = mapping[operand]
        for old, new in zip(inner.results, clone.results):
            mapping[old] = new


def iterator_attr(context, kind: str) -> ir.Attribute:
    """linalg's `parallel` / `reduction` iterator attribute in `context` (`ir_utils.iterator_type`)."""
    with context:
        return iterator_type(kind)


def static_shape(value) -> list[int] | None:
    t = value.type
    if not isinstance(t, ir.MemRefType) or any(t.is_dynamic_dim(i) for i in range(t.rank)):
        return None
    return list(t.shape)


def owner_in(block: ir.Block, value, name: str):
    """The op of `block` named `name` that defines `value`, or None."""
    if isinstance(value, ir.BlockArgument):
        return None
    owner = value.owner.operation
    return owner if owner.name == name and owner.parent == block.owner else None


def unit_results(value, amap: ir.AffineMap) -> list:
    """The results of `amap`, the map `value` (a memref) is read with, where each dimension of
    extent 1 reads index 0 whatever its expression (the only index in bounds). Elementwise fusion
    composes a per-channel vector's map with its consumer's: a BatchNorm's `[C, 1, 1]` vectors, which
    need no broadcast over a 1x1 image, are read by the convolution after it as `(c, oh + kh, ow + kw)`."""
    shape = static_shape(value) if isinstance(value.type, ir.MemRefType) else None
    zero = ir.AffineConstantExpr.get(0)
    return [zero if shape is not None and shape[i] == 1 and not isinstance(e, ir.AffineDimExpr) else e
            for i, e in enumerate(amap.results)]


def _anchor(args: list[int], maps, operands) -> tuple[int, list[ir.AffineMap]] | None:
    """An input among `args` whose map names every dimension the others read as a plain result or as
    one of its own expressions (a residual sum's two reads through a convolution's window), and the
    maps of all of `args` over the anchor's shape (result i of the anchor = dimension i)."""
    for anchor in sorted(args, key=lambda a: -len(maps[a].results)):
        results = unit_results(operands[anchor], maps[anchor])
        extents = static_shape(operands[anchor])
        position = {e.position: i for i, e in enumerate(results) if isinstance(e, ir.AffineDimExpr)}
        rank = len(results)
        new_maps = []
        for a in args:
            if a == anchor:
                new_maps.append(ir.AffineMap.get_identity(rank))
                continue
            exprs = []
            mine, sizes = unit_results(operands[a], maps[a]), static_shape(operands[a])
            for i, e in enumerate(mine):
                if isinstance(e, ir.AffineDimExpr) and e.position in position:
                    exprs.append(ir.AffineDimExpr.get(position[e.position]))
                elif isinstance(e, ir.AffineConstantExpr) and e.value == 0:
                    exprs.append(e)
                elif e in results and extents and sizes and sizes[i] == extents[results.index(e)]:
                    # A window reads at most the extent it needs, however large its buffer: the
                    # prologue loops over the anchor's whole dimension, so both must have its size.
                    exprs.append(ir.AffineDimExpr.get(results.index(e)))
                else:
                    break
            else:
                new_maps.append(ir.AffineMap.get(rank, 0, exprs))
                continue
            break
        else:
            return anchor, new_maps
    return None


def make_prologue(op, block, side, maps, keep=None):
    """Compute `side` (a value of `op`'s body) in a kernel of its own, over the shape of the input it
    reads with the most dimensions (the anchor, whose map must index the others' by plain dimensions,
    its own window expressions or unit dimensions),
    inserted before `op`; returns (buffer, its map in `op`, the new ops) or None.

    `keep`: the inputs the rest of `op`'s body reads (None: unknown). Where the anchor is none of
    them and `op` is its buffer's last reader (`dies_at`), the kernel overwrites the anchor in place
    instead of writing a new buffer of its size: a split then never raises the peak memory (a TeMCO
    group's tile, whose BatchNorm + ReLU the upsampled 1x1 convolution read)."""
    found = backward_slice(block, [side])
    n_inputs = len(op.opview.inputs)
    if found is None:
        return None
    ops, args = found
    args = sorted(args)
    if not args or any(a >= n_inputs for a in args):
        return None  # reads the output (an accumulation, not a prologue) or no input at all
    chosen = _anchor(args, maps, op.operands)
    if chosen is None:
        return None
    anchor, new_maps = chosen
    shape = static_shape(op.operands[anchor])
    if shape is None:
        return None
    if (keep is not None and anchor not in keep and side.type == block.arguments[anchor].type
            and dies_at(op, anchor)):
        _, prologue = _elementwise_kernel(op, block, side, ops, args, new_maps, shape, in_place=anchor)
        return op.operands[anchor], maps[anchor], [prologue.operation]
    alloc, prologue = _elementwise_kernel(op, block, side, ops, args, new_maps, shape)
    return alloc.result, maps[anchor], [alloc.operation, prologue.operation]


def dies_at(op, index: int) -> bool:
    """Whether `op` is the last user of the buffer its operand `index` views: allocated in `op`'s
    block, used after `op` only by its dealloc (and views), and viewed by no other operand of `op`."""
    root = buffer_root(op.operands[index])
    if isinstance(root, ir.BlockArgument):
        return False
    alloc = root.owner.operation
    if alloc.name != "memref.alloc" or alloc.parent != op.parent:
        return False
    if any(buffer_root(v) == root for i, v in enumerate(op.operands) if i != index):
        return False
    for user in users_in_block(root, op.parent):
        if user == op or user.name == "memref.dealloc" or user.name in VIEW_OPS:
            continue
        if not user.is_before_in_block(op):
            return False
    return True


def _elementwise_kernel(op, block, side, ops, args, input_maps, shape, in_place=None):
    """An elementwise kernel before `op` over a new buffer of `shape` (written with the identity
    map), reading `op`'s inputs `args` with `input_maps` and computing `side` with copies of `ops`
    (of `block`, `op`'s body); returns (the buffer's alloc, the kernel). With `in_place` (one of
    `args`, read with the identity map), the kernel writes that input instead, read as its output
    (no alloc: None)."""
    rank = len(shape)
    reads = [(a, m) for a, m in zip(args, input_maps) if a != in_place]
    with op.location, ir.InsertionPoint(op):
        alloc = None
        if in_place is None:
            alloc = memref.AllocOp(ir.MemRefType.get(shape, side.type), [], [], alignment=64)
        out = alloc.result if alloc is not None else op.operands[in_place]
        maps = [m for _, m in reads] + [ir.AffineMap.get_identity(rank)]
        prologue = linalg.GenericOp([], [op.operands[a] for a, _ in reads], [out],
                                    ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]),
                                    ir.ArrayAttr.get([iterator_attr(op.context, "parallel")] * rank))
        body = prologue.regions[0].blocks.append(*([block.arguments[a].type for a, _ in reads] + [side.type]))
        mapping = {block.arguments[a]: body.arguments[i] for i, (a, _) in enumerate(reads)}
        if in_place is not None:
            mapping[block.arguments[in_place]] = body.arguments[len(reads)]
        with ir.InsertionPoint(body):
            clone_ops(ops, mapping)
            linalg.YieldOp([mapping[side]])
    return alloc, prologue


def free_after(op, new_ops) -> None:
    """Free the buffers that `make_prologue` allocated (among `new_ops`) right after `op`, their last reader."""
    with op.location, ir.InsertionPoint.after(op):
        for new in new_ops:
            if new.name == "memref.alloc":
                memref.DeallocOp(new.results[0])


def buffer_root(value):
    """The buffer `value` (a memref) is a view of."""
    while not isinstance(value, ir.BlockArgument) and value.owner.operation.name in VIEW_OPS:
        value = value.owner.operation.operands[0]
    return value


def expr_dims(expr) -> set[int]:
    """The dimensions an affine expression reads."""
    if isinstance(expr, ir.AffineDimExpr):
        return {expr.position}
    if isinstance(expr, ir.AffineBinaryExpr):
        return expr_dims(expr.lhs) | expr_dims(expr.rhs)
    return set()


def loop_extents(op, maps) -> dict[int, int]:
    """The extent of each loop dimension of `op` that an operand of static shape reads as a plain result."""
    extents = {}
    for operand, amap in zip(op.operands, maps):
        shape = static_shape(operand)
        for i, e in enumerate(amap.results if shape is not None else ()):
            if isinstance(e, ir.AffineDimExpr):
                extents.setdefault(e.position, shape[i])
    return extents


def _gather_dims(op, maps, ops, args) -> set[int] | None:
    """The loop dimensions a gather slice (`ops`, reading inputs `args`) depends on, or None if it
    reads the output through a `memref.load` (then it is not computed before the op)."""
    dims = {d for a in args for e in unit_results(op.operands[a], maps[a]) for d in expr_dims(e)}
    output = buffer_root(op.operands[-1])
    for inner in ops:
        if inner.name == "linalg.index":
            dims.add(ir.IntegerAttr(inner.attributes["dim"]).value)
        elif inner.name == "memref.load" and buffer_root(inner.operands[0]) == output:
            return None
    return dims


def _elements_read(op, ops, args) -> int | None:
    """How many elements the inputs `args` of `op` and the buffers `ops` load from hold (each buffer
    once); None if one of them has no static shape."""
    values = [op.operands[a] for a in args]
    values += [o.operands[0] for o in ops if o.name == "memref.load"]
    total, seen = 0, []
    for v in values:
        if any(v == s for s in seen):
            continue
        seen.append(v)
        shape = static_shape(v)
        if shape is None:
            return None
        total += math.prod(shape)
    return total


def make_gather_prologue(op, block, side, maps, asserts):
    """Compute `side` (a value of `op`'s body that reads buffers through `memref.load` at indices
    computed from `linalg.index`: a concat VTC made virtual) in an elementwise kernel of its own over
    the loop dimensions it depends on (those its inputs' maps and its `linalg.index` ops read, and
    those of extent 1; renumbered in order; the buffer has their extents), inserted before `op`. The `asserts` of the
    body (`cf.assert` ops) that depend on no other dimension move into that kernel with it. Returns
    (buffer, its map in `op` (a projected permutation), the new ops, the asserts moved) or None."""
    owners = result_owners(block)
    found = backward_slice(block, [side], owners, GATHER_OPS)
    n_inputs = len(op.opview.inputs)
    if found is None or not any(o.name in GATHER_OPS for o in found[0]) or any(a >= n_inputs for a in found[1]):
        return None
    ops, args = found
    dims = _gather_dims(op, maps, ops, args)
    extents = loop_extents(op, maps)
    out_dims = {e.position for e in maps[-1].results if isinstance(e, ir.AffineDimExpr)}
    if dims is None or not dims <= set(extents) or out_dims <= dims:
        return None  # an unknown extent, or no output element shares the prologue: nothing to gain
    # A buffer larger than everything the prologue reads repeats elements: a window (an upsampled
    # input read by a 3x3 convolution: (n, c, h, w, kh, kw), 9x its source) or a broadcast. That
    # would raise the peak memory TeMCO measures; the fused loops are kept instead.
    read = _elements_read(op, ops, args)
    if read is None or math.prod(extents[d] for d in dims) > read:
        return None
    # Loops of extent 1 cost nothing in the buffer, and the product then reads every reduction the
    # other side reads (a 1x1 convolution's kh, kw: innermost, which the contraction schedule asks).
    dims |= {d for d, size in extents.items() if size == 1}
    moved = []
    for check in asserts:
        slice_ = backward_slice(block, list(check.operands), owners, GATHER_OPS)
        if slice_ is not None and all(a < n_inputs for a in slice_[1]):
            check_dims = _gather_dims(op, maps, slice_[0], slice_[1])
            if check_dims is not None and check_dims <= dims:
                moved.append(check)
                ops += slice_[0]
                args |= slice_[1]
    needed = set(ops) | set(moved)
    ops = [o.operation for o in block.operations if o.operation in needed]
    args = sorted(args)
    order = sorted(dims)
    renumber = {d: i for i, d in enumerate(order)}
    rank = len(order)
    with op.location:
        # Every dimension an input reads is among `dims`: the others' substitutes are never used.
        substitute = ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(renumber[d]) if d in renumber
                                                else ir.AffineConstantExpr.get(0) for d in range(maps[-1].n_dims)])
        new_maps = [ir.AffineMap.get(rank, 0, [e.compose(substitute) for e in unit_results(op.operands[a], maps[a])])
                    for a in args]
        alloc, prologue = _elementwise_kernel(op, block, side, ops, args, new_maps, [extents[d] for d in order])
        for inner in prologue.regions[0].blocks[0].operations:
            if inner.operation.name == "linalg.index":
                dim = ir.IntegerAttr(inner.operation.attributes["dim"])
                inner.operation.attributes["dim"] = ir.IntegerAttr.get(dim.type, renumber[dim.value])
    core_map = ir.AffineMap.get(maps[-1].n_dims, 0, [ir.AffineDimExpr.get(d) for d in order])
    return alloc.result, core_map, [alloc.operation, prologue.operation], moved
