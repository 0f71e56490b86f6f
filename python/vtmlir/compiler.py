"""`vtmlir.compile`: any supported input → a runnable, inspectable compiled object.

Stages (recorded as IR text in `.stages`): "graph" (linalg-on-tensors as imported or parsed), one
stage per step of the default pipeline that ran ("vtc", "layouts", "temco", "lowbit"; `optimize.py`)
or "optimized" (after the user's `pipeline`), then the backend's own stages.
"""

from __future__ import annotations

import contextlib
import sys

from rich.console import Console
from torch_mlir import ir

from .backend.cpu import compile_cpu
from .backend.cpu.executable import print_ir
from .backend.cuda import compile_cuda
from .backend.lowerable import check_lowerable
from .context import make_context
from .dynamic import dynamic_executable, has_dynamic_dims
from .errors import InputMutationError, VtmlirError, format_location
from .frontend import as_module
from .frontend.limits import check_module
from .frontend.torch_import import export_torch, import_exported
from .ir_utils import symbol_name
from .optimize import LOWBIT_PIPELINES, TARGETS, check_opt_level, optimize
from .passes import parse_pipeline, run_pipeline
from .passes.registry import PassFailure
from .signature import box_scalars, find_entry, signature_of


def compile(  # noqa: A001 - mirrors torch.compile
    module,
    *example_args,
    kwargs: dict | None = None,
    target: str = "cpu",
    pipeline: str | None = None,
    entry: str | None = None,
    dynamic_shapes=None,
    opt_level: int = 2,
    memory_budget: int | None = None,
    report: bool = False,
    llvm_opt_level: int = 2,
    chip: str = "sm_80",
    track_memory: bool = False,
    lowbit: str | None = "vector",
    donate=(),
    threads: int | None = None,
    schedules=None,
    prebuild: bool | None = None,
    allow_tf32: bool = False,
    profile: bool = False,
    cuda_graph: bool = True,
    workspace: bool = True,
):
    """Compile `module` for `target`.

    - `module`: an `nn.Module` (then `example_args` and the keyword inputs `kwargs` are its example
      inputs), an `ir.Module`, `.mlir` text, or a path to a `.mlir` file (all at linalg-on-tensors
      level). Compiled from an `nn.Module`, the result is called like the module (`compiled(*args,
      **kwargs)`, the same structure as the example: tensors, lists, dicts, a transformers
      `DynamicCache`) and returns what the module returns (a tensor, a tuple, a dict, a transformers
      `ModelOutput`; `frontend/torch_calls.py`). Non-tensor inputs (`use_cache=True`, `None`) are
      fixed at their example values. Otherwise it takes and returns flat tensors.
    - `opt_level`: which of vtmlir's graph-level systems run (docs/pipeline.md, `vtmlir.optimize`):
      0 none; 1 the bitwise-identical ones never measured slower (VTC data-movement elimination,
      Tilus low-bit lowering); 2 (default) also VTensor layout selection on convolution networks
      and TeMCO rematerialisation + fusion where lconv groups exist or `memory_budget` is given.
      Each pass's cost model decides where it rewrites; `compiled.report()` says what each did.
    - `memory_budget` (bytes): run TeMCO's rematerialisation and fusion whatever the graph (at
      opt level >= 1) and report the internal peak before/after against the budget.
    - `report`: also evaluate the internal peak the backend allocates before and after the
      default pipeline (two extra bufferizations) for `compiled.report()`.
    - `pipeline`: a textual pass pipeline run at graph level before code generation *instead of*
      the opt-level pipeline; vtmlir passes and upstream MLIR passes mix freely (e.g. "vt-stats,
      canonicalize", or "vtmlir-default{opt-level=1}, cse").
    - `entry`: the function to compile (default `@main`, else the only public function).
    - `llvm_opt_level`: LLVM optimisation level of the CPU JIT; `chip`: the sm_XX the PTX targets.
    - `track_memory` (CPU): count the bytes each call allocates; `compiled.memory_stats()` reports
      the last call's peak (see `vtmlir.backend.cpu.memory_tracking`).
    - `lowbit` (CPU, opt level >= 1): how weights quantised with `vtmlir.quantize` are lowered when
      the graph holds any: "vector" (default; `subbyte-pack, subbyte-lower{cpu-vectorize=1}`),
      "portable" (`subbyte-pack, subbyte-lower`), or None (no low-bit passes: the weights are
      dequantised in full, then multiplied). Recorded as stage "lowbit".
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
    - `dynamic_shapes` (an `nn.Module`, torch.export's `Dim` spelling, e.g. `{"x": {0: Dim("batch",
      min=1, max=64)}}`): where a dim stays dynamic, the result is one `dynamic.DynamicExecutable`
      that runs every shape in the declared ranges through DVM's native VM on the CPU without
      recompiling (docs/dvm.md) -- with target="cuda" a `dynamic.CudaDynamicExecutable`, DVM's PTX
      VM for `chip` launched on GPU 0 (compiled without a GPU); `prebuild` (default: when the ranges span at most
      `dynamic.PREBUILD_POINTS` shapes) builds every shape's templates at compile time. Static
      shapes take the path above.
    - `threads` (CPU): threads the kernels run on: None or 0 (all cores, OpenMP), 1 (single-threaded
      code, no OpenMP), or N. Results are identical for any count (parallel tiles split only parallel
      dimensions). `schedules` (CPU): overrides of the code generation schedule per kernel kind, e.g.
      `{"contraction": {"register_m": 4}, "row-reduction": None}` (None: keep scalar loops); see
      `vtmlir.codegen.DEFAULT_SCHEDULES`. `compiled.report()` names each kernel's schedule and the
      kernels left as loops.
    - `allow_tf32` (CUDA): f32 contractions (matmul, Linear, batch matmul, attention's products) on
      TF32 tensor cores (`mma.sync...tf32`: operands rounded to a 10-bit mantissa, f32 accumulation),
      as `torch.backends.cuda.matmul.allow_tf32 = True` does for cuBLAS; default False, like torch:
      exact f32 SIMT kernels. The same as `schedules={"contraction": {"allow_tf32": True}}` (an
      explicit `schedules=` setting of it wins). With target="cpu" it is an error: the CPU has no
      TF32, and a CPU run would silently give exact f32 numbers where TF32 ones were asked for.
    - `cuda_graph` (CUDA, static shapes): a call replays the executable's kernel launches as one CUDA
      graph (`cuGraphLaunch`; built on the first call, the buffers being fixed) instead of one
      `cuLaunchKernel` per kernel from Python -- the same kernels in the same order on the same
      stream, so the same results; where the driver cannot make the graph the executable launches
      per kernel and `compiled.report()` says why. False: per-kernel launches. With target="cpu",
      False is an error (no launches to change); DVM's dynamic-shape runtime never uses a graph.
    - `profile` (CPU): a profiling build; `compiled.profile(*args, repeat=N)` then gives each kernel's
      time (`backend.cpu.profile.CpuProfile`, docs/codegen.md "Profiling"). The same values, bitwise;
      the marks cost ~50 ns per kernel call. CUDA executables time their kernels without it.
    - `workspace` (CPU, static shapes): the intermediate buffers of the function's body live at static
      offsets of one workspace (`codegen-plan-workspace`) that each calling thread gets at its first
      call and keeps (`compiled.workspace_bytes` bytes), so no call mallocs them or faults their pages
      in again. False: each is malloc'd and freed per call (as with `track_memory`, whose counting
      allocator sees every buffer). The same results either way, bitwise.
    """
    if target not in TARGETS:
        raise VtmlirError(f"error: unknown target '{target}'; expected one of: {', '.join(TARGETS)}")
    donated = _donated(donate)
    threads = _threads(threads)
    check_opt_level(opt_level)
    if lowbit is not None and lowbit not in LOWBIT_PIPELINES:
        raise VtmlirError(f"error: unknown lowbit '{lowbit}'; expected one of: "
                          f"{', '.join(LOWBIT_PIPELINES)}, or None")
    if not isinstance(allow_tf32, bool):
        raise VtmlirError(f"error: allow_tf32 must be True or False, got {allow_tf32!r}")
    if allow_tf32 and target != "cuda":
        raise VtmlirError(f"error: allow_tf32=True applies to target='cuda' only (TF32 tensor cores); "
                          f"target='{target}' computes f32 contractions exactly")
    if not isinstance(cuda_graph, bool):
        raise VtmlirError(f"error: cuda_graph must be True or False, got {cuda_graph!r}")
    if not cuda_graph and target != "cuda":
        raise VtmlirError(f"error: cuda_graph=False applies to target='cuda' only (how the CUDA runtime "
                          f"launches its kernels); target='{target}' has no kernel launches to change")
    if not isinstance(profile, bool):
        raise VtmlirError(f"error: profile must be True or False, got {profile!r}")
    if not isinstance(workspace, bool):
        raise VtmlirError(f"error: workspace must be True or False, got {workspace!r}")
    if not workspace and target != "cpu":
        raise VtmlirError(f"error: workspace=False applies to target='cpu' only (where the CPU function keeps "
                          f"its intermediate buffers); target='{target}' has no CPU workspace")
    if profile and target != "cpu":
        raise VtmlirError("error: profile=True applies to target='cpu'; a CUDA executable's kernels are timed "
                          "with CUDA events without a profiling build (its `profile(inputs)`)")
    if memory_budget is not None and (isinstance(memory_budget, bool) or not isinstance(memory_budget, int)
                                      or memory_budget <= 0):
        raise VtmlirError(f"error: memory_budget must be a positive number of bytes, got {memory_budget!r}")
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
    if dynamic_shapes is not None:
        if has_dynamic_dims(graph, entry):
            if profile:
                raise VtmlirError("error: profile=True needs static shapes; DVM's dynamic-shape runtime "
                                  "has no profiling build")
            if allow_tf32:
                raise VtmlirError("error: allow_tf32=True needs static shapes; DVM's PTX VM computes f32 "
                                  "contractions exactly")

            name = symbol_name(find_entry(graph, entry))
            example = call.flatten(example_args, kwargs or {}) if call is not None else None
            executable = dynamic_executable(graph, name, target, chip=chip, prebuild=prebuild, example=example,
                                            threads=threads)
            executable.stages = stages
            executable.call_spec = call
            return executable
    optimization = _optimize_graph(graph, stages, pipeline, target=target, opt_level=opt_level,
                                   memory_budget=memory_budget, lowbit=lowbit, report=report)
    from .vtc.lower_views import lower_views  # vt.view / vt.store_into -> kernels (vt-lower-views)

    if any(_pass_failure_as_error(lower_views, graph)):
        stages["vt-lowered"] = print_ir(graph)
    check_lowerable(graph)
    entry_func = find_entry(graph, entry)
    check_module(graph, entry_func)
    signature = signature_of(entry_func)
    _check_written_inputs(signature, donated)
    box_scalars(entry_func)  # scalars cross the boundary as 0-d tensors (signature.py)

    if target == "cpu":
        executable = compile_cpu(graph, signature, stages, opt_level=llvm_opt_level, track_memory=track_memory,
                                 donate=donated, threads=threads, schedules=schedules, profile=profile,
                                 workspace=workspace)
        executable.call_spec = call
        executable.optimization = optimization
        return executable
    if track_memory:
        raise VtmlirError("error: track_memory is available on the CPU target only")

    executable = compile_cuda(graph, chip=chip, function=signature.name, donate=donated, schedules=schedules,
                              signature=signature, allow_tf32=allow_tf32, cuda_graph=cuda_graph)
    executable.stages = {**stages, **executable.stages}
    executable.call_spec = call
    executable.optimization = optimization
    return executable


def _optimize_graph(graph, stages: dict, pipeline: str | None, *, target, opt_level, memory_budget, lowbit,
                    report):
    """Run the opt-level pipeline (`optimize.py`), or the user's `pipeline` in place of its graph
    steps (the Tilus lowering still runs unless `pipeline` names a subbyte pass), with a progress
    display on a terminal; record each step's IR as a stage. Returns the `OptimizationReport`."""
    only = None
    if pipeline:
        parsed = parse_pipeline(pipeline)
        run_pipeline(graph, parsed)
        stages["optimized"] = print_ir(graph)
        names = {p.name for p in parsed.vtmlir_passes}
        only = () if any(n.startswith("subbyte-") for n in names) else ("lowbit",)

    def record(done):
        stages[done.step.system] = print_ir(graph)

    with _progress() as on_step:
        return optimize(graph, target=target, opt_level=opt_level, memory_budget=memory_budget, lowbit=lowbit,
                        measure_peak=report, on_step=on_step, after_step=record, only=only)


@contextlib.contextmanager
def _progress():
    """A rich status line naming the running step, on a terminal only (else: nothing)."""
    if not sys.stderr.isatty():
        yield None
        return

    console = Console(stderr=True)
    with console.status("optimising") as status:
        yield lambda step: status.update(f"optimising: {step.system} ({step.pipeline})")


def _pass_failure_as_error(function, module):
    """Run a pass's entry point outside a pass manager: its `PassFailure` becomes the error the pass
    would have reported (`file:line:col: error: ...`)."""
    try:
        return function(module)
    except PassFailure as failure:
        where = failure.location if failure.location is not None else module.operation.location
        where = getattr(where, "location", where)
        raise VtmlirError(f"{format_location(where, '<module>')}: error: {failure}") from None


def _check_written_inputs(signature, donated: tuple[int, ...]) -> None:
    """A module that writes its inputs in place (`x.add_(1)`, `copy_`, `out=`) is compiled only when
    those inputs are donated: the compiled function then writes them as PyTorch does; otherwise
    the caller's tensors would silently keep their old values."""
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
    if threads is None:
        return 0
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 0:
        raise VtmlirError(f"error: threads must be None or an integer >= 0, got {threads!r}")
    return threads


def _is_torch_module(obj) -> bool:
    # An nn.Module exists only once torch is imported: text, files and ir.Modules never load torch
    # (heavy, 2-3 s) or need it to be installed.
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.nn.Module)


def _is_ir_module(obj) -> bool:
    return isinstance(obj, ir.Module)


def _fresh_context():
    return make_context()
