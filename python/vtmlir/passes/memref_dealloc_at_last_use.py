"""`memref-dealloc-at-last-use`: move each `memref.dealloc` right after the last use of its buffer.

Ownership-based deallocation (`buffer-deallocation-pipeline`) frees buffers at the end of their
block. Compiled graph functions are one straight-line block, so every intermediate stays allocated
until the function returns and the peak is the sum of all of them. Moving each free to just after the
last top-level op that touches the buffer, or any view of it (subview, reshape, cast, ...), gives the
peak the schedule implies (what TeMCO's peak-memory analysis, §2, computes).
"""

from __future__ import annotations

from ..ir_utils import walk_ops
from .registry import Pass, register_pass

# Ops whose result aliases their first operand (the buffer stays in use while the view is).
VIEW_OPS = frozenset({
    "memref.subview", "memref.expand_shape", "memref.collapse_shape", "memref.cast",
    "memref.reinterpret_cast", "memref.view", "memref.transpose",
})


@register_pass
class MemrefDeallocAtLastUse(Pass):
    name = "memref-dealloc-at-last-use"
    summary = "Move each memref.dealloc right after the last use of its buffer or of a view of it"

    def run(self, module) -> None:
        for dealloc in walk_ops(module, "memref.dealloc"):
            block_owner = dealloc.parent
            last = None
            for user in users_in_block(dealloc.operands[0], block_owner):
                if user == dealloc or user.name == "memref.dealloc":
                    continue
                if last is None or last.is_before_in_block(user):
                    last = user
            if last is not None and last.is_before_in_block(dealloc):
                dealloc.move_after(last)


def users_in_block(buffer, block_owner) -> list:
    """The ops of `block_owner`'s body that use `buffer` or a view of it, directly or in a region."""
    users, pending, seen = [], [buffer], set()
    while pending:
        value = pending.pop()
        if value in seen:
            continue
        seen.add(value)
        for use in value.uses:
            op = use.owner.operation
            if op.name in VIEW_OPS and use.operand_number == 0:
                pending.extend(op.results)
            while op.parent is not None and op.parent != block_owner:
                op = op.parent.operation
            if op.parent is not None:
                users.append(op)
    return users
