"""`codegen-fuse-rows`: a row reduction and the kernels around it run one block of rows at a time.

The kernel level holds a LayerNorm as five kernels over the whole tensor (the row sums of x, of the
squared deviations and of x again in f32, the per-row `rsqrt` that `codegen-split-row-invariants`
splits out, the normalisation and affine map), a softmax as six (max, exp, sum, divide and the fills
of the row buffers), an RMSNorm as three. Each reads every row from memory again: at 256x4096 f32
(4 MiB, more than the L2) the LayerNorm reads x four times. Here such a chain of kernels becomes one
loop over blocks of rows, and in each trip every kernel of the chain runs on the block's rows (a
subview of each buffer), so the block stays in the L1 cache from the first reduction to the last
store: x is read from memory once. The loop is an `scf.forall` (the parallel loop at threads > 1,
`scf.for` otherwise); the schedules then tile and vectorise each kernel inside it without a
parallel split of their own (`ROW_LOOP_ATTR`).

A *row kernel* is a `linalg.generic` row reduction (its innermost loop the only reduction of more
than one element), elementwise or data-movement kernel whose loops, but for the innermost, are
parallel -- the *row loops*: those of more than one element index the output as plain dimensions
--, and whose operands that read the innermost loop read it as their contiguous dimension (no
transposition). A *group* is a run of row kernels in one block with the same row extents, where
every buffer a kernel of the group writes is accessed by the group through one value only, each row
loop indexing the same dimension of it in every kernel (a trip then reads only what the same trip
wrote: fusing is legal). Between the kernels of a group may stand buffer allocations and frees (a
free of a buffer the group uses moves after the loop), constants, views, and kernels that touch
none of the buffers the group's earlier kernels write nor write what they read (those run before
the loop). A group is fused when it holds a row reduction and another kernel reading whole rows
after it, when there is more than one block of rows, and when it is large enough for a parallel
loop (`PARALLEL_MIN_ITERATIONS`, as the schedules' split): smaller groups fit the caches anyway.

A block holds as many rows (of the innermost row loop; the outer ones by one) as fit in
`block-bytes` (default 16 KiB, half an L1 data cache) of the widest row read, at least one; its
number divides the row extent, so every subview has a static shape.

Every kernel computes the same values in the same order as before (the reductions run along the
row as before, per row block instead of over all rows): results are bitwise those of the unfused
kernels under the same schedules, and identical for any thread count.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torch_mlir import ir
from torch_mlir.dialects import memref, scf

from ..passes.memref_dealloc_at_last_use import VIEW_OPS
from ..passes.registry import Option, Pass, register_pass
from .bodies import buffer_root
from .kernels import ROW_LOOP_ATTR, Kernel, KernelKind, classify, element_bits_of
from .schedules import PARALLEL_MIN_ITERATIONS

BLOCK_BYTES = 16 * 1024

# Ops that may stand between the kernels of a group: no memory access the kernels could observe
# (allocation, views, constants); frees move after the loop.
_TRANSPARENT = frozenset({"memref.alloc", "memref.alloca", "memref.dealloc", "memref.get_global",
                          "arith.constant"}) | VIEW_OPS
# What the body of a kernel standing between a group's kernels may hold: no memory access of its own.
_BODY_DIALECTS = ("arith", "math", "linalg", "cf")


@dataclass
class _RowKernel:
    """A row kernel: its loops matched to the group's row extents, and how each operand is read."""

    op: ir.Operation
    kernel: Kernel
    rows: tuple[int, ...]  # extents of the row loops (more than one element each), outermost first
    row_length: int  # extent of the innermost loop
    row_bytes: int  # bytes of the widest operand read along the row
    # per operand: (value, buffer root, per result of its map the row loop index it is, or None)
    accesses: list[tuple[ir.Value, ir.Value, tuple]] = field(default_factory=list)
    per_row: bool = False  # every loop a row loop: one element per row (`row_groups(per_row_members=True)`)

    @property
    def reduces(self) -> bool:
        return self.kernel.kind is KernelKind.REDUCTION

    @property
    def written(self) -> set:
        return {self.accesses[-1][1]}


def _row_kernel(op, per_row: bool = False, kernel: Kernel | None = None) -> _RowKernel | None:
    """`op` as a row kernel, or None. `per_row`: as a *per-row kernel* instead, an elementwise or
    data-movement generic all of whose loops are row loops (one element per row, no row of
    elements: the fills of a softmax's or a norm's row buffers), `row_length` 1."""
    if op.name != "linalg.generic":
        return None
    kernel = kernel or classify(op)
    if len(op.opview.outputs) != 1:
        return None
    if per_row:
        # (A kernel of at most four elements is `SCALAR`: the fill of a sum over three rows.)
        if kernel.kind not in (KernelKind.ELEMENTWISE, KernelKind.DATA_MOVEMENT, KernelKind.SCALAR):
            return None
        return _per_row_kernel(op, kernel)
    if kernel.kind not in (KernelKind.REDUCTION, KernelKind.ELEMENTWISE, KernelKind.DATA_MOVEMENT):
        return None
    if kernel.rank < 2:
        return None
    inner = kernel.rank - 1
    ranges = kernel.loop_ranges
    if any(d != inner and ranges[d] > 1 for d in kernel.reduction_dims):
        return None  # a reduction across rows
    if kernel.reduction_dims and not kernel.innermost_is_reduction:
        return None
    found = _rows_and_operands(op, kernel, inner)
    if found is None:
        return None
    row_loops, operands = found
    accesses, row_bytes = [], 0
    for value, dims in operands:
        if inner in dims:
            if [d for d in dims if d is not None][-1] != inner:
                return None  # read across the row (a transposition)
            row_bytes = max(row_bytes, ranges[inner] * element_bits_of(value) // 8)
        accesses.append(_access(value, dims, row_loops))
    return _RowKernel(op, kernel, tuple(ranges[d] for d in row_loops), ranges[inner], row_bytes, accesses)


def _per_row_kernel(op, kernel: Kernel) -> _RowKernel | None:
    if kernel.reduction_dims or kernel.rank < 1:
        return None
    ranges = kernel.loop_ranges
    found = _rows_and_operands(op, kernel, kernel.rank)
    if found is None:
        return None
    row_loops, operands = found
    accesses = [_access(value, dims, row_loops) for value, dims in operands]
    return _RowKernel(op, kernel, tuple(ranges[d] for d in row_loops), 1, 0, accesses, per_row=True)


def _rows_and_operands(op, kernel: Kernel, loops: int):
    """(the row loops: those of the first `loops` loops with more than one trip, each an index of
    the output; `_operand_dims`), or None where there is none or the output drops one."""
    ranges = kernel.loop_ranges
    row_loops = [d for d in range(loops) if ranges[d] > 1]
    out_dims = [e.position for e in kernel.maps[-1].results if isinstance(e, ir.AffineDimExpr)]
    if not row_loops or any(d not in out_dims for d in row_loops):
        return None
    operands = _operand_dims(op, kernel)
    return None if operands is None else (row_loops, operands)


def _operand_dims(op, kernel: Kernel) -> list[tuple[ir.Value, list[int | None]]] | None:
    """Each operand with the loop dimension of each of its indices (None: the constant 0), or None
    where an index is anything else (an offset, a sum of loops: not a row access)."""
    operands = []
    for value, amap in zip(op.operands, kernel.maps):
        results = list(amap.results)
        dims = [e.position if isinstance(e, ir.AffineDimExpr) else None for e in results]
        if any(e is None and not (isinstance(r, ir.AffineConstantExpr) and r.value == 0)
               for e, r in zip(dims, results)):
            return None
        operands.append((value, dims))
    return operands


def _access(value: ir.Value, dims: list[int | None], row_loops: list[int]) -> tuple:
    """(operand, its buffer, the row loop each of its indices takes or None)."""
    return value, buffer_root(value), tuple(row_loops.index(d) if d in row_loops else None for d in dims)


class _Group:
    def __init__(self, first: _RowKernel):
        self.members = [first]
        self.between: list = []  # frees of the members' buffers met between them (moved after the loop)
        self.pending: list = []  # such frees met after the last member so far

    def append(self, member: _RowKernel) -> None:
        self.members.append(member)
        self.between += self.pending
        self.pending = []

    @property
    def rows(self) -> tuple[int, ...]:
        return self.members[0].rows

    def written(self) -> set:
        return set().union(*(m.written for m in self.members))

    def accessed(self) -> set:
        return {root for m in self.members for _, root, _ in m.accesses}

    def admits(self, candidate: _RowKernel) -> bool:
        """Whether `candidate` can join: same rows, and every written buffer accessed one way."""
        if candidate.rows != self.rows:
            return False
        members = self.members + [candidate]
        written = self.written() | candidate.written
        seen: dict = {}
        for m in members:
            for value, root, rows in m.accesses:
                if root not in written:
                    continue
                if sorted(r for r in rows if r is not None) != list(range(len(self.rows))):
                    return False  # a written buffer not indexed by every row loop
                if seen.setdefault(root, (value, rows)) != (value, rows):
                    return False
        return True

    def independent_of(self, op) -> bool:
        """Whether `op` (standing between members, not one) may run before the members met so far:
        a kernel that writes no buffer they access and reads none they write."""
        if not (op.name.startswith("linalg.") and "indexing_maps" in op.attributes):
            return False
        body = op.regions[0].blocks[0].operations if op.regions and op.regions[0].blocks else []
        if any(inner.operation.name.split(".", 1)[0] not in _BODY_DIALECTS for inner in body):
            return False  # a gather (memref.load) reads buffers that are no operand
        outputs = set(op.opview.outputs)
        written = {buffer_root(v) for v in op.operands if v in outputs}
        read = {buffer_root(v) for v in op.operands if v not in outputs and isinstance(v.type, ir.MemRefType)}
        return not (written & self.accessed()) and not (read & self.written())

    def worth_fusing(self, block_rows: int) -> bool:
        full = [m for m in self.members if m.row_length > 1]
        first_reduction = next((i for i, m in enumerate(self.members) if m.reduces and m.row_length > 1), None)
        if first_reduction is None or not any(m.row_length > 1 for m in self.members[first_reduction + 1:]):
            return False
        rows = 1
        for r in self.rows:
            rows *= r
        largest = max(m.kernel.iterations for m in full)
        return rows > block_rows and largest >= PARALLEL_MIN_ITERATIONS


def _block_rows(group: _Group, block_bytes: int) -> int:
    """Rows of the innermost row loop per trip: as many as fit in `block_bytes`, dividing its extent."""
    row_bytes = max(m.row_bytes for m in group.members) or 1
    fit = max(1, block_bytes // row_bytes)
    extent = group.rows[-1]
    return max(d for d in range(1, min(fit, extent) + 1) if extent % d == 0)


def _fuse(group: _Group, block_rows: int) -> None:
    """Move the members into one `scf.forall` over row blocks, where the last member stood."""
    last = group.members[-1].op
    n = len(group.rows)
    with last.location, ir.InsertionPoint(last):
        loop = scf.ForallOp([0] * n, list(group.rows), [1] * (n - 1) + [block_rows])
        loop.operation.attributes[ROW_LOOP_ATTR] = ir.UnitAttr.get()
        with ir.InsertionPoint(loop.body):
            terminator = scf.InParallelOp()
    ivs = list(loop.induction_variables)
    views: dict = {}
    for m in group.members:
        with m.op.location, ir.InsertionPoint(terminator):
            for i, (value, _, rows) in enumerate(m.accesses):
                if all(r is None for r in rows):
                    continue  # read whole (a row of weights, a scalar buffer)
                key = (value, rows)
                if key not in views:
                    shape = ir.MemRefType(value.type).shape
                    offsets = [ivs[r] if r is not None else 0 for r in rows]
                    sizes = [shape[k] if r is None else (block_rows if r == n - 1 else 1) for k, r in enumerate(rows)]
                    views[key] = memref.subview(value, offsets, sizes, [1] * len(sizes))
                m.op.operands[i] = views[key]
        m.op.move_before(terminator.operation)
    after = loop.operation
    for free in group.between:
        if free.is_before_in_block(after):  # (not after a later group's loop already)
            free.move_after(after)
            after = free


def _reseeded(previous: _Group, first: _RowKernel) -> _Group | None:
    """`previous` (closed by `first`, which it could not admit) and `first` as one group, its
    members read as per-row kernels: a [B, S] fill read as rows (B) of length S is one element per
    row of a group over rows (B, S); or None."""
    if previous.rows != first.rows[:len(previous.rows)] or previous.rows == first.rows:
        return None
    forms = [_row_kernel(m.op, per_row=True, kernel=m.kernel) for m in previous.members]
    if any(f is None for f in forms):
        return None
    group = _Group(forms[0])
    for form in forms[1:]:
        if not group.admits(form):
            return None
        group.members.append(form)
    if not group.admits(first):
        return None
    group.between, group.pending = list(previous.between), list(previous.pending)
    group.append(first)
    return group


def row_groups(block: ir.Block, per_row_members: bool = False, independent_groups: bool = False,
               exclude=frozenset()) -> list[_Group]:
    """The groups of row kernels of `block` (a function body), in program order; each holds at
    least one kernel (the GPU's `codegen-gpu-attach-schedule` fuses them its own way). The ops in
    `exclude` (the GPU's members of a contraction's group) join none: other kernels to the scan.

    `per_row_members`: per-row kernels (`_row_kernel(per_row=True)`: a softmax's fills of its max
    and sum buffers) join groups over their rows too, where a kernel with a row of elements would
    not, instead of running before the group or closing it (the sum's fill, on the buffer the
    bufferization reused from the max, stands between the exp and the sum: without it a softmax is
    two groups). The GPU's row groups take them (one thread of the row stores the element); the
    CPU's `codegen-fuse-rows` does not.

    `independent_groups`: the scan keeps one group open, and the kernels independent of it that it
    passes over (they run before the group) start no group of their own: a row sum over other rows
    after a softmax. Scanned again with the members of the groups found treated as other kernels
    (which the new group's members must be independent of, as any kernel standing between them),
    they form groups too, until a scan finds none; only groups that hold a row reduction and
    another member are returned then (the GPU's; every kernel in one group at most). Each group
    runs at its last member's place: a member moves past the other group's kernels in between,
    which the scan that formed either group found independent of it."""
    if not independent_groups:
        return _scan_row_groups(block, per_row_members, set(exclude))
    found: list[_Group] = []
    taken: set = set(exclude)
    while True:
        more = [g for g in _scan_row_groups(block, per_row_members, taken)
                if len(g.members) > 1 and any(m.reduces and m.row_length > 1 for m in g.members)]
        if not more:
            break
        found += more
        taken |= {m.op for g in more for m in g.members}
    order = {op.operation: i for i, op in enumerate(block.operations)}
    return sorted(found, key=lambda g: order[g.members[0].op])


def _scan_row_groups(block: ir.Block, per_row_members: bool, taken: set) -> list[_Group]:
    """`row_groups`' scan: the ops of `block` in order, one group open; the kernels in `taken`
    (`exclude`, and the members of groups found before) join none."""
    groups: list[_Group] = []
    current: _Group | None = None

    def close():
        nonlocal current
        if current is not None:
            groups.append(current)
        current = None

    for op in list(block.operations):
        op = op.operation
        kernel = classify(op) if op.name == "linalg.generic" and op not in taken else None
        row = _row_kernel(op, kernel=kernel) if kernel is not None else None
        alone = _row_kernel(op, per_row=True, kernel=kernel) if per_row_members and kernel is not None else None
        if current is not None:
            joining = next((r for r in (row, alone) if r is not None and current.admits(r)), None)
            if joining is not None:
                current.append(joining)
                continue
        previous = None
        if current is not None:
            if op.name in _TRANSPARENT:
                if op.name == "memref.dealloc" and buffer_root(op.operands[0]) in current.accessed():
                    current.pending.append(op)
                continue
            if current.independent_of(op):
                continue  # (stays before the loop)
            previous = current
            close()
        first = row or alone
        if first is not None:
            current = _Group(first)
            if per_row_members and previous is not None and (merged := _reseeded(previous, first)) is not None:
                groups.pop()
                current = merged
    close()
    return groups


def fuse_rows(block: ir.Block, block_bytes: int = 0) -> int:
    """Fuse the row groups of `block` (a function body); returns how many loops it made.
    `block_bytes`: see the module's doc (0: `BLOCK_BYTES`)."""
    block_bytes = block_bytes or BLOCK_BYTES
    made = 0
    for group in row_groups(block):
        rows = _block_rows(group, block_bytes)
        if group.worth_fusing(rows):
            _fuse(group, rows)
            made += 1
    return made


def fuse_all_rows(module_op, block_bytes: int = 0) -> int:
    made = 0
    with module_op.context:
        for op in module_op.regions[0].blocks[0].operations:
            if op.operation.name == "func.func" and op.regions[0].blocks:
                made += fuse_rows(op.regions[0].blocks[0], block_bytes)
    return made


@register_pass
class FuseRows(Pass):
    name = "codegen-fuse-rows"
    summary = "Run a row reduction and the row kernels around it one block of rows at a time, in one loop"
    options = (
        Option("block-bytes", int, 0, "bytes of the widest row read per trip (rows per block: this / the row's "
                                      "bytes; 0: 16 KiB)"),
    )

    def run(self, module):
        fuse_all_rows(module, self.block_bytes)
