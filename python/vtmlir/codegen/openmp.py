"""The OpenMP runtime the JIT-compiled code calls when it runs on several threads.

`convert-scf-to-openmp` + `convert-openmp-to-llvm` emit calls to LLVM's OpenMP runtime ABI
(`__kmpc_fork_call`, `__kmpc_for_static_init_8u`, ...). torch's libgomp does not define them, so
LLVM's libomp comes from the pinned `cmeel-libomp` wheel and is handed to MLIR's ExecutionEngine
(`shared_libs`) for modules that need it.

libomp keeps its worker threads spinning for `KMP_BLOCKTIME` after a parallel region (200 ms by
default) before they sleep. Inside one call the kernels follow each other within microseconds, so
the team stays awake across them with any blocktime of a millisecond or more; between calls a
200 ms spin takes the cores from everything else in the process — torch's own OpenMP threads
first, which then wait at their barriers for a descheduled thread. And by default a spinning
libomp thread calls `sched_yield` on every round of its wait loop (`KMP_USE_YIELD=1`): measured on
this 2-core VM, a team woken after an idle pause then ran a 64x1024 LayerNorm in 300 us instead of
20 us, call after call for tens of milliseconds, in a third of the bursts (never with
`KMP_USE_YIELD=2`, which yields only when the machine is oversubscribed). So unless the user set
them, vtmlir sets `KMP_BLOCKTIME` and `KMP_USE_YIELD` (`RUNTIME_DEFAULTS`) before the runtime
starts (it reads them once, at its first parallel region).
"""

from __future__ import annotations

import os
from functools import lru_cache
from importlib import metadata

from torch_mlir import ir

from ..errors import VtmlirError

OPENMP_WHEEL = "cmeel-libomp"
RUNTIME_DEFAULTS = {"KMP_BLOCKTIME": "1", "KMP_USE_YIELD": "2"}


@lru_cache(maxsize=1)
def openmp_library() -> str:
    """Path of libomp.so from the `cmeel-libomp` wheel (and `RUNTIME_DEFAULTS` set where the user did not)."""
    for name, value in RUNTIME_DEFAULTS.items():
        os.environ.setdefault(name, value)
    try:
        dist = metadata.distribution(OPENMP_WHEEL)
    except metadata.PackageNotFoundError:
        raise VtmlirError(f"error: multi-threaded CPU code needs LLVM's OpenMP runtime: pip install {OPENMP_WHEEL} "
                          "(or compile with threads=1)") from None
    for f in dist.files or ():
        if f.name == "libomp.so":
            return str(dist.locate_file(f))
    raise VtmlirError(f"error: the {OPENMP_WHEEL} wheel holds no libomp.so")


def calls_openmp(module) -> bool:
    """Whether the LLVM-dialect `module` holds OpenMP ops (`omp.parallel`, ...): their translation to
    LLVM IR calls the runtime, so the JIT must load it."""
    found = False

    def visit(op):
        nonlocal found
        if op.name.startswith("omp."):
            found = True
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found
