"""PyTorch → MLIR through torch-mlir's FX importer.

`import_torch` exports the module with `torch.export`, imports it into a vtmlir context (so `vt` and
`layout` are available to every later pass), lowers it to the torch backend contract and then to
linalg-on-tensors (DESIGN.md §3, the graph level). When torch-mlir cannot lower an op, the error names
the op and the Python source line it came from instead of torch-mlir's generic pipeline failure.
"""

from __future__ import annotations

import warnings

from torch_mlir import ir

from ..context import make_context
from ..errors import UnsupportedOpError, VtmlirError, format_location
from ..passes import run_pipeline

OUTPUT_TYPES = ("torch", "linalg-on-tensors")

_TORCH_BACKEND = "builtin.module(func.func(torch-match-quantized-custom-ops), torchdynamo-export-to-torch-backend-pipeline{ extra-library=})"
_LINALG_BACKEND = "builtin.module(torch-backend-to-linalg-on-tensors-backend-pipeline{allow-non-finites=True})"
# Partial conversions: whatever torch op survives them is one torch-mlir has no linalg lowering for.
_PARTIAL_TO_LINALG = (
    "builtin.module(func.func(convert-torch-to-tmtensor, convert-torch-to-linalg, "
    "convert-torch-to-scf, convert-torch-to-arith, convert-torch-to-tensor))"
)
# Ops that the partial conversions leave for the final type conversion; they are not the culprits.
_BOOKKEEPING_PREFIXES = ("torch.constant.", "torch.prim.", "torch_c.", "torch.derefine", "torch.vtensor.literal")


def import_torch(
    module,
    *example_args,
    dynamic_shapes=None,
    output_type: str = "linalg-on-tensors",
    func_name: str = "main",
    context: ir.Context | None = None,
) -> ir.Module:
    """Import an `nn.Module` called on `example_args` as an `ir.Module`.

    `output_type` is "linalg-on-tensors" (the graph level, default) or "torch" (torch backend
    contract). `dynamic_shapes` is passed to `torch.export.export` unchanged.
    """
    import torch
    from torch_mlir import fx  # also registers the torch pipelines by name (DESIGN.md pitfall)
    from torch_mlir.extras.fx_importer import FxImporter

    if output_type not in OUTPUT_TYPES:
        raise VtmlirError(f"error: unknown output_type '{output_type}'; expected one of {', '.join(OUTPUT_TYPES)}")
    if not isinstance(module, torch.nn.Module):
        raise VtmlirError(f"error: import_torch expects a torch.nn.Module, got {type(module).__name__}")
    args = tuple(_as_torch(a) for a in example_args)

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = torch.export.export(module, args, dynamic_shapes=dynamic_shapes, strict=False)
            program = program.run_decompositions(fx.get_decomposition_table())
    except Exception as err:  # torch.export raises many exception types; all mean "cannot trace"
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise VtmlirError(f"error: torch.export could not trace {type(module).__name__}: {first}") from None

    ctx = context or make_context()
    importer = FxImporter(context=ctx)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        importer.import_frozen_program(program, func_name=func_name)
    mod = importer.module

    run_pipeline(mod, _TORCH_BACKEND, what="lowering to the torch backend contract")
    if output_type == "torch":
        return mod
    torch_level = mod.operation.clone()
    try:
        run_pipeline(mod, _LINALG_BACKEND, what="lowering torch to linalg-on-tensors")
    except VtmlirError as err:
        raise _explain_lowering_failure(torch_level, err) from None
    return mod


def _as_torch(value):
    import numpy as np
    import torch

    if isinstance(value, np.ndarray):
        return torch.from_numpy(value)
    return value


def _explain_lowering_failure(torch_level, err: VtmlirError) -> VtmlirError:
    """Name the torch ops that have no linalg lowering (with their source lines)."""
    module = ir.Module.parse(torch_level.get_asm(enable_debug_info=True), torch_level.context)
    try:
        run_pipeline(module, _PARTIAL_TO_LINALG)
    except VtmlirError:
        return err
    leftovers: list[tuple[str, str]] = []

    def visit(op):
        name = op.name
        if name.startswith("torch.") and not name.startswith(_BOOKKEEPING_PREFIXES):
            leftovers.append((name, format_location(op.location, "<unknown>")))
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    if not leftovers:
        return err
    seen = dict.fromkeys(leftovers)
    lines = [f"{loc}: error: unsupported op '{name}': torch-mlir has no linalg-on-tensors lowering for it" for name, loc in seen]
    return UnsupportedOpError("\n".join(lines), op_name=leftovers[0][0])
