"""Transform-IR builders for the GPU schedules: thin wrappers over the upstream transform ops
(`transform.structured`, `transform.gpu`, `transform.nvgpu`, `transform.memref`) so a schedule reads
like the script it builds. Every op is built with its Python builder.

The GPU mapping attributes (`#gpu.block<linear_dim_0>`, `#gpu.warp<...>`, `#gpu.thread<...>`,
`#gpu.memory_space<workgroup>`) have no builder in the Python bindings; they are made from the
`MappingId` and `AddressSpace` enums the bindings export, the way the bindings' own generated
attribute builders make the GPU enum attributes.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch_mlir import ir
from torch_mlir.dialects import _gpu_transform_ops_gen as gpu_gen
from torch_mlir.dialects import _loop_transform_ops_gen as loop_gen
from torch_mlir.dialects import _memref_transform_ops_gen as memref_gen
from torch_mlir.dialects import _nvgpu_transform_ops_gen as nvgpu_gen
from torch_mlir.dialects import _structured_transform_ops_gen as structured_gen
from torch_mlir.dialects import transform
from torch_mlir.dialects._gpu_enum_gen import AddressSpace, MappingId
from torch_mlir.dialects.transform import structured
from torch_mlir.dialects.transform import memref as transform_memref
from torch_mlir.dialects.transform import vector as transform_vector

from ..kernels import KERNEL_ATTR
from ..transform_ir import any_op, kernel_id_attr

PROCESSORS = ("block", "warp", "thread")


def mapping(processor: str, linear_dims: Sequence[int]) -> ir.ArrayAttr:
    """`[#gpu.<processor><linear_dim_k>, ...]`, one entry per forall dimension."""
    if processor not in PROCESSORS:
        raise ValueError(processor)
    attrs = []
    for k in linear_dims:
        mid = MappingId(MappingId.LinearDim0 + k)
        attrs.append(ir.Attribute.parse(f"#gpu.{processor}<{mid}>"))
    return ir.ArrayAttr.get(attrs)


def workgroup_memory_space() -> ir.Attribute:
    """`#gpu.address_space<workgroup>` through the bindings' registered attribute builder."""
    return ir.AttrBuilder.get("gpu.GPU_AddressSpaceAttr")(AddressSpace.Workgroup, ir.Context.current)


def match_tagged(scope: ir.Value, op_name: str, kernel_id: int) -> ir.Value:
    """The `op_name` ops under `scope` carrying `codegen.kernel = kernel_id` (a forall or a launch
    annotated by the schedule, or the kernel's linalg op)."""
    return structured.MatchOp(any_op(), scope, ops=[op_name], op_attrs={KERNEL_ATTR: kernel_id_attr(kernel_id)}).result


def annotate(target: ir.Value, name: str, value: int) -> None:
    """Put `name = value : i64` on the payload ops of `target`."""
    param_type = transform.ParamType.get(ir.IntegerType.get_signless(64))
    param = transform.ParamConstantOp(param_type, kernel_id_attr(value)).result
    transform.AnnotateOp(target, name, param=param)


def annotate_kernel(target: ir.Value, kernel_id: int) -> None:
    """Put `codegen.kernel = kernel_id : i64` on the payload ops of `target` (foralls, launches)."""
    annotate(target, KERNEL_ATTR, kernel_id)


def tile_forall(target: ir.Value, *, tile_sizes: Sequence[int] | None = None, num_threads: Sequence[int] | None = None,
                processor: str, linear_dims: Sequence[int]) -> tuple[ir.Value, ir.Value]:
    """Tile into an `scf.forall` mapped to blocks, warps or threads; returns (tiled op, forall)."""
    kwargs = {"mapping": mapping(processor, linear_dims)}
    if num_threads is not None:
        kwargs["num_threads"] = list(num_threads)
    else:
        kwargs["tile_sizes"] = list(tile_sizes)
    op = structured.TileUsingForallOp(target, **kwargs)
    return op.tiled_op, op.forall_op


def parent_function(target: ir.Value) -> ir.Value:
    """The `func.func` holding the payload ops of `target`."""
    return transform.GetParentOp(any_op(), target, op_name="func.func").result


def fuse_sibling(first: ir.Value, second: ir.Value) -> ir.Value:
    """One `scf.forall` running the body of the `first` forall, then the body of the `second`, at the
    `second`'s place (`transform.loop.fuse_sibling`: same bounds, steps and mapping)."""
    return loop_gen.LoopFuseSiblingOp(any_op(), first, second).result


def unroll(loop: ir.Value, factor: int) -> None:
    casted = transform.CastOp(transform.OperationType.get("scf.for"), loop).result
    loop_gen.LoopUnrollOp(casted, factor)


def interchange(target: ir.Value, permutation: Sequence[int]) -> ir.Value:
    return structured_gen.InterchangeOp(any_op(), target, iterator_interchange=list(permutation)).result


def promote_to_workgroup(target: ir.Value, operands: Sequence[int]) -> ir.Value:
    """Copy the operands' tiles into shared memory (`memref.alloc` in workgroup memory at the function
    entry, `memref.copy` between barriers; moved into the kernel by `codegen-gpu-sink-workgroup-buffers`)."""
    # `#gpu.memory_space<workgroup>`: the promotion's device mapping (no builder in the bindings).
    space = ir.Attribute.parse(f"#gpu.memory_space<{AddressSpace.Workgroup}>")
    return structured_gen.PromoteOp(any_op(), target, operands_to_promote=list(operands),
                                    mapping=ir.ArrayAttr.get([space])).result


def split(handle: ir.Value, count: int) -> list[ir.Value]:
    if count == 1:
        return [handle]
    return list(transform.SplitHandleOp([any_op()] * count, handle).results)


def map_to_launch(forall: ir.Value, block_threads: int, kernel_id: int, sync: bool = True) -> ir.Value:
    """The block forall becomes a `gpu.launch` (grid from its trip counts), nested thread/warp
    foralls the threads of a `block_threads`-thread block; the launch is annotated with the kernel id.
    `sync`: a barrier after each distributed forall (needed where threads share memory)."""
    launch = gpu_gen.MapForallToBlocks(any_op(), forall, generate_gpu_launch=True).result
    launch = gpu_gen.MapNestedForallToThreads(any_op(), launch, block_dims=[block_threads, 1, 1],
                                              warp_size=32, sync_after_distribute=sync).result
    annotate_kernel(launch, kernel_id)
    return launch


def apply_patterns(scope: ir.Value, *builders) -> None:
    """`transform.apply_patterns to %scope { ... }` with the given pattern-op builders (callables)."""
    patterns = transform.ApplyPatternsOp(scope)
    with ir.InsertionPoint(patterns.patterns):
        for build in builders:
            build()


def canonicalization() -> None:
    transform.ApplyCanonicalizationPatternsOp()


def fold_memref_aliases() -> None:
    transform_memref.ApplyFoldMemrefAliasOpsPatternsOp()


def contraction_patterns() -> None:
    """Vectorised broadcast+multiply+reduce → `vector.contract` of the 2-d operand tiles: broadcasts
    out of the transfers, casts moved before them, then folded into the contraction's maps."""
    transform_vector.ApplyTransferPermutationPatternsOp()
    transform_vector.ApplySinkVectorPatternsOp()
    transform_vector.ApplyVectorReductionToContractPatternsOp()


def fold_extensions() -> None:
    """Widening casts of the operands folded into `vector.contract` (the f16 x f16 → f32 contraction
    that `mma.sync` computes)."""
    transform_vector.ApplyFoldArithExtensionPatternsOp()


def drop_unit_dims() -> None:
    transform_vector.ApplyCastAwayVectorLeadingOneDimPatternsOp()
    transform_vector.ApplyDropUnitDimWithShapeCastPatternsOp()


def unroll_to_mma(m: int = 16, n: int = 8, k: int = 16) -> None:
    gpu_gen.ApplyUnrollVectorsSubgroupMmaOp(m, n, k)


def lower_contractions_to_fma() -> None:
    """`vector.contract` → outer products → `vector.fma` (one FMA per multiply-add)."""
    transform_vector.ApplyLowerContractionPatternsOp(
        lowering_strategy=transform_vector.VectorContractLowering.OuterProduct)
    transform_vector.ApplyTransferPermutationPatternsOp()


def lower_outer_products() -> None:
    transform_vector.ApplyLowerOuterProductPatternsOp()
    transform_vector.ApplyLowerTransposePatternsOp()


def transfers_to_1d() -> None:
    """N-d transfers → unrolled 1-d ones (what `create_async_groups` turns into `cp.async`)."""
    transform_vector.ApplyTransferToScfPatternsOp(max_transfer_rank=1, full_unroll=True)


def vectorize(target: ir.Value) -> None:
    structured_gen.VectorizeOp(target, [], static_vector_sizes=[], scalable_sizes=[], create_named_contraction=True)


def convert_to_loops(target: ir.Value) -> None:
    """The structured op becomes `scf.for` loops of scalar loads and stores (its tile's extents)."""
    structured_gen.ConvertToLoopsOp(any_op(), target)


def async_copies(scope: ir.Value) -> ir.Value:
    """Global→shared vector copies → `cp.async` (bypassing L1 for 16-byte copies) in groups."""
    return nvgpu_gen.CreateAsyncGroupsOp(any_op(), scope, bypass_l1=True).result


def multibuffer(allocs: ir.Value, factor: int) -> ir.Value:
    casted = transform.CastOp(transform.OperationType.get("memref.alloc"), allocs).result
    return memref_gen.MemRefMultiBufferOp(any_op(), casted, factor, skip_analysis=True).result


def pipeline_copies(loop: ir.Value, depth: int) -> ir.Value:
    """Software-pipeline the shared-memory copies of `loop` `depth` deep (cp.async prefetch of the
    next tiles while the current one is multiplied); the tail iterations' copies are predicated."""
    casted = transform.CastOp(transform.OperationType.get("scf.for"), loop).result
    return nvgpu_gen.PipelineSharedMemoryCopiesOp(any_op(), casted, depth, peel_epilogue=False).result


def hoist_vector_transfers(func_handle: ir.Value) -> ir.Value:
    return structured.HoistRedundantVectorTransfersOp(any_op(), func_handle).result
