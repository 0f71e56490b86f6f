"""The measured cost model of VTC Alg. 2: w(e) from kernels timed on the actual target.

VTC §5.2: ℓ (the latency saving of a points-to graph) "can only be measured through profiling on
real hardware"; Alg. 2 profiles every VTOG edge once (line 6) and re-profiles the edges into the node
it has just anchored (lines 18–19), because the anchored node may now be virtual and the edge's
mapping is then composed through it (F_t ∘ F_e), which changes how the kernels access memory.

`MeasuredCostModel.weight(state, e)` does that for an edge e = (v → t), v the result of a
data-movement op. It builds, in the graph's context, the kernels the two choices lead to and times
them (compiled through `vtmlir.compile`, so through vt-lower-views and the real code generation):

* gather: a function returning `vt.view(physical sources)` of v with the edge's mapping composed
  down to physical tensors; vt-lower-views materialises it, so its time is what producing v
  physically costs (the data-movement op, on physical inputs);
* per linalg reader u of v: u reading a materialised v (v an argument) and u reading the view
  (the view folded into u's indexing maps — or gathered first where vt-lower-views cannot fold it:
  the measurement shows that too).

w(e) = saved − penalty − gather + unblocked, in nanoseconds:
saved = the gather's time if vt-stats counts the op as moving data (a reshape is already free);
penalty = Σ_u (time of u through the view − time of u on the materialised v) (negative if reading
through the mapping is faster); gather = the gather's time if some reader cannot read a view at
all (a returned value, a non-linalg op, an init operand: see `greedy.can_read_view`);
unblocked = the analytic model's unblocked bytes at the target's measured copy bandwidth.
Edges with no kernel of their own to build get the analytic estimate converted with that bandwidth:
input-of-output and in-place insert_slice edges (offered only with `rewrite=false`), and partial
edges (one piece of a concat: what its readers cost depends on the other pieces' choices, which
are not made yet); also an edge whose reader uses values from above other than constants, or whose
kernel the backend refuses on its own (said in `log`).

Kernel timings are cached by the kernel's IR text (an edge whose kernels are the same as an earlier
edge's — same op, shapes and composed mapping — is not timed again); `profiled`/`cached` count them.
Progress (rich) is shown on stderr while the edges of a function are profiled when stderr is a
terminal (`progress=True` forces it, False hides it).

Targets: `cpu` (the host, LLVM JIT); `cuda` times the CUDA executable where a GPU exists (host
transfers included, equal for both variants) and raises a clear `VtmlirError` otherwise.
"""

from __future__ import annotations

import time

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from torch_mlir import ir
from torch_mlir.dialects import func as func_d
from torch_mlir.dialects import linalg
from torch_mlir.dialects import tensor as tensor_d

from ..backend.cpu.executable import memref_pointer
from ..backend.cpu.profile import sample_inputs
from ..backend.cuda.runtime import cuda_available, device_arch
from ..dialects import vt as vt_dialect
from ..context import make_context
from ..errors import VtmlirError
from ..ir_utils import nested_ops
from . import catalogue as cat
from .contiguity import CPU_CACHE_LINE, CUDA_COALESCING, TransferUnit
from .greedy import (
    AnalyticCostModel,
    CostModel,
    GreedyState,
    Weight,
    can_read_view,
    num_inits,
    op_moves_bytes,
    readers_excluding,
)
from .build_vtog import Edge
from ..passes.services import compiler

TARGET_UNITS = {"cpu": CPU_CACHE_LINE, "cuda": CUDA_COALESCING}
_NULL_KERNEL = "func.func @main(%a: tensor<1xf32>) -> tensor<1xf32> { return %a : tensor<1xf32> }"
_BANDWIDTH_ELEMENTS = 1 << 20


class KernelTimer:
    """Compiles one-function modules for a target and times them: the fastest of `repeat` samples,
    each the mean of enough calls to last `MIN_SAMPLE_S`."""

    MIN_SAMPLE_S = 2e-3

    def __init__(self, target: str = "cpu", repeat: int = 5, opt_level: int = 2):
        if target not in TARGET_UNITS:
            raise VtmlirError(f"error: measured cost model: unknown target '{target}' "
                              f"(expected one of {', '.join(TARGET_UNITS)})")
        if target == "cuda":
            if not cuda_available():
                raise VtmlirError("error: measured cost model: target 'cuda' times kernels on an NVIDIA "
                                  "GPU, and this machine has none (no CUDA driver or device); use "
                                  "target=cpu or the analytic cost model")
        self.target, self.repeat, self.opt_level = target, repeat, opt_level
        self.cache: dict[str, float] = {}
        self.profiled = 0
        self.cached = 0
        self._overhead: float | None = None

    def time(self, text: str) -> float:
        """Seconds per call of the kernel `text` (its @main), call overhead not subtracted."""
        if text in self.cache:
            self.cached += 1
            return self.cache[text]
        kwargs = {"opt_level": self.opt_level} if self.target == "cpu" else {}
        if self.target == "cuda":
            kwargs["chip"] = device_arch()
        exe = compiler()(text, target=self.target, **kwargs)   # vtmlir.compile (passes/services.py)
        call = _fast_call(exe) if self.target == "cpu" else _plain_call(exe)
        call()                                       # warm-up (first call loads the code)
        # Calls per sample so that a sample lasts about MIN_SAMPLE_S (timer resolution, noise).
        start = time.perf_counter()
        call()
        once = max(time.perf_counter() - start, 1e-7)
        number = max(1, min(10000, int(self.MIN_SAMPLE_S / once)))
        samples = []
        for _ in range(self.repeat):
            start = time.perf_counter()
            for _ in range(number):
                call()
            samples.append((time.perf_counter() - start) / number)
        self.profiled += 1
        # The minimum: other processes only ever add time (a shared machine), never remove it.
        self.cache[text] = min(samples)
        return self.cache[text]

    @property
    def overhead(self) -> float:
        """Seconds of a call that does no work (argument conversion, the JIT entry): subtracted from
        a kernel's time where one kernel's time is taken on its own (the gather)."""
        if self._overhead is None:
            self._overhead = self.time(_NULL_KERNEL)
        return self._overhead

    def copy_bandwidth(self) -> float:
        """Bytes of traffic (read + write) per second of a plain copy on the target."""
        n = _BANDWIDTH_ELEMENTS
        seconds = max(self.time(_copy_kernel(n)) - self.overhead, 1e-9)
        return 2 * 4 * n / seconds


def _fast_call(exe):
    """A CPU kernel call with its memref descriptors built once (the engine only, no conversions)."""
    arrays = [t.numpy() for t in sample_inputs(exe.signature)]
    arrays += [np.zeros(spec.shape, spec.numpy_dtype) for spec in exe.signature.results]
    pointers = [memref_pointer(a) for a in arrays]
    engine, name = exe._engine, exe.signature.name

    def call():
        engine.invoke(name, *pointers)
    call.keepalive = arrays
    return call


def _plain_call(exe):
    args = sample_inputs(exe.signature)
    return lambda: exe(*args)


class MeasuredCostModel(CostModel):
    """w(e) from kernels timed on the target (VTC Alg. 2 lines 6 and 18–19; module docstring)."""

    name = "measured"
    weight_unit = "ns"

    def __init__(self, target: str = "cpu", unit: TransferUnit | int | None = None, repeat: int = 5,
                 progress: bool | None = None, timer: KernelTimer | None = None, opt_level: int = 2):
        self.timer = timer or KernelTimer(target, repeat, opt_level)
        self.target = self.timer.target
        self.unit = TARGET_UNITS[self.target] if unit is None else unit
        # As configured by vt-eliminate-data-movement's analytic mode (used for the edges not timed).
        self.analytic = AnalyticCostModel(self.unit, multi_piece_readers=True)
        # A launch per kernel on the GPU: no timed edge sees the readers a view splits.
        self.kernel_launches = self.target == "cuda"
        self.progress = progress
        self.edge_cache: dict[tuple, Weight] = {}
        self.log: list[str] = []
        self._bandwidth: float | None = None
        self._bar = None
        self._graph = None

    # -- CostModel -----------------------------------------------------------------------------------

    def weight(self, state: GreedyState, edge: Edge) -> Weight:
        self._advance(state)
        base = self.analytic.weight(state, edge)      # the composed mapping and the reader rules
        c = edge.candidate
        if base.mapping is None:
            return base                                # MAXEDGES skips it: no mapping to realise
        if c.direction != cat.OUTPUT_OF_INPUT or c.in_place or not c.full:
            w = self._from_bytes(base)
            self._note(state, edge, w, "analytic bytes at the measured bandwidth")
            return w
        graph = state.graph
        v = graph.nodes[edge.src].value
        sources = [graph.nodes[s].value for s in base.sources]
        try:
            gather = _gather_kernel(v, base.mapping, sources)
            timed, blocked = [], False
            for owner, operand in readers_excluding(v, c.op):
                if owner.name.startswith("linalg.") and operand < len(owner.operands) - num_inits(owner):
                    timed.append(_reader_kernels(owner, v, base.mapping, sources))
                elif not can_read_view((owner, operand), v, False, state.edges):
                    blocked = True
        except (NotTimeable, ValueError) as why:
            w = self._from_bytes(base)
            self._note(state, edge, w, f"not timed ({why}): analytic bytes at the measured bandwidth")
            return w
        key = (gather, tuple(timed), blocked, op_moves_bytes(c.op), base.unblocked)
        if key in self.edge_cache:
            self.timer.cached += 1
            w = _with_structure(self.edge_cache[key], base)
            self._note(state, edge, w, "cached")
            return w
        try:
            t_gather = max(self.timer.time(gather) - self.timer.overhead, 0.0)
            penalty = sum(self.timer.time(through_view) - self.timer.time(materialised)
                          for materialised, through_view in timed)
        except VtmlirError as err:   # a kernel the backend refuses on its own: say so, do not fail
            w = self._from_bytes(base)
            reason = str(err).removeprefix("error: ").splitlines()[0]
            self._note(state, edge, w, f"not timed ({reason}): analytic bytes at the measured bandwidth")
            return w
        saved = t_gather if op_moves_bytes(c.op) else 0.0
        materialise = t_gather if blocked else 0.0
        unblocked = base.unblocked / self.bandwidth if base.unblocked else 0.0
        ns = 1e9
        w = Weight((saved - penalty - materialise + unblocked) * ns, round(saved * ns), penalty * ns,
                   round(materialise * ns), round(unblocked * ns), base.profit, base.mapping, base.sources)
        self.edge_cache[key] = w
        self._note(state, edge, w, f"{len(timed)} reader(s) timed")
        return w

    # -- helpers -------------------------------------------------------------------------------------

    @property
    def bandwidth(self) -> float:
        if self._bandwidth is None:
            self._bandwidth = self.timer.copy_bandwidth()
        return self._bandwidth

    def _from_bytes(self, w: Weight) -> Weight:
        """An analytic weight (bytes of traffic) converted to nanoseconds at the copy bandwidth."""
        k = 1e9 / self.bandwidth
        return Weight(w.value * k, round(w.saved * k), w.penalty * k, round(w.materialise * k),
                      round(w.unblocked * k), w.profit, w.mapping, w.sources)

    def _note(self, state, edge, w: Weight, how: str) -> None:
        names = {n.id: n.name for n in state.graph.nodes}
        self.log.append(f"e{edge.id} {names[edge.src]} -> {names[edge.dst]} {edge.candidate.kind}: "
                        f"w={w.value:.0f} ns ({how})")
        if self._bar is not None:
            bar, task = self._bar
            bar.update(task, advance=1, description=f"vtc measured: @{state.graph.function} e{edge.id}")
            bar.refresh()
            if bar.tasks[0].finished:
                self.close()

    def _advance(self, state: GreedyState) -> None:
        """Start the progress bar for the initial profiling (Alg. 2 line 6) of a new function."""
        if state.graph is self._graph:
            return
        self.close()
        self._graph = state.graph
        if self.progress is False:
            return
        console = Console(stderr=True)
        if self.progress is None and not console.is_terminal:
            return
        bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                       TimeElapsedColumn(), console=console, auto_refresh=False, transient=True,
                       redirect_stdout=False, redirect_stderr=False)
        task = bar.add_task("vtc measured: profiling", total=max(1, len(state.edges)))
        bar.start()
        self._bar = (bar, task)

    def close(self) -> None:
        """Stop the progress display (also done when the initial profiling completes)."""
        if self._bar is not None:
            self._bar[0].stop()
            self._bar = None

    def summary(self) -> str:
        return (f"measured cost model ({self.target}): {self.timer.profiled} kernels timed, "
                f"{self.timer.cached} cached")


def _with_structure(w: Weight, base: Weight) -> Weight:
    return Weight(w.value, w.saved, w.penalty, w.materialise, w.unblocked, base.profit, base.mapping,
                  base.sources)


# -- kernels -------------------------------------------------------------------------------------------


def _tensor_shape(value) -> list[int]:
    return list(ir.RankedTensorType(value.type).shape)


def _gather_kernel(v, mapping, sources) -> str:
    """@main(physical sources) -> v: the view of v, returned (vt-lower-views gathers it)."""
    with v.type.context, ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            fn = func_d.FuncOp("main", ir.FunctionType.get([s.type for s in sources], [v.type]))
            block = fn.add_entry_block()
            with ir.InsertionPoint(block):
                view = vt_dialect.view(list(block.arguments), mapping, _tensor_shape(v))
                func_d.ReturnOp([view])
        return str(module)


def _copy_kernel(n: int) -> str:
    """@main(a: tensor<n x f32>) -> a linalg.copy of it into a new tensor (the bandwidth probe)."""
    with make_context(), ir.Location.unknown():
        f32 = ir.F32Type.get()
        vector = ir.RankedTensorType.get([n], f32)
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            fn = func_d.FuncOp("main", ir.FunctionType.get([vector], [vector]))
            block = fn.add_entry_block()
            with ir.InsertionPoint(block):
                empty = tensor_d.EmptyOp([n], f32).result
                func_d.ReturnOp([linalg.copy(block.arguments[0], outs=[empty])])
        return str(module)


def _reader_kernels(reader, v, mapping, sources) -> tuple[str, str]:
    """(reader on a materialised v, reader on the view of v): @main takes every operand of the
    reader as an argument (v's physical sources instead of v for the second)."""
    texts = []
    for through_view in (False, True):
        with v.type.context, ir.Location.unknown():
            module = ir.Module.create()
            others = [i for i, o in enumerate(reader.operands) if o != v]
            arg_types = ([s.type for s in sources] if through_view else [v.type])
            arg_types += [reader.operands[i].type for i in others]
            with ir.InsertionPoint(module.body):
                fn = func_d.FuncOp("main", ir.FunctionType.get(arg_types, [r.type for r in reader.results]))
                block = fn.add_entry_block()
                with ir.InsertionPoint(block):
                    args = list(block.arguments)
                    if through_view:
                        vv = vt_dialect.view(args[:len(sources)], mapping, _tensor_shape(v))
                        rest = args[len(sources):]
                    else:
                        vv, rest = args[0], args[1:]
                    captured = _clone_captured_constants(reader, block)
                    clone = reader.clone(ip=ir.InsertionPoint(block))
                    for i in range(len(reader.operands)):
                        clone.operands[i] = vv if reader.operands[i] == v else rest[others.index(i)]
                    _remap_inside(clone, captured)
                    func_d.ReturnOp(list(clone.results))
            texts.append(str(module))
    return texts[0], texts[1]


def _clone_captured_constants(op, block) -> list[tuple]:
    """Values the op's regions use from above (linalg bodies may read outer scalar constants):
    each must be an `arith.constant`, cloned into `block`; returns (old value, new value) pairs."""
    pairs: list[tuple] = []
    for inner in nested_ops(op):
        for value in inner.operands:
            owner = value.owner
            if isinstance(owner, ir.Block):
                if _defined_inside(owner, op):
                    continue
                raise NotTimeable(f"{op.name} reads a block argument from above")
            owner = owner.operation if hasattr(owner, "operation") else owner
            if _defined_inside(owner.block, op) or any(value == a for a, _ in pairs):
                continue
            if owner.name != "arith.constant":
                raise NotTimeable(f"{op.name} reads {owner.name} from above")
            pairs.append((value, owner.clone(ip=ir.InsertionPoint(block)).results[0]))
    return pairs


def _defined_inside(block, op) -> bool:
    parent = block.owner
    while parent is not None:
        parent = parent.operation if hasattr(parent, "operation") else parent
        if parent == op:
            return True
        if parent.name in ("func.func", "builtin.module"):
            return False
        parent = parent.block.owner if parent.block is not None else None
    return False


def _remap_inside(op, pairs) -> None:
    if not pairs:
        return
    for inner in nested_ops(op):
        for i, value in enumerate(inner.operands):
            for old, new in pairs:
                if value == old:
                    inner.operands[i] = new


class NotTimeable(Exception):
    """The edge's kernels cannot be built on their own (the weight falls back to the analytic one)."""
