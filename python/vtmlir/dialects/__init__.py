"""vtmlir's own dialects, defined in Python with `torch_mlir.dialects.ext` (DESIGN.md §4).

`load_dialects(ctx)` loads both into a context; `vtmlir.context.make_context()` calls it for every
context vtmlir creates.
"""

from __future__ import annotations

from torch_mlir import ir

from .layout import LayoutDialect
from .vt import VTDialect

ALL_DIALECTS = (VTDialect, LayoutDialect)


def load_dialects(ctx: ir.Context) -> None:
    """Load `vt` and `layout` into `ctx` (which must be the current context)."""
    for dialect in ALL_DIALECTS:
        if not ctx.is_dialect_loaded(dialect.DIALECT_NAMESPACE):
            dialect.load()
