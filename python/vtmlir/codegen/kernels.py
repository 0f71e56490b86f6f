"""Kernel classification: what each linalg op of the kernel level is, so a schedule can be chosen for it.

The kernel level holds `linalg.generic` ops over memrefs (the bufferization pipeline generalises the
named ops first, so a matmul, a Linear layer's `x @ W^T`, a convolution and a LayerNorm's row sums
all arrive as generics) plus the `linalg.copy`/`linalg.fill` ops made after bufferization and the
`linalg.map` a padding's fill becomes. The
classes follow IREE's CPU dispatch (`KernelDispatch.cpp`): contractions (matmul and batch matmul in
any operand order, by the contraction interface of upstream linalg), convolutions and pooling
(sliding-window maps), reductions, elementwise ops and pure data movement (copy, transpose,
broadcast, fill). Everything is read through the bindings: the contraction and convolution
interfaces, indexing maps as `AffineMap`s, iterator types compared with the attributes linalg's own
builder makes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from torch_mlir import ir
from torch_mlir.dialects import linalg

# The attribute that names a kernel for its schedule: `codegen.kernel = <id> : i64` on the linalg op.
# Set by `codegen-attach-schedule`, matched by the transform script, removed by `codegen-erase-schedule`.
KERNEL_ATTR = "codegen.kernel"
# A unit attribute on the kernels that have a schedule: the script matches them all in one walk.
SCHEDULED_ATTR = "codegen.scheduled"
# A unit attribute on the loop over row blocks `codegen-fuse-rows` makes (the parallel loop of the
# kernels inside it: their schedules split no loop of their own); removed by `codegen-erase-schedule`.
ROW_LOOP_ATTR = "codegen.row_loop"
# `codegen.fused_into = <id> : i64` on a kernel that runs in contraction <id>'s outer tiles (its fill,
# its epilogue: `codegen.fusion`); `codegen-insert-profile-marks` times the group in that contraction's
# slot. Removed by `codegen-erase-schedule`.
FUSED_ATTR = "codegen.fused_into"
# `codegen.unfused.<id>`: a unit attribute the script sets on the module where kernel <id>'s own
# schedule ran after all, its contraction's having failed before fusing it (`codegen.report`
# reads it; `codegen-erase-schedule` removes it).
UNFUSED_PREFIX = "codegen.unfused."
# A unit attribute on a loop whose vector stores should bypass the caches (a large transposing copy's
# tile loop, `schedules._tile_vectors`); `codegen-streaming-stores` acts on it and removes it.
STREAMING_STORES_ATTR = "codegen.streaming_stores"
# A unit attribute on a contraction's vectorised multiplies (`ContractionSchedule.fma`): each add of
# such a product becomes one fused multiply-add (`codegen-fuse-multiply-add`, which removes it).
FMA_ATTR = "codegen.fma"
# A unit attribute on a vector kernel's divisions (`VectorSchedule.reciprocal`): one whose divisor is
# the same all along its loop becomes a multiplication by the reciprocal, computed once before the
# loop (`codegen-reciprocal-divisions`, which removes it).
RECIPROCAL_ATTR = "codegen.reciprocal"


class KernelKind(str, Enum):
    CONTRACTION = "contraction"
    CONVOLUTION = "convolution"
    POOLING = "pooling"
    REDUCTION = "reduction"
    ELEMENTWISE = "elementwise"
    DATA_MOVEMENT = "data-movement"
    SCALAR = "scalar"  # rank 0 or a handful of elements: loops are the right code
    CHECK = "check"  # no outputs: a run-time check (`cf.assert` per element, from the importer)
    UNKNOWN = "unknown"


# Ops a kernel body may hold for the vectoriser (anything else, e.g. a memref.load gather, is not
# vectorised: such a kernel keeps its loops and is named in the report).
_VECTORIZABLE_DIALECTS = ("arith", "math")
_VECTORIZABLE_OPS = ("linalg.index", "linalg.yield")
_STRUCTURED = ("linalg.generic", "linalg.copy", "linalg.fill", "linalg.map", "linalg.transpose", "linalg.broadcast")


@dataclass
class Kernel:
    """One linalg op of the kernel level and what code generation knows about it."""

    op: ir.Operation
    kind: KernelKind
    loop_ranges: tuple[int, ...] = ()
    reduction_dims: tuple[int, ...] = ()
    element_bits: int = 32
    reason: str = ""  # why a kernel is UNKNOWN
    # contractions: loop dimensions by role, and which input is the "B" operand (holds the n dims);
    # convolutions: m = output image, n = output channels, k = input channels and filter window
    m: tuple[int, ...] = ()
    n: tuple[int, ...] = ()
    k: tuple[int, ...] = ()
    batch: tuple[int, ...] = ()
    b_operand: int = 1
    b_transposed: bool = False  # B's innermost (contiguous) dimension is k, not n: a Linear's W
    maps: list = field(default_factory=list)

    @property
    def rank(self) -> int:
        return len(self.loop_ranges)

    @property
    def iterations(self) -> int:
        total = 1
        for r in self.loop_ranges:
            total *= r
        return total

    @property
    def in_parallel_loop(self) -> bool:
        """Whether the kernel sits in an `scf.forall` (an im2col convolution's loop over images and
        panels, `codegen-decompose-convolutions`): its threads are that loop's, so the kernel runs on
        one thread, its tiles in sequential loops."""
        parent = self.op.parent
        while parent is not None:
            if parent.name == "scf.forall":
                return True
            parent = parent.parent
        return False

    @property
    def innermost_is_reduction(self) -> bool:
        return self.rank > 0 and (self.rank - 1) in self.reduction_dims

    def describe(self) -> str:
        shape = "x".join(map(str, self.loop_ranges)) or "scalar"
        extra = ", B transposed" if self.b_transposed else ""
        return f"{self.kind.value} {shape}{extra}" + (f" ({self.reason})" if self.reason else "")


def _reduction_attr(context: ir.Context) -> ir.Attribute:
    # The attribute linalg's own builder makes for `reduction` (compared, never matched as text).
    from torch_mlir.dialects._linalg_enum_gen import IteratorType, _iteratortypeenum

    return _iteratortypeenum(IteratorType.reduction, context)


def _memref_shape(value) -> list[int] | None:
    shaped = value.type
    if not isinstance(shaped, ir.ShapedType):
        return []  # a scalar operand (fill value)
    if not shaped.has_rank:
        return None
    if any(shaped.is_dynamic_dim(i) for i in range(shaped.rank)):
        return None
    return list(shaped.shape)


def element_bits_of(value) -> int:
    t = value.type
    elem = t.element_type if isinstance(t, ir.ShapedType) else t
    if isinstance(elem, ir.IndexType):
        return 64
    try:
        return elem.width
    except AttributeError:
        return 32


def indexing_maps_of(op) -> list[ir.AffineMap] | None:
    if "indexing_maps" not in op.attributes:
        return None
    return [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]


def _body_problem(op) -> str:
    """Why the body of `op` cannot be vectorised, or ''."""
    if not op.regions or not op.regions[0].blocks:
        return ""
    for inner in op.regions[0].blocks[0].operations:
        name = inner.operation.name
        if name in _VECTORIZABLE_OPS or name.split(".", 1)[0] in _VECTORIZABLE_DIALECTS:
            continue
        return f"body holds '{name}'"
    return ""


def _memory_problem(op, maps, ranges: tuple[int, ...]) -> str:
    """Why the buffers of `op` cannot be read or written as vectors, or ''. LLVM lays out a vector of
    elements narrower than a byte bit-packed (LangRef: a `<8 x i1>` store writes one byte), while a
    memref of i1 holds a byte per element, as torch's bool tensors do: a vectorised mask kernel
    stored 8 flags into one byte and left the other 7 uninitialised for the scalar code reading
    them. Such a buffer may only be indexed by loops no schedule runs its vectors along (the
    innermost loop, the output's innermost dimension): it is then read one element at a time and
    broadcast (an attention mask per row), or written one element per vector of the others."""
    vector_loops = {d for d in (len(ranges) - 1, _innermost_dim(maps[-1])) if d is not None and ranges[d] > 1}
    for value, amap in zip(op.operands, maps):
        if not isinstance(value.type, ir.ShapedType) or element_bits_of(value) % 8 == 0:
            continue
        if any(isinstance(e, ir.AffineDimExpr) and e.position in vector_loops for e in amap.results):
            return f"{value.type.element_type} buffer along the vectors (bit-packed in a vector, a byte per element in memory)"
    vector_dim = _innermost_dim(maps[-1])
    for value, amap in zip(op.operands[:-1], maps[:-1] if not _is_data_movement(op) else ()):
        # A strided window's tap (a pooling's or a depthwise convolution's with stride > 1, all taps
        # in one kernel) whose innermost loop is the output's contiguous dimension: the vector would
        # be gathered one scalar load at a time, slower than the loops (maxpool 3x3/2
        # 1x64x112x112: 4.1 ms against 0.49; depthwise 3x3/2 1x144x56x56: 2.4 ms against 0.25).
        # A strided im2col copy is about even either way (stride-2 conv 64->128 56x56) and stays vectors.
        if (isinstance(value.type, ir.MemRefType) and vector_dim == len(ranges) - 1 and ranges[vector_dim] > 1
                and _innermost_dim(amap) == vector_dim and _innermost_stride(value.type) not in (1, None)):
            return "an input strided along the vectors (a strided window's tap)"
    return ""


def _innermost_stride(t: ir.MemRefType) -> int | None:
    strides, _ = t.get_strides_and_offset()
    return strides[-1] if strides and not t.is_dynamic_stride_or_offset(strides[-1]) else None


def _is_data_movement(op) -> bool:
    """The body only forwards an input or a value defined outside (copy, transpose, broadcast, fill)."""
    if op.name != "linalg.generic":
        return True
    ops = list(op.regions[0].blocks[0].operations)
    if len(ops) != 1:
        return False
    yielded = ops[0].operation.operands
    block = op.regions[0].blocks[0]
    n_in = len(op.operands) - 1
    for v in yielded:
        if isinstance(v, ir.BlockArgument) and v.owner == block and v.arg_number >= n_in:
            return False  # yields the output's old value: an update in place, not a move
    return True


def loop_ranges_of(op, maps) -> tuple[int, ...] | None:
    n_loops = maps[0].n_dims if maps else 0
    ranges: list[int | None] = [None] * n_loops
    for operand, amap in zip(op.operands, maps):
        shape = _memref_shape(operand)
        if shape is None:
            return None
        for size, expr in zip(shape, amap.results):
            if isinstance(expr, ir.AffineDimExpr):
                ranges[expr.position] = size
    if any(r is None for r in ranges):
        return None
    return tuple(ranges)  # type: ignore[arg-type]


def _is_projected_permutation(amap: ir.AffineMap) -> bool:
    seen = set()
    for e in amap.results:
        if isinstance(e, ir.AffineDimExpr):
            pos = e.position
            if pos in seen:
                return False
            seen.add(pos)
        elif isinstance(e, ir.AffineConstantExpr) and e.value == 0:
            continue  # a broadcast unit dimension (`(d0, d1) -> (d0, 0)`)
        else:
            return False
    return True


def _innermost_dim(amap: ir.AffineMap) -> int | None:
    for e in reversed(list(amap.results)):
        if isinstance(e, ir.AffineDimExpr):
            return e.position
        if not (isinstance(e, ir.AffineConstantExpr)):
            return None
    return None


def classify(op: ir.Operation) -> Kernel:
    """The `Kernel` for a structured op of the kernel level (memref operands)."""
    op = op.operation
    if op.name not in _STRUCTURED:
        return Kernel(op, KernelKind.UNKNOWN, reason=f"'{op.name}' has no schedule")
    if op.name == "linalg.generic":
        maps = indexing_maps_of(op)
    else:
        maps = [ir.AffineMapAttr(m).value for m in linalg.get_indexing_maps(op)] if op.name != "linalg.fill" else None
        if maps is None:  # fill: a scalar in, the output written whole
            out = op.operands[-1]
            rank = out.type.rank
            maps = [ir.AffineMap.get(rank, 0, []), ir.AffineMap.get_identity(rank)]
    if maps is None:
        return Kernel(op, KernelKind.UNKNOWN, reason="no indexing maps")
    if op.name == "linalg.generic" and len(op.opview.outputs) == 0:
        return Kernel(op, KernelKind.CHECK, reason="a run-time check (no outputs)")
    out_bits = element_bits_of(op.operands[-1])
    ranges = loop_ranges_of(op, maps)
    if ranges is None:
        return Kernel(op, KernelKind.UNKNOWN, reason="dynamic shape", element_bits=out_bits)
    reduction = ()
    if "iterator_types" in op.attributes:
        red = _reduction_attr(op.context)
        reduction = tuple(i for i, a in enumerate(ir.ArrayAttr(op.attributes["iterator_types"])) if a == red)
    kernel = Kernel(op, KernelKind.UNKNOWN, ranges, reduction, out_bits, maps=maps)
    if problem := _body_problem(op):
        kernel.reason = problem
        return kernel
    if not ranges or (kernel.iterations <= 4 and not in_row_loop(op)):
        # (Inside a loop over row blocks a kernel of a few elements is a row's share of a kernel:
        # vectorised like the rest, its views fold away, and the row reductions' accumulators stay
        # in registers -- hoisting refuses a buffer that some view still reads.)
        kernel.kind = KernelKind.SCALAR
        return kernel
    if problem := _memory_problem(op, maps, ranges):
        kernel.reason = problem
        return kernel
    # infer_convolution_dimensions is None where isa_convolution_op's looser check held (a window
    # read through a VTC view's folded map): such a kernel is classified by the rules below.
    dims = linalg.infer_convolution_dimensions(op) if op.name == "linalg.generic" and linalg.isa_convolution_op(op) \
        else None
    if dims is not None:
        kernel.kind = KernelKind.CONVOLUTION
        kernel.batch = tuple(dims.batch) + tuple(dims.depth)
        kernel.m, kernel.n = tuple(dims.output_image), tuple(dims.output_channel)
        kernel.k = tuple(dims.input_channel) + tuple(dims.filter_loop)
        return kernel
    if not all(_is_projected_permutation(m) for m in maps):
        kernel.kind = KernelKind.POOLING if reduction else KernelKind.UNKNOWN
        kernel.reason = "" if reduction else "an indexing map is not a projected permutation"
        return kernel
    if reduction and op.name == "linalg.generic" and linalg.isa_contraction_op(op):
        # Not a reduction to reassociate where it is refused: another pipeline may see the same
        # product as a contraction, whose order is the loops'. Loops keep the two bitwise equal.
        kernel.reason = _classify_contraction(kernel, op, maps)
        return kernel
    if reduction:
        kernel.kind = KernelKind.REDUCTION
    else:
        kernel.kind = KernelKind.DATA_MOVEMENT if _is_data_movement(op) else KernelKind.ELEMENTWISE
    return kernel


def _classify_contraction(kernel: Kernel, op, maps) -> str:
    """Make `kernel` a contraction; '' if it is one, else why it is not."""
    dims = linalg.infer_contraction_dimensions(op)
    m, n, k, batch = (tuple(dims.m), tuple(dims.n), tuple(dims.k), tuple(dims.batch))
    if not k or not m or not n or len(op.operands) != 3:
        return "a contraction without m, n and k dimensions"
    alone = tuple(d for d in kernel.reduction_dims if d not in k)
    if alone:
        # A reduction one input alone reads (a concat buffer's channel block c_hi folded into a
        # convolution and delinearised: the filter reads (c_hi, c_lo), the input c_lo) is no k for
        # linalg; left out, it was summed in the vectoriser's order, not the loops' (a 2x2 stride-2
        # convolution of cat(x, x) was 1 ulp from opt level 0 under EXACT_SCHEDULES). It joins k
        # in loop order, and the schedule sums it one at a time, outermost first.
        if max(alone) > k[-1]:
            return "a contraction whose innermost reduction one input alone reads"
        k = tuple(sorted(k + alone))
    if kernel.loop_ranges:
        # Reductions of extent 1 (a 1x1 convolution's kh, kw, left innermost when a VTC view made it
        # a plain contraction) go outermost: k[-1] is the schedule's register-tile k, and with kw
        # there the 16 channels of efficientvit's grouped 1x1 convolution were summed one packed
        # panel at a time (7x slower). A loop of one trip adds nothing: the order of the sum stays.
        k = tuple(d for d in k if kernel.loop_ranges[d] == 1) + tuple(d for d in k if kernel.loop_ranges[d] != 1)
    c_inner = _innermost_dim(maps[2])
    if c_inner in m:  # linalg names m after operand 0; the vectors run along C's contiguous dimension
        m, n = n, m
    if c_inner not in n:
        return "a contraction whose output's contiguous dimension is not an input's"
    n = tuple(d for d in n if d != c_inner) + (c_inner,)
    b_operand = next(i for i in (0, 1) if n[-1] in {e.position for e in maps[i].results
                                                     if isinstance(e, ir.AffineDimExpr)})
    b_map = maps[b_operand]
    kernel.kind = KernelKind.CONTRACTION
    kernel.m, kernel.n, kernel.k, kernel.batch = m, n, k, batch
    kernel.b_operand = b_operand
    kernel.b_transposed = _innermost_dim(b_map) != n[-1]
    return ""


def structured_ops(module_op) -> list[ir.Operation]:
    """The structured (linalg) ops of every function, in program order; not those inside another
    structured op nor inside transform IR."""
    found: list[ir.Operation] = []

    def visit(op):
        name = op.name
        if name.startswith("transform."):
            return
        if name.startswith("linalg.") and name in _STRUCTURED or (name.startswith("linalg.") and
                                                                   "indexing_maps" in op.attributes):
            found.append(op)
            return
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    visit(inner.operation)

    visit(module_op)
    return found


def rewrite_generics(module_op, rewrite) -> int:
    """Apply `rewrite(op) -> bool` to every `linalg.generic` kernel; returns how many it rewrote."""
    with module_op.context:
        return sum(1 for op in structured_ops(module_op) if op.name == "linalg.generic" and rewrite(op))


def row_loop_of(op):
    """The loop over row blocks (`ROW_LOOP_ATTR`) that `op` stands in, or None."""
    parent = op.parent
    while parent is not None and parent.name != "func.func":
        if ROW_LOOP_ATTR in parent.attributes:
            return parent
        parent = parent.parent
    return None


def in_row_loop(op) -> bool:
    return row_loop_of(op) is not None


def tagged_ops(module_op) -> list[ir.Operation]:
    """The linalg ops that carry a `codegen.kernel` tag."""
    found = []

    def visit(op):
        if op.name.startswith("linalg.") and KERNEL_ATTR in op.attributes:
            found.append(op)
        return ir.WalkResult.ADVANCE

    module_op.walk(visit)
    return found
