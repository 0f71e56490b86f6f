"""The one way vtmlir makes an MLIR context.

Every context vtmlir creates has the upstream dialects (torch-mlir's bundled MLIR registers them all),
the `torch` and `tm_tensor` dialects, and vtmlir's own `vt`, `layout` and `lowbit` dialects loaded. Anything that parses IR or
imports a model goes through `make_context()` so a `vt.view` parses everywhere.
"""

from __future__ import annotations

from torch_mlir import ir, passmanager
from torch_mlir.dialects import torch as torch_dialect


def make_context() -> ir.Context:
    """A fresh context with torch, tm_tensor, vt, layout and lowbit loaded."""
    # deferred: the dialect modules load with the first context; `import vtmlir` stays light
    from .dialects import load_dialects

    ctx = ir.Context()
    torch_dialect.register_dialect(ctx)
    with ctx:
        _load_tm_tensor()
        load_dialects(ctx)
    return ctx


def _load_tm_tensor() -> None:
    """Load torch-mlir's `tm_tensor` dialect into the current context, so that a module imported
    with TMTensor ops (sort, scatter, cumsum, ...) parses again. The bindings have no registration
    function for it; a pass manager loads the dialects its passes depend on when it runs, and
    `tm-tensor-bufferize` depends on `tm_tensor` -- run on an empty module, it changes nothing."""
    with ir.Location.unknown():
        empty = ir.Module.create()
    passmanager.PassManager.parse("builtin.module(func.func(tm-tensor-bufferize))").run(empty.operation)
