"""`codegen-insert-profile-marks`: bracket every kernel with calls that record its time (a profiling build).

Runs right after `codegen-attach-schedule`: the kernels are tagged `codegen.kernel = <id>` (the ids of the
kernel report) and are still one linalg op each. Before each tagged op the pass inserts
`func.call @__vtmlir_profile_begin(<id>)`, after it `func.call @__vtmlir_profile_end(<id>)`; every public
function gets the same pair around its whole body (slot `kernels`, one past the last id). The schedule
then tiles and vectorises the op between its marks: the interpreter replaces a kernel by its loop nest
in place, and nothing later moves a kernel's memory accesses across a call of unknown effects, so the
time between two marks is the kernel's.

The marks are MLIR functions the pass adds, lowered and inlined by LLVM with the rest: `now()` calls the C
library's `clock_gettime` (resolved by the JIT in the host process) on the clock whose id the caller
wrote into the buffer (`CLOCK_WORD`: `CLOCK_THREAD_CPUTIME_ID`, the calling thread's CPU time, immune to
preemption on a shared machine, a system call; or `CLOCK_MONOTONIC`, wall time, a vDSO call), `begin`
stores it in the kernel's slot of a module global, `end` adds the difference to the slot's total and
counts the call. Slot layout (`SLOT_WORDS` i64 per kernel): [start, total ns, calls, unused]; the
clock id is the unused word of the last slot. `@__vtmlir_profile_buffer()` returns the global's
address so that the caller can set the clock, read and reset the slots (`backend.cpu.profile`), and
`@__vtmlir_profile_calibrate(n)` runs `n` empty brackets, whose time the caller subtracts per kernel
call (a clock read is a vDSO call of ~20-50 ns on x86 Linux, a thread CPU time one a system call). A
kernel inside a loop (a convolution's taps, a fused group's tiles) is timed per trip, summed, and its
calls counted; the kernels of a loop over row blocks (`codegen-fuse-rows`) are timed together, the
whole loop in its first reduction's slot (the others show no calls), and so are a contraction and the
kernels fused into its tiles (`codegen.fused_into`: its fill and epilogue), in the contraction's slot:
their one loop nest takes the last member's place (`codegen.fusion`), which is bracketed.

Limits: the marks run on the calling thread, around whole parallel regions (a kernel's `scf.forall`
is inside its marks), so with threads > 1 a kernel's time is its wall time, barrier included. Kernels
already inside a parallel loop (an im2col convolution's loop over images and panels, threads > 1)
would be timed by every thread in one slot: the loop is bracketed instead, in the slot of its last
kernel (the panel's contraction), and its copies count no calls. A mark
inside a loop (a fused group's tiles) is a call of unknown effects in that loop: the schedules'
clean-ups do not hoist vector transfers across it, so that loop's code may differ from the
unprofiled build's (never its values: nothing is reassociated).
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import arith, func, llvm, memref, scf

from ..ir_utils import walk_ops
from ..passes.registry import Pass, register_pass
from .kernels import FUSED_ATTR, KERNEL_ATTR, KernelKind, classify, row_loop_of, tagged_ops

GLOBAL = "__vtmlir_profile"
BEGIN = "__vtmlir_profile_begin"
END = "__vtmlir_profile_end"
NOW = "__vtmlir_profile_now"
BUFFER = "__vtmlir_profile_buffer"
CALIBRATE = "__vtmlir_profile_calibrate"
CLOCK = "clock_gettime"
CLOCK_MONOTONIC, CLOCK_THREAD_CPUTIME_ID = 1, 3  # Linux <time.h>
SLOT_WORDS = 4  # per kernel: start, total ns, calls, unused (a 32-byte slot)
START, TOTAL, CALLS = 0, 1, 2
CLOCK_WORD = 3  # in the last slot (the functions'): the clock_gettime clock id the marks read


def insert_profile_marks(module_op) -> int:
    """Insert the marks and their functions into `module_op` (kernel level, kernels tagged);
    returns the number of kernel slots (the slot of that index times each public function's call)."""
    with module_op.context, ir.Location.unknown():
        kernels = tagged_ops(module_op)
        slots = 1 + max((ir.IntegerAttr(op.attributes[KERNEL_ATTR]).value for op in kernels), default=-1)
        entries = [op for op in module_op.regions[0].blocks[0].operations
                   if op.operation.name == "func.func" and len(op.regions[0].blocks)
                   and "sym_visibility" not in op.attributes]
        _add_functions(module_op, slots + 1)
        loops: list = []  # [loop, the kernels inside it], in program order
        neighbours: dict[int, list] = {}  # contraction id -> the kernels fused into its tiles
        for op in kernels:
            if FUSED_ATTR in op.attributes:
                neighbours.setdefault(ir.IntegerAttr(op.attributes[FUSED_ATTR]).value, []).append(op)
        for op in kernels:
            loop = row_loop_of(op) or _outermost_forall(op)
            if loop is None:
                if FUSED_ATTR in op.attributes:
                    continue  # timed with its contraction, below
                kid = ir.IntegerAttr(op.attributes[KERNEL_ATTR]).value
                group = [op] + neighbours.get(kid, [])
                # A contraction and its fused fill and epilogue are one loop at the group's last
                # member's place (`codegen.fusion`): that place is bracketed. From the first member
                # on, the kernels the group skipped over (a copy between the fill and the product)
                # were timed twice, in their own slot and in the group's.
                last = next(o for o in group if not any(o.is_before_in_block(p) for p in group if p != o))
                _bracket(last, kid)
            elif loops and loops[-1][0] == loop:
                loops[-1][1].append(op)
            else:
                loops.append([loop, [op]])
        for loop, members in loops:
            if row_loop_of(members[0]) is not None:
                # A loop over row blocks (`codegen-fuse-rows`, parallel at threads > 1) is timed as a
                # whole, in the slot of its first reduction: marks inside would run on the worker threads.
                owner = next((op for op in members if classify(op).kind is KernelKind.REDUCTION), members[0])
            else:
                # A parallel loop over images and panels: in the slot of its last kernel (the contraction).
                owner = members[-1]
            slot = owner.attributes[FUSED_ATTR] if FUSED_ATTR in owner.attributes else owner.attributes[KERNEL_ATTR]
            _bracket(loop, ir.IntegerAttr(slot).value)
        for fn in entries:
            _bracket_body(fn, slots)
        return slots


def _outermost_forall(op):
    """The outermost `scf.forall` around `op` (an im2col convolution's loop over images and panels), or None."""
    found, parent = None, op.parent
    while parent is not None:
        if parent.name == "scf.forall":
            found = parent
        parent = parent.parent
    return found


def _index(value: int):
    return arith.ConstantOp(ir.IndexType.get(), ir.IntegerAttr.get(ir.IndexType.get(), value)).result


def _call(name: str, slot: int) -> None:
    func.CallOp([], ir.FlatSymbolRefAttr.get(name), [_index(slot)])


def _bracket(op, slot: int) -> None:
    """Marks before and after `op`."""
    with ir.InsertionPoint(op):
        _call(BEGIN, slot)
    with ir.InsertionPoint.after(op):
        _call(END, slot)


def _bracket_body(fn, slot: int) -> None:
    entry = fn.regions[0].blocks[0]
    with ir.InsertionPoint.at_block_begin(entry):
        _call(BEGIN, slot)
    for ret in walk_ops(fn):
        if ret.name == "func.return" and ret.parent.name == "func.func":
            with ir.InsertionPoint(ret):
                _call(END, slot)


def _add_functions(module_op, slots: int) -> None:
    i32, i64, index = ir.IntegerType.get_signless(32), ir.IntegerType.get_signless(64), ir.IndexType.get()
    buffer_type = ir.MemRefType.get([slots, SLOT_WORDS], i64)
    body = module_op.regions[0].blocks[0]
    with ir.InsertionPoint(body):
        zeros = ir.DenseElementsAttr.get_splat(ir.RankedTensorType.get([slots, SLOT_WORDS], i64),
                                               ir.IntegerAttr.get(i64, 0))
        memref.GlobalOp(GLOBAL, ir.TypeAttr.get(buffer_type), sym_visibility="private", initial_value=zeros,
                        alignment=64)
        # An llvm.func, not a func.func declaration: `llvm-request-c-wrappers` would make the call
        # go to a `_mlir_ciface_clock_gettime` that does not exist.
        ptr = llvm.PointerType.get()
        llvm.LLVMFuncOp(CLOCK, ir.TypeAttr.get(llvm.FunctionType.get(i32, [i32, ptr])))

        now = _function(NOW, [], [i64])
        with ir.InsertionPoint(now.add_entry_block()):
            spec = memref.AllocaOp(ir.MemRefType.get([2], i64), [], []).result  # struct timespec
            address = arith.index_cast(i64, memref.extract_aligned_pointer_as_index(spec))
            buf = memref.get_global(buffer_type, GLOBAL)
            clock = arith.trunci(i32, memref.load(buf, [_index(slots - 1), _index(CLOCK_WORD)]))
            llvm.CallOp(i32, [clock, llvm.inttoptr(ptr, address)], [], [], callee=CLOCK)
            seconds = memref.load(spec, [_index(0)])
            nanos = memref.load(spec, [_index(1)])
            giga = arith.ConstantOp(i64, 1_000_000_000).result
            func.ReturnOp([arith.addi(arith.muli(seconds, giga), nanos)])

        begin = _function(BEGIN, [index], [])
        with ir.InsertionPoint(begin.add_entry_block()):
            slot = begin.arguments[0]
            t = func.CallOp([i64], ir.FlatSymbolRefAttr.get(NOW), []).result
            buf = memref.get_global(buffer_type, GLOBAL)
            memref.store(t, buf, [slot, _index(START)])
            func.ReturnOp([])

        end = _function(END, [index], [])
        with ir.InsertionPoint(end.add_entry_block()):
            slot = end.arguments[0]
            t = func.CallOp([i64], ir.FlatSymbolRefAttr.get(NOW), []).result
            buf = memref.get_global(buffer_type, GLOBAL)
            start = memref.load(buf, [slot, _index(START)])
            total = memref.load(buf, [slot, _index(TOTAL)])
            memref.store(arith.addi(total, arith.subi(t, start)), buf, [slot, _index(TOTAL)])
            calls = memref.load(buf, [slot, _index(CALLS)])
            memref.store(arith.addi(calls, arith.ConstantOp(i64, 1).result), buf, [slot, _index(CALLS)])
            func.ReturnOp([])

        address = _function(BUFFER, [], [i64], private=False)
        with ir.InsertionPoint(address.add_entry_block()):
            buf = memref.get_global(buffer_type, GLOBAL)
            func.ReturnOp([arith.index_cast(i64, memref.extract_aligned_pointer_as_index(buf))])

        # `n` empty brackets on the last slot: what a mark pair itself adds to a kernel's time.
        calibrate = _function(CALIBRATE, [i64], [], private=False)
        with ir.InsertionPoint(calibrate.add_entry_block()):
            n = arith.index_cast(index, calibrate.arguments[0])
            loop = scf.ForOp(_index(0), n, _index(1))
            with ir.InsertionPoint(loop.body):
                _call(BEGIN, slots - 1)
                _call(END, slots - 1)
                scf.YieldOp([])
            func.ReturnOp([])


def _function(name: str, inputs, results, private: bool = True):
    fn = func.FuncOp(name, ir.FunctionType.get(inputs, results))
    if private:
        fn.attributes["sym_visibility"] = ir.StringAttr.get("private")
    return fn


@register_pass
class InsertProfileMarks(Pass):
    name = "codegen-insert-profile-marks"
    summary = "Bracket each tagged kernel (and each public function) with calls that time it"
    description = (
        "Kernel level, after codegen-attach-schedule. Inserts func.call @__vtmlir_profile_begin/end(<id>) "
        "around every `codegen.kernel = <id>` op and each public function's body, and adds those functions, "
        "a clock_gettime declaration, the slot buffer global and @__vtmlir_profile_buffer()."
    )

    def run(self, module):
        insert_profile_marks(module)
