"""The GPU side of the code-generation strategy layer (NVIDIA, sm_80 and sm_90).

The same kernel classification as the CPU (`codegen.kernels.classify`) decides what each kernel of
the kernel level is; this package gives each class a GPU schedule (docs/codegen_gpu.md):

- `contraction`: analysis of contraction bodies (the two operand sides and their prologues).
- `target`: the chips' limits and datasheet peaks (`GpuTarget`, `gpu_target`).
- `matvec`: which kernels are matrix-vector products (the `gemv` schedule).
- `schedules`: the schedules per kind and their transform IR; `attach_schedule`: classification,
  the choice per kernel (`GpuKernelPlan`) and the appended script; `fusion`: which prologue and
  epilogue kernels run in a contraction's block tiles; `launch_plans`: the plans of kernels launched
  whole -- the Tilus kernels that lowbit's `subbyte-cuda-kernels` launches for quantised
  contractions (first in the stage) and the sm_90a `wgmma` kernel (`wgmma_kernel`).
- passes (one per file, in pipeline order): `codegen-gpu-split-prologues`, `codegen-gpu-im2col-convolutions`,
  `codegen-gpu-collapse-contraction-loops`, `codegen-gpu-wgmma-contractions`, `codegen-gpu-pad-contractions`, `codegen-gpu-collapse-sums`, `codegen-gpu-split-reductions`, `codegen-gpu-attach-schedule`, `codegen-gpu-sync-epilogues`,
  `codegen-gpu-sink-workgroup-buffers`, `codegen-gpu-sink-constants`,
  `codegen-gpu-outline-kernels`, `codegen-gpu-convert-mma`, `codegen-gpu-eliminate-barriers`,
  `codegen-gpu-workgroup-globals`.
"""

from __future__ import annotations

from .target import GpuTarget, gpu_target

__all__ = ["GpuTarget", "gpu_target"]
