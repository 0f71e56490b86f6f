"""vtmlir's own dialects, defined in Python with `torch_mlir.dialects.ext` (docs/design.md §4).

- `vt` (`vt.py`): virtual tensors — `vt.view`, `vt.store_into`; mapping functions in `vt_mapping.py`.
- `lowbit` (`lowbit.py`): `lowbit.unpack`, the sub-byte tensors `subbyte-pack` hands to
  `subbyte-lower`, and the `lowbit.*` attributes on the ops around it.
- `layout` (`layout.py`): memory layouts — `layout.convert`, produced/required layout attributes;
  the `Layout` model in `memory_layout.py`; register layouts (Tilus §4) in `register_layout.py`
  (`RegisterLayout`, `local`/`spatial`/`column_*`, composition, division, reinterpretation) and
  `layout.reinterpret`.

`load_dialects(ctx)` loads them into a context; `vtmlir.context.make_context()` calls it for every
context vtmlir creates. `irdl_text(dialect)` is the IRDL the Python definitions emit; the checked-in
copies under dialects/ are regenerated with `python -m vtmlir.dialects.write_irdl`.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.passmanager import PassManager

from .layout import (
    ANY_LAYOUT,
    PRODUCED_LAYOUTS_ATTR,
    REQUIRED_LAYOUTS_ATTR,
    ConvertOp,
    LayoutDialect,
    ReinterpretOp,
)
from .lowbit import LowbitDialect, UnpackOp
from .memory_layout import Layout, LayoutFormatError, layout_from_attr
from .register_layout import (
    LayoutDivisionError,
    RegisterLayout,
    can_reinterpret,
    column_local,
    column_spatial,
    local,
    parse_register_layout,
    reinterpret,
    spatial,
)
from .vt import FloatType, StoreIntoOp, ViewOp, VTDialect, element_bits, float_type
from .vt_mapping import (
    MappingCompositionError,
    MappingFormatError,
    MappingFunction,
    Piece,
    composed_sources,
)

ALL_DIALECTS = (VTDialect, LayoutDialect, LowbitDialect)

__all__ = [
    "ALL_DIALECTS", "ANY_LAYOUT", "ConvertOp", "Layout", "LayoutDialect", "LayoutDivisionError", "LowbitDialect",
    "UnpackOp",
    "LayoutFormatError", "RegisterLayout", "can_reinterpret", "column_local", "column_spatial",
    "local", "parse_register_layout", "reinterpret", "spatial",
    "MappingCompositionError", "MappingFormatError", "MappingFunction", "PRODUCED_LAYOUTS_ATTR",
    "FloatType", "Piece", "element_bits", "float_type", "REQUIRED_LAYOUTS_ATTR", "ReinterpretOp", "StoreIntoOp", "VTDialect", "ViewOp", "composed_sources",
    "irdl_text", "layout_from_attr", "load_dialects",
]


def load_dialects(ctx: ir.Context) -> None:
    """Load `vt`, `layout` and `lowbit` into `ctx` (which must be the current context)."""
    for dialect in ALL_DIALECTS:
        if not ctx.is_dialect_loaded(dialect.DIALECT_NAMESPACE):
            dialect.load()


def irdl_text(dialect) -> str:
    """The IRDL of an `ext` dialect class (or its namespace, "vt"/"layout"/"lowbit"), as `Dialect.load`
    registers it (canonicalized), printed in a fresh context so the text is deterministic."""
    if isinstance(dialect, str):
        by_name = {d.DIALECT_NAMESPACE: d for d in ALL_DIALECTS}
        dialect = by_name[dialect]
    with ir.Context(), ir.Location.unknown():
        module = dialect._emit_module()
        pm = PassManager.parse("builtin.module(canonicalize, cse)")
        pm.run(module.operation)
        body = "\n".join(line.rstrip() for line in str(module).splitlines()) + "\n"
    header = (f"// IRDL of the `{dialect.DIALECT_NAMESPACE}` dialect, generated from "
              f"python/vtmlir/dialects/ -- do not edit.\n"
              f"// Regenerate: python -m vtmlir.dialects.write_irdl\n"
              f"// Load into MLIR tools with --irdl-file=<this file>. Op verifiers beyond these\n"
              f"// structural constraints live in Python (see dialects/README.md).\n")
    return header + body
