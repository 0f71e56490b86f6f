"""What a pass needs from the layers above it, registered by them: the dependency inverted.

VTC's measured cost model (`vt-eliminate-data-movement{cost=measured}`, VTC Alg. 2) times candidate
kernels compiled as a user's module is, by `vtmlir.compile` (graph passes, code generation, the
JIT), which sits at the top of the package's layers (test_layering.py). The top package registers it
here when it is imported (`vtmlir/__init__.py`, which Python runs before any `vtmlir.*` module), so
the pass calls down into this module instead of up into the compiler.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import VtmlirError

_compiler: Callable | None = None


def register_compiler(compile_fn: Callable) -> None:
    """Set the function that compiles a module (`vtmlir.compile`'s signature)."""
    global _compiler
    _compiler = compile_fn


def compiler() -> Callable:
    """The registered compile function; a `VtmlirError` when none is (never with `import vtmlir`)."""
    if _compiler is None:
        raise VtmlirError("error: no compiler registered (vtmlir.passes.services.register_compiler)")
    return _compiler
