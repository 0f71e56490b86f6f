"""PyTorch → MLIR through torch-mlir's FX importer.

`import_torch` exports the module with `torch.export`, imports it into a vtmlir context (so `vt` and
`layout` are available to every later pass), lowers it to the torch backend contract and then to
linalg-on-tensors (DESIGN.md §3, the graph level). When torch-mlir cannot lower an op, the error names
the op and the Python source line it came from instead of torch-mlir's generic pipeline failure.

Dynamic shapes (DVM issue 7, point 1): with `dynamic_shapes` (torch.export `Dim`s) the importer asks
torch-mlir for its symbolic shape expressions. At torch level these are `torch.symbolic_int` (one
per symbol, with its range) and `torch.bind_symbolic_shape` (each tensor's sizes as an affine map of
the symbols, e.g. `(s0 * s1, 16)` after a view); `output_type="torch"` keeps them. torch-mlir's
linalg conversion cannot legalize them, so before lowering they are recorded on the function and
erased: the function gets `vtmlir.shape_symbols = {s77 = {min = 1, max = 1024, name = "batch"}}` and
every argument/result bound by torch-mlir a `vtmlir.symbolic_shape = ["s77", "s27", "16"]` (string
expressions over the symbols, like `"s27 * s77"`). `shape_symbols(module)` reads them back;
`dvm-fuse` seeds its symbol deduction from them.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from dataclasses import dataclass

from torch_mlir import ir

from ..context import make_context
from ..errors import UnsupportedOpError, VtmlirError, format_location
from ..passes import run_pipeline
from .decompositions import vtmlir_decompositions

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
    contract). `dynamic_shapes` is passed to `torch.export.export` unchanged; with it, the shape
    symbols torch-mlir records are kept (see the module docstring and `shape_symbols`).
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
        with warnings.catch_warnings(), _quiet_torch_logs():
            warnings.simplefilter("ignore")
            program = torch.export.export(module, args, dynamic_shapes=dynamic_shapes, strict=False)
            program = program.run_decompositions(vtmlir_decompositions())
    except Exception as err:  # torch.export raises many exception types; all mean "cannot trace"
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise VtmlirError(f"error: torch.export could not trace {type(module).__name__}: {first}") from None

    ctx = context or make_context()
    importer = FxImporter(context=ctx)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            importer.import_frozen_program(program, func_name=func_name,
                                           import_symbolic_shape_expressions=dynamic_shapes is not None)
    except Exception as err:  # noqa: BLE001 - the importer's own failures: a VtmlirError, never a traceback
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise VtmlirError(f"error: torch-mlir's FX importer cannot import {type(module).__name__}: "
                          f"{type(err).__name__}: {first}") from None
    mod = importer.module

    run_pipeline(mod, _TORCH_BACKEND, what="lowering to the torch backend contract")
    if dynamic_shapes is not None:
        _record_shape_symbols(mod, _user_dim_names(program, dynamic_shapes))
    if output_type == "torch":
        return mod
    _erase_symbolic_shape_ops(mod)
    torch_level = mod.operation.clone()
    try:
        run_pipeline(mod, _LINALG_BACKEND, what="lowering torch to linalg-on-tensors")
    except VtmlirError as err:
        raise _explain_lowering_failure(torch_level, err) from None
    return mod


@dataclass(frozen=True)
class ShapeSymbols:
    """The shape symbols of one imported function: `symbols` maps a torch-mlir symbol name to
    (min, max, user Dim name or None); `args`/`results` hold one tuple of string size expressions
    per argument/result (None where torch-mlir bound no shape)."""

    symbols: dict
    args: tuple
    results: tuple


def shape_symbols(module: ir.Module, func_name: str = "main") -> ShapeSymbols:
    """Read back the symbol table `import_torch(..., dynamic_shapes=...)` attached to `func_name`."""
    fn = _find_func(module, func_name)
    symbols = {}
    if fn is not None and "vtmlir.shape_symbols" in fn.attributes:
        for named in ir.DictAttr(fn.attributes["vtmlir.shape_symbols"]):
            d = ir.DictAttr(named.attr)
            name = ir.StringAttr(d["name"]).value if "name" in d else None
            symbols[named.name] = (ir.IntegerAttr(d["min"]).value, ir.IntegerAttr(d["max"]).value, name)

    def per(attr_name):
        if fn is None or attr_name not in fn.attributes:
            return ()
        out = []
        for entry in ir.ArrayAttr(fn.attributes[attr_name]):
            d = ir.DictAttr(entry)
            out.append(tuple(ir.StringAttr(x).value for x in ir.ArrayAttr(d["vtmlir.symbolic_shape"]))
                       if "vtmlir.symbolic_shape" in d else None)
        return tuple(out)

    return ShapeSymbols(symbols, per("arg_attrs"), per("res_attrs"))


def _find_func(module, name):
    for op in module.body.operations:
        if op.operation.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == name:
            return op.operation
    return None


def _user_dim_names(program, dynamic_shapes) -> dict[str, str]:
    """torch.export renames every Dim to a fresh symbol (s77); map those back to the user's names
    where a placeholder size is exactly one symbol bound to a named Dim of the spec."""
    import torch

    names: dict[str, str] = {}
    placeholders = [n for n in program.graph.nodes if n.op == "placeholder"]
    user = [n for n in placeholders if n.name in set(program.graph_signature.user_inputs)]
    if isinstance(dynamic_shapes, dict):
        specs = list(dynamic_shapes.values())
    else:
        specs = list(dynamic_shapes)
    for node, spec in zip(user, specs):
        val = node.meta.get("val")
        if val is None or spec is None:
            continue
        items = spec.items() if isinstance(spec, dict) else enumerate(spec)
        for dim, d in items:
            label = getattr(d, "__name__", None)
            if label is None or dim >= len(val.shape):
                continue
            size = val.shape[dim]
            if isinstance(size, torch.SymInt):
                names.setdefault(str(size.node.expr), label)
    return names


def _affine_symbol_names(expr_text: str, operands: list[str]) -> str:
    import re

    return re.sub(r"\bs(\d+)\b", lambda m: operands[int(m.group(1))], expr_text)


def _record_shape_symbols(module: ir.Module, user_names: dict[str, str]) -> None:
    """Copy torch-mlir's symbolic_int / bind_symbolic_shape facts of function arguments and results
    to attributes that survive the lowering to linalg (module docstring)."""
    ctx = module.context
    with ctx, ir.Location.unknown():
        for fop in module.body.operations:
            fn = fop.operation
            if fn.name != "func.func":
                continue
            syms: dict[ir.Value, str] = {}
            entries = {}
            binds: list = []

            def visit(op):
                if op.name == "torch.symbolic_int":
                    name = ir.StringAttr(op.attributes["symbol_name"]).value
                    syms[op.results[0]] = name
                    fields = {"min": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), ir.IntegerAttr(op.attributes["min_val"]).value),
                              "max": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), ir.IntegerAttr(op.attributes["max_val"]).value)}
                    if name in user_names:
                        fields["name"] = ir.StringAttr.get(user_names[name])
                    entries[name] = ir.DictAttr.get(fields)
                elif op.name == "torch.bind_symbolic_shape":
                    binds.append(op)
                return ir.WalkResult.ADVANCE

            fn.walk(visit)
            if not entries:
                continue
            shape_of: dict = {}
            for op in binds:
                operands = [syms.get(v, "?") for v in list(op.operands)[1:]]
                amap = ir.AffineMapAttr(op.attributes["shape_expressions"]).value
                shape_of[op.operands[0]] = [_affine_symbol_names(str(e), operands) for e in amap.results]
            fn.attributes["vtmlir.shape_symbols"] = ir.DictAttr.get(entries)
            block = fn.regions[0].blocks[0]
            ret = block.operations[len(block.operations) - 1]

            def attrs_for(values, existing):
                out = []
                for i, v in enumerate(values):
                    d = {n.name: n.attr for n in ir.DictAttr(existing[i])} if existing is not None else {}
                    if v in shape_of:
                        d["vtmlir.symbolic_shape"] = ir.ArrayAttr.get([ir.StringAttr.get(x) for x in shape_of[v]])
                    out.append(ir.DictAttr.get(d))
                return ir.ArrayAttr.get(out)

            args = list(block.arguments)
            old = ir.ArrayAttr(fn.attributes["arg_attrs"]) if "arg_attrs" in fn.attributes else None
            fn.attributes["arg_attrs"] = attrs_for(args, old)
            outs = list(ret.operands)
            old = ir.ArrayAttr(fn.attributes["res_attrs"]) if "res_attrs" in fn.attributes else None
            fn.attributes["res_attrs"] = attrs_for(outs, old)


def _erase_symbolic_shape_ops(module: ir.Module) -> None:
    """Drop torch.bind_symbolic_shape / torch.symbolic_int (recorded already): the linalg
    conversion has no legalization for them."""
    binds, ints = [], []

    def visit(op):
        if op.name == "torch.bind_symbolic_shape":
            binds.append(op)
        elif op.name == "torch.symbolic_int":
            ints.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    for op in binds + ints:
        op.erase()


@contextlib.contextmanager
def _quiet_torch_logs():
    """torch.export logs a Python traceback (at ERROR, through its own handlers) before it raises on a
    model it cannot trace; the raise becomes a VtmlirError, so the log is noise: muted meanwhile."""
    logger = logging.getLogger("torch")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


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
