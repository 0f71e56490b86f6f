"""`temco-analyze-peak-memory`: internal-tensor memory over the schedule, and its peak (TeMCO §2.2).

TeMCO (Song et al., ICPP'24, §2.2) splits inference memory into *weight tensors*, loaded once before
inference, and *internal tensors* (feature maps, skip connections), allocated when the layer that
produces them runs and freed after their last use; the internal-tensor peak is the maximum over layers
of everything live while that layer runs: its inputs, its output and whatever is kept for later
(Eq. 3–4, Fig. 4). Alg. 1 (lines 11–16) computes the same tensor liveness (`begin` = defining layer,
`end` = last user) to find skip connections; `Buffer.begin`/`Buffer.end` are that liveness.

Model, on graph-level IR (linalg-on-tensors) in program order, one function at a time:

- **Steps**: the ops of the function body in order, except bookkeeping that allocates nothing
  (`arith.constant`, `tensor.empty`, scalar ops). An op with regions is one step; values its nested
  ops use are used at that step.
- **Weights** (counted apart): tensors defined by `arith.constant`, all resident for the whole run.
- **Inputs**: function arguments are internal tensors live from the first step to their last use.
- **Buffers**: each internal tensor value maps to one or more buffers (`vt.view` reads several):
  - `tensor.empty`, and a `linalg.fill` of one that is only used as an init, allocate nothing: each
    consumer fills its own output buffer (the importer shares one zero fill between all convs);
  - views alias their source and allocate nothing: `tensor.expand_shape`/`collapse_shape`/`cast`/
    `bitcast`/`extract_slice` (a subview after bufferization), `vt.view`;
  - destination-style ops (`linalg.*` structured ops, `tensor.insert_slice`/`insert`, `scf.forall`,
    `vt.store_into`) write into their
    init operand in place when it is an internal buffer with no later use — so
    `fill → conv` or `broadcast(bias) → conv` is one buffer, as one-shot bufferization makes it — and
    otherwise (init is `tensor.empty`, a weight, or still needed later) allocate a new buffer;
  - every other tensor result (e.g. `tensor.pad`, `tensor.concat`, calls) is a new buffer.
- A buffer is live from the step that allocates it through the last step using any alias of it;
  function results stay live through `func.return`. Memory at step i = bytes of the live buffers.

Tensors computed at run time from weights only (e.g. the BatchNorm `1/sqrt(var+eps)` the importer
emits) are internal tensors in this model, as the CPU runtime allocates them; they are tiny.

Dynamic shapes have no size: those buffers count 0 bytes and are listed in `dynamic`.
"""

from __future__ import annotations

import json as _json
from dataclasses import dataclass, field

from torch_mlir import ir

from ..frontend import as_module
from ..passes import run_pipeline
from ..passes.registry import Option, Pass, register_pass, report_option
from ..errors import format_location
from ..ir_types import shaped_bytes
from ..ir_utils import all_parallel, destination_indices, fill_value, nested_operands, nested_ops, walk_ops
from .plot import plot_memory

WEIGHT = "weight"
INPUT = "input"
OUTPUT = "output"  # a buffer returned by the function (it is the caller's out-parameter once compiled)
INTERNAL = "internal"

_NO_STEP = {"arith.constant", "tensor.empty", "func.func"}
_VIEW_OPS = {
    "tensor.expand_shape",
    "tensor.collapse_shape",
    "tensor.cast",
    "tensor.bitcast",
    "tensor.extract_slice",
    "vt.view",
}


@dataclass
class Buffer:
    """One allocation of an internal tensor: its liveness `[begin, end]` in steps (Alg. 1, l. 11–16)."""

    id: int
    name: str  # SSA name of the value that allocated it
    op: str  # defining op (or "argument")
    location: str
    bytes: int
    begin: int
    end: int
    kind: str = INTERNAL  # INPUT for function arguments
    dynamic: bool = False

    @property
    def distance(self) -> int:
        """DISTANCE(begin, end) of Alg. 1: how many steps the tensor is kept."""
        return self.end - self.begin


@dataclass
class Step:
    index: int
    op: str
    name: str  # SSA name of the first result ('' for none)
    location: str
    live_bytes: int = 0
    live: list[int] = field(default_factory=list)  # buffer ids live during this step
    transient_bytes: int = 0  # tile buffers inside a tiled loop (scf.forall body), live during this step only


@dataclass
class MemoryTimeline:
    """Internal-tensor memory of one function over its schedule."""

    function: str
    steps: list[Step] = field(default_factory=list)
    buffers: list[Buffer] = field(default_factory=list)
    weight_bytes: int = 0
    weight_count: int = 0

    @property
    def usage(self) -> list[int]:
        return [s.live_bytes for s in self.steps]

    @property
    def peak_bytes(self) -> int:
        return max(self.usage, default=0)

    @property
    def internal_usage(self) -> list[int]:
        """Memory per step without the function's inputs and results: what the runtime allocates
        (`measure_peak_memory`'s `peak_internal_bytes` counts the same)."""
        outside = {b.id for b in self.buffers if b.kind in (INPUT, OUTPUT)}
        return [s.live_bytes - sum(self.buffers[i].bytes for i in s.live if i in outside) for s in self.steps]

    @property
    def peak_internal_bytes(self) -> int:
        return max(self.internal_usage, default=0)

    @property
    def peak_step(self) -> Step | None:
        return max(self.steps, key=lambda s: s.live_bytes, default=None)

    @property
    def dynamic(self) -> list[Buffer]:
        return [b for b in self.buffers if b.dynamic]

    def buffer(self, buffer_id: int) -> Buffer:
        return self.buffers[buffer_id]

    def peak_buffers(self) -> list[Buffer]:
        step = self.peak_step
        return [] if step is None else [self.buffers[i] for i in step.live]

    def to_dict(self) -> dict:
        peak = self.peak_step
        return {
            "function": self.function,
            "peak_bytes": self.peak_bytes,
            "peak_step": None if peak is None else peak.index,
            "weight_bytes": self.weight_bytes,
            "weight_count": self.weight_count,
            "usage": self.usage,
            "steps": [{"index": s.index, "op": s.op, "name": s.name, "live_bytes": s.live_bytes} for s in self.steps],
            "buffers": [b.__dict__ for b in self.buffers],
        }


@dataclass
class MemoryReport:
    functions: list[MemoryTimeline] = field(default_factory=list)

    def function(self, name: str) -> MemoryTimeline:
        for f in self.functions:
            if f.function == name:
                return f
        raise KeyError(name)

    @property
    def peak_bytes(self) -> int:
        return max((f.peak_bytes for f in self.functions), default=0)

    @property
    def weight_bytes(self) -> int:
        return sum(f.weight_bytes for f in self.functions)

    def to_json(self, indent: int | None = 2) -> str:
        return _json.dumps({"functions": [f.to_dict() for f in self.functions]}, indent=indent)

    def to_text(self, timeline: bool = True) -> str:
        lines = ["temco-analyze-peak-memory report"]
        for f in self.functions:
            peak = f.peak_step
            lines.append(
                f"func @{f.function}: internal peak {f.peak_bytes} bytes"
                + (f" at step {peak.index} ({peak.op} {peak.name})" if peak else "")
                + f"; weights {f.weight_bytes} bytes in {f.weight_count} constant(s); "
                f"{len(f.steps)} steps, {len(f.buffers)} buffers"
                + (f" ({len(f.dynamic)} dynamic, counted 0)" if f.dynamic else "")
            )
            if peak is not None:
                lines.append("  live at peak:")
                for b in sorted(f.peak_buffers(), key=lambda b: (-b.bytes, b.id)):
                    lines.append(
                        f"    {b.name:<14} {b.bytes:>12} bytes  {b.kind:<8} {b.op:<28} steps {b.begin}..{b.end}  "
                        f"{b.location}".rstrip()
                    )
            if timeline:
                lines.append("  timeline:")
                for s in f.steps:
                    lines.append(f"    {s.index:>4} {s.live_bytes:>12}  {s.op} {s.name}".rstrip())
        return "\n".join(lines) + "\n"

    def __str__(self) -> str:
        return self.to_text()


# -- analysis --------------------------------------------------------------------------------------


# The graph-level prefix of code generation (`backend/bufferize.GRAPH_TO_KERNELS`): elementwise
# fusion there removes tensors (a ReLU fused into the pooling or conv that reads it) before buffers exist.
COMPILED_GRAPH_PREFIX = ("builtin.module(func.func(linalg-generalize-named-ops, linalg-fuse-elementwise-ops, "
                         "canonicalize, cse))")


def analyze_peak_memory(module, as_compiled: bool = False) -> MemoryReport:
    """The internal-tensor memory timeline of every `func.func` with a body in `module`.

    `as_compiled`: analyse a copy after the compiler's graph-level fusion (`COMPILED_GRAPH_PREFIX`),
    i.e. the tensors the compiled code really allocates; `peak_internal_bytes` of that timeline is
    what `measure_peak_memory` measures, up to allocation alignment (tested)."""
    if as_compiled:
        module = as_module(module.operation.get_asm(enable_debug_info=True), context=module.context)
        run_pipeline(module, COMPILED_GRAPH_PREFIX, what="graph-level fusion before the memory analysis")
    report = MemoryReport()
    for func in walk_ops(module.operation, "func.func"):
        if len(func.regions[0].blocks) == 0:
            continue  # declaration
        # shared init fills allocate nothing even as compiled: memref-alloc-at-first-use turns the
        # copies one-shot bufferization makes of them into fills of each consumer's own buffer
        report.functions.append(analyze_function(func, elementwise_in_place=as_compiled))
    return report


def _is_tensor(value) -> bool:
    try:
        ir.RankedTensorType(value.type)
        return True
    except (ValueError, TypeError):
        return isinstance(value.type, ir.UnrankedTensorType)


def _value_name(value, state) -> str:
    try:
        return value.get_name(state)
    except (ValueError, TypeError, RuntimeError):  # printing names needs a parent op
        return ""




def analyze_function(func, shared_fills_allocate: bool = False, elementwise_in_place: bool = False) -> MemoryTimeline:
    """Liveness and memory over the steps of one `func.func` (see the module docstring).

    `shared_fills_allocate`: a `linalg.fill` used as the init of several ops is one buffer, live to
    its last use, and each consumer but the last copies it into a buffer of its own: what one-shot
    bufferization does (the default, TeMCO's model, lets each consumer fill its own output).
    `elementwise_in_place`: an elementwise op writes into an input that dies at it, as the compiled
    code does (`memref-alloc-at-first-use`); TeMCO's model (Eq. 3, the default) counts input and output."""
    func = func.operation
    timeline = MemoryTimeline(ir.StringAttr(func.attributes["sym_name"]).value)
    block = func.regions[0].blocks[0]
    ops = [op.operation for op in block.operations]
    state = ir.AsmState(func)  # one naming state: Value.get_name would print the function each time

    # Steps: ops that touch tensors (non-step ops map to the next step, so their uses land there).
    init_fills = {id(op) for op in ops if _is_init_only_fill(op)
                  and not (shared_fills_allocate and len(list(op.results[0].uses)) > 1)}

    def is_step(op) -> bool:
        if op.name in _NO_STEP or id(op) in init_fills:
            return False
        return any(_is_tensor(r) for r in op.results) or any(_is_tensor(v) for v in nested_operands(op))

    step_of: dict[int, int] = {}
    steps: list = []
    pending = []
    for op in ops:
        pending.append(op)
        if is_step(op):
            for p in pending:
                step_of[id(p)] = len(steps)
            steps.append(op)
            pending = []
    for p in pending:
        step_of[id(p)] = max(len(steps) - 1, 0)

    # Use steps of every tensor value (keyed by the value's hash identity).
    uses: dict = {}
    for op in ops:
        at = step_of[id(op)]
        for v in nested_operands(op):
            if _is_tensor(v):
                uses.setdefault(v, []).append(at)

    value_buffers: dict = {}  # value -> tuple of buffer ids ( () for weights / tensor.empty )
    weights: dict = {}  # value -> bytes
    empties = set()
    buffers = timeline.buffers
    alias_values: dict[int, list] = {}  # buffer id -> values aliasing it

    def new_buffer(value, op_name, loc, at, kind=INTERNAL) -> int:
        size = shaped_bytes(value.type)
        b = Buffer(len(buffers), _value_name(value, state), op_name, loc, size or 0, at, at, kind, size is None)
        buffers.append(b)
        value_buffers[value] = (b.id,)
        alias_values[b.id] = [value]
        return b.id

    def alias(value, ids) -> None:
        value_buffers[value] = tuple(ids)
        for i in ids:
            alias_values[i].append(value)

    def later_use(buffer_id: int, at: int) -> bool:
        return any(u > at for v in alias_values[buffer_id] for u in uses.get(v, ()))

    for arg in block.arguments:
        if _is_tensor(arg):
            new_buffer(arg, "argument", format_location(func.location), 0, INPUT)

    for op in ops:
        at = step_of[id(op)]
        loc = format_location(op.location)
        results = [r for r in op.results if _is_tensor(r)]
        if op.name == "arith.constant":
            for r in results:
                weights[r] = shaped_bytes(r.type) or 0
                value_buffers[r] = ()
            continue
        if op.name == "tensor.empty" or id(op) in init_fills:
            for r in results:
                empties.add(r)
                value_buffers[r] = ()
            continue
        if op.name in _VIEW_OPS:
            ids = [i for v in op.operands if _is_tensor(v) for i in value_buffers.get(v, ())]
            for r in results:
                alias(r, ids) if ids else value_buffers.__setitem__(r, ())
            continue
        inits = _destinations(op)
        for index, r in enumerate(results):
            init = inits[index] if index < len(inits) else None
            ids = value_buffers.get(init, ()) if init is not None else ()
            in_place = (
                init is not None
                and init not in empties
                and init not in weights
                and len(ids) == 1
                and not later_use(ids[0], at)
            )
            dead_input = None if in_place or init not in empties or not elementwise_in_place else _dead_elementwise_input(
                op, index, lambda v: (value_buffers.get(v, ()), alias_values), buffers, later_use, at)
            if in_place:
                alias(r, ids)
            elif dead_input is not None:
                alias(r, value_buffers[dead_input])
            else:
                new_buffer(r, op.name, loc, at)

    # Liveness: end = last step using any alias (results of the function: the return step).
    returned = {v for op in ops if op.name == "func.return" for v in op.operands}
    for b in buffers:
        ends = [u for v in alias_values[b.id] for u in uses.get(v, ())]
        b.end = max([b.end, *ends])
        if b.kind == INTERNAL and any(v in returned for v in alias_values[b.id]):
            b.kind = OUTPUT
    timeline.weight_bytes = sum(weights.values())
    timeline.weight_count = len(weights)

    for index, op in enumerate(steps):
        live = [b.id for b in buffers if b.begin <= index <= b.end]
        name = _value_name(op.results[0], state) if len(op.results) else ""
        transient = _tile_bytes(op) if op.name == "scf.forall" else 0
        timeline.steps.append(
            Step(index, op.name, name, format_location(op.location), sum(buffers[i].bytes for i in live) + transient,
                 live, transient)
        )
    return timeline


def _tile_bytes(loop) -> int:
    """Bytes of the tensors a tiled loop's body computes per iteration (its tile buffers): the
    results of the nested tensor ops that are not views, constants or empties (TeMCO §3.2's tiles)."""
    def counted(op) -> bool:
        if op.name in _NO_STEP or op.name in _VIEW_OPS or op.name.startswith("tensor.parallel"):
            return False
        # A fill is an init: the op accumulating into it writes into the same tile buffer.
        return fill_value(op) is None

    return sum(shaped_bytes(r.type) or 0
               for op in nested_ops(loop, descend=counted) if counted(op)
               for r in op.results if _is_tensor(r))


def _is_init_only_fill(op) -> bool:
    """A `linalg.fill` of a `tensor.empty` used only as the init of destination-style ops.

    Such a fill is an initial value, not a tensor of its own: each consumer starts from it in its own
    output buffer (the importer shares one zero fill between all convs of a shape; a buffer for it
    would look like a tensor kept alive across the whole model)."""
    if fill_value(op) is None or len(op.results) != 1:
        return False
    init = op.operands[len(op.operands) - 1]
    if isinstance(init.owner, ir.Block) or init.owner.name != "tensor.empty":
        return False
    for use in op.results[0].uses:
        user = use.owner.operation if hasattr(use.owner, "operation") else use.owner
        if use.operand_number not in destination_indices(user):
            return False
    return True


def _dead_elementwise_input(op, index, lookup, buffers, later_use, at):
    """The input an elementwise `linalg.generic` writes its result into in place (the kernel-level
    rule of `memref-alloc-at-first-use`'s `reuse_dead_inputs`): the first input with the result's type
    and indexing map, read once, that is a whole internal buffer (not a view, input or result) with no
    use after this step; the init must be an empty whose old value the payload ignores. Else None."""
    if (op.name != "linalg.generic" or index != 0 or len(op.results) != 1
            or "operandSegmentSizes" not in op.attributes):
        return None
    n_in, n_out = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))[:2]
    if n_out != 1 or not all_parallel(op):
        return None
    if any(True for _ in op.regions[0].blocks[0].arguments[n_in].uses):
        return None
    operands = list(op.operands)
    maps = [str(m) for m in ir.ArrayAttr(op.attributes["indexing_maps"])]
    for i in range(n_in):
        x = operands[i]
        if x.type != op.results[0].type or maps[i] != maps[n_in] or sum(1 for v in operands[:n_in] if v == x) != 1:
            continue
        ids, alias_values = lookup(x)
        if len(ids) != 1 or buffers[ids[0]].kind != INTERNAL or alias_values[ids[0]][-1] != x:
            continue
        read = nested_operands(op)  # operands first, then what the payload reads from above
        if any(ids[0] in lookup(v)[0] for k, v in enumerate(read) if k != i and _is_tensor(v)):
            continue  # x is also read elsewhere (a view as another input, an extract in the payload)
        producer = x.owner
        if isinstance(producer, ir.Block) or producer.name in _VIEW_OPS:
            continue
        if not later_use(ids[0], at):
            return x
    return None


def _destinations(op) -> list:
    """The init (destination) operand of each result of a destination-style op, else []."""
    return [op.operands[i] for i in destination_indices(op)]


# -- the pass --------------------------------------------------------------------------------------


@register_pass
class TemcoAnalyzePeakMemory(Pass):
    name = "temco-analyze-peak-memory"
    summary = "Report internal-tensor memory over the schedule and its peak (weights apart)"
    description = (
        "TeMCO (ICPP'24) §2.2: tensor liveness in program order on graph-level IR; prints the "
        "internal-tensor peak per function with the tensors live at the peak, the weight bytes apart, "
        "and the memory after every step; optionally a PNG plot of memory over time (Fig. 4). The IR is "
        "left unchanged."
    )
    options = (
        Option("json", bool, False, "print the report as JSON instead of text"),
        Option("timeline", bool, True, "list the live bytes of every step in the text report"),
        report_option("the memory report"),
        Option("plot", str, "", "write a PNG plot of memory over time to this path"),
    )

    def run(self, module):
        report = analyze_peak_memory(module)
        self.write_report(module, report.to_json() + "\n" if self.json else report.to_text(self.timeline))
        if self.plot and self.check_binary_destination(module, "plot", self.plot):
            try:
                plot_memory([(f"@{f.function}", f) for f in report.functions], self.plot)
            except OSError as err:
                self.emit_error(module, f"{self.name}: cannot write '{self.plot}': {err.strerror}")
        return report
