// RUN: vt-opt %s --codegen-gpu-attach-schedule | filecheck %s
// RUN: vt-opt %s '--codegen-gpu-attach-schedule=schedules=contraction.fuse:false' | filecheck %s --check-prefix=UNFUSED
// RUN: vt-opt %s '--codegen-gpu-attach-schedule=schedules=contraction.tensor_cores:false' | filecheck %s --check-prefix=SIMT

// RUN: vt-opt %s --codegen-gpu-attach-schedule --mlir-print-debuginfo | filecheck %s --check-prefix=LOC

// Every kernel is tagged with its id and gets its transform ops in the entry point of each phase of
// the CUDA lowering (no named sequence per kernel, no transform.include: a symbol lookup each):
// the f16 contraction the tensor-core schedule (block tiles, shared-memory promotion, warps,
// cp.async groups, multi-buffering and pipelining). The elementwise kernel reading its result is
// its epilogue (codegen/gpu/fusion.py): no schedule of its own (the only scheduled kernel's handle
// is not split), tiled with the contraction's block tiles in the contraction's ops, the two foralls
// fused, its tile spread over the threads (a row at a time), the launch marked for
// codegen-gpu-sync-epilogues.
// CHECK:       linalg.generic {{.*}} attrs = {codegen.kernel = 0 : i64, codegen.scheduled}
// CHECK:       linalg.generic {{.*}} attrs = {codegen.kernel = 1 : i64}
// CHECK-NOT:   transform.named_sequence @kernel_
// CHECK:       transform.named_sequence @__gpu_tile(%[[ROOT:.*]]: !transform.any_op {transform.readonly})
// CHECK:         %[[K:.*]] = transform.structured.match attributes {codegen.scheduled} in %[[ROOT]]
// CHECK-NOT:     transform.split_handle
// CHECK:         transform.structured.tile_using_forall %[[K]] tile_sizes [32, 32, 0](mapping = [#gpu.block<linear_dim_1>, #gpu.block<linear_dim_0>])
// CHECK:         transform.structured.match ops{["linalg.generic"]} attributes {codegen.kernel = 1 : i64}
// CHECK:         transform.structured.tile_using_forall %{{.*}} tile_sizes [32, 32](mapping = [#gpu.block<linear_dim_1>, #gpu.block<linear_dim_0>])
// CHECK:         transform.loop.fuse_sibling
// CHECK:       transform.named_sequence @__gpu_promote
// CHECK:         transform.structured.match ops{["linalg.generic"]} attributes {codegen.kernel = 0 : i64}
// CHECK:         transform.structured.promote %{{.*}} {mapping = [#gpu.memory_space<workgroup>], operands_to_promote = [0, 1]}
// CHECK:       transform.named_sequence @__gpu_map
// CHECK:         transform.structured.match ops{["scf.forall"]} attributes {codegen.kernel = 0 : i64}
// CHECK:         mapping = [#gpu.warp<linear_dim_1>, #gpu.warp<linear_dim_0>]
// CHECK:         transform.structured.tile_using_forall %{{.*}} num_threads [16, 8](mapping = [#gpu.thread<linear_dim_1>, #gpu.thread<linear_dim_0>])
// CHECK:         transform.loop.unroll %{{.*}} {factor = 2 : i64}
// CHECK:         transform.gpu.map_nested_forall_to_threads %{{.*}} block_dims = [128, 1, 1]
// CHECK:         transform.annotate %{{.*}} "codegen.epilogue"
// CHECK:         transform.structured.hoist_redundant_vector_transfers
// CHECK:       transform.named_sequence @__gpu_pipeline
// CHECK:         transform.structured.match ops{["gpu.func"]} attributes {codegen.kernel = 0 : i64}
// CHECK:         transform.nvgpu.create_async_groups
// CHECK:         transform.memref.multibuffer
// CHECK:         transform.nvgpu.pipeline_shared_memory_copies
// CHECK-NOT:   transform.named_sequence @kernel_
// CHECK-NOT:   transform.include

// Without fusion the elementwise kernel gets the vector schedule (threads without a barrier: they
// share no memory).
// UNFUSED:     linalg.generic {{.*}} attrs = {codegen.kernel = 1 : i64, codegen.scheduled}
// UNFUSED:     transform.named_sequence @__gpu_tile
// UNFUSED:       %[[K:.*]]:2 = transform.split_handle
// UNFUSED:       transform.structured.tile_using_forall %[[K]]#0 tile_sizes [32, 32, 0]
// UNFUSED-NOT:   transform.loop.fuse_sibling
// UNFUSED:       transform.structured.tile_using_forall %[[K]]#1 tile_sizes [16, 64]
// UNFUSED:     transform.named_sequence @__gpu_map
// UNFUSED:       transform.structured.match ops{["scf.forall"]} attributes {codegen.kernel = 1 : i64}
// UNFUSED:       transform.gpu.map_nested_forall_to_threads %{{.*}} block_dims = [256, 1, 1] sync_after_distribute = false

// Without tensor cores the contraction is a SIMT kernel.
// SIMT:        transform.named_sequence @__gpu_tile
// SIMT-NOT:    mma_sync

// Each kernel's ops are located `kernel <id>: ... (<phase>)`: what names the kernel in an
// interpreter error (codegen/gpu/attach_schedule.py kernel_of_failure; the CUDA lowering retries
// without it).
// LOC:         transform.named_sequence @__gpu_tile
// LOC:           transform.structured.tile_using_forall {{.*}} loc(#[[TILE:loc[0-9]+]])
// LOC:         transform.named_sequence @__gpu_map
// LOC:           transform.gpu.map_nested_forall_to_threads {{.*}} loc(#[[MAP:loc[0-9]+]])
// LOC:         transform.named_sequence @__gpu_pipeline
// LOC:           transform.nvgpu.create_async_groups {{.*}} loc(#[[PIPE:loc[0-9]+]])
// LOC-DAG:     #[[TILE]] = loc("kernel 0: contraction 64x64x64 (tile)")
// LOC-DAG:     #[[MAP]] = loc("kernel 0: contraction 64x64x64 (map)")
// LOC-DAG:     #[[PIPE]] = loc("kernel 0: contraction 64x64x64 (pipeline)")
#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(i, j) -> (i, j)>
func.func @kernels(%x: memref<64x64xf16>, %w: memref<64x64xf16>, %y: memref<64x64xf32>, %z: memref<64x64xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<64x64xf16>, memref<64x64xf16>) outs(%y : memref<64x64xf32>) {
  ^bb0(%p: f16, %q: f16, %acc: f32):
    %pe = arith.extf %p : f16 to f32
    %qe = arith.extf %q : f16 to f32
    %m = arith.mulf %pe, %qe : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y : memref<64x64xf32>) outs(%z : memref<64x64xf32>) {
  ^bb0(%v: f32, %o: f32):
    %e = math.exp %v : f32
    linalg.yield %e : f32
  }
  return
}
