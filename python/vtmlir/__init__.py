"""vtmlir: an MLIR-based deep-learning compiler written in Python.

Entry points:
- `vtmlir.import_torch(module, *example_args)`: PyTorch → linalg-on-tensors `ir.Module`.
- `vtmlir.compile(module, *example_args, target="cpu"|"cuda")`: a runnable compiled object.
- `vtmlir.quantize(model, dtype="u4", group_size=128)`: weight-only 1–8 bit quantisation (Tilus types).
- `vt-opt`: the `mlir-opt` of vtmlir (see `vtmlir.cli.vt_opt`).
"""

from .errors import InputMutationError, UnsupportedOpError, VtmlirError
from .frontend import as_module, import_torch, parse_mlir
from .passes.services import register_compiler

__version__ = "0.1.0"


def compile(module, *example_args, target: str = "cpu", **options):  # noqa: A001 - mirrors torch.compile
    """Compile an `nn.Module` (with example inputs), an `ir.Module`, or `.mlir` text/path.

    See `vtmlir.compiler.compile` for the options.
    """
    # deferred: the compiler loads every pass and backend; `import vtmlir` stays light
    from .compiler import compile as _compile

    return _compile(module, *example_args, target=target, **options)


def quantize(model, dtype: str = "u4", group_size: int = 128, **options):
    """Weight-only quantisation of `model`'s linear layers to a 1–8 bit type (see `vtmlir.lowbit`)."""
    from .lowbit import quantize as _quantize  # imports torch: only when asked for

    return _quantize(model, dtype=dtype, group_size=group_size, **options)


# VTC's measured cost model compiles candidate kernels with `compile`: registered for the passes
# below this layer (vtmlir/passes/services.py).
register_compiler(compile)

__all__ = ["InputMutationError", "UnsupportedOpError", "VtmlirError", "as_module", "compile", "import_torch", "parse_mlir", "quantize"]
