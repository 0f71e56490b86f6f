"""The one way vtmlir makes an MLIR context.

Every context vtmlir creates has the upstream dialects (torch-mlir's bundled MLIR registers them all),
the `torch` dialect, and vtmlir's own `vt`, `layout` and `lowbit` dialects loaded. Anything that parses IR or
imports a model goes through `make_context()` so a `vt.view` parses everywhere.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import torch as torch_dialect


def make_context() -> ir.Context:
    """A fresh context with torch, vt, layout and lowbit loaded."""
    from .dialects import load_dialects

    ctx = ir.Context()
    torch_dialect.register_dialect(ctx)
    with ctx:
        load_dialects(ctx)
    return ctx
