"""`memref-alloc-at-first-use`: move each static `memref.alloc` right before the first use of its buffer.

The mirror of `memref-dealloc-at-last-use` (passes/memref_dealloc_at_last_use.py). One-shot
bufferization allocates a tensor's buffer where the `tensor.empty` it was written into stood, and the
graph-level `cse` merges all `tensor.empty`s of one shape into a single one at the top of the function:
every buffer of that shape is then allocated at the function's start and lives from there, although
the op that writes it runs much later. TeMCO's analysis (§2.2) counts a tensor from the layer that
produces it to its last use; with frees at last use and allocations at first use, the runtime's
measured internal peak follows it (`test_temco_fuse.py` checks the agreement on the evaluation
models). Allocations with operands (dynamic sizes) stay where they are, so their operands still
dominate them.
"""

from __future__ import annotations

from ..ir_utils import walk_ops
from ..passes.memref_dealloc_at_last_use import _users_in_block
from ..passes.registry import Pass, register_pass


def sink_allocations(module) -> int:
    """Move static allocations to their first user in their block; returns how many moved."""
    root = module.operation if hasattr(module, "operation") else module
    moved = 0
    for alloc in walk_ops(root, "memref.alloc"):
        if len(alloc.operands):
            continue
        block_owner = alloc.parent
        first = None
        for user in _users_in_block(alloc.results[0], block_owner):
            if user == alloc:
                continue
            if first is None or user.is_before_in_block(first):
                first = user
        if first is not None and alloc.is_before_in_block(first):
            alloc.move_before(first)
            moved += 1
    return moved


@register_pass
class MemrefAllocAtFirstUse(Pass):
    name = "memref-alloc-at-first-use"
    summary = "Move each static memref.alloc right before the first use of its buffer or of a view of it"

    def run(self, module) -> None:
        sink_allocations(module)
