"""`codegen-plan-workspace`: an entry function's intermediate buffers at static offsets of one workspace.

Bufferized, every intermediate buffer of a model is a `memref.alloc` freed by a `memref.dealloc`:
malloc and free on every call. Where a call frees more than glibc's trim threshold at the top of its
heap, or a buffer is above the mmap threshold, that memory goes back to the system and the next call
faults every page in again (vtc_efficientvit_block b16, one thread: 13968 page faults per call, a
third of its time). As IREE's and TVM's static memory plans do, this pass gives those buffers byte
offsets in one workspace that the caller passes in and keeps between calls (the CPU executable keeps
one per calling thread, `backend/cpu/calling.py`).

Planned: the `memref.alloc`s directly in the function's entry block with a static shape, the identity
layout, the default memory space and a byte-sized int or float element, freed by one `memref.dealloc`
in the same block and never escaping (no use, through views, by a return, a call, a yield or any
other terminator, or an op with regions other than linalg's that takes it as an operand). A buffer's
lifetime is the positions of its alloc and its dealloc in the block; an op between them that uses it
inside its regions is inside it. Allocations in loops and other regions (OpenMP's parallel bodies keep theirs), dynamic
shapes and strided layouts stay malloc/free.

Offsets come from the greedy-by-size plan (TFLite's and TVM's): buffers in decreasing size, each at the
lowest offset, a multiple of its alignment (its `alignment` attribute, at least 64 bytes), that
overlaps no buffer already placed whose lifetime intersects its own. Where that spans more than the
block's peak of live planned bytes, the same placement in TFLite's breadth order (the buffers live at
the block's widest points first), then by size times lifetime, is tried too, and the smallest plan
kept (`plan_offsets`).

The rewrite: the function gets one more argument, `memref<N x i8>` (N the workspace's bytes), last;
each planned alloc becomes a `memref.view` of it (after a `memref.assume_alignment` of the workspace's
alignment) at its offset, and its dealloc is erased. The caller passes a buffer of N bytes aligned to
the plan's alignment. Nothing is planned, and the signature is unchanged, where no buffer qualifies.
Same operations on the same values in other memory: results are bitwise unchanged.

`function` names the one function to plan (the CPU backend passes its entry); empty: every public
function with a body that no call in the module refers to (a called one would need its callers
changed).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from torch_mlir import ir
from torch_mlir.dialects import arith, memref

from ..ir_utils import symbol_name, walk_ops
from ..passes.registry import Option, Pass, register_pass

#: the least alignment of a planned buffer and of the workspace: a cache line (what the backend's
#: allocations ask for, and what the streaming stores of `codegen-streaming-stores` look for)
MIN_ALIGNMENT = 64

#: ops whose memref results are views of (alias) their memref operand
_VIEWS = frozenset({"memref.subview", "memref.expand_shape", "memref.collapse_shape", "memref.cast",
                    "memref.reinterpret_cast", "memref.view", "memref.transpose", "memref.assume_alignment",
                    "memref.extract_strided_metadata", "memref.memory_space_cast"})


@dataclass(frozen=True)
class PlannedBuffer:
    """One planned allocation: `size` bytes at `offset`, live from op `start` to op `end` (positions in
    the entry block, the alloc's and the dealloc's)."""

    size: int
    alignment: int
    start: int
    end: int
    offset: int


@dataclass(frozen=True)
class WorkspacePlan:
    """The workspace of one function: `bytes` (the argument's size), `alignment` (of its start) and
    the buffers placed in it; `left` counts the entry block's allocations that stay malloc'd."""

    function: str
    bytes: int
    alignment: int
    buffers: tuple[PlannedBuffer, ...]
    left: int = 0

    @property
    def peak_bytes(self) -> int:
        """The most planned bytes live at once (the least any plan of these lifetimes needs)."""
        return live_peak([(b.size, b.start, b.end) for b in self.buffers])

    def __str__(self) -> str:
        return (f"workspace of @{self.function}: {self.bytes} bytes per calling thread, {len(self.buffers)} "
                f"buffers at static offsets (their live peak {self.peak_bytes} bytes), {self.left} left to malloc")


def live_peak(lifetimes) -> int:
    """The most bytes live at once among `(size, start, end)` buffers, each live from `start` to `end`
    inclusive."""
    events = sorted([(s, 0, size) for size, s, _ in lifetimes] + [(e, 1, -size) for size, _, e in lifetimes])
    live = peak = 0
    for _, _, delta in events:   # at one position an allocation counts before a free
        live += delta
        peak = max(peak, live)
    return peak


def _align_up(value: int, alignment: int) -> int:
    return -(-value // alignment) * alignment


def greedy_by_size(requests, order=None) -> tuple[list[int], int]:
    """Offsets for `(size, alignment, start, end)` requests (lifetimes inclusive) and the bytes they span.

    In `order` (default: largest first, ties earliest first), each at the lowest offset that is a
    multiple of its alignment and overlaps no placed buffer whose lifetime intersects its own."""
    if order is None:
        order = sorted(range(len(requests)), key=lambda i: (-requests[i][0], requests[i][2], i))
    offsets = [0] * len(requests)
    placed: list[tuple[int, int, int, int]] = []   # (offset, end offset, start, end)
    total = 0
    for i in order:
        size, alignment, start, end = requests[i]
        busy = sorted((o, oe) for o, oe, s, e in placed if s <= end and start <= e)
        offset = 0
        for o, oe in busy:
            candidate = _align_up(offset, alignment)
            if candidate + size <= o:
                break
            offset = max(offset, oe)
        offset = _align_up(offset, alignment)
        offsets[i] = offset
        placed.append((offset, offset + size, start, end))
        total = max(total, offset + size)
    return offsets, total


def breadth_order(requests) -> list[int]:
    """The requests by the most bytes live at any point of their lifetime, largest first (then by
    size): the buffers of the block's widest points are placed first, together (TFLite's greedy by
    breadth)."""
    starts = sorted({s for _, _, s, _ in requests})
    live = {p: 0 for p in starts}
    for size, _, s, e in requests:   # bytes live at each allocation point
        lo, hi = bisect.bisect_left(starts, s), bisect.bisect_right(starts, e)
        for p in starts[lo:hi]:
            live[p] += size
    widest = []
    for size, _, s, e in requests:
        lo, hi = bisect.bisect_left(starts, s), bisect.bisect_right(starts, e)
        widest.append(max(live[p] for p in starts[lo:hi]))
    return sorted(range(len(requests)), key=lambda i: (-widest[i], -requests[i][0], requests[i][2], i))


def area_order(requests) -> list[int]:
    """The requests by size times lifetime (in ops), largest first: long-lived buffers low in the
    workspace, the short ones fitted around them."""
    return sorted(range(len(requests)),
                  key=lambda i: (-requests[i][0] * (requests[i][3] - requests[i][2] + 1), requests[i][2], i))


def plan_offsets(requests) -> tuple[list[int], int]:
    """The offsets of `greedy_by_size`; where they span more than the live peak (the order left holes
    that later buffers could not fill), the same placement in the breadth order (`breadth_order`),
    then in the area order (`area_order`), until one reaches the peak; the plan that spans the fewest
    bytes. By size / breadth / area, over their buffers' live peak: ResNet-50 b8 (125 buffers)
    1.32 / 1.00x, temco_unet_small b8 (54) 1.19 / 1.19 / 1.00x."""
    best = greedy_by_size(requests)
    peak = live_peak([(size, s, e) for size, _, s, e in requests])
    for order in (breadth_order, area_order):
        if best[1] <= peak:
            break
        other = greedy_by_size(requests, order(requests))
        if other[1] < best[1]:
            best = other
    return best


def _buffer_bytes(memref_type: ir.MemRefType) -> int | None:
    """Bytes of a plannable buffer type (static shape, identity layout, default memory space, an int or
    float element of whole bytes: the size the LLVM lowering allocates), else None."""
    if not memref_type.has_static_shape:
        return None
    layout = memref_type.layout
    if not isinstance(layout, ir.AffineMapAttr) or layout.value != ir.AffineMap.get_identity(memref_type.rank):
        return None
    if memref_type.memory_space is not None:
        return None
    element = memref_type.element_type
    if isinstance(element, (ir.IntegerType, ir.FloatType)):
        width = element.width
    else:
        return None
    if width % 8:
        return None
    size = width // 8
    for n in memref_type.shape:
        size *= n
    return size


def _escapes(value: ir.Value, deallocs: list) -> bool:
    """Whether `value` (an allocation) or a view of it leaves the function's control: used by a
    terminator (return, yield), a call, an op with regions taking it as an operand, or anything
    that is not an ordinary reader or writer; its deallocs are collected in `deallocs`."""
    pending = [value]
    while pending:
        v = pending.pop()
        for use in v.uses:
            user = use.owner
            user = user.operation if hasattr(user, "operation") else user
            name = user.name
            if name == "memref.dealloc":
                deallocs.append(user)
                continue
            if name in _VIEWS:
                pending.extend(r for r in user.results if isinstance(r.type, ir.MemRefType))
                continue
            if (name.startswith(("func.", "llvm.", "builtin.")) or "call" in name.rsplit(".", 1)[-1]
                    or (len(user.regions) and not name.startswith("linalg."))
                    or user.has_trait(ir.IsTerminatorTrait)):
                return True   # (a linalg op's regions take elements, not the buffer)
            if any(isinstance(r.type, (ir.MemRefType, ir.UnrankedMemRefType)) for r in user.results):
                return True   # an op that returns a memref we do not know to be a view
    return False


def _entry_functions(module_op, function: str):
    """The functions to plan: `function` if given, else every public one with a body; never one that
    a call refers to."""
    called = set()
    for op in walk_ops(module_op):
        callee = op.attributes["callee"] if "callee" in op.attributes else None
        if isinstance(callee, ir.FlatSymbolRefAttr):   # (a nested reference names another table's symbol)
            called.add(callee.value)
    found = []
    for op in walk_ops(module_op, "func.func"):
        name = symbol_name(op)
        if not op.regions[0].blocks or name in called:
            continue
        if function:
            if name == function:
                found.append(op)
        elif "sym_visibility" not in op.attributes or ir.StringAttr(op.attributes["sym_visibility"]).value == "public":
            found.append(op)
    return found


def plan_workspace(fn) -> WorkspacePlan:
    """Plan and rewrite `fn` (a `func.func`): see the module doc. Returns the plan (no buffers: `fn`
    left as it was)."""
    block = fn.regions[0].blocks[0]
    ops = [op.operation for op in block.operations]
    position = {op: i for i, op in enumerate(ops)}
    candidates, left = [], 0
    for i, op in enumerate(ops):
        if op.name != "memref.alloc":
            continue
        result = op.results[0]
        size = _buffer_bytes(result.type)
        deallocs: list = []
        if (size is None or size == 0 or len(op.operands) or _escapes(result, deallocs)
                or len(deallocs) != 1 or deallocs[0] not in position):
            left += 1
            continue
        alignment = MIN_ALIGNMENT
        if "alignment" in op.attributes:
            alignment = max(alignment, ir.IntegerAttr(op.attributes["alignment"]).value)
        candidates.append((op, deallocs[0], size, alignment, i, position[deallocs[0]]))
    name = symbol_name(fn)
    if not candidates:
        return WorkspacePlan(name, 0, MIN_ALIGNMENT, (), left)
    offsets, total = plan_offsets([(size, a, s, e) for _, _, size, a, s, e in candidates])
    alignment = max(c[3] for c in candidates)
    total = _align_up(total, MIN_ALIGNMENT)

    with fn.location:
        i8 = ir.IntegerType.get_signless(8)
        workspace_type = ir.MemRefType.get([total], i8)
        argument = block.add_argument(workspace_type, fn.location)
        ftype = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)
        fn.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get(list(ftype.inputs) + [workspace_type], list(ftype.results)))
        if "arg_attrs" in fn.attributes:
            attrs = list(ir.ArrayAttr(fn.attributes["arg_attrs"]))
            fn.attributes["arg_attrs"] = ir.ArrayAttr.get(attrs + [ir.DictAttr.get({})])
        with ir.InsertionPoint.at_block_begin(block):
            workspace = memref.AssumeAlignmentOp(argument, alignment).result
        index = ir.IndexType.get()
        for (alloc, dealloc, *_), offset in zip(candidates, offsets):
            with alloc.location, ir.InsertionPoint(alloc):
                shift = arith.ConstantOp(index, offset).result
                view = memref.ViewOp(alloc.results[0].type, workspace, shift, []).result
            alloc.results[0].replace_all_uses_with(view)
            alloc.erase()
            dealloc.erase()
    buffers = tuple(PlannedBuffer(size, a, s, e, o) for (_, _, size, a, s, e), o in zip(candidates, offsets))
    return WorkspacePlan(name, total, alignment, buffers, left)


@register_pass
class PlanWorkspace(Pass):
    name = "codegen-plan-workspace"
    summary = "Place an entry function's intermediate buffers at static offsets of one workspace argument"
    options = (Option("function", str, "", "the function to plan (default: every public function no call refers to)"),)

    def run(self, module):
        """{function name: `WorkspacePlan`} of the functions planned."""
        return {p.function: p for p in (plan_workspace(fn) for fn in _entry_functions(module, self.function))}
