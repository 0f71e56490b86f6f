"""The DVM virtual machine as one PTX kernel (Fang et al., DVM, §4.3 and Alg. 2: the VM is compiled
once; a program is data).

The MLIR of `native_mlir.build_vm_module(gpu=True)` -- the same interpreter as the native CPU VM --
goes through vtmlir's CUDA path: the stages of `backend.cuda.lower` from ``map-to-gpu`` on (the
``scf.parallel`` over tiles becomes the grid: one thread block per tile, Alg. 2's cores are the
thread blocks), `backend.cuda.ptx` translates the outlined kernel to PTX with llvmlite and
`backend.cuda.ptxas.assemble` checks it. The kernel takes the bytecode, a local-memory buffer of
``tile_count * local_bytes`` bytes in global memory (one slice per block), the argument buffers,
the tile count and ``local_bytes``.

The two linalg-specific stages (``parallel-loops``, ``wrap-serial-code``) are left out: the VM has
no linalg ops, and wrapping its serial helper functions into one-thread kernels would be wrong.
Launching it on a device (cuda-python) is not done here.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from torch_mlir import ir

from ..backend.cuda.lower import DEFAULT_STAGES, lower_to_nvvm
from ..backend.cuda.ptx import check_chip, kernel_sources, translate_kernels
from ..backend.cuda.ptxas import assemble
from ..errors import VtmlirError
from .native_mlir import build_vm_module

#: CUDA lowering stages the VM goes through (see the module docstring)
SKIPPED_STAGES = ("parallel-loops", "wrap-serial-code")


@dataclass(frozen=True)
class VmPtx:
    """The VM's kernel for one chip: entry name, PTX text and the IR of every lowering stage."""

    chip: str
    kernel: str
    ptx: str
    stages: dict

    def assemble(self, arch: str | None = None) -> bytes:
        """ptxas (from nvidia-cuda-nvcc) for `arch` (default: the chip it was generated for)."""
        return assemble(self.ptx, arch or self.chip, self.kernel)


@functools.lru_cache(maxsize=None)
def vm_ptx(chip: str = "sm_80") -> VmPtx:
    """The VM lowered through the CUDA path to PTX for `chip` (cached per chip)."""
    check_chip(chip)
    stages = tuple(s for s in DEFAULT_STAGES if s.name not in SKIPPED_STAGES)
    with ir.Context(), ir.Location.unknown():
        module = build_vm_module(gpu=True)
        lowering = lower_to_nvvm(module, chip=chip, stages=stages)
        sources = kernel_sources(module)
    if len(sources) != 1:
        raise VtmlirError(f"error: the DVM VM lowered to {len(sources)} kernels, expected 1")
    src = sources[0]
    out = translate_kernels([(src.module_name, src.mlir)], chip=chip)[src.module_name]
    return VmPtx(chip, src.function_name, out["ptx"], dict(lowering.stages))
