"""Running upstream pass pipelines with vtmlir's error reporting and stage recording."""

from __future__ import annotations

import contextlib
import io

from torch_mlir import ir, passmanager

from ..errors import VtmlirError, format_diagnostic


def run_pipeline(module, pipeline: str, what: str) -> None:
    """Run a textual pipeline on `module` (an `ir.Module` or its operation).

    Diagnostics are collected instead of going to stderr; a failure becomes a `VtmlirError` that says
    which stage failed (`what`).
    """
    op = module.operation if isinstance(module, ir.Module) else module
    diagnostics: list[str] = []

    def handler(diag):
        diagnostics.append(format_diagnostic(diag))
        return True

    with op.context:
        handle = op.context.attach_diagnostic_handler(handler)
        try:
            try:
                pm = passmanager.PassManager.parse(pipeline)
            except ValueError as err:
                raise VtmlirError(f"error: invalid pipeline for {what}: {err}") from None
            with contextlib.redirect_stderr(io.StringIO()):
                pm.run(op)
        except ir.MLIRError as err:
            lines = diagnostics or [format_diagnostic(d) for d in err.error_diagnostics]
            raise VtmlirError("\n".join(lines + [f"note: while {what}"])) from None
        finally:
            handle.detach()


def walk_ops(root, name: str | None = None) -> list:
    """All operations under `root` (pre-order), optionally only those named `name`."""
    found = []
    root_op = root.operation if hasattr(root, "operation") else root

    def visit(op):
        if name is None or op.name == name:
            found.append(op)
        return ir.WalkResult.ADVANCE

    root_op.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found
