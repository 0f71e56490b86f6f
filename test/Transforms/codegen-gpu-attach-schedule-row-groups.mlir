// RUN: vt-opt %s --codegen-gpu-attach-schedule | filecheck %s
// RUN: vt-opt %s '--codegen-gpu-attach-schedule=schedules=row-reduction.fuse:false' | filecheck %s --check-prefix=UNFUSED

// A softmax at the kernel level as the CUDA schedule stage sees it: the fill of the row buffer,
// the row max, exp(x - max), the fill of the same buffer for the sum (the bufferization reused it),
// the row sum, the division. All six kernels are one row group, run by the division: the fills
// are per-row members (one element per row), the sum's fill between the exp and the sum included,
// so nothing breaks the group. Only the division is scheduled (the warp-reduce schedule's ops); every
// other kernel carries the group's id and has no transform ops of its own. The members that walk
// the rows (of 1024 f32, contiguous) take them in chunks of 4 elements (128-bit accesses), at most
// 4 chunks a trip; the fills, one element per row, do not.
// CHECK-LABEL: func.func @softmax
// CHECK:         linalg.generic {{.*}} outs(%[[ROWS:.*]] : memref<8xf32>) attrs = {codegen.kernel = 0 : i64, codegen.row_group = 5 : i64}
// CHECK:         linalg.generic {{.*}} attrs = {codegen.kernel = 1 : i64, codegen.row_chunks = 4 : i64, codegen.row_group = 5 : i64, codegen.row_vector = 4 : i64}
// CHECK:         linalg.generic {{.*}} attrs = {codegen.kernel = 2 : i64, codegen.row_chunks = 4 : i64, codegen.row_group = 5 : i64, codegen.row_vector = 4 : i64}
// CHECK:         linalg.generic {{.*}} outs(%[[ROWS]] : memref<8xf32>) attrs = {codegen.kernel = 3 : i64, codegen.row_group = 5 : i64}
// CHECK:         linalg.generic {{.*}} attrs = {codegen.kernel = 4 : i64, codegen.row_chunks = 4 : i64, codegen.row_group = 5 : i64, codegen.row_vector = 4 : i64}
// CHECK:         linalg.generic {{.*}} attrs = {codegen.kernel = 5 : i64, codegen.row_chunks = 4 : i64, codegen.row_group = 5 : i64, codegen.row_vector = 4 : i64, codegen.scheduled}
// CHECK:         memref.dealloc
// CHECK-NOT:   transform.named_sequence @kernel_
// CHECK:       transform.named_sequence @__gpu_tile(%[[ROOT:.*]]: !transform.any_op
// CHECK-NEXT:    %[[K:.*]] = transform.structured.match attributes {codegen.scheduled} in %[[ROOT]]
// CHECK-NOT:     transform.split_handle
// CHECK:         transform.annotate %[[K]] "codegen.row_threads" = %{{.*}}
// CHECK-NOT:   codegen.kernel = {{[0-4]}} : i64

// Without row groups the fills are kernels of their own (vector schedule), as are the others: the
// tile entry point's handles, one per scheduled kernel in order, tiled (vector) or annotated (warp
// reduce).
// UNFUSED-LABEL: func.func @softmax
// UNFUSED-NOT:   codegen.row_group
// UNFUSED:       transform.named_sequence @__gpu_tile
// UNFUSED:         %[[K:.*]]:6 = transform.split_handle
// UNFUSED:         transform.structured.tile_using_forall %[[K]]#0 tile_sizes [8]
// UNFUSED:         transform.annotate %[[K]]#1 "codegen.row_threads"
// UNFUSED:         transform.annotate %[[K]]#1 "codegen.row_vector"
// UNFUSED:         transform.structured.tile_using_forall %[[K]]#3 tile_sizes [8]
// UNFUSED:         transform.annotate %[[K]]#4 "codegen.row_threads"
func.func @softmax(%x: memref<8x1024xf32>, %y: memref<8x1024xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %alloc = memref.alloc() {alignment = 64 : i64} : memref<8x1xf32>
  %rows = memref.collapse_shape %alloc [[0, 1]] : memref<8x1xf32> into memref<8xf32>
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} outs(%rows : memref<8xf32>) {
  ^bb0(%out: f32):
    linalg.yield %ninf : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8x1024xf32>) outs(%rows : memref<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.maximumf %in, %out : f32
    linalg.yield %0 : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%x, %rows : memref<8x1024xf32>, memref<8xf32>) outs(%y : memref<8x1024xf32>) {
  ^bb0(%in: f32, %m: f32, %out: f32):
    %0 = arith.subf %in, %m : f32
    %1 = math.exp %0 : f32
    linalg.yield %1 : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} outs(%rows : memref<8xf32>) {
  ^bb0(%out: f32):
    linalg.yield %zero : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
      ins(%y : memref<8x1024xf32>) outs(%rows : memref<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.addf %in, %out : f32
    linalg.yield %0 : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%y, %rows : memref<8x1024xf32>, memref<8xf32>) outs(%y : memref<8x1024xf32>) {
  ^bb0(%in: f32, %s: f32, %out: f32):
    %0 = arith.divf %in, %s : f32
    linalg.yield %0 : f32
  }
  memref.dealloc %alloc : memref<8x1xf32>
  return
}
