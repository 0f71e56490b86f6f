"""`.mlir` text, files and `ir.Module`s as vtmlir input.

Everywhere vtmlir takes a module it takes any of: an `ir.Module` (re-homed into a vtmlir context if it
came from elsewhere), `.mlir` text, or a path to a `.mlir` file. Parse errors come back as a
`VtmlirError` with `file:line:col: error:` lines.
"""

from __future__ import annotations

import os
from pathlib import Path

from torch_mlir import ir

from ..context import make_context
from ..errors import VtmlirError, from_mlir_error


def parse_mlir(text: str, source_name: str = "-", context: ir.Context | None = None) -> ir.Module:
    """Parse `.mlir` text into a module in a vtmlir context (a new one unless given)."""
    ctx = context or make_context()
    try:
        op = ir.Operation.parse(text, source_name=source_name, context=ctx)
    except ir.MLIRError as err:
        raise from_mlir_error(err, source_name) from None
    if op.operation.name != "builtin.module":
        # A bare op at top level (e.g. one func.func) is wrapped like mlir-opt does.
        with ctx, ir.Location.unknown():
            module = ir.Module.create()
            module.body.append(op.operation)
        return module
    # Operation.parse is the parser that knows the source name; the ir.Module wrapper comes from
    # re-parsing its printout with locations kept, so diagnostics still point into the file.
    return ir.Module.parse(op.operation.get_asm(enable_debug_info=True), ctx)


def _looks_like_path(text: str) -> bool:
    return "\n" not in text and len(text) < 4096 and (text.endswith((".mlir", ".mlirbc")) or os.path.isfile(text))


def as_module(source, context: ir.Context | None = None) -> ir.Module:
    """An `ir.Module` in a vtmlir context from a module, `.mlir` text, or a path."""
    if isinstance(source, ir.Module):
        if context is None and _has_vtmlir_dialects(source.context):
            return source
        return parse_mlir(source.operation.get_asm(enable_debug_info=True), "<module>", context)
    if isinstance(source, os.PathLike) or (isinstance(source, str) and _looks_like_path(source)):
        path = Path(source)
        if not path.is_file():
            raise VtmlirError(f"{path}: error: no such file")
        return parse_mlir(path.read_text(), str(path), context)
    if isinstance(source, str):
        return parse_mlir(source, "<string>", context)
    raise VtmlirError(
        f"error: expected an nn.Module, an ir.Module, .mlir text or a path, got {type(source).__name__}"
    )


def _has_vtmlir_dialects(ctx: ir.Context) -> bool:
    return ctx.is_dialect_loaded("vt") and ctx.is_dialect_loaded("layout")
