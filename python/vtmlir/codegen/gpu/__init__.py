"""The GPU side of the code-generation strategy layer (NVIDIA, sm_80 and sm_90).

The same kernel classification as the CPU (`codegen.kernels.classify`) decides what each kernel of
the kernel level is; this package gives each class a GPU schedule (docs/codegen_gpu.md):

- `contraction`: analysis of contraction bodies (the two operand sides and their prologues).
- `target`: the chips' limits and datasheet peaks (`GpuTarget`, `gpu_target`).
- passes (one per file): `codegen-gpu-split-prologues` (`split_prologues`).
"""

from __future__ import annotations

from .target import GpuTarget, gpu_target

__all__ = ["GpuTarget", "gpu_target"]
