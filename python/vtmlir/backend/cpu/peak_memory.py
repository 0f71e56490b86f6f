"""Measured internal-tensor peak of a real CPU run, and what the kernel-level IR says it must be.

TeMCO (Song et al., ICPP'24, §4.2, Fig. 10) reports the peak memory of internal tensors of a real
inference, weights apart. `measure_peak_memory` compiles a graph-level module for the CPU with
`track_memory=True` (the JIT's memref allocations go through a counting allocator,
`vtmlir.backend.cpu.memory_tracking`), runs it once and returns its `MemoryStats`.

`kernel_allocation_timeline` replays the allocations and deallocations of the bufferized entry
function in program order (each `memref.alloc` counts its bytes plus its `alignment`: MLIR's generic
aligned allocation asks for `size + alignment` and aligns the pointer itself). The measured peak must
equal its peak exactly; a test checks that on zoo and decomposed models.

Why the measured peak could differ from `temco-analyze-peak-memory` (TeMCO §2.2: each internal
tensor freed right after its last use), and what the CPU pipeline does about it (docs/temco.md,
"Measured = analysed"):

1. ownership-based deallocation frees at block end: `memref-dealloc-at-last-use` moves each free to
   the buffer's last use;
2. allocations sit where the shared `tensor.empty` stood, a shared zero fill is materialised once
   and copied into every conv's buffer, and several tensors share the one empty's buffer with dead
   gaps between them: `memref-alloc-at-first-use` (`passes/memref_alloc_at_first_use.py`) sinks
   allocations, turns the fill copies into fills, and splits reused buffers;
3. elementwise fusion before bufferization removes buffers, and elementwise ops write into inputs
   that die at them: `analyze_peak_memory(as_compiled=True)` models both.

Inputs and outputs are the caller's arrays and are reported apart (`input_bytes`, `output_bytes`).
"""

from __future__ import annotations

from dataclasses import dataclass

from torch_mlir import ir

from ...context import make_context
from ...frontend import as_module
from ...ir_types import shaped_bytes
from ...ir_utils import walk_ops
from ...signature import find_entry, signature_of
from ..lowerable import check_lowerable
from . import compile_cpu


@dataclass
class AllocationTimeline:
    """Live bytes after each top-level `memref.alloc`/`memref.dealloc` of a bufferized function."""

    usage: list[int]
    allocations: int
    frees: int

    @property
    def peak_bytes(self) -> int:
        return max(self.usage, default=0)


def kernel_allocation_timeline(kernel_module, function: str = "main") -> AllocationTimeline:
    """Replay the allocations of `@function` in a bufferized module, as the counting allocator sees them.

    The entry block is replayed in program order. An op with regions (the tile loop of a
    `temco-fuse-activation` group) whose allocations are all freed inside it adds its body's replay
    once, as a transient on top of what is live (every iteration allocates and frees the same tile
    buffers, so one iteration gives the peak). An allocation that outlives its region raises
    `ValueError`.
    """
    funcs = [op for op in walk_ops(kernel_module, "func.func")
             if ir.StringAttr(op.attributes["sym_name"]).value == function]
    if not funcs:
        raise ValueError(f"no function @{function}")
    timeline = AllocationTimeline(usage=[], allocations=0, frees=0)
    _replay_block(funcs[0].regions[0].blocks[0], 0, {}, timeline)
    return timeline


def _replay_block(block, live: int, sizes: dict, timeline: AllocationTimeline) -> int:
    """Replay `block` from `live` bytes; returns the bytes live at its end."""
    for op in block.operations:
        op = op.operation
        if op.name == "memref.alloc":
            size = shaped_bytes(op.results[0].type)
            if size is None:
                raise ValueError(f"dynamic allocation {op}")
            if "alignment" in op.attributes:
                size += ir.IntegerAttr(op.attributes["alignment"]).value
            sizes[op.results[0]] = size
            live += size
            timeline.allocations += 1
            timeline.usage.append(live)
        elif op.name == "memref.dealloc":
            live -= sizes.pop(op.operands[0], 0)
            timeline.frees += 1
            timeline.usage.append(live)
        else:
            for region in op.regions:
                for nested in region.blocks:
                    if _replay_block(nested, live, sizes, timeline) != live:
                        raise ValueError(f"allocation outliving its region in '{op.name}': not modelled")
    return live


def measure_peak_memory(module, *inputs, entry: str | None = None, stages: dict | None = None,
                        opt_level: int = 2):
    """Compile `module` (graph level; not modified) for the CPU with memory tracking, run it on
    `inputs`, and return `(outputs, MemoryStats)`. `stages`, if given, receives the IR of each stage.
    `opt_level` is the JIT's; allocations do not depend on it (0 compiles big models much faster)."""
    graph = as_module(module, context=make_context())
    check_lowerable(graph)
    signature = signature_of(find_entry(graph, entry))
    stages = {} if stages is None else stages
    executable = compile_cpu(graph, signature, stages, opt_level=opt_level, track_memory=True)
    outputs = executable(*inputs)
    return outputs, executable.memory_stats()
