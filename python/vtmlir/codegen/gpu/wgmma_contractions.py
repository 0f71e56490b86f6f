"""`codegen-gpu-wgmma-contractions`: on sm_90a, f16 and bf16 contractions become launches of the
`wgmma` kernel (codegen/gpu/wgmma_kernel.py) instead of taking the `mma-sync` schedule.

Hopper's warpgroup MMA (`wgmma.mma_async`) reads both operands from shared memory through matrix
descriptors and multiplies a 64 x N x 16 product per instruction for a warpgroup of 128 threads;
upstream's vector-to-GPU conversion has no route to it, but the nvvm dialect's builders reach it
(issue 22: "wgmma on sm_90a where the bindings reach it, else mma.sync"). The pass runs in the
CUDA `schedule` stage after the convolutions became batch matmuls and before the tensor-core
padding, and only for `chip=sm_90a` (the `a` features: PTX for sm_90 has no wgmma).

A contraction is taken (`read_contraction`) when its body is `out + extf(a) * extf(b)` with f16 or
bf16 operands into an f32 C, it has one sum loop, and one of its orientations fits the kernel
(`_problem`): one operand holds the rows i of C, the other its columns j, at most one other
parallel loop remains (z: the grid's third dimension; an operand without it is shared), each
operand is contiguous along k or along its own i or j, with static 16-byte aligned strides, and
the product has at least 128 rows and M, N, K multiples of 8 (`wgmma_kernel.refusal`). An im2col
convolution (`W[co, k] x col[b, k, pixels]`) fits with its pixels as rows. Runs of parallel loops
read contiguously by every operand are merged first where only that makes it fit. The others keep
the `mma-sync` schedule (and its padding).

Around the product, computed in the kernel's registers:
- a fill of C with +0.0 right before goes: the accumulators start at zero;
- an elementwise kernel right before that writes C whole without reading it (a Linear's bias
  broadcast into C) goes: the accumulators start at its values; else they start from C's values (a
  linalg contraction adds to its output);
- an elementwise kernel right after that alone reads C (the importer's `truncf` to f16, a bias add,
  GELU) is computed on each accumulator and stored to its own output: it and C's buffer go (the
  `mma-sync` schedule's fused epilogue reads C back from global memory instead).
A neighbour the `mma-sync` schedule would run in its tiles but these rules do not take (a fill of C
through another view) keeps the contraction on `mma-sync`: sm_90a runs no more kernels than sm_90.

The launch carries `codegen.launch_plan` (schedule `wgmma`, launch shape, flops, bytes, shared
memory), from which the CUDA backend makes its plan and report row (launch_plans.py). The products
are summed in f32, 16 k at a time in the tensor core, k tiles in order: as `mma-sync` does, so the
two schedules differ by the order of f32 additions only (docs/codegen_gpu.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from torch_mlir import ir
from torch_mlir.dialects import affine, arith, gpu, memref

from ...ir_utils import fill_value
from ...passes.registry import Option, Pass, register_pass
from ...passes.memref_dealloc_at_last_use import VIEW_OPS
from ..bodies import buffer_root, clone_ops
from ..decompose_convolutions import merge_loops
from ..kernels import Kernel, KernelKind, classify, indexing_maps_of
from .collapse_contraction_loops import loop_groups
from .attach_schedule import top_level_kernels
from .layouts import element_bytes, strides_and_offset
from .launch_plans import LAUNCH_ATTR, is_positive_zero, launch_plan_attr
from .schedules import ContractionSchedule, resolve_gpu_schedules
from .wgmma_kernel import STAGES, TILE_K, TILE_M, THREADS, WgmmaProblem, refusal, wgmma_kernel

SCHEDULE = "wgmma"
_EPILOGUE_DIALECTS = ("arith.", "math.")


class NotWgmma(Exception):
    """Why a contraction does not take the wgmma kernel."""


@dataclass
class Epilogue:
    """An elementwise kernel right after the contraction that alone reads C (or the buffer C views):
    `op`, C's position among its inputs, its output, and the views between."""

    op: ir.Operation
    c_input: int
    out: ir.Value
    through: list  # the views from C to the buffer the epilogue reads (empty: it reads C itself)


@dataclass
class WgmmaContraction:
    """A contraction the kernel takes: its operands in the kernel's order (A' holds the rows i of
    C', B' its columns j), the problem, and the kernels before and after it computed in its
    registers."""

    op: ir.Operation
    a: ir.Value
    b: ir.Value
    c: ir.Value
    problem: WgmmaProblem
    fill: ir.Operation | None      # a zero fill of C before: the accumulators start at zero
    prologue: ir.Operation | None  # an elementwise kernel writing C right before: they start at its values
    prologue_through: list         # the views from C to the buffer the prologue writes
    epilogue: Epilogue | None


def _dims(amap: ir.AffineMap) -> list[int] | None:
    results = list(amap.results)
    if not all(isinstance(e, ir.AffineDimExpr) for e in results):
        return None
    return [ir.AffineDimExpr(e).position for e in results]


def _aligned_16_bytes(mtype: ir.MemRefType) -> bool:
    """Static strides and offset, unit innermost stride, every other stride and the offset multiples
    of 8 elements (16 bytes of f16): each 16-byte copy's source is 16-byte aligned."""
    static = strides_and_offset(mtype)
    if static is None or not mtype.has_static_shape:
        return False
    strides, offset = static
    return strides[-1] == 1 and all(s % 8 == 0 for s in strides[:-1]) and offset % 8 == 0


def _problem(kernel: Kernel) -> tuple[WgmmaProblem, int, int]:
    """The kernel's problem for a contraction, and which operands are A' and B': every orientation
    whose rows i are read by one operand and columns j by the other, at most one other parallel
    loop (z, the grid's third dimension), each operand contiguous along k or its own i or j; the
    one with whole 128-row tiles and the most rows first."""
    ranges = kernel.loop_ranges
    if len(kernel.reduction_dims) != 1:
        raise NotWgmma("not one sum loop")
    (kd,) = kernel.reduction_dims
    dims = [_dims(m) for m in kernel.maps]
    if any(d is None or len(set(d)) != len(d) for d in dims):
        raise NotWgmma("an operand indexed by an expression or twice by one loop")
    parallel = [d for d in range(kernel.rank) if d != kd]
    if sorted(dims[2]) != parallel:
        raise NotWgmma("C does not hold every parallel loop once")
    found, why = [], "no operand order fits"
    for x, y in ((0, 1), (1, 0)):
        for i in (d for d in dims[x] if d not in dims[y] and d != kd):
            for j in (d for d in dims[y] if d not in dims[x] and d != kd):
                rest = [d for d in parallel if d not in (i, j)]
                if len(rest) > 1 or kd not in dims[x] or kd not in dims[y]:
                    continue
                role = {i: "i", j: "j", kd: "k", **({rest[0]: "z"} if rest else {})}
                a_roles, b_roles = tuple(role[d] for d in dims[x]), tuple(role[d] for d in dims[y])
                if a_roles[-1] not in ("k", "i") or b_roles[-1] not in ("k", "j"):
                    why = "an operand contiguous along neither k nor its rows or columns"
                    continue
                z = ranges[rest[0]] if rest else 1
                problem = WgmmaProblem(z, ranges[i], ranges[j], ranges[kd], a_roles, b_roles,
                                       tuple(role[d] for d in dims[2]))
                why = refusal(problem.m, problem.n, problem.k) or (f"{z} entries exceed the grid's z dimension"
                                                                   if z > 65535 else None)
                if why is None:
                    found.append((problem, x, y))
    if not found:
        raise NotWgmma(why)
    return max(found, key=lambda f: (f[0].m % TILE_M == 0, f[0].m))


def _merge_trial(kernel: Kernel) -> Kernel | None:
    """A copy of the contraction with its runs of parallel loops that every operand reads
    contiguously merged into one loop each (`merge_loops`: views, the same sums), placed before it;
    None where there is no such run."""
    groups = loop_groups(kernel)
    if not groups:
        return None
    clone = kernel.op.clone(ip=ir.InsertionPoint(kernel.op))
    return classify(merge_loops(clone, kernel.maps, groups))


def _discard(op) -> None:
    """Erase a trial generic and the views made for it."""
    views = [v.owner for v in op.operands if not isinstance(v.owner, ir.Block)
             and v.owner.operation.name == "memref.collapse_shape"]
    op.erase()
    for view in views:
        if not list(view.operation.results[0].uses):
            view.operation.erase()


def read_contraction(op) -> WgmmaContraction:
    """The contraction `op` as the kernel takes it (merging its contiguous runs of loops where only
    that makes it fit: the original goes); `NotWgmma` with why otherwise."""
    kernel = classify(op)
    if kernel.kind is not KernelKind.CONTRACTION:
        raise NotWgmma(f"not a contraction ({kernel.kind.value})")
    types = [ir.MemRefType(v.type) for v in op.operands]
    element = types[0].element_type
    if not (isinstance(element, (ir.F16Type, ir.BF16Type)) and types[1].element_type == element
            and isinstance(types[2].element_type, ir.F32Type)):
        raise NotWgmma("not f16 x f16 or bf16 x bf16 into f32")
    if not _body_is_widened_product(op):
        raise NotWgmma("the body is not out + extf(a) * extf(b)")
    if not all(_aligned_16_bytes(t) for t in types[:2]):
        raise NotWgmma("an operand's strides or offset are dynamic or not 16-byte aligned")
    try:
        problem, x, y = _problem(kernel)
    except NotWgmma as why:
        trial = _merge_trial(kernel)
        if trial is None:
            raise
        try:
            problem, x, y = _problem(trial)
        except NotWgmma:
            _discard(trial.op)
            raise why from None
        op.erase()
        op = trial.op
    c = op.operands[2]
    chain, root = _view_chain(c)
    buffers = {c: []} if root is None or root == c else {c: [], root: chain}
    fill = _zero_fill_before(op, buffers)
    prologue, prologue_through = _prologue_before(op, buffers) if fill is None else (None, [])
    if fill is None and problem.m % TILE_M:
        raise NotWgmma("a partial row tile of a product that adds to C's values")
    before = fill or prologue
    epilogue = _epilogue_after(op, buffers, list(op.operands[:2]), before) if before is not None else None
    left = _left_unfused(op, c, {n for n in (fill, prologue, epilogue and epilogue.op) if n is not None})
    if left:
        raise NotWgmma(left)
    return WgmmaContraction(op, op.operands[x], op.operands[y], c, problem, fill, prologue, prologue_through,
                            epilogue)


def _body_is_widened_product(op) -> bool:
    """`out + extf(a) * extf(b)` (either order), nothing else."""
    block = op.regions[0].blocks[0]
    body = [o.operation for o in block.operations]
    names = [o.name for o in body]
    if sorted(names) != sorted(["arith.extf", "arith.extf", "arith.mulf", "arith.addf", "linalg.yield"]):
        return False
    args = list(block.arguments)
    exts = [o for o in body if o.name == "arith.extf"]
    mul = next(o for o in body if o.name == "arith.mulf")
    add = next(o for o in body if o.name == "arith.addf")
    return ({e.operands[0] for e in exts} == set(args[:2]) and {v for v in mul.operands} == {e.results[0] for e in exts}
            and set(add.operands) == {args[2], mul.results[0]} and body[-1].operands[0] == add.results[0])


def _users(value) -> list:
    return [use.owner.operation if hasattr(use.owner, "operation") else use.owner for use in value.uses]


def _owner_op(value):
    owner = value.owner
    return None if isinstance(owner, ir.Block) else owner.operation


def _elementwise(op, rank: int) -> bool:
    """A generic over `rank` parallel loops with one output written whole (identity map), whose body
    is arith / math ops on its arguments and constants: computable per element in registers."""
    if op.name != "linalg.generic" or len(op.opview.outputs) != 1:
        return False
    maps = indexing_maps_of(op)
    iterators = [str(a) for a in ir.ArrayAttr(op.attributes["iterator_types"])]
    if maps is None or len(iterators) != rank or any("reduction" in it for it in iterators) \
            or maps[-1] != ir.AffineMap.get_identity(rank):
        return False
    body = [o.operation for o in op.regions[0].blocks[0].operations]
    results = {r for inner in body for r in inner.results}
    for inner in body:
        if inner.name != "linalg.yield" and not inner.name.startswith(_EPILOGUE_DIALECTS):
            return False
        for operand in inner.operands:
            if isinstance(operand, ir.BlockArgument) or operand in results:
                continue
            owner = _owner_op(operand)
            if owner is None or owner.name != "arith.constant":
                return False  # a value from outside the body other than a constant
    return True


_NOT_KERNELS = ("arith.constant", "memref.get_global", "memref.alloc", "memref.dealloc", *VIEW_OPS)


def _neighbour(op, offset: int):
    """The kernel `offset` (1 or -1) places from `op` in its block, past constants, global reads,
    allocations and views."""
    ops = [o.operation for o in op.block.operations]
    at = next(i for i, o in enumerate(ops) if o == op.operation) + offset
    while 0 <= at < len(ops) and ops[at].name in _NOT_KERNELS:
        at += offset
    return ops[at] if 0 <= at < len(ops) else None


def _left_unfused(op, c, taken) -> str | None:
    """Why the kernel would leave a kernel the `mma-sync` schedule may run in its block tiles: a fill
    or an elementwise kernel anywhere in the block that writes or reads C's buffer (through any
    view) and is not computed in registers here -- one launch more than `mma-sync`, so the
    contraction keeps it. None where there is none."""
    root = buffer_root(c)
    for other in op.block.operations:
        other = other.operation
        if other == op.operation or other in taken or not other.name.startswith("linalg."):
            continue
        if not any(isinstance(v.type, ir.MemRefType) and buffer_root(v) == root for v in other.operands):
            continue
        rank = ir.MemRefType(other.operands[-1].type).rank
        if other.name == "linalg.fill" or _elementwise(other, rank):
            return "a fill or elementwise kernel on C's buffer that mma-sync may run in its tiles and this kernel cannot"
    return None


def _view_chain(c) -> tuple[list, ir.Value | None]:
    """The `collapse_shape` / `expand_shape` views from C up to the buffer they view (C's first), and
    that buffer; ([], None) where another view is on the way (a subview: C is part of a buffer)."""
    chain, value = [], c
    while True:
        owner = _owner_op(value)
        if owner is None or owner.name not in VIEW_OPS:
            return chain, value
        if owner.name not in ("memref.collapse_shape", "memref.expand_shape"):
            return [], None
        chain.append(owner)
        value = owner.operands[0]


def _indices_through(chain: list, indices: list[ir.Value]) -> list[ir.Value]:
    """C's `indices` as indices of the buffer at the end of `chain` (built at the insertion point):
    a collapsed dimension's index delinearised over the dimensions it groups, an expanded group's
    indices linearised."""
    for view in chain:
        groups = [[ir.IntegerAttr(d).value for d in g] for g in ir.ArrayAttr(view.attributes["reassociation"])]
        source = ir.MemRefType(view.operands[0].type).shape
        result = ir.MemRefType(view.results[0].type).shape
        out = []
        if view.name == "memref.collapse_shape":
            for group, index in zip(groups, indices):
                parts = []
                for d in reversed(group[1:]):
                    parts.append(arith.remui(index, _index(source[d])))
                    index = arith.divui(index, _index(source[d]))
                out.extend([index, *reversed(parts)])
        else:
            for group in groups:
                index = indices[group[0]]
                for d in group[1:]:
                    index = arith.addi(arith.muli(index, _index(result[d])), indices[d])
                out.append(index)
        indices = out
    return indices


def _index(value: int) -> ir.Value:
    return arith.ConstantOp(ir.IndexType.get(), value).result


def _is_zero_fill(op, buffers) -> bool:
    """A fill of one of `buffers` with +0.0 (`linalg.fill`, or a generic with no input yielding it)."""
    value = fill_value(op) if op.name != "linalg.map" else None
    return value is not None and op.operands[-1] in buffers and is_positive_zero(value)


def _zero_fill_before(op, buffers) -> ir.Operation | None:
    """The last kernel before `op` that touches C's buffer, where it only fills C or the buffer C
    views with +0.0 (a fill has no input: it may run anywhere before the product)."""
    roots = {buffer_root(v) for v in buffers}
    ops = [o.operation for o in op.block.operations]
    at = next(i for i, o in enumerate(ops) if o == op.operation)
    for prev in reversed(ops[:at]):
        if prev.name in _NOT_KERNELS:
            continue
        if any(isinstance(v.type, ir.MemRefType) and buffer_root(v) in roots for v in prev.operands):
            return prev if _is_zero_fill(prev, buffers) else None
    return None


def _prologue_before(op, buffers) -> tuple[ir.Operation | None, list]:
    """The elementwise kernel right before `op` that writes C (or the buffer C views) whole without
    reading it (a Linear's bias broadcast into C), and the views between: its values are computed
    in registers as the accumulators' start."""
    prev = _neighbour(op, -1)
    if prev is None or prev.name != "linalg.generic" or len(prev.opview.outputs) != 1:
        return None, []
    out = prev.opview.outputs[0]
    if out not in buffers or not _elementwise(prev, ir.MemRefType(out.type).rank):
        return None, []
    roots = {buffer_root(v) for v in buffers}
    if any(buffer_root(v) in roots for v in prev.opview.inputs) or list(prev.regions[0].blocks[0].arguments[-1].uses):
        return None, []  # reads C's old values
    return prev, buffers[out]


def _epilogue_after(op, buffers, operands, before) -> Epilogue | None:
    """The elementwise kernel right after `op` that alone reads C (or the buffer C views), that
    buffer its own (an alloc no other kernel than `before`, the contraction and the epilogue
    touches), writing another buffer of the same shape that is no operand."""
    roots = {buffer_root(v) for v in buffers}
    (root,) = roots
    owner = _owner_op(root)
    if owner is None or owner.name != "memref.alloc":
        return None
    nxt = _neighbour(op, 1)
    if nxt is None or nxt.name != "linalg.generic" or len(nxt.opview.outputs) != 1:
        return None
    out = nxt.opview.outputs[0]
    rank = ir.MemRefType(out.type).rank
    if not _elementwise(nxt, rank):
        return None
    maps = indexing_maps_of(nxt)
    inputs = list(nxt.opview.inputs)
    positions = [i for i, v in enumerate(inputs) if v in buffers]
    if len(positions) != 1 or maps[positions[0]] != ir.AffineMap.get_identity(rank):
        return None
    read = inputs[positions[0]]
    if any(buffer_root(v) in roots for i, v in enumerate(inputs) if i != positions[0]):
        return None
    if ir.MemRefType(out.type).shape != ir.MemRefType(read.type).shape or buffer_root(out) in roots \
            or any(buffer_root(out) == buffer_root(v) for v in operands):
        return None
    for other in op.block.operations:
        other = other.operation
        if other in (op.operation, nxt, before) or other.name in _NOT_KERNELS:
            continue
        if any(isinstance(v.type, ir.MemRefType) and buffer_root(v) in roots for v in other.operands):
            return None  # another kernel reads or writes C's buffer
    return Epilogue(nxt, positions[0], out, buffers[read])


def _apply(amap: ir.AffineMap, dims: list[ir.Value]) -> list[ir.Value]:
    """The indices `amap` gives for the loop indices `dims` (plain dimensions as they are)."""
    out = []
    for expr in amap.results:
        if isinstance(expr, ir.AffineDimExpr):
            out.append(dims[ir.AffineDimExpr(expr).position])
        else:
            out.append(affine.apply(ir.AffineMap.get(amap.n_dims, 0, [expr]), dims))
    return out


def _compute(op, given: dict[int, ir.Value], loaded: list[ir.Value], indices: list[ir.Value],
             out: ir.Value | None) -> ir.Value:
    """The value the elementwise `op` yields at `indices`, built at the insertion point: its body
    cloned, block argument i taken from `given[i]`, the other inputs loaded from `loaded` (the
    kernel's arguments, in input order) through their maps, the output's old value from `out`."""
    maps = indexing_maps_of(op)
    body = op.regions[0].blocks[0]
    n_in = len(op.opview.inputs)
    mapping = {body.arguments[i]: v for i, v in given.items()}
    for value, i in zip(loaded, [i for i in range(n_in) if i not in given]):
        mapping[body.arguments[i]] = memref.load(value, _apply(maps[i], indices))
    if list(body.arguments[n_in].uses):
        mapping[body.arguments[n_in]] = memref.load(out, indices)
    ops = [o.operation for o in body.operations]
    results = {r for inner in ops for r in inner.results}
    for inner in ops[:-1]:
        for operand in inner.operands:
            if operand not in mapping and not isinstance(operand, ir.BlockArgument) and operand not in results:
                mapping[operand] = operand.owner.clone().results[0]  # a constant from outside
    clone_ops(ops[:-1], mapping)
    result = ops[-1].operands[0]
    return mapping.get(result, result)


def lower_contraction(found: WgmmaContraction, kid: int, module_op) -> ir.Operation:
    """Replace the contraction (and the kernels computed in its registers) by a launch of its wgmma
    kernel."""
    name = f"wgmma_{kid}"
    symbols = {ir.StringAttr(o.attributes["sym_name"]).value for o in module_op.regions[0].blocks[0].operations
               if "sym_name" in o.attributes}
    while f"{name}_module" in symbols:
        name += "_"
    epilogue, prologue, p = found.epilogue, found.prologue, found.problem
    target = epilogue.out if epilogue else found.c
    before = list(prologue.opview.inputs) if prologue else []
    after = [v for i, v in enumerate(epilogue.op.opview.inputs) if i != epilogue.c_input] if epilogue else []
    extras = before + after
    types = [ir.MemRefType(v.type) for v in (found.a, found.b, target, *extras)]

    def initial(args):
        def start(indices):
            return _compute(prologue, {}, args[:len(before)], _indices_through(found.prologue_through, indices), None)
        return start

    def store(args):
        def put(indices, value, out):
            indices = _indices_through(epilogue.through, indices)
            memref.store(_compute(epilogue.op, {epilogue.c_input: value}, args[len(before):], indices, out),
                         out, indices)
        return put

    built = wgmma_kernel(name, p, *types, accumulate=found.fill is None, initial=initial if prologue else None,
                         store=store if epilogue else None)
    body = module_op.regions[0].blocks[0]
    built.body.operations[0].operation.move_before(body.operations[0])
    module_op.attributes["gpu.container_module"] = ir.UnitAttr.get()
    op = found.op
    if epilogue is not None:
        # The launch goes where the epilogue is (its inputs may be defined after the product); A
        # and B must still be alive there: their deallocations in between move after it.
        ops = [o.operation for o in op.block.operations]
        operand_roots = {buffer_root(v) for v in (found.a, found.b)}
        for between in ops[ops.index(op.operation) + 1:ops.index(epilogue.op)]:
            if between.name == "memref.dealloc" and buffer_root(between.operands[0]) in operand_roots:
                between.move_after(epilogue.op)
    with ir.InsertionPoint(epilogue.op if epilogue else op), op.location:
        launch = gpu.LaunchFuncOp([f"{name}_module", name],
                                  tuple(_index(v) for v in p.grid), tuple(_index(v) for v in (THREADS, 1, 1)),
                                  [found.a, found.b, target, *extras])
    # each operand once from DRAM (the tiles re-read from L2), C read back where the product adds to it
    moved = sum(_bytes(v) for v in (found.a, found.b, target, *extras)) \
        + (_bytes(found.c) if found.fill is None and prologue is None else 0)
    element = "bf16" if isinstance(types[0].element_type, ir.BF16Type) else "f16"
    majors = f"A {'K' if p.a_k_major else 'M'}-major, B {'K' if p.b_k_major else 'N'}-major"
    detail = (f"wgmma m64n{p.tile_n}k16 ({element}), one warpgroup per {TILE_M}x{p.tile_n} tile, k tiles of "
              f"{TILE_K} in {STAGES} cp.async stages, {majors}" + (", zero fill dropped" if found.fill else "")
              + (", prologue in registers" if prologue else "") + (", epilogue in registers" if epilogue else ""))
    extents = ([p.z] if p.z > 1 else []) + [p.m, p.n, p.k]
    launch.attributes[LAUNCH_ATTR] = launch_plan_attr(
        schedule=SCHEDULE, detail=detail, description=f"contraction {'x'.join(map(str, extents))}",
        threads=THREADS, grid=p.grid[0] * p.grid[1] * p.grid[2], flops=2 * p.z * p.m * p.n * p.k,
        bytes=moved, shared_bytes=p.shared_bytes)
    op.erase()
    for neighbour in (found.fill, prologue):
        if neighbour is not None:
            neighbour.erase()
    if epilogue is not None:
        epilogue.op.erase()
        _erase_buffer(buffer_root(found.c))
    return launch.operation


def _erase_buffer(buffer) -> None:
    """Erase an allocation nothing reads any more: its views (innermost first) and its dealloc."""
    for user in _users(buffer):
        if user.name in VIEW_OPS:
            _erase_buffer(user.results[0])
        else:
            user.erase()  # the dealloc
    owner = _owner_op(buffer)
    if owner is not None:
        owner.erase()


def _bytes(value) -> int:
    t = ir.MemRefType(value.type)
    return prod(t.shape) * element_bytes(t.element_type)



def wgmma_contractions(module_op, chip: str = "sm_80", overrides=()) -> list[str]:
    """Launch the wgmma kernel for every contraction it takes (sm_90a only); one line per contraction
    taken or refused (f16 / bf16 contractions only)."""
    if chip != "sm_90a":
        return []
    schedule = resolve_gpu_schedules(list(overrides)).get(KernelKind.CONTRACTION.value)
    if not isinstance(schedule, ContractionSchedule) or not (schedule.tensor_cores and schedule.wgmma):
        return []
    lines, taken = [], []
    with module_op.context, ir.Location.unknown():
        # every contraction is read before any is rewritten: a rewrite erases its fill and epilogue
        for kid, op in enumerate([o for o in top_level_kernels(module_op) if o.name == "linalg.generic"]):
            try:
                taken.append((kid, read_contraction(op)))
            except NotWgmma as why:
                lines.append(f"codegen-gpu-wgmma-contractions: kept mma-sync: {why}")
        for kid, found in taken:
            lower_contraction(found, kid, module_op)
            lines.append(f"codegen-gpu-wgmma-contractions: {found.problem}")
    return lines


@register_pass
class WgmmaContractions(Pass):
    name = "codegen-gpu-wgmma-contractions"
    summary = "On sm_90a, launch the wgmma kernel for the f16 / bf16 contractions it takes"
    description = ("Kernel level (memrefs). f16 / bf16 contractions into f32 C with one operand holding C's rows, "
                   "the other its columns, at most one batch loop, operands contiguous along k or their own rows "
                   "or columns and 16-byte aligned, at least 128 rows and M, N, K multiples of 8; a zero fill or "
                   "elementwise prologue before and an elementwise epilogue after are computed in registers. "
                   "Other chips: no-op.")
    options = (
        Option("chip", str, "sm_80", "the GPU the kernels are for (only sm_90a has wgmma)"),
        Option("schedules", list[str], [], "the GPU schedule overrides (contraction.wgmma:false keeps mma-sync)"),
    )

    def run(self, module):
        wgmma_contractions(module, chip=self.chip, overrides=self.schedules)
