"""Errors vtmlir raises, and how MLIR diagnostics become `file:line:col: error:` lines.

Every failure a user can cause (malformed IR, an unsupported op, a bad pipeline, wrong inputs) is a
`VtmlirError`. Its message is already formatted the way `mlir-opt` prints diagnostics, so the CLI
prints it verbatim and exits 1 instead of showing a Python traceback.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile

from torch_mlir import ir


class VtmlirError(Exception):
    """A user-facing error: its message is what the user should read."""


class UnsupportedOpError(VtmlirError):
    """An op that a stage of vtmlir (or torch-mlir beneath it) cannot handle."""

    def __init__(self, message: str, op_name: str | None = None):
        super().__init__(message)
        self.op_name = op_name


class InputMutationError(VtmlirError):
    """The module writes some of its arguments in place (`x.add_(1)`, `copy_`, `fill_`, an `out=`
    tensor): `vtmlir.compile` refuses it unless those `arguments` are donated."""

    def __init__(self, message: str, arguments: tuple[int, ...]):
        super().__init__(message)
        self.arguments = tuple(arguments)


_LOC_RE = re.compile(r'^loc\((?:callsite\()?"(?P<file>[^"]*)":(?P<line>\d+):(?P<col>\d+)')


def format_location(loc: ir.Location, default_file: str = "-") -> str:
    """`file:line:col` for a file location (first frame of a call site), else the loc text."""
    text = str(loc)
    m = _LOC_RE.match(text)
    if m:
        return f"{m['file'] or default_file}:{m['line']}:{m['col']}"
    if text == "loc(unknown)":
        return default_file
    return text[len("loc(") : -1] if text.startswith("loc(") else text


def severity_name(diag) -> str:
    """"error", "warning", "note" or "remark" for an MLIR diagnostic."""
    return {
        ir.DiagnosticSeverity.ERROR: "error",
        ir.DiagnosticSeverity.WARNING: "warning",
        ir.DiagnosticSeverity.NOTE: "note",
        ir.DiagnosticSeverity.REMARK: "remark",
    }.get(diag.severity, "error")


def format_diagnostic(diag, default_file: str = "-") -> str:
    """One diagnostic (and its notes) as mlir-opt prints it."""
    lines = [f"{format_location(diag.location, default_file)}: {severity_name(diag)}: {diag.message}"]
    for note in diag.notes:
        lines.append(format_diagnostic(note, default_file))
    return "\n".join(lines)


def from_mlir_error(err: ir.MLIRError, default_file: str = "-", what: str | None = None) -> VtmlirError:
    """Turn an `ir.MLIRError` into a `VtmlirError` whose message lists its diagnostics."""
    diags = [format_diagnostic(d, default_file) for d in err.error_diagnostics]
    if not diags:
        diags = [f"{default_file}: error: {what or err.message}"]
    elif what:
        diags.append(f"{default_file}: note: while {what}")
    return VtmlirError("\n".join(diags))


@contextlib.contextmanager
def capture_native_stderr():
    """Capture what C++ writes to fd 2 (LLVM's option parser and JIT report errors there, not as
    diagnostics); the captured text is appended to the yielded list when the block ends."""
    captured: list[str] = []
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):
        yield captured
        return
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield captured
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            captured.append(tmp.read().decode(errors="replace").strip())
