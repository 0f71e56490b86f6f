"""PyTorch → MLIR through torch-mlir's FX importer.

`import_torch` exports the module with `torch.export`, imports it into a vtmlir context (so `vt` and
`layout` are available to every later pass), lowers it to the torch backend contract and then to
linalg-on-tensors (docs/design.md §3, the graph level). When torch-mlir cannot lower an op, the error names
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
import io
import logging
import numbers
import re
import warnings
from dataclasses import dataclass

import numpy as np
from torch_mlir import ir

from ..context import make_context
from ..errors import UnsupportedOpError, VtmlirError, format_location
from ..ir_utils import copy_module, walk_ops
from ..passes import run_pipeline
from .decompositions import add_corrections
from .torch_calls import TorchCallSpec
from .transformers_export import exportable_experts, is_transformers_model, register_cache_pytrees

OUTPUT_TYPES = ("torch", "linalg-on-tensors")

# `backend-legal-ops`: ops torch-mlir's decompositions must leave alone because its linalg conversion
# lowers them directly and the decomposition does not lower (adaptive_max_pool2d with an output size
# that does not divide the input; torch-mlir's e2e configuration keeps it the same way).
_TORCH_BACKEND = ("builtin.module(func.func(torch-match-quantized-custom-ops), torchdynamo-export-to-torch-backend-pipeline"
                  "{backend-legal-ops=aten.adaptive_max_pool2d extra-library=})")
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
    kwargs: dict | None = None,
    dynamic_shapes=None,
    output_type: str = "linalg-on-tensors",
    func_name: str = "main",
    context: ir.Context | None = None,
) -> ir.Module:
    """Import an `nn.Module` called on `example_args` (and keyword inputs `kwargs`) as an `ir.Module`.

    `output_type` is "linalg-on-tensors" (the graph level, default) or "torch" (torch backend
    contract). `dynamic_shapes` is passed to `torch.export.export` unchanged; with it, the shape
    symbols torch-mlir records are kept (see the module docstring and `shape_symbols`).
    The function's arguments are the tensors among the inputs' pytree leaves, its results the
    module's tensor outputs (`export_torch` says how to call it with the module's own structure).
    """
    if output_type not in OUTPUT_TYPES:
        raise VtmlirError(f"error: unknown output_type '{output_type}'; expected one of {', '.join(OUTPUT_TYPES)}")
    exported = export_torch(module, *example_args, kwargs=kwargs, dynamic_shapes=dynamic_shapes)
    return import_exported(exported, output_type=output_type, func_name=func_name, context=context)


@dataclass(frozen=True)
class ExportedTorch:
    """A module exported for import: the `torch.export` program (decomposed, its state frozen
    into it) and the Python calling convention of the function it becomes."""

    program: object
    call: TorchCallSpec
    dynamic_shapes: object = None


def export_torch(module, *example_args, kwargs: dict | None = None, dynamic_shapes=None) -> ExportedTorch:
    """`torch.export` `module` on the example inputs, decompose it for torch-mlir and prepare it for
    the frozen import (`_prepare_for_import`). The inputs may be any pytree of tensors and Python
    constants; a transformers model's cache classes are registered as pytrees first
    (`transformers_export`)."""
    import torch  # deferred: torch is heavy; loaded on first use
    from torch_mlir import fx  # also registers the torch pipelines by name (docs/design.md §6)

    if not isinstance(module, torch.nn.Module):
        raise VtmlirError(f"error: import_torch expects a torch.nn.Module, got {type(module).__name__}")
    args = tuple(_as_torch(a) for a in example_args)
    kwargs = {k: _as_torch(v) for k, v in (kwargs or {}).items()}
    experts = contextlib.nullcontext()
    if is_transformers_model(module):
        register_cache_pytrees(module)
        experts = exportable_experts(module)
    _check_input_leaves(args, kwargs)
    with experts:
        program = _export(module, args, kwargs, dynamic_shapes)
    _refuse_byte_contractions(program)
    call = _prepare_for_import(program)
    return ExportedTorch(program, call, dynamic_shapes)


def import_exported(exported: ExportedTorch, output_type: str = "linalg-on-tensors", func_name: str = "main",
                    context: ir.Context | None = None) -> ir.Module:
    """Import an `export_torch` result as an `ir.Module` at `output_type` level."""
    # deferred: torch_mlir.extras.fx_importer imports torch (heavy)
    from torch_mlir.extras.fx_importer import FxImporter

    if output_type not in OUTPUT_TYPES:
        raise VtmlirError(f"error: unknown output_type '{output_type}'; expected one of {', '.join(OUTPUT_TYPES)}")
    program, dynamic_shapes = exported.program, exported.dynamic_shapes
    ctx = context or make_context()
    importer = FxImporter(context=ctx)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            importer.import_frozen_program(program, func_name=func_name,
                                           import_symbolic_shape_expressions=dynamic_shapes is not None)
        except NotImplementedError as err:
            raise _unimported_node(program, err) from None
        except Exception as err:  # noqa: BLE001 - the importer's own failures: a VtmlirError, never a traceback
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise VtmlirError(f"error: torch-mlir's FX importer cannot import the exported program: "
                              f"{type(err).__name__}: {first}") from None
    mod = importer.module

    try:
        run_pipeline(mod, _TORCH_BACKEND, what="lowering to the torch backend contract")
    except VtmlirError as err:
        raise _explain_unknown_operators(mod, err) from None
    with mod.context:
        _record_calling_convention(_find_func(mod, func_name), program)
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
    _refuse_conditionless_while_loops(mod)
    return mod


def _prepare_for_import(program) -> TorchCallSpec:
    """Make `program` importable by torch-mlir's frozen import, and record how to call the result.

    - Non-persistent buffers (rotary `inv_freq`, causal-mask tables: `register_buffer(...,
      persistent=False)`) are lifted like other buffers but stored in `program.constants`, not in the
      `state_dict` where torch-mlir looks them up ("Could not find state mapping for buffer"): they
      are frozen from there.
    - User inputs that `torch.export` specialised (`None`, `use_cache=True`, ints: a
      `ConstantArgument` in the signature) have placeholders that nothing reads: they are removed,
      so the function's arguments are the input tensors only; their values are recorded.
    - Constant user outputs (a `None` in a returned tuple) are removed from the graph's outputs and
      recorded, so the function returns tensors only.
    - A parameter, buffer or constant read inside a list operand (`aten.index.Tensor(table,
      [relative_position_index])` in Swin's attention) is read through a `get_attr` node: the frozen
      import puts the tensor itself into the list, which torch-mlir's list import refuses
      ("Heterogeneous lists are not supported"); a `get_attr` in a list it imports as a literal.
    """
    # deferred: torch is heavy; loaded on first use
    from torch.export.graph_signature import ConstantArgument, InputKind, OutputKind

    sig = program.graph_signature
    state = program.state_dict
    for spec in sig.input_specs:
        if spec.kind == InputKind.BUFFER and spec.target not in state and spec.target in program.constants:
            state[spec.target] = program.constants[spec.target]

    graph = program.graph
    placeholders = {n.name: n for n in graph.nodes if n.op == "placeholder"}
    for spec in sig.input_specs:
        if spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
            store = program.constants if spec.kind == InputKind.CONSTANT_TENSOR else state
            node = placeholders.get(spec.arg.name)
            if node is not None and spec.target in store:
                _read_lists_through_get_attr(program.graph_module, node, store[spec.target])
    user_inputs = [s for s in sig.input_specs if s.kind == InputKind.USER_INPUT]
    input_constants = {}
    for i, spec in enumerate(user_inputs):
        if isinstance(spec.arg, ConstantArgument):
            input_constants[i] = spec.arg.value
            node = placeholders.get(spec.arg.name)
            if node is not None:
                if node.users:
                    raise VtmlirError(f"error: the exported graph reads the constant input '{spec.arg.name}'")
                graph.erase_node(node)
            sig.input_specs.remove(spec)

    output = next(n for n in graph.nodes if n.op == "output")
    values = list(output.args[0])
    user_outputs = [(i, s) for i, s in enumerate(sig.output_specs) if s.kind == OutputKind.USER_OUTPUT]
    output_constants = {}
    dropped = set()
    for leaf, (position, spec) in enumerate(user_outputs):
        if isinstance(spec.arg, ConstantArgument):
            output_constants[leaf] = spec.arg.value
            dropped.add(position)
    if dropped:
        output.args = (tuple(v for i, v in enumerate(values) if i not in dropped),)
        sig.output_specs[:] = [s for i, s in enumerate(sig.output_specs) if i not in dropped]
    graph.lint()
    return TorchCallSpec(program.call_spec.in_spec, program.call_spec.out_spec, input_constants, output_constants)
def _node_location(node) -> str:
    """`file:line:0` of the innermost frame of an FX node's Python stack (else `<unknown>`)."""
    frame = re.findall(r'File "([^"]+)", line (\d+)', node.meta.get("stack_trace") or "")
    return f"{frame[-1][0]}:{frame[-1][1]}:0" if frame else "<unknown>"


def _unimported_node(program, err: NotImplementedError) -> UnsupportedOpError:
    """torch-mlir's FX importer raises NotImplementedError for a node it cannot import (Python-number
    ops on data-dependent values: `sym_float`, `sym_ite`, ...): name the first such node."""
    import torch  # deferred: torch is heavy; loaded on first use

    for node in program.graph.nodes:
        if node.op == "call_function" and not isinstance(node.target, (torch._ops.OpOverload, torch._ops.HigherOrderOperator)):
            name = getattr(node.target, "__name__", str(node.target))
            return UnsupportedOpError(f"{_node_location(node)}: error: unsupported op '{name}': torch-mlir's "
                                      "FX importer cannot import it", op_name=name)
    first = str(err).strip().splitlines()[0] if str(err).strip() else "NotImplementedError"
    return UnsupportedOpError(f"error: torch-mlir's FX importer cannot import the graph: {first}")


_INT64_MAX = 2**63 - 1


def _refuse_conditionless_while_loops(module) -> None:
    """torch-mlir imports `torch.while_loop` (the higher-order op) as a `torch.prim.Loop` whose initial
    condition is the constant true, takes it for a TorchScript `for` loop, and lowers it to an
    `scf.for` over 2**63 - 1 iterations without the exit condition -- a loop that would not end.
    Refuse it, naming the loop, instead of compiling it."""
    for loop in walk_ops(module, "scf.for"):
        bound = loop.operands[1].owner
        if not isinstance(bound, ir.Block) and bound.name == "arith.constant" \
                and ir.IntegerAttr(bound.attributes["value"]).value == _INT64_MAX:
            where = format_location(loop.location, "<unknown>")
            raise UnsupportedOpError(
                f"{where}: error: unsupported op 'torch.prim.Loop': a while loop (torch.while_loop) that "
                "torch-mlir lowers as a for loop of 2**63 - 1 iterations without its exit condition",
                op_name="torch.prim.Loop")


def _refuse_byte_contractions(program) -> None:
    """torch-mlir's linalg conversion of matmuls and convolutions whose result is int8/uint8 builds a
    `linalg.yield` of a null value (its scalar conversion to byte types is unimplemented) and the
    process dies (SIGSEGV). Refuse them, naming the op and its source line, before torch-mlir runs."""
    import torch  # deferred: torch is heavy; loaded on first use

    aten = torch.ops.aten
    contractions = {aten.mm.default, aten.bmm.default, aten.matmul.default, aten.addmm.default,
                    aten.baddbmm.default, aten.convolution.default}
    for node in program.graph.nodes:
        if node.op == "call_function" and node.target in contractions \
                and getattr(node.meta.get("val"), "dtype", None) in (torch.int8, torch.uint8):
            where = _node_location(node)
            name = f"torch.aten.{node.target.__name__.split('.')[0]}"
            raise UnsupportedOpError(
                f"{where}: error: unsupported op '{name}' with a {node.meta['val'].dtype} result: torch-mlir's "
                "linalg lowering crashes on 8-bit integer matmuls and convolutions (compute in int32 "
                "and convert the result)", op_name=name)


def _export(module, args, kwargs, dynamic_shapes):
    """`torch.export` of `module` on `args`, decomposed for torch-mlir. Non-strict tracing first
    (Python semantics, no graph breaks to worry about); where it cannot trace -- `int(t)`,
    `float(t)`, `t.item()` feeding Python arithmetic become data-dependent symbols it cannot guard
    on -- strict (TorchDynamo) tracing, which captures them as tensor ops, as torch-mlir's own
    e2e configuration does."""
    # deferred: torch (heavy) loads on first use
    import torch
    from torch_mlir import fx

    errors = []
    for strict in (False, True):
        try:
            with warnings.catch_warnings(), _quiet_torch_logs():
                warnings.simplefilter("ignore")
                with contextlib.redirect_stderr(io.StringIO()):
                    program = torch.export.export(module, args, kwargs or None, dynamic_shapes=dynamic_shapes,
                                                     strict=strict)
                return program.run_decompositions(_decomposition_table())
        except Exception as err:  # torch.export raises many exception types; all mean "cannot trace"
            errors.append(str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__)
    raise VtmlirError(f"error: torch.export could not trace {type(module).__name__}: {errors[0]}")


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


def _decomposition_table() -> dict:
    """torch-mlir's decompositions, with vtmlir's corrections for ops torch-mlir lowers wrongly
    (`decompositions.add_corrections`: roll, negative pads, ops along the dimension of a 0-d
    tensor) and two more:
    - PyTorch's own for `aten.gelu`: torch-mlir lowers `gelu(approximate="tanh")` (GPT-2's and Gemma's
      activation) with sqrt(2/pi) as 0.797724 (pi as 22/7; the true value is 0.7978846), an error of
      5e-5 on activations of size 3 that grows through the layers; PyTorch's decomposition uses the
      exact constants (and erf for approximate="none");
    - `sort(stable=True)` (also argsort's) as a plain sort: torch-mlir does not know
      `aten.sort.stable`, and the sort vtmlir compiles is stable (`convert-tm-tensor-to-scf`), so the
      two are the same function here."""
    # deferred: torch (heavy) loads on first use
    import torch
    from torch._decomp import get_decompositions
    from torch_mlir import fx

    def stable_sort(x, *, stable=None, dim=-1, descending=False):
        return torch.ops.aten.sort.default(x, dim, descending)

    table = dict(fx.get_decomposition_table())
    table.update(get_decompositions([torch.ops.aten.gelu]))
    table[torch.ops.aten.sort.stable] = stable_sort
    return add_corrections(table)


def _check_input_leaves(args: tuple, kwargs: dict) -> None:
    """Refuse, naming it, an input `torch.export` cannot flatten (an object of an unregistered class)
    before the export fails on it with a message about pytrees."""
    # deferred: torch is heavy; loaded on first use
    import torch
    from torch.utils import _pytree as pytree

    leaves, _ = pytree.tree_flatten_with_path((args, kwargs))
    for path, leaf in leaves:
        if leaf is None or isinstance(leaf, (torch.Tensor, numbers.Number, str, torch.dtype, torch.device)):
            continue
        top = path[1]
        where = (f"argument {top.idx}" if path[0].idx == 0 else f"'{top.key}'") + pytree.keystr(path[2:])
        raise VtmlirError(
            f"error: input {where} is a {type(leaf).__name__}, which vtmlir cannot pass to a compiled function; "
            "pass tensors, tuples/lists/dicts of them, Python constants, or transformers cache objects "
            "(DynamicCache, StaticCache; past key/values as tensors inside such a cache)")


def _read_lists_through_get_attr(graph_module, placeholder, value) -> None:
    """Replace `placeholder` inside the list operands of its users by a `get_attr` of `value` (see
    `_prepare_for_import`)."""
    attr = None
    for user in list(placeholder.users):
        if not any(isinstance(a, (list, tuple)) and placeholder in a for a in (*user.args, *user.kwargs.values())):
            continue
        if attr is None:
            attr = f"_vtmlir_frozen_{placeholder.name}"
            graph_module.register_buffer(attr, value.detach(), persistent=False)
        with graph_module.graph.inserting_before(user):
            fetched = graph_module.graph.get_attr(attr)

        def swap(a):
            return type(a)(fetched if x is placeholder else x for x in a) if isinstance(a, (list, tuple)) else a

        user.args = tuple(swap(a) for a in user.args)
        user.kwargs = {k: swap(v) for k, v in user.kwargs.items()}
def _record_calling_convention(fn, program) -> None:
    """Write on `fn` what its signless, flat signature loses (`vtmlir.signature` reads it back):
    uint8 arguments and results (`vtmlir.element_type = ui8`) and which results are new values of
    user inputs or buffers the module writes in place (`vtmlir.input_mutations`). Python numbers
    torch.export made constants are no arguments (`_prepare_for_import` took them out)."""
    # deferred: torch is heavy; loaded on first use
    import torch
    from torch.export.graph_signature import InputKind, OutputKind, TensorArgument

    # deferred: signature loads ml_dtypes and the tensor dialect; `import vtmlir` stays light
    from ..signature import BUFFER_UPDATE, ELEMENT_TYPE, INPUT_MUTATIONS, RETURNED, attr_dicts

    sig = program.graph_signature
    block = fn.regions[0].blocks[0]
    ftype = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)
    users = [s for s in sig.input_specs if s.kind == InputKind.USER_INPUT]
    values = {n.name: n.meta.get("val") for n in program.graph.nodes}
    output = next(n for n in program.graph.nodes if n.op == "output")
    ui8 = ir.TypeAttr.get(ir.IntegerType.get_unsigned(8))

    if len(users) == len(block.arguments):
        args = attr_dicts(fn, "arg_attrs", len(users))
        for attrs, spec in zip(args, users):
            if isinstance(spec.arg, TensorArgument) and getattr(values.get(spec.arg.name), "dtype", None) == torch.uint8:
                attrs[ELEMENT_TYPE] = ui8
        fn.attributes["arg_attrs"] = ir.ArrayAttr.get([ir.DictAttr.get(a) for a in args])
    outputs = list(output.args[0])
    if len(sig.output_specs) == len(ftype.results) == len(outputs):
        names = [s.arg.name if isinstance(s.arg, TensorArgument) else None for s in users]
        writes = []
        results = attr_dicts(fn, "res_attrs", len(outputs))
        for attrs, spec, node in zip(results, sig.output_specs, outputs):
            if spec.kind == OutputKind.USER_INPUT_MUTATION and spec.target in names:
                writes.append(names.index(spec.target))
            else:
                writes.append(BUFFER_UPDATE if spec.kind == OutputKind.BUFFER_MUTATION else RETURNED)
            if getattr(getattr(node, "meta", {}).get("val"), "dtype", None) == torch.uint8:
                attrs[ELEMENT_TYPE] = ui8
        fn.attributes["res_attrs"] = ir.ArrayAttr.get([ir.DictAttr.get(a) for a in results])
        if any(w != RETURNED for w in writes):
            fn.attributes[INPUT_MUTATIONS] = ir.DenseI64ArrayAttr.get(writes)


def _find_func(module, name):
    for op in module.body.operations:
        if op.operation.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == name:
            return op.operation
    return None


def _user_dim_names(program, dynamic_shapes) -> dict[str, str]:
    """torch.export renames every Dim to a fresh symbol (s77); map those back to the user's names
    where a placeholder size is exactly one symbol bound to a named Dim of the spec."""
    import torch  # deferred: torch is heavy; loaded on first use

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
    """torch logs and prints (to stderr) the graph of a failed trace, and torch.export a Python
    traceback (at ERROR, through its own handlers) before it raises; the raise becomes a VtmlirError
    that says what matters, so the logs are noise: muted meanwhile."""
    loggers = [logging.getLogger(name) for name in ("torch", "torch.fx.experimental.symbolic_shapes")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def _as_torch(value):
    import torch  # deferred: torch is heavy; loaded on first use

    if isinstance(value, np.ndarray):
        return torch.from_numpy(value)
    return value


def _explain_unknown_operators(module, err: VtmlirError) -> VtmlirError:
    """The torch ops the importer could only import as `torch.operator` (torch-mlir does not know
    them: `aten.ne.float`, `aten.sort.stable`, ...), named with their source lines, when the torch
    backend pipeline failed on them; else `err`."""
    unknown = []

    def visit(op):
        if op.name == "torch.operator":
            unknown.append((ir.StringAttr(op.attributes["name"]).value, format_location(op.location, "<unknown>")))
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    if not unknown:
        return err
    lines = [f"{loc}: error: unsupported op '{name}': torch-mlir does not know it (no torch dialect op)"
             for name, loc in dict.fromkeys(unknown)]
    return UnsupportedOpError("\n".join(lines), op_name=unknown[0][0])


def _explain_lowering_failure(torch_level, err: VtmlirError) -> VtmlirError:
    """Name the torch ops that have no linalg lowering (with their source lines)."""
    module = copy_module(torch_level.operation)
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
