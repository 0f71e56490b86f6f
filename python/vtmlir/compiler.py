"""`vtmlir.compile`: any supported input → a runnable, inspectable compiled object.

Stages (recorded as IR text in `.stages`): "graph" (linalg-on-tensors as imported or parsed),
"optimized" (after the user's vtmlir/upstream `pipeline`, if any), then the backend's own stages.
"""

from __future__ import annotations

TARGETS = ("cpu", "cuda")

# What `lowbit=` runs on the CPU when the graph holds quantised weights (Tilus §6): "vector" is the
# word-at-a-time vector loops (the fast path, so the default), "portable" the fused scalar loop.
LOWBIT_PIPELINES = {
    "vector": "subbyte-pack, subbyte-lower{cpu-vectorize=1}",
    "portable": "subbyte-pack, subbyte-lower",
}


def compile(  # noqa: A001 - mirrors torch.compile
    module,
    *example_args,
    kwargs: dict | None = None,
    target: str = "cpu",
    pipeline: str | None = None,
    entry: str | None = None,
    dynamic_shapes=None,
    opt_level: int = 2,
    chip: str = "sm_80",
    track_memory: bool = False,
    lowbit: str | None = "vector",
    donate=(),
    threads: int | None = None,
    schedules=None,
):
    """Compile `module` for `target`.

    - `module`: an `nn.Module` (then `example_args` and the keyword inputs `kwargs` are its example
      inputs), an `ir.Module`, `.mlir` text, or a path to a `.mlir` file (all at linalg-on-tensors
      level). Compiled from an `nn.Module`, the result is called like the module (`compiled(*args,
      **kwargs)`, the same structure as the example: tensors, lists, dicts, a transformers
      `DynamicCache`) and returns what the module returns (a tensor, a tuple, a dict, a transformers
      `ModelOutput`; `frontend/torch_calls.py`). Non-tensor inputs (`use_cache=True`, `None`) are
      fixed at their example values. Otherwise it takes and returns flat tensors.
    - `pipeline`: a textual pass pipeline run at graph level before code generation; vtmlir passes
      and upstream MLIR passes mix freely (e.g. "vt-stats, canonicalize").
    - `entry`: the function to compile (default `@main`, else the only public function).
    - `opt_level`: LLVM optimisation level of the CPU JIT; `chip`: the sm_XX the PTX targets.
    - `track_memory` (CPU): count the bytes each call allocates; `compiled.memory_stats()` reports
      the last call's peak (see `vtmlir.backend.cpu.memory_tracking`).
    - `lowbit` (CPU): how weights quantised with `vtmlir.quantize` are lowered when the graph holds
      any and `pipeline` names no `subbyte-` pass: "vector" (default; `subbyte-pack,
      subbyte-lower{cpu-vectorize=1}`), "portable" (`subbyte-pack, subbyte-lower`), or None (no
      low-bit passes: the weights are dequantised in full, then multiplied). Recorded as stage "lowbit".
    - `donate`: indices of arguments the compiled function may overwrite (JAX's `donate_argnums`;
      for an `nn.Module`, indices among its tensor inputs in order). A module that writes an
      argument in place (`x.add_(1)`, `copy_`, `out=`) needs it donated (else `InputMutationError`);
      the compiled function then writes it as PyTorch does and returns only what the module returns.
      Without it no argument is ever written. A result that is a donated argument updated in place
      (a KV cache: `cache[:, :, p] = k` on a clone of the input) is then computed in that argument's
      memory and returned in it -- no second buffer, no copy; on the CPU `compiled.aliases` says
      which results that is. The values are those of the non-donated function; on the CPU the
      donated input's old values are gone after the call (pass the returned tensor to the next
      call); on CUDA the donated input's device buffer is updated and read back as the result.
    - `threads` (CPU): threads the kernels run on: None or 0 (all cores, OpenMP), 1 (single-threaded
      code, no OpenMP), or N. Results are identical for any count (parallel tiles split only parallel
      dimensions). `schedules` (CPU): overrides of the code generation schedule per kernel kind, e.g.
      `{"contraction": {"register_m": 4}, "row-reduction": None}` (None: keep scalar loops); see
      `vtmlir.codegen.DEFAULT_SCHEDULES`. `compiled.report()` names each kernel's schedule and the
      kernels left as loops.
    """
    from .backend.cpu.executable import print_ir
    from .errors import VtmlirError
    from .frontend import as_module
    from .frontend.torch_import import export_torch, import_exported
    from .signature import box_scalars, find_entry, signature_of

    if target not in TARGETS:
        raise VtmlirError(f"error: unknown target '{target}'; expected one of: {', '.join(TARGETS)}")
    donated = _donated(donate)
    threads = _threads(threads)
    if lowbit is not None and lowbit not in LOWBIT_PIPELINES:
        raise VtmlirError(f"error: unknown lowbit '{lowbit}'; expected one of: "
                          f"{', '.join(LOWBIT_PIPELINES)}, or None")
    call = None
    if _is_torch_module(module):
        exported = export_torch(module, *example_args, kwargs=kwargs, dynamic_shapes=dynamic_shapes)
        graph = import_exported(exported)
        call = exported.call
    else:
        if example_args or kwargs:
            raise VtmlirError("error: example inputs are only taken with an nn.Module")
        # A fresh copy: compilation rewrites the module in place, the caller's stays as it was.
        graph = as_module(module, context=_fresh_context()) if _is_ir_module(module) else as_module(module)

    stages: dict[str, str] = {"graph": print_ir(graph)}
    if pipeline:
        from .passes import run_pipeline

        run_pipeline(graph, pipeline)
        stages["optimized"] = print_ir(graph)
    if target == "cpu" and lowbit and "subbyte-" not in (pipeline or "") and _has_byte_constants(graph):
        from .passes import run_pipeline

        run_pipeline(graph, LOWBIT_PIPELINES[lowbit])
        if (text := print_ir(graph)) != stages.get("optimized", stages["graph"]):
            stages["lowbit"] = text
    from .vtc.lower import lower_views  # vt.view / vt.store_into -> kernels (vt-lower-views)

    if any(lower_views(graph)):
        stages["vt-lowered"] = print_ir(graph)
    check_lowerable(graph)
    entry_func = find_entry(graph, entry)
    signature = signature_of(entry_func)
    _check_written_inputs(signature, donated)
    box_scalars(entry_func)  # scalars cross the boundary as 0-d tensors (signature.py)

    if target == "cpu":
        from .backend.cpu import compile_cpu

        executable = compile_cpu(graph, signature, stages, opt_level=opt_level, track_memory=track_memory,
                                 donate=donated, threads=threads, schedules=schedules)
        executable.call_spec = call
        return executable
    if track_memory:
        raise VtmlirError("error: track_memory is available on the CPU target only")
    from .backend.cuda import compile_cuda

    executable = compile_cuda(graph, chip=chip, function=signature.name, donate=donated, schedules=schedules,
                              signature=signature)
    executable.stages = {**stages, **executable.stages}
    executable.call_spec = call
    return executable


# Dialects the graph level may hold that no backend lowers (yet), and what to tell the user.
_NOT_LOWERABLE = {
    "torch": "the module is at torch level; vtmlir.compile needs linalg-on-tensors "
             "(the default output_type of vtmlir.import_torch)",
    "torch_c": "the module is at torch level; vtmlir.compile needs linalg-on-tensors "
               "(the default output_type of vtmlir.import_torch)",
    "vt": "vt ops are lowered by vt-lower-views (compile runs it); one is left unlowered",
    "layout": "layout conversions have no lowering to kernels yet",
}


def check_lowerable(module) -> None:
    """Refuse, naming the op and its location, graph-level ops that code generation cannot lower."""
    from .errors import UnsupportedOpError, format_location
    from .ir_utils import walk_ops

    for op in walk_ops(module):
        dialect = op.name.split(".", 1)[0]
        if dialect in _NOT_LOWERABLE:
            where = format_location(op.location, "<module>")
            raise UnsupportedOpError(f"{where}: error: cannot compile '{op.name}': {_NOT_LOWERABLE[dialect]}",
                                     op_name=op.name)


def _check_written_inputs(signature, donated: tuple[int, ...]) -> None:
    """A module that writes its inputs in place (`x.add_(1)`, `copy_`, `out=`) is compiled only when
    those inputs are donated: the compiled function then writes them as PyTorch does; otherwise
    the caller's tensors would silently keep their old values."""
    from .errors import InputMutationError

    written = sorted(set(signature.written_inputs) - set(donated))
    if written:
        names = ", ".join(map(str, written))
        raise InputMutationError(
            f"error: @{signature.name} writes its input{'s' if len(written) > 1 else ''} {names} in place "
            "(an in-place op such as add_, copy_, fill_ or an out= tensor); the compiled function "
            f"returns what the module returns and leaves its inputs alone unless they are donated: "
            f"compile with donate={tuple(written)!r} to have it write them as PyTorch does",
            arguments=tuple(written))


def _donated(donate) -> tuple[int, ...]:
    """`donate` as a tuple of argument indices (an int, or an iterable of ints)."""
    from .errors import VtmlirError

    if isinstance(donate, int) and not isinstance(donate, bool):
        return (donate,)
    try:
        indices = tuple(donate)
    except TypeError:
        raise VtmlirError(f"error: donate must be an argument index or a sequence of them, got {donate!r}") from None
    if len(set(indices)) != len(indices):
        raise VtmlirError(f"error: donate={indices} names an argument twice")
    return indices


def _threads(threads) -> int:
    """`threads` as an int >= 0 (0: all cores)."""
    from .errors import VtmlirError

    if threads is None:
        return 0
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 0:
        raise VtmlirError(f"error: threads must be None or an integer >= 0, got {threads!r}")
    return threads


def _has_byte_constants(module) -> bool:
    """Whether the graph holds a matmul and a tensor constant of bytes (i8): the cheap sign of packed
    quantised weights, which `vtmlir.quantize` stores as uint8 whatever their width (subbyte-pack
    then decides for real, by evaluating each matmul's weight)."""
    from torch_mlir import ir

    from .ir_utils import walk_ops

    if not walk_ops(module, "linalg.matmul"):
        return False
    for op in walk_ops(module, "arith.constant"):
        t = op.results[0].type.maybe_downcast()
        if isinstance(t, ir.RankedTensorType) and isinstance(t.element_type, ir.IntegerType) \
                and ir.IntegerType(t.element_type).width == 8:
            return True
    return False


def _is_torch_module(obj) -> bool:
    try:
        import torch
    except ImportError:  # pragma: no cover
        return False
    return isinstance(obj, torch.nn.Module)


def _is_ir_module(obj) -> bool:
    from torch_mlir import ir

    return isinstance(obj, ir.Module)


def _fresh_context():
    from .context import make_context

    return make_context()
