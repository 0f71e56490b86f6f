"""`vtmlir.compile(..., dynamic_shapes=...)`: one callable for every shape in the declared ranges.

The graph imported with torch.export `Dim`s keeps `?` dims and the symbol table of their ranges
(docs/dvm.md, "Dynamic import"); `DynamicExecutable` runs it through DVM (`dvm.runner.DvmFunction`,
the native VM compiled once through MLIR): a new shape costs the per-structure template fill, never a
recompile; from a shape's second call on, its kernels run as one native call on the tensors' own
memory (`dvm.replay`). Where the ranges span at most `PREBUILD_POINTS` shapes, every template is built ahead of
time (`DvmFunction.prebuild`). The static path (`CpuExecutable`) is taken where no dim is dynamic.
"""

from __future__ import annotations

import math
import os
import threading
import time

import numpy as np
from torch_mlir import ir

from .backend.report import CompileReport
from .dvm.runner import DvmFunction
from .dvm.tiling import Target
from .errors import VtmlirError
from .frontend.torch_calls import call_compiled
from .signature import find_entry

# Shape spaces up to this many points are prebuilt at compile time (DVM's `prebuild`).
PREBUILD_POINTS = 64


class DynamicExecutable:
    """A function compiled for dynamic shapes, run by DVM's native VM on the CPU."""

    target = "cpu"

    def __init__(self, graph, entry: str, prebuild: bool | None = None, example=None, threads: int = 0):
        start = time.perf_counter()
        self.graph = graph  # the function's values live in its context
        # `threads` (0: every core) are Alg. 2's cores: the tiling's cost model and the VM's workers
        target = Target(cores=threads or max(1, os.cpu_count() or 1))
        self.function = DvmFunction(graph, entry, native=True, target=target)
        self.call_spec = None
        self.optimization = None
        self.stages: dict[str, str] = {}
        self.prebuilt = None
        self._replayed: dict = {}  # argument shapes -> _TensorReplay, once `function.replays` has one
        ranges = self.function.symbols.symbols
        points = math.prod(hi - lo + 1 for lo, hi, _ in ranges.values()) if ranges else 0
        if prebuild or (prebuild is None and 0 < points <= PREBUILD_POINTS):
            self.prebuilt = self.function.prebuild(limit=max(points, 1))
        if example is not None:
            self.run(*example)  # the first call JIT-compiles the native VM: at compile time, not the user's
        self.compile_seconds = time.perf_counter() - start

    @property
    def symbols(self) -> dict:
        """Shape symbol -> (min, max, the user's Dim name)."""
        return dict(self.function.symbols.symbols)

    def __call__(self, *args, **kwargs):
        return call_compiled(self, args, kwargs)

    def run(self, *args) -> tuple:
        key = tuple([getattr(a, "shape", None) for a in args])
        call = self._replayed.get(key)
        if call is None:
            replay = self.function.replays.get(key)
            if replay:  # recorded (a shape's second call): from now on run without conversions
                call = self._replayed[key] = _TensorReplay(replay)
        if call is not None:
            results = call(args)
            if results is not None:
                return results
        import torch  # deferred: torch is heavy; loaded on first use

        arrays = [a.detach().cpu().numpy() if isinstance(a, torch.Tensor) else np.asarray(a) for a in args]
        arrays = [np.ascontiguousarray(a) for a in arrays]
        return tuple(torch.from_numpy(np.ascontiguousarray(r)) for r in self.function(*arrays))

    def report(self):
        """`backend.report.CompileReport` with DVM's part: symbols, kernels, templates, compile times."""
        f = self.function
        lines = [f"dvm (dynamic shapes): {len(f.kernels)} kernel(s); symbols "
                 + ", ".join(f"{name}{'=' + n if n else ''} in [{lo}, {hi}]" for name, (lo, hi, n) in self.symbols.items()),
                 f"  templates {f.template_count()}, per-shape compile {f.compile_seconds * 1e3:.2f} ms so far, "
                 f"setup {self.compile_seconds:.2f} s"]
        if self.prebuilt is not None:
            p = self.prebuilt
            lines.append(f"  prebuilt: {p['points']} shape(s), {p['templates']} template(s) in {p['seconds']:.2f} s")
        return CompileReport(self.optimization, extra="\n".join(lines))


class _TensorReplay:
    """A recorded shape (`dvm.replay.ShapeReplay`) run on torch tensors without converting them:
    CPU, contiguous, of the recorded dtypes, not negated or conjugated views (`CpuExecutable`'s
    fast call takes the same), on the recording thread; the results are fresh tensors (a large
    one's memory recycled once the caller has dropped it, `ShapeReplay.buffers`). Calling it
    returns None for anything else. Everything a call does not need to look up again is read once
    here: the steady state of a dynamic compile is this call and one native one."""

    __slots__ = ("run", "owner", "inputs", "arrays", "returned", "tensor", "wrap")

    def __init__(self, replay):
        import torch  # deferred: torch is heavy; made at a replayed call, when it is loaded

        self.run, self.owner = replay.run, replay.owner
        self.inputs = [torch.from_numpy(np.empty(0, d)).dtype for d in replay.dtypes]
        self.arrays = replay.buffers.arrays
        self.returned = replay.returned
        self.tensor, self.wrap = torch.Tensor, torch.from_numpy

    def __call__(self, args):
        if threading.get_ident() != self.owner:
            return None
        pointers = []
        tensor = self.tensor
        for a, dt in zip(args, self.inputs):
            if type(a) is not tensor or a.dtype is not dt or not a.is_cpu or not a.is_contiguous() or a.is_neg() \
                    or a.is_conj():
                return None
            pointers.append(a.data_ptr())
        wrap, outs = self.wrap, []
        for a in self.arrays():
            t = wrap(a)
            pointers.append(t.data_ptr())
            outs.append(t)
        self.run(pointers)
        return tuple([outs[r] for r in self.returned])


def has_dynamic_dims(graph, entry: str | None) -> bool:
    """Whether the entry function takes or returns a tensor with a `?` dim."""
    func = find_entry(graph, entry)
    ftype = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
    for t in [*ftype.inputs, *ftype.results]:
        t = t.maybe_downcast() if hasattr(t, "maybe_downcast") else t
        if isinstance(t, ir.RankedTensorType) and any(ir.ShapedType.is_dynamic_size(d) for d in t.shape):
            return True
    return False


def check_target(target: str) -> None:
    if target != "cpu":
        raise VtmlirError(f"error: dynamic shapes through vtmlir.compile run on the CPU (DVM's native VM); "
                          f"got target '{target}' (DVM's PTX VM is reached through vtmlir.dvm)")
