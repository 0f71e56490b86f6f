"""TeMCO in vtmlir: tensor-decomposed models and the memory of their internal tensors.

Song et al., "TeMCO: Tensor Memory Compiler Optimization across Tensor Decompositions in Deep Learning
Inference", ICPP'24. Docs: docs/temco.md.

- `temco-decompose` (`decompose.decompose_convs`): Tucker-2 (HOSVD) decomposition of constant-weight
  convs into fconv (1x1) -> core -> lconv (1x1), §2.1; math in `tucker`, weight I/O in `weights`.
- `temco-analyze-peak-memory` (`memory.analyze_peak_memory`): tensor liveness and internal-tensor
  memory over the schedule, weights apart, §2.2 and Alg. 1 l. 11-16; PNG plots in `plot` (Fig. 4).
- measured peak (`measure.measure_peak_memory`): a real CPU run with the runtime's counting allocator
  (`vtmlir.backend.cpu.memory_tracking`), §4.2; `measure.kernel_allocation_timeline` predicts it.
- `temco-remat-skip` (`remat.remat_skip_connections`): skip-connection optimisation, §3.1, Algs. 1-2.
- `temco-fuse-activation` (`fuse.fuse_activations`): lconv-activation(-pooling)-fconv as one tiled
  loop, concat split, §3.2-3.3; `gpu-sequentialize-forall` (`gpu_forall`) makes such a loop one CUDA
  kernel; `memref-alloc-at-first-use` (`alloc_at_first_use`) for the measured peak.
- layer transformations run by the fusion (§3.3): `temco-push-through-concat`
  (`push_through_concat`: BatchNorm/ReLU from a concat to its parts), `temco-merge-lconvs`
  (`merge_lconvs`: Fig. 9a), `temco-gather-to-affine` (`gather_to_affine`: fusible nearest
  upsampling); `temco-fold-weight-ops` (`fold_weight_ops`: ops on weights only into constants) and
  `temco-pad-in-place` (`pad_in_place`).
"""

from .decompose import DecompositionReport, LayerDecomposition, TemcoDecompose, decompose_convs
from .analyze_peak_memory import Buffer, MemoryReport, MemoryTimeline, TemcoAnalyzePeakMemory, analyze_function, analyze_peak_memory
from ..backend.cpu.peak_memory import AllocationTimeline, kernel_allocation_timeline, measure_peak_memory
from .plot import plot_memory
from .fuse_activation import FusedGroup, FusionReport, TemcoFuseActivation, fuse_activations
from .remat_skip import RematReport, SkipConnection, TemcoRematSkip, remat_skip_connections
from .tucker import Tucker2, relative_error, tucker2_decompose, tucker2_ranks
from ..ir_constants import constant_array, make_constant

__all__ = [
    "FusedGroup",
    "FusionReport",
    "TemcoFuseActivation",
    "fuse_activations",
    "AllocationTimeline",
    "RematReport",
    "SkipConnection",
    "TemcoRematSkip",
    "kernel_allocation_timeline",
    "measure_peak_memory",
    "remat_skip_connections",
    "Buffer",
    "DecompositionReport",
    "LayerDecomposition",
    "MemoryReport",
    "MemoryTimeline",
    "TemcoAnalyzePeakMemory",
    "TemcoDecompose",
    "Tucker2",
    "analyze_function",
    "analyze_peak_memory",
    "constant_array",
    "decompose_convs",
    "make_constant",
    "plot_memory",
    "relative_error",
    "tucker2_decompose",
    "tucker2_ranks",
]
